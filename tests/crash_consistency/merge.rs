//! `Dataset::merge` under failures: every storage operation failing in turn,
//! power loss after every operation (each kind the model knows), and a merging
//! process SIGKILLed at deterministic points. Whatever happens, the target holds
//! exactly its old records or those plus every part's, and each part is whole
//! unless the merge was committed (then it is whole, or no longer a dataset).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bcd::{
    Compression, CreateOptions, Dataset, Error, MergeCommitInput, MergeOnDuplicate, MergeOptions,
    PartSource, ShardFingerprint, SidecarRewrite,
};
use bcd_test_support::sim_storage::ALL_SURVIVORS;
use bcd_test_support::sim_storage::{Config, Op, OpKind, Policy, SimStorage, Survivors};
use bcd_test_support::{read_all, snapshot, Record};
use tempfile::TempDir;

use crate::{records, scratch_dir};

/// A merge's datasets: the target and two parts, all in one scratch directory.
pub(crate) struct MergeFixture {
    scenario: MergeScenario,
    old: Vec<Record>,
    parts: Vec<Vec<Record>>,
    /// What the target holds once the merge is committed.
    merged: Vec<Record>,
    /// Every file of every dataset before the merge, by directory name.
    files: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// The merge's operations when nothing fails.
    pub(crate) ops: Vec<Op>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct MergeScenario {
    pub(crate) keyed: bool,
    pub(crate) copy: bool,
    pub(crate) no_hard_links: bool,
    /// A key of the target and one of the first part repeat in the second part,
    /// which is merged with `Skip` (two of its shards are rewritten).
    pub(crate) duplicates: bool,
}

pub(crate) const MOVE: MergeScenario = MergeScenario {
    keyed: true,
    copy: false,
    no_hard_links: false,
    duplicates: false,
};

const NAMES: [&str; 3] = ["target", "a", "b"];
const SHARD: u64 = 3000;

/// Keeps the rows of a `rows` sidecar (one byte per record) that were kept.
struct KeepRows;

impl SidecarRewrite for KeepRows {
    fn rewrite(
        &self,
        _suffix: &str,
        bytes: &[u8],
        kept_rows: &[bool],
        _fingerprint: &ShardFingerprint,
    ) -> Result<Option<Vec<u8>>, bcd::HookError> {
        Ok(Some(
            bytes
                .iter()
                .zip(kept_rows)
                .filter(|(_, &k)| k)
                .map(|(b, _)| *b)
                .collect(),
        ))
    }
}

fn commit_file(input: &MergeCommitInput<'_>) -> Result<Option<Vec<u8>>, bcd::HookError> {
    Ok(Some(
        format!("{{\"shards\": {}}}", input.shards).into_bytes(),
    ))
}

/// Creates `dir` holding `records`, each shard with a `rows` sidecar of one
/// byte per record.
fn create(dir: &Path, keyed: bool, records: &[Record]) {
    let options = CreateOptions {
        keyed,
        compression: Compression::Lz4,
        max_shard_size: SHARD,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    for (key, value) in records {
        if keyed {
            extend.push(key, value).unwrap();
        } else {
            extend.push_value(value).unwrap();
        }
    }
    for shard in extend.close_shard().unwrap() {
        let rows = vec![b'r'; shard.fingerprint.records as usize];
        extend.write_sidecar(shard.id, "rows", &rows).unwrap();
    }
    extend.commit().unwrap();
}

impl MergeFixture {
    pub(crate) fn new(scenario: MergeScenario) -> MergeFixture {
        let keyed = scenario.keyed;
        let old = records("old", 30, keyed, 11, 300, 2000);
        let a = records("a", 60, keyed, 12, 300, 4000);
        let mut b = records("b", 50, keyed, 13, 300, 4000);
        let mut merged_b = b.clone();
        if scenario.duplicates {
            // b's first record repeats one of the target, its last one of a.
            b[0].0 = old[3].0.clone();
            b[49].0 = a[7].0.clone();
            merged_b = b[1..49].to_vec();
        }
        let root = scratch_dir();
        for (name, records) in NAMES.iter().zip([&old, &a, &b]) {
            create(&root.path().join(name), keyed, records);
        }
        let files = NAMES
            .iter()
            .map(|name| (name.to_string(), snapshot(&root.path().join(name))))
            .collect();
        drop(root);
        let mut fixture = MergeFixture {
            scenario,
            merged: [old.clone(), a.clone(), merged_b].concat(),
            old,
            parts: vec![a, b],
            files,
            ops: Vec::new(),
        };
        let work = fixture.copy();
        let storage = fixture.storage(work.path(), Policy::Pass, false);
        let summary = fixture.merge(work.path(), &storage).unwrap();
        assert!(summary.parts_not_removed.is_empty(), "{summary:?}");
        if scenario.duplicates {
            assert_eq!(summary.rewritten_shards, 2, "{summary:?}");
        }
        fixture.ops = storage.ops();
        fixture.check_target(work.path(), true, "counting run");
        eprintln!("{scenario:?}: {} operations", fixture.ops.len());
        fixture
    }

    /// A fresh copy of the three datasets.
    pub(crate) fn copy(&self) -> TempDir {
        let root = scratch_dir();
        for (name, files) in &self.files {
            let dir = root.path().join(name);
            fs::create_dir(&dir).unwrap();
            for (file, bytes) in files {
                fs::write(dir.join(file), bytes).unwrap();
            }
        }
        root
    }

    pub(crate) fn storage(&self, root: &Path, policy: Policy, real_sync: bool) -> SimStorage {
        let storage = SimStorage::new(
            &root.join("target"),
            Config {
                policy,
                real_sync,
                no_hard_links: self.scenario.no_hard_links,
                ..Config::pass()
            },
        );
        storage.watch(&root.join("a"));
        storage.watch(&root.join("b"));
        storage
    }

    pub(crate) fn merge(
        &self,
        root: &Path,
        storage: &SimStorage,
    ) -> bcd::Result<bcd::MergeSummary> {
        let mut dataset = storage.open(&root.join("target"));
        let parts = [
            PartSource::new(root.join("a")),
            PartSource::new(root.join("b")),
        ];
        let options = MergeOptions {
            copy: self.scenario.copy,
            on_duplicate: if self.scenario.duplicates {
                MergeOnDuplicate::Skip
            } else {
                MergeOnDuplicate::Error
            },
            sidecars: &KeepRows,
            commit_file: Some(&commit_file),
            ..MergeOptions::default()
        };
        dataset.merge(&parts, &options)
    }

    /// 1-based number of the rename of the target's manifest (the commit).
    pub(crate) fn rename_op(&self) -> usize {
        1 + self
            .ops
            .iter()
            .position(|op| op.kind == OpKind::Rename && op.name == ".manifest.json.tmp")
            .unwrap()
    }

    /// Checks the target in `root` holds the old records (or, if `committed`,
    /// the merged ones) and that every sidecar of it describes its shard.
    pub(crate) fn check_target(&self, root: &Path, committed: bool, context: &str) {
        let dir = root.join("target");
        let dataset = Dataset::open(&dir)
            .unwrap_or_else(|e| panic!("{context}: the target does not open: {e}"));
        let expected = if committed { &self.merged } else { &self.old };
        let got = read_all(&dataset);
        assert!(
            got == *expected,
            "{context}: the target holds {} records, expected {} ({})",
            got.len(),
            expected.len(),
            if committed { "merged" } else { "old" }
        );
        for shard in 0..dataset.shards() {
            let rows = fs::read(dataset.sidecar_path(shard, "rows"))
                .unwrap_or_else(|e| panic!("{context}: shard {shard}'s sidecar: {e}"));
            assert_eq!(rows.len() as u64, dataset.shard_records(shard), "{context}");
        }
        let commit = dataset.read_commit_file(dataset.shards(), 100).unwrap();
        if committed {
            let text = format!("{{\"shards\": {}}}", dataset.shards());
            assert_eq!(commit.as_deref(), Some(text.as_bytes()), "{context}");
        }
    }

    /// Checks each part in `root`: whole, or (only if `committed`) no longer a
    /// dataset. Returns whether each is whole.
    pub(crate) fn check_parts(&self, root: &Path, committed: bool, context: &str) -> Vec<bool> {
        let mut whole = Vec::new();
        for (name, records) in NAMES[1..].iter().zip(&self.parts) {
            let dir = root.join(name);
            match Dataset::open(&dir) {
                Ok(part) => {
                    assert_eq!(&read_all(&part), records, "{context}: part {name}");
                    whole.push(true);
                }
                Err(Error::NotADataset { .. }) if committed => whole.push(false),
                Err(e) => panic!("{context}: part {name} is neither whole nor gone: {e}"),
            }
        }
        whole
    }
}

fn check_failure_at_every_operation(scenario: MergeScenario) {
    let fx = MergeFixture::new(scenario);
    let total = fx.ops.len();
    let rename = fx.rename_op();
    for n in 1..=total {
        let failing = &fx.ops[n - 1];
        let context = format!("{scenario:?}, failing operation {n}/{total} ({failing})");
        let context = context.as_str();
        let work = fx.copy();
        let root = work.path();
        let storage = fx.storage(root, Policy::FailOnce(n), true);
        let result = fx.merge(root, &storage);
        let ops = storage.ops();
        assert!(
            ops[..n]
                .iter()
                .map(Op::key)
                .eq(fx.ops[..n].iter().map(Op::key)),
            "{context}: the merge is not deterministic"
        );
        if n <= rename {
            let err = result.expect_err(context);
            assert!(
                matches!(err, Error::Io { .. }),
                "{context}: expected an I/O error, got {err:?}"
            );
            fx.check_target(root, false, context);
            assert_eq!(fx.check_parts(root, false, context), [true, true]);
            // Nothing of the merge is left in the target: it removed its files.
            let mut files = snapshot(&root.join("target"));
            files.remove(".bcd.lock");
            let mut before = fx.files["target"].clone();
            before.remove(".bcd.lock");
            assert_eq!(
                files.keys().collect::<Vec<_>>(),
                before.keys().collect::<Vec<_>>(),
                "{context}: files left in the target"
            );
            // A retry succeeds.
            let retry = fx.storage(root, Policy::Pass, false);
            fx.merge(root, &retry)
                .unwrap_or_else(|e| panic!("{context}: retry: {e}"));
            fx.check_target(root, true, context);
        } else if n == rename + 1 {
            // The rename happened, its durability is in doubt: visible, parts kept.
            let err = result.expect_err(context);
            assert!(
                matches!(err, Error::CommittedNotDurable { .. }),
                "{context}: {err:?}"
            );
            fx.check_target(root, true, context);
            assert_eq!(fx.check_parts(root, false, context), [true, true]);
        } else {
            // Committed; removing a part failed, which the summary says.
            assert!(n > rename + 1, "{context}");
            let summary = result.unwrap_or_else(|e| panic!("{context}: {e}"));
            fx.check_target(root, true, context);
            let whole = fx.check_parts(root, true, context);
            if !scenario.copy {
                assert_eq!(summary.parts_not_removed.len(), 1, "{context}: {summary:?}");
                let (part, message) = &summary.parts_not_removed[0];
                assert!(message.contains("injected failure"), "{context}: {message}");
                let failed = NAMES[1..]
                    .iter()
                    .position(|name| *part == root.join(name))
                    .unwrap();
                // Only a failure to remove the manifest itself leaves it whole.
                let manifest_failed =
                    failing.kind == OpKind::Remove && failing.name.ends_with("/manifest.json");
                assert_eq!(whole[failed], manifest_failed, "{context}");
            }
        }
    }
}

#[test]
fn merge_failing_at_any_operation_leaves_the_target_old_or_new_and_the_parts_whole() {
    let _guard = crate::no_child_processes();
    check_failure_at_every_operation(MOVE);
}

#[test]
fn merge_with_skipped_duplicates_or_copies_failing_at_any_operation_is_all_or_nothing() {
    let _guard = crate::no_child_processes();
    check_failure_at_every_operation(MergeScenario {
        duplicates: true,
        ..MOVE
    });
    check_failure_at_every_operation(MergeScenario { copy: true, ..MOVE });
    check_failure_at_every_operation(MergeScenario {
        keyed: false,
        no_hard_links: true,
        ..MOVE
    });
}

fn check_crash_at_every_point(scenario: MergeScenario) {
    let fx = MergeFixture::new(scenario);
    let total = fx.ops.len();
    let rename = fx.rename_op();
    let mut images = HashSet::new();
    for n in 0..=total {
        let work = fx.copy();
        let root = work.path();
        let storage = fx.storage(root, Policy::CrashAfter(n), false);
        let result = fx.merge(root, &storage);
        if n < rename {
            assert!(result.is_err(), "crash after {n}/{total}");
        }
        // The model agrees with the real directories.
        for name in NAMES {
            let dir = root.join(name);
            let real = if dir.exists() {
                snapshot(&dir)
            } else {
                BTreeMap::new()
            };
            assert_eq!(
                storage.files_in(&dir, Survivors::ProcessCrash),
                real,
                "crash after {n}: model and {name} disagree"
            );
        }
        for survivors in ALL_SURVIVORS {
            let context = format!("{scenario:?}, {survivors:?} after {n}/{total}");
            let context = context.as_str();
            let committed = if survivors.keeps_unsynced_rename() {
                n >= rename
            } else {
                n > rename
            };
            let image: Vec<(String, BTreeMap<String, Vec<u8>>)> = NAMES
                .iter()
                .map(|name| {
                    let files = storage.files_in(&root.join(name), survivors);
                    (name.to_string(), files)
                })
                .collect();
            if !images.insert(format!("{committed} {image:?}")) {
                continue;
            }
            let restored = scratch_dir();
            for (name, files) in &image {
                let dir = restored.path().join(name);
                fs::create_dir(&dir).unwrap();
                for (file, bytes) in files {
                    fs::write(dir.join(file), bytes).unwrap();
                }
            }
            fx.check_target(restored.path(), committed, context);
            let whole = fx.check_parts(restored.path(), committed, context);
            if !committed {
                // The merge can be run again, and completes.
                let retry = fx.storage(restored.path(), Policy::Pass, false);
                fx.merge(restored.path(), &retry)
                    .unwrap_or_else(|e| panic!("{context}: retry: {e}"));
                fx.check_target(restored.path(), true, context);
            } else if scenario.copy {
                assert_eq!(whole, [true, true], "{context}");
            }
        }
    }
    eprintln!("{scenario:?}: {} distinct crash images", images.len());
}

#[test]
fn power_loss_at_any_point_of_a_merge_leaves_the_target_old_or_new_and_the_parts_whole() {
    let _guard = crate::no_child_processes();
    check_crash_at_every_point(MOVE);
    check_crash_at_every_point(MergeScenario {
        duplicates: true,
        ..MOVE
    });
}

// ---------------------------------------------------------------------------
// SIGKILL
// ---------------------------------------------------------------------------

const CHILD_ROOT_ENV: &str = "BCD_CRASH_TEST_MERGE_ROOT";
const PROGRESS: &str = "bcd-merge-crash-test:";

/// A rewrite hook that says where it is and waits for the parent's go-ahead, so
/// the parent can kill the merge exactly there.
struct Pausing;

fn pause(what: &str) {
    {
        let mut out = io::stdout().lock();
        writeln!(out, "{PROGRESS} {what}").unwrap();
        out.flush().unwrap();
    }
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line).unwrap();
}

impl SidecarRewrite for Pausing {
    fn rewrite(
        &self,
        suffix: &str,
        bytes: &[u8],
        kept_rows: &[bool],
        fingerprint: &ShardFingerprint,
    ) -> Result<Option<Vec<u8>>, bcd::HookError> {
        pause("rewrite");
        KeepRows.rewrite(suffix, bytes, kept_rows, fingerprint)
    }
}

/// Runs in the child process: merges the parts of the fixture in
/// `BCD_CRASH_TEST_MERGE_ROOT`, pausing at each rewritten shard, before the
/// commit and after it. Ignored: the parent runs it.
#[test]
#[ignore = "a helper process of the merge SIGKILL test, run by it"]
fn child_merge_process() {
    let Some(root) = std::env::var_os(CHILD_ROOT_ENV).map(PathBuf::from) else {
        return;
    };
    let mut dataset = Dataset::open(root.join("target")).unwrap();
    pause("open");
    let hook = |input: &MergeCommitInput<'_>| {
        pause("commit");
        commit_file(input)
    };
    let options = MergeOptions {
        on_duplicate: MergeOnDuplicate::Skip,
        sidecars: &Pausing,
        commit_file: Some(&hook),
        ..MergeOptions::default()
    };
    let parts = [
        PartSource::new(root.join("a")),
        PartSource::new(root.join("b")),
    ];
    let summary = dataset.merge(&parts, &options).unwrap();
    assert!(summary.parts_not_removed.is_empty());
    pause("merged");
}

#[cfg(unix)]
#[test]
fn sigkilled_merge_leaves_the_target_old_or_new_and_the_parts_whole_until_the_commit() {
    let _guard = crate::alone_while_starting_processes();
    let fx = MergeFixture::new(MergeScenario {
        duplicates: true,
        ..MOVE
    });
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_crate, module)| module);
    let name = format!("{module}::child_merge_process");
    // Progress lines: open, rewrite, rewrite, commit, merged.
    let points = ["open", "rewrite", "rewrite", "commit", "merged"];
    let mut outcomes = Vec::new();
    // Killed once it has paused this many times (0: at once), or never.
    let plan = (0..=points.len()).map(Some).chain([None]);
    for kill_after in plan {
        let context = format!("killed after {kill_after:?} pauses");
        let context = context.as_str();
        let work = fx.copy();
        let root = work.path();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                &name,
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ROOT_ENV, root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = io::BufReader::new(child.stdout.take().unwrap());
        let mut seen = Vec::new();
        let mut line = String::new();
        let until = kill_after.unwrap_or(points.len());
        while seen.len() < until {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let Some((_, what)) = line.split_once(PROGRESS) else {
                continue;
            };
            seen.push(what.trim().to_owned());
            if kill_after.is_none() || seen.len() < until {
                writeln!(stdin, "go").unwrap();
            }
        }
        assert_eq!(seen, points[..until], "{context}: the child's pauses");
        match kill_after {
            Some(_) => {
                child.kill().unwrap();
                child.wait().unwrap();
            }
            None => {
                drop(stdin);
                let status = child.wait().unwrap();
                assert!(status.success(), "{context}: {status}");
            }
        }
        // Committed once the merge returned ("merged").
        let kill_after = kill_after.unwrap_or(points.len() + 1);
        let committed = kill_after >= points.len();
        fx.check_target(root, committed, context);
        let whole = fx.check_parts(root, committed, context);
        if committed {
            assert_eq!(
                whole,
                [false, false],
                "{context}: parts left after the merge"
            );
            assert!(!root.join("a").exists() && !root.join("b").exists());
        } else {
            assert_eq!(whole, [true, true], "{context}");
            // The killed merge's lock died with it: run it again here.
            let storage = fx.storage(root, Policy::Pass, false);
            fx.merge(root, &storage)
                .unwrap_or_else(|e| panic!("{context}: retry: {e}"));
            fx.check_target(root, true, context);
        }
        outcomes.push((kill_after, committed));
    }
    eprintln!("merge kills: {outcomes:?}");
}
