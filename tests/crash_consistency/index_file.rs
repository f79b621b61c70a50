//! The persisted index (`.bcd-index`) through the simulated storage. Opened with
//! [`INDEX_FILE_ALWAYS`], every extend commits and then rewrites the index file
//! (a temporary `.bcd-index.tmp-*`, fsync, rename; best effort, so a failure of
//! that rewrite does not fail the extend). Whatever fails or crashes, the
//! dataset must reopen with exactly the old or the old + new records, every key
//! must be found at its place through whichever index file is there, and a
//! failed (not crashed) rewrite must leave no temporary file.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashSet};
use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;

use bcd::storage::FileSystem;
use bcd::{Compression, CreateOptions, Dataset, Error};
use bcd_test_support::sim_storage::{
    Config, Op, OpKind, Policy, SimStorage, Survivors, ALL_SURVIVORS,
};
use bcd_test_support::{read_all, snapshot, Record, INDEX_FILE, INDEX_FILE_ALWAYS};
use tempfile::TempDir;

use crate::fixture::SMALL_SHARD;
use crate::{classify, concat, extend, records, scratch_dir, write_dir, Outcome};

/// Prefix of the index file's temporary name (its suffix varies per write).
const INDEX_FILE_TMP: &str = ".bcd-index.tmp-";

/// A dataset with committed records, the extend under test, and the storage
/// operations of that extend when nothing fails.
struct IndexFixture {
    /// The dataset before the extend, without an index file (see [`Self::copy`]).
    base_files: BTreeMap<String, Vec<u8>>,
    old: Vec<Record>,
    new: Vec<Record>,
    more: Vec<Record>,
    /// Largest write call (see [`Config::max_write`]).
    max_write: usize,
    ops: Vec<Op>,
}

/// What identifies an operation across runs: the temporary index file's name
/// ends with a process id and a clock reading, so it is cut to its prefix.
fn stable_key(op: &Op) -> (OpKind, &str) {
    let name = if op.name.starts_with(INDEX_FILE_TMP) {
        INDEX_FILE_TMP
    } else {
        op.name.as_str()
    };
    (op.kind, name)
}

impl IndexFixture {
    fn new(max_write: usize) -> IndexFixture {
        let base = scratch_dir();
        let options = CreateOptions {
            keyed: true,
            compression: Compression::Lz4,
            max_shard_size: SMALL_SHARD,
        };
        let mut dataset = Dataset::create(base.path(), options).unwrap();
        let old = records("old", 40, true, 11, 200, 5000);
        extend(&mut dataset, &old).unwrap();
        assert!(dataset.shards() >= 2);
        drop(dataset);
        let mut fixture = IndexFixture {
            base_files: snapshot(base.path()),
            old,
            new: records("new", 120, true, 12, 150, 6000),
            more: records("more", 20, true, 13, 150, 6000),
            max_write,
            ops: Vec::new(),
        };
        assert!(!fixture.base_files.contains_key(INDEX_FILE));

        let work = fixture.copy();
        let storage = SimStorage::new(work.path(), fixture.config(Policy::Pass));
        let mut dataset = storage.open_with(work.path(), INDEX_FILE_ALWAYS);
        assert!(storage.ops().is_empty(), "open wrote: {:?}", storage.ops());
        extend(&mut dataset, &fixture.new).unwrap();
        fixture.ops = storage.ops();
        let ops = &fixture.ops;
        // The extend's commit (rename of the manifest, directory fsync), then the
        // index file's rewrite: create, writes, fsync, rename.
        let start = fixture.index_start();
        assert_eq!(ops[start - 2].key(), (OpKind::Rename, ".manifest.json.tmp"));
        assert_eq!(ops[start - 1].kind, OpKind::SyncDir);
        assert_eq!(stable_key(&ops[start]), (OpKind::Create, INDEX_FILE_TMP));
        let tail: Vec<OpKind> = ops.iter().rev().take(2).map(|op| op.kind).collect();
        assert_eq!(tail, [OpKind::Rename, OpKind::SyncFile], "{ops:?}");
        assert!(ops[start..]
            .iter()
            .all(|op| op.name.starts_with(INDEX_FILE_TMP)));
        assert!(dataset.uses_index_file());
        drop(dataset);
        let reopened = open_checked(work.path(), &fixture.old_and_new(), "counting run");
        assert!(reopened.uses_index_file(), "counting run: no index file");
        eprintln!(
            "index file, writes of at most {max_write} bytes: {} operations, {} of them \
             the index rewrite",
            ops.len(),
            ops.len() - start
        );
        fixture
    }

    /// A copy of the dataset with a current index file, written for real: the
    /// file records its shards' modification times, which a copy changes.
    fn copy(&self) -> TempDir {
        let work = write_dir(&self.base_files);
        let dataset = Dataset::open_with(work.path(), INDEX_FILE_ALWAYS, Arc::new(FileSystem))
            .unwrap_or_else(|e| panic!("open with the index file: {e}"));
        assert!(dataset.uses_index_file(), "no index file written on open");
        work
    }

    /// The simulated storage's settings for a run failing as `policy` says.
    fn config(&self, policy: Policy) -> Config {
        Config {
            policy,
            max_write: self.max_write,
            ..Config::pass()
        }
    }

    /// 0-based position of the first operation of the index rewrite.
    fn index_start(&self) -> usize {
        self.ops
            .iter()
            .position(|op| op.name.starts_with(INDEX_FILE_TMP))
            .expect("the extend rewrites the index file")
    }

    /// 1-based number of the rename of the manifest.
    fn rename_op(&self) -> usize {
        1 + self
            .ops
            .iter()
            .position(|op| op.kind == OpKind::Rename)
            .unwrap()
    }

    fn old_and_new(&self) -> Vec<Record> {
        concat(&[&self.old, &self.new])
    }
}

/// Asserts every record of `expected` is found by its key, at its position,
/// with its value: the lookups that go through the index file when it is used.
fn assert_lookups(dataset: &Dataset, expected: &[Record], context: &str) {
    for (i, (key, value)) in expected.iter().enumerate() {
        let position = dataset
            .position(key)
            .unwrap_or_else(|e| panic!("{context}: position of record {i}: {e}"));
        assert_eq!(position, Some(i), "{context}: position of record {i}");
        let got = dataset.get(key).unwrap();
        assert!(
            got.as_deref() == Some(value.as_slice()),
            "{context}: value of record {i}"
        );
    }
    assert_eq!(dataset.position(b"absent-key").unwrap(), None, "{context}");
}

/// Opens `dir` with the default options (which use an index file that is there,
/// and write none at this size) and asserts it holds exactly `expected`, read by
/// position and found by key.
fn open_checked(dir: &Path, expected: &[Record], context: &str) -> Dataset {
    let dataset =
        Dataset::open(dir).unwrap_or_else(|e| panic!("{context}: open {}: {e}", dir.display()));
    crate::assert_records(&dataset, expected, context);
    assert_lookups(&dataset, expected, context);
    dataset
}

/// The temporary index files in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    snapshot(dir)
        .into_keys()
        .filter(|name| name.starts_with(INDEX_FILE_TMP))
        .collect()
}

/// Writes of the whole buffer, and short writes that split the index file's.
const MAX_WRITES: [usize; 2] = [usize::MAX, 1000];

#[test]
fn index_file_rewrite_failing_at_any_operation_keeps_the_records_and_leaves_no_temporary() {
    let _guard = crate::no_child_processes();
    for max_write in MAX_WRITES {
        check_failure_at_every_operation(max_write);
    }
}

/// Fails operation N of an extend and its index rewrite, for every N.
fn check_failure_at_every_operation(max_write: usize) {
    let fx = IndexFixture::new(max_write);
    let total = fx.ops.len();
    let index_start = fx.index_start();
    for n in 1..=total {
        let context = format!(
            "writes of at most {max_write}, failing operation {n}/{total} ({})",
            fx.ops[n - 1]
        );
        let context = context.as_str();
        let work = fx.copy();
        let dir = work.path();
        let old_index = fs::read(dir.join(INDEX_FILE)).unwrap();
        let config = Config {
            real_sync: true,
            ..fx.config(Policy::FailOnce(n))
        };
        let storage = SimStorage::new(dir, config);
        let mut dataset = storage.open_with(dir, INDEX_FILE_ALWAYS);
        let result = extend(&mut dataset, &fx.new);
        let ops = storage.ops();
        assert!(
            ops[..n]
                .iter()
                .map(stable_key)
                .eq(fx.ops[..n].iter().map(stable_key)),
            "{context}: the writer is not deterministic"
        );

        // From the fsync after the rename of the manifest on, the commit is visible.
        let committed = n > fx.rename_op();
        if n > index_start {
            // The records are committed and durable: a failed index rewrite is
            // not the extend's failure.
            result.unwrap_or_else(|e| panic!("{context}: the extend failed: {e}"));
            assert_eq!(
                fs::read(dir.join(INDEX_FILE)).unwrap(),
                old_index,
                "{context}: the index file changed"
            );
        } else if n == index_start {
            assert!(
                matches!(result, Err(Error::CommittedNotDurable { .. })),
                "{context}: {result:?}"
            );
        } else {
            assert!(result.is_err(), "{context}: the extend succeeded");
        }
        let expected = if committed {
            fx.old_and_new()
        } else {
            fx.old.clone()
        };
        crate::assert_records(&dataset, &expected, context);
        assert_lookups(&dataset, &expected, context);
        assert_eq!(
            temporaries(dir),
            Vec::<String>::new(),
            "{context}: a temporary index file is left"
        );
        let reopened = open_checked(dir, &expected, context);
        // The old file covers the old shards and still serves them; the records
        // after it are indexed from their shards.
        assert!(
            reopened.uses_index_file(),
            "{context}: the index file is unused"
        );
        drop(reopened);

        // A later extend (nothing fails any more) commits and rewrites the file.
        let later = if committed { &fx.more } else { &fx.new };
        extend(&mut dataset, later).unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
        let after = concat(&[&expected, later]);
        let reopened = open_checked(dir, &after, context);
        assert!(
            reopened.uses_index_file(),
            "{context}: after the later extend"
        );
        assert_ne!(
            fs::read(dir.join(INDEX_FILE)).unwrap(),
            old_index,
            "{context}: the later extend did not rewrite the index file"
        );
        assert_eq!(temporaries(dir), Vec::<String>::new(), "{context}: later");
    }
}

/// Rebuilds `files` (one crash's image of `work`) in a new directory. Each file
/// keeps the modification time of the file of that name in `work`, as a crash
/// would: the index file identifies shards by length and modification time.
fn image_of(files: &BTreeMap<String, Vec<u8>>, work: &Path) -> TempDir {
    let image = write_dir(files);
    for name in files.keys() {
        if let Ok(metadata) = fs::metadata(work.join(name)) {
            let file = File::options()
                .write(true)
                .open(image.path().join(name))
                .unwrap();
            file.set_modified(metadata.modified().unwrap()).unwrap();
        }
    }
    image
}

#[test]
fn power_loss_during_an_extend_and_its_index_rewrite_leaves_old_or_old_plus_new_through_the_index()
{
    let _guard = crate::no_child_processes();
    for max_write in MAX_WRITES {
        check_crash_at_every_point(max_write);
    }
}

/// Stops an extend and its index rewrite after N operations, for every N, and
/// opens what each kind of crash would leave.
fn check_crash_at_every_point(max_write: usize) {
    let fx = IndexFixture::new(max_write);
    let total = fx.ops.len();
    let rename = fx.rename_op();
    let commit_fsync = fx.index_start();
    let mut checked = HashSet::new();
    let (mut seen_old, mut seen_new) = (false, false);
    for n in 0..=total {
        let work = fx.copy();
        let dir = work.path();
        let storage = SimStorage::new(dir, fx.config(Policy::CrashAfter(n)));
        let mut dataset = storage.open_with(dir, INDEX_FILE_ALWAYS);
        let result = extend(&mut dataset, &fx.new);
        // The rewrite of the index file is best effort: once the commit is
        // durable, its crash does not fail the extend.
        assert_eq!(
            result.is_ok(),
            n >= commit_fsync,
            "crash after {n}/{total}: {result:?}"
        );
        drop(dataset);
        assert_eq!(
            storage.files(Survivors::ProcessCrash),
            snapshot(dir),
            "crash after {n}: model and directory disagree"
        );

        for survivors in ALL_SURVIVORS {
            let after = if n == 0 {
                "before any operation".to_owned()
            } else {
                format!("after {n}/{total} ({})", fx.ops[n - 1])
            };
            let context = format!("writes of at most {max_write}, {survivors:?} {after}");
            let context = context.as_str();
            let files = storage.files(survivors);
            let committed = if survivors.keeps_unsynced_rename() {
                n >= rename
            } else {
                n >= commit_fsync
            };
            let mut hasher = DefaultHasher::new();
            files.hash(&mut hasher);
            if !checked.insert((hasher.finish(), committed)) {
                continue;
            }
            assert!(
                files.contains_key(INDEX_FILE),
                "{context}: the index file is gone"
            );

            let image = image_of(&files, dir);
            let dataset = Dataset::open(image.path())
                .unwrap_or_else(|e| panic!("{context}: the image does not open: {e}"));
            let outcome = classify(&read_all(&dataset), &fx.old, &fx.new, context);
            assert_eq!(outcome == Outcome::New, committed, "{context}");
            seen_old |= outcome == Outcome::Old;
            seen_new |= outcome == Outcome::New;
            let now = if committed {
                fx.old_and_new()
            } else {
                fx.old.clone()
            };
            assert_lookups(&dataset, &now, context);
            // Whichever index file survived (the old one, or the new one renamed
            // in after the commit was durable) is valid for the image's shards.
            assert!(
                dataset.uses_index_file(),
                "{context}: the index file is unused"
            );
            drop(dataset);

            // A later extend on the image commits and writes a current index.
            let later = if committed { &fx.more } else { &fx.new };
            let mut dataset = SimStorage::new(image.path(), Config::pass())
                .open_with(image.path(), INDEX_FILE_ALWAYS);
            extend(&mut dataset, later).unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
            let reopened = open_checked(image.path(), &concat(&[&now, later]), context);
            assert!(
                reopened.uses_index_file(),
                "{context}: after the later extend"
            );
        }
    }
    assert!(
        seen_old && seen_new,
        "not both outcomes: old {seen_old}, new {seen_new}"
    );
    eprintln!(
        "index file, writes of at most {max_write} bytes: {} distinct crash images",
        checked.len()
    );
}
