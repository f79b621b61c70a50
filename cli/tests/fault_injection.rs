//! System-call failures injected with strace (`-e inject=SYSCALL:error=ERRNO:when=N`)
//! into a small `bcd ingest`: ENOSPC, EIO and EMFILE at every write, fsync,
//! rename, openat and ftruncate it makes (up to [`MAX_OCCURRENCES`] of each).
//! Whatever fails, bcd never panics, and the dataset reads as it was before the
//! run or as it is after a complete one, records, fields (`--labels folder`) and
//! statistics alike; a run that exits 0 committed.
//!
//! strace must be installed (`make test` installs it with apt-get when it runs as
//! root); set `BCD_TEST_NO_STRACE=1` to skip this file on a machine without it.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bcd::Dataset;
use bcd_pipeline::fields::DatasetFields;
use bcd_test_support::{read_all, Rng};

mod common;
use common::*;

/// The system calls failed, one occurrence at a time.
const SYSCALLS: [&str; 5] = ["write", "fsync", "rename", "openat", "ftruncate"];
/// The errors each is failed with.
const ERRNOS: [&str; 3] = ["ENOSPC", "EIO", "EMFILE"];
/// Most occurrences of one system call tried (a small ingest makes fewer): a
/// bound on the run time, should the ingest ever make many more calls.
const MAX_OCCURRENCES: usize = 400;

/// Eight files, a few KiB each, in two class folders, for 4 KiB shards: the
/// ingest (with `--labels folder`) writes several shards, each with a fields
/// file and a statistics file, and a commit file. In the order of the ingest.
fn source_tree(dir: &Path) -> (PathBuf, Records) {
    let tree = dir.join("tree");
    let mut rng = Rng::new(5);
    let mut records = Vec::new();
    for i in 0..8 {
        let name = format!("{}/f{i}.bin", ["cat", "dog"][i % 2]);
        let len = 500 + rng.below(3000);
        let value = rng.bytes(len);
        let path = tree.join(&name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &value).unwrap();
        records.push((name.into_bytes(), value));
    }
    records.sort();
    (tree, records)
}

/// What a reader sees of a committed dataset: its records, every record's fields
/// (nulls left out) and the statistics `bcd stats --json` reports.
type State = (Records, Vec<serde_json::Value>, serde_json::Value);

fn state(path: &Path) -> Result<State, bcd::Error> {
    let dataset = Dataset::open(path)?;
    let fields = DatasetFields::load(&dataset).expect("fields load");
    let mut rows = Vec::new();
    for shard in 0..dataset.shards() {
        for batch in fields
            .shard_batches(&dataset, shard, None)
            .expect("fields read")
        {
            for row in 0..batch.num_rows() {
                rows.push(serde_json::Value::Object(bcd_fields::row_to_json(
                    &batch, row,
                )));
            }
        }
    }
    let stats = bcd_pipeline::fields::stats_report(&dataset, false).expect("statistics");
    Ok((read_all(&dataset), rows, stats))
}

/// A committed dataset of three records, stored uncompressed in 4 KiB shards.
fn old_dataset(dir: &Path) -> (PathBuf, Records) {
    let path = dir.join("old");
    let mut dataset = bcd::Dataset::create(
        &path,
        bcd::CreateOptions {
            keyed: true,
            compression: bcd::Compression::None,
            max_shard_size: 4096,
        },
    )
    .unwrap();
    let old: Records = (0..3)
        .map(|i| (format!("old{i}").into_bytes(), vec![b'o'; 1000 + i]))
        .collect();
    dataset
        .extend(old.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .unwrap();
    (path, old)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// `bcd ingest TREE --into TARGET` under strace with `inject` (none: only counts
/// the calls into `log`); returns the exit code and stderr.
fn ingest_under_strace(
    strace: &Path,
    tree: &Path,
    target: &Path,
    inject: Option<String>,
    log: &Path,
) -> (Option<i32>, String) {
    let mut command = Command::new(strace);
    // cargo's LD_LIBRARY_PATH (bcd needs none of it) makes the loader probe each
    // of its directories with openat: over a hundred calls to inject into, each
    // a run, that only test the loader.
    command
        .env_remove("LD_LIBRARY_PATH")
        .args(["-f", "-qq", "-o"])
        .arg(log)
        .arg("-e")
        .arg(format!("trace={}", SYSCALLS.join(",")));
    if let Some(inject) = inject {
        command.arg("-e").arg(inject);
    }
    let out = command
        .arg(env!("CARGO_BIN_EXE_bcd"))
        .args(["ingest", s(tree), "--into", s(target), "--jobs", "2"])
        .args(["--labels", "folder"])
        .args(["--compression", "none", "--max-shard-size", "4K"])
        .stdin(Stdio::null())
        .output()
        .expect("run strace");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How often each of [`SYSCALLS`] occurs in a strace log, in the thread that
/// makes it most often: strace counts `when=N` per thread, so injecting at every N
/// up to that count fails every call of every thread once.
fn occurrences(log: &Path) -> Vec<(&'static str, usize)> {
    let text = std::fs::read_to_string(log).unwrap();
    SYSCALLS
        .iter()
        .map(|name| {
            let call = format!("{name}(");
            let mut per_thread = std::collections::HashMap::<&str, usize>::new();
            for line in text.lines() {
                // "PID name(args) = result", or "PID <... name resumed> ..." for
                // the second half of a call another thread interrupted.
                let Some((pid, rest)) = line.split_once(' ') else {
                    continue;
                };
                if rest.trim_start().starts_with(&call) {
                    *per_thread.entry(pid).or_default() += 1;
                }
            }
            (*name, per_thread.into_values().max().unwrap_or(0))
        })
        .collect()
}

/// Every injection into an ingest into `initial` (an existing dataset, or `None`
/// for a new one), checked against the state before and after.
fn check_every_injection(strace: &Path, initial: Option<(&Path, &Records)>) {
    let dir = tempfile::tempdir().unwrap();
    let (tree, new) = source_tree(dir.path());
    let old: Records = initial.map(|(_, r)| r.clone()).unwrap_or_default();
    let complete: Records = old.iter().chain(&new).cloned().collect();
    let target = dir.path().join("target");
    let log = dir.path().join("strace.log");
    let reset = || {
        let _ = std::fs::remove_dir_all(&target);
        if let Some((path, _)) = initial {
            copy_dir(path, &target);
        }
    };

    reset();
    let before = initial.map(|_| state(&target).unwrap());
    let (code, stderr) = ingest_under_strace(strace, &tree, &target, None, &log);
    assert_eq!(
        code,
        Some(0),
        "the ingest fails without injection: {stderr}"
    );
    let after = state(&target).unwrap();
    assert_eq!(after.0, complete);
    assert_eq!(after.1.len(), complete.len());
    assert_eq!(after.1[old.len()]["label"], "cat", "{:?}", after.1);
    let counts = occurrences(&log);
    eprintln!("system calls of the ingest: {counts:?}");
    assert!(
        counts.iter().any(|(name, n)| *name == "write" && *n > 0),
        "{counts:?}"
    );

    let mut runs = 0;
    let mut failed = 0;
    for (syscall, count) in counts {
        for n in 1..=count.min(MAX_OCCURRENCES) {
            for errno in ERRNOS {
                reset();
                let inject = format!("inject={syscall}:error={errno}:when={n}");
                let (code, stderr) =
                    ingest_under_strace(strace, &tree, &target, Some(inject.clone()), &log);
                let what = format!("{inject}: exit {code:?}, stderr: {stderr}");
                runs += 1;
                // None: killed by a signal (an abort after a panic while panicking).
                assert!(code.is_some() && code != Some(101), "{what}");
                assert!(!stderr.contains("panicked"), "{what}");
                let state = match state(&target) {
                    Ok(state) => Some(state),
                    Err(e) if initial.is_none() => {
                        // A new dataset that was not committed must not exist, or
                        // be an empty directory a re-run can use.
                        let entries = std::fs::read_dir(&target).map(|d| d.count());
                        assert!(
                            matches!(entries, Err(_) | Ok(0)),
                            "{what}: left an unusable {}: {e}",
                            target.display()
                        );
                        None
                    }
                    Err(e) => panic!("{what}: the dataset does not open: {e}"),
                };
                // Records, fields and statistics all old, or all new.
                let is_old = state.is_none() || state == before;
                let is_new = state.as_ref() == Some(&after);
                assert!(
                    is_old || is_new,
                    "{what}: neither the old nor the new records"
                );
                if code == Some(0) {
                    assert!(is_new, "{what}: exit 0 without the new records");
                } else {
                    failed += 1;
                }
            }
        }
    }
    eprintln!("{runs} injected runs, {failed} of them failed cleanly");
    assert!(failed > 0, "no injection made the ingest fail");
}

#[test]
fn injected_failures_into_an_existing_dataset_leave_it_old_or_new_and_never_panic() {
    let Some(strace) = strace() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (old, records) = old_dataset(dir.path());
    check_every_injection(&strace, Some((&old, &records)));
}

#[test]
fn injected_failures_into_a_new_dataset_leave_none_or_a_complete_one_and_never_panic() {
    let Some(strace) = strace() else { return };
    check_every_injection(&strace, None);
}

/// An ingest whose key check spills to `.bcd-spill/` (`--memory-limit 64K`),
/// SIGKILLed at each of its writes in turn (`strace -e inject=write:signal=KILL`,
/// a deterministic kill point): the dataset is old or new, and the runs the dead
/// writer left are gone after the next run or `bcd gc`, whichever comes first.
#[test]
fn kills_during_a_spilling_ingest_leave_the_dataset_old_or_new_and_no_runs_after_the_next_run_or_gc(
) {
    let Some(strace) = strace() else { return };
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("records.jsonl");
    let mut lines = String::new();
    let mut new: Records = Vec::new();
    for i in 0..4000 {
        let key = format!("k{i:05}");
        let text = format!("value {}", i % 97);
        lines.push_str(&format!("{{\"id\": \"{key}\", \"text\": \"{text}\"}}\n"));
        new.push((key.into_bytes(), text.into_bytes()));
    }
    std::fs::write(&source, lines).unwrap();
    let (old_path, old) = old_dataset(dir.path());
    let complete: Records = old.iter().chain(&new).cloned().collect();
    let target = dir.path().join("target");
    let log = dir.path().join("strace.log");
    let run = |inject: Option<String>| {
        let mut command = Command::new(&strace);
        command
            .env_remove("LD_LIBRARY_PATH")
            .args(["-f", "-qq", "-y", "-o"])
            .arg(&log)
            .args(["-e", "trace=write"]);
        if let Some(inject) = inject {
            command.arg("-e").arg(inject);
        }
        command
            .arg(env!("CARGO_BIN_EXE_bcd"))
            .args([
                "ingest",
                s(&source),
                "--into",
                s(&target),
                "--key-field",
                "id",
            ])
            .args(["--memory-limit", "64K", "--jobs", "1"])
            .stdin(Stdio::null())
            .output()
            .expect("run strace")
    };
    let records = |path: &Path| read_all(&Dataset::open(path).unwrap());

    let _ = std::fs::remove_dir_all(&target);
    copy_dir(&old_path, &target);
    let out = run(None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(records(&target), complete);
    let text = std::fs::read_to_string(&log).unwrap();
    let writes = text.lines().filter(|l| l.contains(" write(")).count();
    let spilled = text.lines().filter(|l| l.contains(".bcd-spill/")).count();
    assert!(spilled > 5, "the ingest spilled {spilled} times");
    eprintln!("{writes} writes, {spilled} of them to spilled runs");

    let mut killed_with_runs = 0;
    for n in 1..=writes {
        let _ = std::fs::remove_dir_all(&target);
        copy_dir(&old_path, &target);
        let out = run(Some(format!("inject=write:signal=KILL:when={n}")));
        let what = format!("killed at write {n}: {:?}", out.status);
        let got = records(&target);
        assert!(got == old || got == complete, "{what}: neither old nor new");
        let spill = target.join(".bcd-spill");
        if spill.exists() {
            killed_with_runs += 1;
        }
        // The next run, or gc, removes what the dead writer spilled.
        if n % 2 == 0 {
            let gc = Command::new(env!("CARGO_BIN_EXE_bcd"))
                .args(["gc", s(&target)])
                .output()
                .unwrap();
            assert!(
                gc.status.success(),
                "{what}: gc: {}",
                String::from_utf8_lossy(&gc.stderr)
            );
            assert_eq!(records(&target), got, "{what}: gc changed the records");
        } else {
            let rerun = Command::new(env!("CARGO_BIN_EXE_bcd"))
                .args([
                    "ingest",
                    s(&source),
                    "--into",
                    s(&target),
                    "--key-field",
                    "id",
                ])
                .args(["--memory-limit", "64K", "--on-duplicate", "skip"])
                .output()
                .unwrap();
            assert!(
                rerun.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&rerun.stderr)
            );
            assert_eq!(records(&target), complete, "{what}: the re-run");
        }
        assert!(
            !spill.exists(),
            "{what}: runs left after the next run or gc"
        );
    }
    assert!(killed_with_runs > 0, "no kill left runs behind");
}
