//! An extend is all-or-nothing and crash-safe.
//!
//! 1. Fault injection: every storage operation of a multi-shard extend (each create,
//!    write call, file fsync, directory fsync and the rename) is made to fail in
//!    turn; the dataset must keep exactly its committed records and the directory
//!    exactly its committed files, and a later extend must succeed. The one
//!    documented exception is the directory fsync after the rename: the commit is
//!    then visible.
//! 2. Power loss: the same storage also models durability (file contents are durable
//!    as of their last fsync, directory entries as of the directory's last fsync).
//!    For every crash point, the image a power loss would leave must open with
//!    exactly the old records or exactly old + new, at the point the protocol
//!    promises, and take a later extend.
//! 3. SIGKILL: this test binary re-runs itself as a child that extends a dataset and
//!    is killed at about 25 different moments.
//!
//! 4. The persisted index: an extend that rewrites `.bcd-index` too, failing at
//!    every operation and losing power at every point.
//!
//! Plus: two writers at once, in one process and across processes.
//!
//! Power loss is simulated, so the directories need no real disk: they go to
//! /dev/shm when it exists (much faster on a busy machine), else to the usual
//! temporary directory; set BCD_CRASH_TEST_TMPDIR to choose another place.//!
//! The simulated storage (fault injection and the durability model) is
//! `bcd_test_support::sim_storage`. Here: [`fixture`] (the dataset and the extend
//! under test), then one module per kind of failure:
//!
//! * [`failure_at_every_operation`]: an operation fails, the process goes on;
//! * [`power_loss`]: the machine stops, only what is durable remains;
//! * [`child_process`]: a writer process is SIGKILLed;
//! * [`second_writer`]: a second writer meets the lock;
//! * [`index_file`]: the same for the extend's rewrite of `.bcd-index`;
//! * [`merge`]: the same three kinds of failure for `Dataset::merge`;
//! * [`spill`]: an extend whose key check spills to `.bcd-spill/`;
//! * [`views`]: a view's write, failing at every operation and cut by a crash.

mod fixture;

mod child_process;
mod failure_at_every_operation;
mod index_file;
mod merge;
mod merge_rerun;
mod power_loss;
mod second_writer;
mod spill;
mod views;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bcd::{Dataset, Error};
use bcd_test_support::{read_all, snapshot, Record, Rng};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------

/// `count` records keyed `{tag}-{i:05}` (empty keys when keyless). Values are
/// compressible text of up to `max_len` bytes; every 29th is empty and the middle
/// one is `big_len` incompressible bytes (so, when larger than the shard limit, it
/// gets a shard of its own).
pub(crate) fn records(
    tag: &str,
    count: usize,
    keyed: bool,
    seed: u64,
    max_len: usize,
    big_len: usize,
) -> Vec<Record> {
    const WORDS: [&[u8]; 8] = [
        b"bitcask ",
        b"shard ",
        b"manifest ",
        b"fsync ",
        b"rename ",
        b"\x00\x01\x02\x03",
        b"lz4 ",
        b"record ",
    ];
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let key = if keyed {
                format!("{tag}-{i:05}").into_bytes()
            } else {
                Vec::new()
            };
            let value = match i {
                _ if i % 29 == 5 => Vec::new(),
                _ if i == count / 2 => (0..big_len).map(|_| rng.next_u64() as u8).collect(),
                _ => {
                    let len = rng.below(max_len + 1);
                    let mut value = Vec::with_capacity(len + 16);
                    while value.len() < len {
                        if rng.below(4) == 0 {
                            value.push(rng.next_u64() as u8);
                        } else {
                            value.extend_from_slice(WORDS[rng.below(8)]);
                        }
                    }
                    value.truncate(len);
                    value
                }
            };
            (key, value)
        })
        .collect()
}

pub(crate) fn concat(parts: &[&[Record]]) -> Vec<Record> {
    parts.concat()
}

/// Extends with `records`, as keyed records or bare values as the dataset takes them.
pub(crate) fn extend(dataset: &mut Dataset, records: &[Record]) -> bcd::Result<bcd::ExtendSummary> {
    if dataset.keyed() {
        dataset.extend(records.iter().map(|(k, v)| (k, v)))
    } else {
        dataset.extend_values(records.iter().map(|(_, v)| v))
    }
}

/// Asserts the dataset holds exactly `expected` (reading every value decodes it).
pub(crate) fn assert_records(dataset: &Dataset, expected: &[Record], context: &str) {
    assert_same_records(&read_all(dataset), expected, context);
}

/// Panics unless `got` is exactly `expected`, naming the first difference.
pub(crate) fn assert_same_records(got: &[Record], expected: &[Record], context: &str) {
    if got != expected {
        let first = got
            .iter()
            .zip(expected)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(expected.len()));
        panic!(
            "{context}: the dataset holds {} records, expected {}; first difference at record {first}",
            got.len(),
            expected.len()
        );
    }
}

/// Opens `dir` with the real file system, panicking with `context` on error.
pub(crate) fn open(dir: &Path, context: &str) -> Dataset {
    Dataset::open(dir).unwrap_or_else(|e| panic!("{context}: open {}: {e}", dir.display()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Exactly the records committed before the extend.
    Old,
    /// Exactly those plus every record of the extend, in order.
    New,
}

/// Which of the two allowed states `got` is; panics on anything else (a mix).
pub(crate) fn classify(got: &[Record], old: &[Record], new: &[Record], context: &str) -> Outcome {
    if got == old {
        Outcome::Old
    } else if got.len() == old.len() + new.len()
        && got[..old.len()] == *old
        && got[old.len()..] == *new
    {
        Outcome::New
    } else {
        panic!(
            "{context}: the dataset holds {} records, neither exactly the {} old ones nor \
             old + all {} new ones",
            got.len(),
            old.len(),
            new.len()
        )
    }
}

// ---------------------------------------------------------------------------
// Directories
// ---------------------------------------------------------------------------

pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const MANIFEST_TMP: &str = ".manifest.json.tmp";
pub(crate) const LOCK: &str = ".bcd.lock";

/// A new, empty temporary directory (see the note at the top of the file).
pub(crate) fn scratch_dir() -> TempDir {
    if let Some(dir) = std::env::var_os("BCD_CRASH_TEST_TMPDIR") {
        return tempfile::tempdir_in(dir).unwrap();
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Copies the files of `from` (not its directories) into `to`.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    for (name, bytes) in snapshot(from) {
        fs::write(to.join(name), bytes).unwrap();
    }
}

/// A new temporary directory holding `files`.
pub(crate) fn write_dir(files: &BTreeMap<String, Vec<u8>>) -> TempDir {
    let dir = scratch_dir();
    for (name, bytes) in files {
        fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// The shard number of `NNNNNN.bin` / `NNNNNN.idx`.
pub(crate) fn shard_id(name: &str) -> Option<u64> {
    let (stem, extension) = name.split_once('.')?;
    let digits = stem.len() == 6 && stem.bytes().all(|b| b.is_ascii_digit());
    (digits && (extension == "bin" || extension == "idx")).then(|| stem.parse().unwrap())
}

/// Asserts `dir` holds manifest.json and both files of shards `0..shards`, maybe the
/// lock file, and otherwise only leftovers that readers ignore (`.manifest.json.tmp`,
/// shard files numbered `shards` or more) for which `allowed` says yes. Returns
/// those leftovers.
pub(crate) fn assert_files(
    dir: &Path,
    shards: u64,
    allowed: impl Fn(&str) -> bool,
    context: &str,
) -> Vec<String> {
    let files: Vec<String> = snapshot(dir).into_keys().collect();
    let mut leftovers = Vec::new();
    for name in &files {
        let committed =
            name == MANIFEST || name == LOCK || shard_id(name).is_some_and(|id| id < shards);
        if committed {
            continue;
        }
        let ignored = name == MANIFEST_TMP || shard_id(name).is_some_and(|id| id >= shards);
        assert!(
            ignored && allowed(name),
            "{context}: unexpected file {name} in {} (committed shards: {shards}; files: {files:?})",
            dir.display()
        );
        leftovers.push(name.clone());
    }
    for id in 0..shards {
        for extension in ["bin", "idx"] {
            let name = format!("{id:06}.{extension}");
            assert!(
                files.contains(&name),
                "{context}: committed {name} is missing"
            );
        }
    }
    assert!(
        files.iter().any(|f| f == MANIFEST),
        "{context}: no manifest"
    );
    leftovers
}

/// Panics unless `err` is an I/O error about exactly `path` whose message shows it.
pub(crate) fn assert_io_error_about(err: &Error, path: &Path, context: &str) {
    match err {
        Error::Io { path: p, .. } => assert_eq!(p, path, "{context}: {err}"),
        other => panic!(
            "{context}: expected an I/O error about {}, got {other:?}",
            path.display()
        ),
    }
    let message = err.to_string();
    assert!(
        message.contains(&*path.to_string_lossy()),
        "{context}: the message does not name {}: {message}",
        path.display()
    );
}

// ---------------------------------------------------------------------------
// Tests that start processes
// ---------------------------------------------------------------------------

/// Held by every test: shared by most, exclusively by those that start a child
/// process. The writer lock is an flock on `.bcd.lock`, and a child started while
/// another test's thread has it open holds a copy of that descriptor from its
/// fork to its exec (the descriptor is close-on-exec, but a loaded machine can
/// delay the exec by milliseconds). A test that releases the lock and takes it
/// again, as most here do, would then meet `Error::Locked` from its own earlier
/// writer. `Command::spawn` returns once the child has exec'd, so no test may run
/// while another spawns.
static PROCESS_GUARD: RwLock<()> = RwLock::new(());

/// For a test that starts no process (see [`PROCESS_GUARD`]).
pub(crate) fn no_child_processes() -> RwLockReadGuard<'static, ()> {
    // A failed test poisons the lock; the others go on.
    PROCESS_GUARD.read().unwrap_or_else(|e| e.into_inner())
}

/// For a test that starts child processes: it runs alone (see [`PROCESS_GUARD`]).
pub(crate) fn alone_while_starting_processes() -> RwLockWriteGuard<'static, ()> {
    PROCESS_GUARD.write().unwrap_or_else(|e| e.into_inner())
}
