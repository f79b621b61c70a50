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
//! Plus: two writers at once, in one process and across processes.
//!
//! Power loss is simulated, so the directories need no real disk: they go to
//! /dev/shm when it exists (much faster on a busy machine), else to the usual
//! temporary directory; set BCD_CRASH_TEST_TMPDIR to choose another place.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bcd::storage::{FileSystem, Storage, StorageFile};
use bcd::{Compression, CreateOptions, Dataset, Error};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------

/// `(key, value)`; the key is empty in keyless datasets.
type Record = (Vec<u8>, Vec<u8>);

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `count` records keyed `{tag}-{i:05}` (empty keys when keyless). Values are
/// compressible text of up to `max_len` bytes; every 29th is empty and the middle
/// one is `big_len` incompressible bytes (so, when larger than the shard limit, it
/// gets a shard of its own).
fn records(
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
                _ if i == count / 2 => (0..big_len).map(|_| rng.next() as u8).collect(),
                _ => {
                    let len = rng.below(max_len as u64 + 1) as usize;
                    let mut value = Vec::with_capacity(len + 16);
                    while value.len() < len {
                        if rng.below(4) == 0 {
                            value.push(rng.next() as u8);
                        } else {
                            value.extend_from_slice(WORDS[rng.below(8) as usize]);
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

fn concat(parts: &[&[Record]]) -> Vec<Record> {
    parts.concat()
}

/// Extends with `records`, as keyed records or bare values as the dataset takes them.
fn extend(dataset: &mut Dataset, records: &[Record]) -> bcd::Result<bcd::ExtendSummary> {
    if dataset.keyed() {
        dataset.extend(records.iter().map(|(k, v)| (k, v)))
    } else {
        dataset.extend_values(records.iter().map(|(_, v)| v))
    }
}

/// Every record of the dataset, in order, read back in full.
fn contents(dataset: &Dataset) -> Vec<Record> {
    (0..dataset.len())
        .map(|i| {
            let key = if dataset.keyed() {
                dataset.key_at(i).unwrap().to_vec()
            } else {
                Vec::new()
            };
            (key, dataset.at(i).unwrap().into_owned())
        })
        .collect()
}

/// Panics unless `got` is exactly `expected`, naming the first difference.
fn assert_same_records(got: &[Record], expected: &[Record], context: &str) {
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

/// Asserts the dataset holds exactly `expected` (reading every value decodes it).
fn assert_records(dataset: &Dataset, expected: &[Record], context: &str) {
    assert_same_records(&contents(dataset), expected, context);
}

/// Opens `dir` with the real file system, panicking with `context` on error.
fn open(dir: &Path, context: &str) -> Dataset {
    Dataset::open(dir).unwrap_or_else(|e| panic!("{context}: open {}: {e}", dir.display()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Exactly the records committed before the extend.
    Old,
    /// Exactly those plus every record of the extend, in order.
    New,
}

/// Which of the two allowed states `got` is; panics on anything else (a mix).
fn classify(got: &[Record], old: &[Record], new: &[Record], context: &str) -> Outcome {
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

const MANIFEST: &str = "manifest.json";
const MANIFEST_TMP: &str = ".manifest.json.tmp";
const LOCK: &str = ".bcd.lock";

/// Every file of `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            assert!(entry.file_type().unwrap().is_file(), "{:?}", entry.path());
            let name = entry.file_name().into_string().unwrap();
            (name, fs::read(entry.path()).unwrap())
        })
        .collect()
}

/// A new, empty temporary directory (see the note at the top of the file).
fn scratch_dir() -> TempDir {
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

/// A new temporary directory holding `files`.
fn write_dir(files: &BTreeMap<String, Vec<u8>>) -> TempDir {
    let dir = scratch_dir();
    for (name, bytes) in files {
        fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// The shard number of `NNNNNN.bin` / `NNNNNN.idx`.
fn shard_id(name: &str) -> Option<u64> {
    let (stem, extension) = name.split_once('.')?;
    let digits = stem.len() == 6 && stem.bytes().all(|b| b.is_ascii_digit());
    (digits && (extension == "bin" || extension == "idx")).then(|| stem.parse().unwrap())
}

/// Asserts `dir` holds manifest.json and both files of shards `0..shards`, maybe the
/// lock file, and otherwise only leftovers that readers ignore (`.manifest.json.tmp`,
/// shard files numbered `shards` or more) for which `allowed` says yes. Returns
/// those leftovers.
fn assert_files(
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
fn assert_io_error_about(err: &Error, path: &Path, context: &str) {
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
// Simulated storage: fault injection and a durability model
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Create,
    /// One call of `Write::write` on a file.
    Write,
    /// `StorageFile::sync` (fsync of a file).
    SyncFile,
    SyncDir,
    Rename,
    Remove,
}

/// One storage operation, as the writer asked for it.
#[derive(Clone, Debug)]
struct Op {
    kind: OpKind,
    /// The file (the source of a rename, the directory of a directory fsync).
    path: PathBuf,
    /// Its name in the dataset directory, "." for the directory itself.
    name: String,
}

impl Op {
    /// The operation independently of where the dataset is.
    fn key(&self) -> (OpKind, &str) {
        (self.kind, &self.name)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}", self.kind, self.name)
    }
}

#[derive(Clone, Copy, Debug)]
enum Policy {
    /// Every operation succeeds.
    Pass,
    /// Operation number `n` (1-based) fails with an error and has no effect; the
    /// others succeed.
    FailOnce(usize),
    /// The process "dies" after `n` operations: every later one fails and has no
    /// effect.
    CrashAfter(usize),
}

#[derive(Clone, Copy, Debug)]
struct Config {
    policy: Policy,
    /// Every remove also fails (cleanup after a failure cannot delete anything).
    fail_removes: bool,
    /// A write call writes at most this many bytes (short writes).
    max_write: usize,
    /// Whether file and directory syncs reach the real file system. The durability
    /// model does not need them; skipping them keeps the power-loss loop fast.
    real_sync: bool,
}

impl Config {
    fn pass() -> Config {
        Config {
            policy: Policy::Pass,
            fail_removes: false,
            max_write: usize::MAX,
            real_sync: false,
        }
    }
}

/// A file's contents: what is durable (as of its last fsync) and what is current.
#[derive(Clone, Debug, Default)]
struct Inode {
    synced: Vec<u8>,
    current: Vec<u8>,
}

/// A change to the directory not yet made durable by a directory fsync.
#[derive(Clone, Debug)]
enum DirChange {
    Create,
    Rename {
        from: String,
        to: String,
        inode: usize,
    },
    Remove(String),
}

/// The dataset directory as the operations left it, and as a crash would.
#[derive(Debug)]
struct Model {
    dir: PathBuf,
    inodes: Vec<Inode>,
    /// Name -> inode, as a process sees it now.
    live: BTreeMap<String, usize>,
    /// Name -> inode as of the directory's last fsync.
    durable: BTreeMap<String, usize>,
    /// Directory changes since the last directory fsync, in order.
    pending: Vec<DirChange>,
}

/// What survives a crash. File contents are durable as of the file's last fsync
/// and directory entries as of the directory's last fsync; the power-loss variants
/// differ in what else happens to reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Survivors {
    /// The process died, the machine did not: everything done is there.
    ProcessCrash,
    /// Nothing that was not fsynced.
    PowerLossUnsyncedLost,
    /// Of the bytes written to a file since its last fsync, the first half
    /// (a torn write-back); no unsynced directory change.
    PowerLossUnsyncedTorn,
    /// Every byte written, even unsynced; no unsynced directory change.
    PowerLossUnsyncedKept,
    /// Every directory change (journaled metadata) but only fsynced file contents.
    PowerLossMetadataKept,
    /// Of the unsynced directory changes, renames and removes but not creations
    /// (directory changes reordered); only fsynced file contents.
    PowerLossRenamesKept,
}

const ALL_SURVIVORS: [Survivors; 6] = [
    Survivors::ProcessCrash,
    Survivors::PowerLossUnsyncedLost,
    Survivors::PowerLossUnsyncedTorn,
    Survivors::PowerLossUnsyncedKept,
    Survivors::PowerLossMetadataKept,
    Survivors::PowerLossRenamesKept,
];

impl Survivors {
    /// Whether the manifest's rename survives as soon as it is done, rather than
    /// once the directory is fsynced after it.
    fn keeps_unsynced_rename(self) -> bool {
        matches!(
            self,
            Survivors::ProcessCrash
                | Survivors::PowerLossMetadataKept
                | Survivors::PowerLossRenamesKept
        )
    }
}

impl Model {
    /// The directory as it is now, all of it taken as durable.
    fn load(dir: &Path) -> Model {
        let mut model = Model {
            dir: dir.to_owned(),
            inodes: Vec::new(),
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            pending: Vec::new(),
        };
        for (name, bytes) in snapshot(dir) {
            model.inodes.push(Inode {
                synced: bytes.clone(),
                current: bytes,
            });
            model.live.insert(name, model.inodes.len() - 1);
        }
        model.durable = model.live.clone();
        model
    }

    fn name(&self, path: &Path) -> String {
        assert_eq!(
            path.parent(),
            Some(self.dir.as_path()),
            "the writer touched a file outside the dataset directory"
        );
        path.file_name().unwrap().to_str().unwrap().to_owned()
    }

    /// Creating an existing name truncates that file; otherwise a new, empty file.
    fn create(&mut self, path: &Path) -> usize {
        let name = self.name(path);
        if let Some(&inode) = self.live.get(&name) {
            self.inodes[inode].current.clear();
            return inode;
        }
        self.inodes.push(Inode::default());
        let inode = self.inodes.len() - 1;
        self.live.insert(name, inode);
        self.pending.push(DirChange::Create);
        inode
    }

    fn rename(&mut self, from: &Path, to: &Path) {
        let (from, to) = (self.name(from), self.name(to));
        let inode = self.live.remove(&from).expect("renamed file exists");
        self.live.insert(to.clone(), inode);
        self.pending.push(DirChange::Rename { from, to, inode });
    }

    fn remove(&mut self, path: &Path) {
        let name = self.name(path);
        if self.live.remove(&name).is_some() {
            self.pending.push(DirChange::Remove(name));
        }
    }

    fn sync_dir(&mut self) {
        self.durable = self.live.clone();
        self.pending.clear();
    }

    fn files(&self, survivors: Survivors) -> BTreeMap<String, Vec<u8>> {
        let entries = match survivors {
            Survivors::ProcessCrash | Survivors::PowerLossMetadataKept => self.live.clone(),
            Survivors::PowerLossRenamesKept => {
                let mut entries = self.durable.clone();
                for change in &self.pending {
                    match change {
                        DirChange::Create => {}
                        DirChange::Rename { from, to, inode } => {
                            entries.remove(from);
                            entries.insert(to.clone(), *inode);
                        }
                        DirChange::Remove(name) => {
                            entries.remove(name);
                        }
                    }
                }
                entries
            }
            _ => self.durable.clone(),
        };
        entries
            .into_iter()
            .map(|(name, inode)| {
                let Inode { synced, current } = &self.inodes[inode];
                let bytes = match survivors {
                    Survivors::ProcessCrash | Survivors::PowerLossUnsyncedKept => current.clone(),
                    Survivors::PowerLossUnsyncedLost
                    | Survivors::PowerLossMetadataKept
                    | Survivors::PowerLossRenamesKept => synced.clone(),
                    Survivors::PowerLossUnsyncedTorn => {
                        if current.starts_with(synced) {
                            // Appended since the fsync: half of the new bytes made it.
                            let unsynced = current.len() - synced.len();
                            current[..synced.len() + unsynced / 2].to_vec()
                        } else {
                            // Truncated and rewritten since the fsync.
                            current[..current.len() / 2].to_vec()
                        }
                    }
                };
                (name, bytes)
            })
            .collect()
    }
}

#[derive(Debug)]
struct State {
    config: Config,
    ops: Vec<Op>,
    model: Model,
}

impl State {
    /// Records an operation and decides whether it fails.
    fn begin(&mut self, kind: OpKind, path: &Path) -> io::Result<()> {
        let name = if path == self.model.dir {
            ".".to_owned()
        } else {
            self.model.name(path)
        };
        self.ops.push(Op {
            kind,
            path: path.to_owned(),
            name,
        });
        let n = self.ops.len();
        let fail = match self.config.policy {
            Policy::Pass => false,
            Policy::FailOnce(at) => n == at,
            Policy::CrashAfter(after) => n > after,
        } || (kind == OpKind::Remove && self.config.fail_removes);
        if fail {
            Err(io::Error::other(format!(
                "injected failure of {:?} {}",
                kind,
                path.display()
            )))
        } else {
            Ok(())
        }
    }
}

/// A [`Storage`] that passes operations to [`FileSystem`] while logging them,
/// failing them as its [`Policy`] says, and tracking what would be durable.
#[derive(Clone)]
struct SimStorage(Arc<Mutex<State>>);

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SimStorage")
    }
}

impl SimStorage {
    /// Storage for the dataset in `dir`, whose current files are taken as durable.
    fn new(dir: &Path, config: Config) -> SimStorage {
        SimStorage(Arc::new(Mutex::new(State {
            config,
            ops: Vec::new(),
            model: Model::load(dir),
        })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    fn ops(&self) -> Vec<Op> {
        self.state().ops.clone()
    }

    fn files(&self, survivors: Survivors) -> BTreeMap<String, Vec<u8>> {
        self.state().model.files(survivors)
    }

    /// Opens the dataset in `dir` writing through this storage.
    fn open(&self, dir: &Path) -> Dataset {
        let mut dataset = Dataset::open_with_storage(dir, Arc::new(self.clone())).unwrap();
        // One compression thread: the cores are better spent on the many iterations.
        dataset.set_threads(1);
        dataset
    }
}

struct SimFile {
    inner: Box<dyn StorageFile>,
    inode: usize,
    path: PathBuf,
    state: Arc<Mutex<State>>,
}

impl Write for SimFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let mut state = self.state.lock().unwrap();
        state.begin(OpKind::Write, &self.path)?;
        let buf = &buf[..buf.len().min(state.config.max_write)];
        let written = self.inner.write(buf)?;
        state.model.inodes[self.inode]
            .current
            .extend_from_slice(&buf[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl StorageFile for SimFile {
    fn sync(&mut self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap();
        state.begin(OpKind::SyncFile, &self.path)?;
        if state.config.real_sync {
            self.inner.sync()?;
        }
        let inode = &mut state.model.inodes[self.inode];
        inode.synced = inode.current.clone();
        Ok(())
    }
}

impl Storage for SimStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let mut state = self.state();
        state.begin(OpKind::Create, path)?;
        let inner = FileSystem.create(path)?;
        let inode = state.model.create(path);
        Ok(Box::new(SimFile {
            inner,
            inode,
            path: path.to_owned(),
            state: self.0.clone(),
        }))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::SyncDir, dir)?;
        assert_eq!(dir, state.model.dir, "fsync of another directory");
        if state.config.real_sync {
            FileSystem.sync_dir(dir)?;
        }
        state.model.sync_dir();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::Rename, from)?;
        FileSystem.rename(from, to)?;
        state.model.rename(from, to);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::Remove, path)?;
        FileSystem.remove(path)?;
        state.model.remove(path);
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The extend under test
// ---------------------------------------------------------------------------

/// Shard limit of the fault-injection datasets: a few hundred records make 3+ shards.
const SMALL_SHARD: u64 = 4096;

#[derive(Clone, Copy, Debug)]
struct Scenario {
    keyed: bool,
    compression: Compression,
    /// Largest write call (see [`Config::max_write`]).
    max_write: usize,
    /// Whether removes fail too, so a failed extend cannot clean up.
    fail_removes: bool,
}

const KEYED_LZ4: Scenario = Scenario {
    keyed: true,
    compression: Compression::Lz4,
    max_write: usize::MAX,
    fail_removes: false,
};

/// A dataset with committed records, and the records of the extend under test.
struct Fixture {
    scenario: Scenario,
    /// The dataset before the extend, every file with its bytes.
    base_files: BTreeMap<String, Vec<u8>>,
    old: Vec<Record>,
    old_shards: u64,
    /// The extend under test.
    new: Vec<Record>,
    /// A later extend.
    more: Vec<Record>,
    /// Operations of the extend when nothing fails.
    ops: Vec<Op>,
    /// Shards once the extend is committed.
    new_shards: u64,
}

impl Fixture {
    fn new(scenario: Scenario) -> Fixture {
        let keyed = scenario.keyed;
        let base = scratch_dir();
        let options = CreateOptions {
            keyed,
            compression: scenario.compression,
            max_shard_size: SMALL_SHARD,
        };
        let mut dataset = Dataset::create(base.path(), options).unwrap();
        let old = records("old", 40, keyed, 1, 200, 5000);
        extend(&mut dataset, &old).unwrap();
        let old_shards = dataset.shards();
        assert!(old_shards >= 2, "{old_shards} old shards");
        drop(dataset);

        let mut fixture = Fixture {
            scenario,
            base_files: snapshot(base.path()),
            old,
            old_shards,
            new: records("new", 240, keyed, 2, 150, 6000),
            more: records("more", 30, keyed, 3, 150, 6000),
            ops: Vec::new(),
            new_shards: 0,
        };

        // Count the operations of the extend when nothing fails.
        let work = fixture.copy();
        let storage = fixture.storage(work.path(), Policy::Pass, false);
        let mut dataset = storage.open(work.path());
        extend(&mut dataset, &fixture.new).unwrap();
        fixture.ops = storage.ops();
        fixture.new_shards = dataset.shards();
        assert_records(
            &open(work.path(), "counting run"),
            &concat(&[&fixture.old, &fixture.new]),
            "counting run",
        );
        let count = |kind| fixture.ops.iter().filter(|op| op.kind == kind).count();
        let new_shards = (fixture.new_shards - old_shards) as usize;
        assert!(new_shards >= 3, "only {new_shards} new shards");
        assert_eq!(
            count(OpKind::Create),
            2 * new_shards + 1,
            "{:?}",
            fixture.ops
        );
        assert_eq!(count(OpKind::SyncFile), 2 * new_shards + 1);
        assert_eq!(count(OpKind::SyncDir), 2);
        assert_eq!(count(OpKind::Rename), 1);
        assert_eq!(count(OpKind::Remove), 0);
        let last: Vec<OpKind> = fixture.ops.iter().rev().take(2).map(|op| op.kind).collect();
        assert_eq!(
            last,
            [OpKind::SyncDir, OpKind::Rename],
            "the commit ends with rename + fsync"
        );
        eprintln!(
            "{scenario:?}: {} operations, {new_shards} new shards",
            fixture.ops.len()
        );
        fixture
    }

    fn copy(&self) -> TempDir {
        write_dir(&self.base_files)
    }

    /// Storage for a copy in `dir`, failing as `policy` says.
    fn storage(&self, dir: &Path, policy: Policy, real_sync: bool) -> SimStorage {
        SimStorage::new(
            dir,
            Config {
                policy,
                fail_removes: self.scenario.fail_removes,
                max_write: self.scenario.max_write,
                real_sync,
            },
        )
    }

    fn total_ops(&self) -> usize {
        self.ops.len()
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

/// Fails operation N of the extend, for every N, and checks what is left.
fn check_failure_at_every_operation(scenario: Scenario) {
    let fx = Fixture::new(scenario);
    let total = fx.total_ops();
    for n in 1..=total {
        let failing = &fx.ops[n - 1];
        let context = format!("{scenario:?}, failing operation {n}/{total} ({failing})");
        let context = context.as_str();
        let work = fx.copy();
        let dir = work.path();
        // Every operation reaches the real file system here, fsyncs included.
        let storage = fx.storage(dir, Policy::FailOnce(n), true);
        let mut dataset = storage.open(dir);

        let err = extend(&mut dataset, &fx.new).expect_err(context);
        let ops = storage.ops();
        assert!(
            ops[..n]
                .iter()
                .map(Op::key)
                .eq(fx.ops[..n].iter().map(Op::key)),
            "{context}: the writer is not deterministic"
        );
        if n == total {
            match &err {
                Error::CommittedNotDurable { path, .. } => assert_eq!(path, dir, "{context}"),
                other => panic!("{context}: expected CommittedNotDurable, got {other:?}"),
            }
        } else {
            assert_io_error_about(&err, &ops[n - 1].path, context);
        }

        if n == total {
            // The documented exception: the manifest was renamed into place and only
            // its durability is in doubt, so the commit is visible, to this handle and
            // to readers, and nothing was cleaned up.
            assert_eq!(failing.kind, OpKind::SyncDir, "{context}");
            assert_eq!(dataset.shards(), fx.new_shards, "{context}");
            assert_records(&dataset, &fx.old_and_new(), context);
            assert_records(&open(dir, context), &fx.old_and_new(), context);
            assert_files(dir, fx.new_shards, |_| false, context);
            assert!(
                !ops[n..].iter().any(|op| op.kind == OpKind::Remove),
                "{context}: committed files were removed: {:?}",
                &ops[n..]
            );
            extend(&mut dataset, &fx.more)
                .unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
            assert_records(
                &open(dir, context),
                &concat(&[&fx.old, &fx.new, &fx.more]),
                context,
            );
            continue;
        }

        // Nothing committed: the handle and a fresh reader see exactly the old records.
        assert_eq!(dataset.shards(), fx.old_shards, "{context}");
        assert_records(&dataset, &fx.old, context);
        assert_records(&open(dir, context), &fx.old, context);
        // The committed files are byte for byte as before.
        let files = snapshot(dir);
        for (name, bytes) in &fx.base_files {
            assert!(files.get(name) == Some(bytes), "{context}: {name} changed");
        }
        if scenario.fail_removes {
            // Cleanup could not delete anything: what is left must be files this
            // extend created (shards numbered from the old count, the temporary
            // manifest), all of which readers ignore.
            let created: Vec<String> = ops[..n]
                .iter()
                .filter(|op| op.kind == OpKind::Create)
                .map(|op| op.name.clone())
                .collect();
            assert_files(
                dir,
                fx.old_shards,
                |name| created.iter().any(|c| c == name),
                context,
            );
        } else {
            // Cleanup worked: the directory is exactly as before the extend.
            assert_eq!(
                files.keys().collect::<Vec<_>>(),
                fx.base_files.keys().collect::<Vec<_>>(),
                "{context}: files left behind"
            );
        }

        // The same handle retries (nothing fails any more) and commits.
        extend(&mut dataset, &fx.new).unwrap_or_else(|e| panic!("{context}: retry: {e}"));
        assert_records(&open(dir, context), &fx.old_and_new(), context);
        // The retry wrote the same shard numbers, so it overwrote every leftover.
        assert_files(dir, fx.new_shards, |_| false, context);
    }
}

#[test]
fn extend_failing_at_any_operation_commits_nothing_and_removes_its_files() {
    check_failure_at_every_operation(KEYED_LZ4);
}

#[test]
fn extend_failing_at_any_operation_with_short_writes_and_failing_cleanup_leaves_only_ignored_leftovers(
) {
    check_failure_at_every_operation(Scenario {
        max_write: 1000,
        fail_removes: true,
        ..KEYED_LZ4
    });
}

#[test]
fn keyless_uncompressed_extend_failing_at_any_operation_commits_nothing() {
    check_failure_at_every_operation(Scenario {
        keyed: false,
        compression: Compression::None,
        ..KEYED_LZ4
    });
}

#[test]
fn failed_final_directory_fsync_after_the_rename_leaves_the_commit_visible() {
    let fx = Fixture::new(KEYED_LZ4);
    let work = fx.copy();
    let dir = work.path();
    let storage = fx.storage(dir, Policy::FailOnce(fx.total_ops()), false);
    let mut dataset = storage.open(dir);
    let err = extend(&mut dataset, &fx.new).unwrap_err();
    match &err {
        Error::CommittedNotDurable { path, .. } => assert_eq!(path, dir),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("committed"), "{err}");
    // Visible to the handle and to any reader; no file was removed.
    assert_eq!(dataset.len(), fx.old.len() + fx.new.len());
    assert_records(&open(dir, "after"), &fx.old_and_new(), "after");
    assert_files(dir, fx.new_shards, |_| false, "after");
    // Retrying the same keys is refused: they are committed.
    assert!(matches!(
        extend(&mut dataset, &fx.new),
        Err(Error::DuplicateKey { .. })
    ));
}

/// The error of a failed fsync of the directory *after* the rename (records
/// committed) must not read like that of the fsync *before* it (nothing committed):
/// a caller deciding whether to retry has to tell them apart, or a keyless retry
/// would append every record twice.
#[test]
fn final_fsync_error_is_distinguishable_from_an_uncommitted_one() {
    let fx = Fixture::new(KEYED_LZ4);
    let fail = |n: usize| {
        let work = fx.copy();
        let storage = fx.storage(work.path(), Policy::FailOnce(n), false);
        let mut dataset = storage.open(work.path());
        let err = extend(&mut dataset, &fx.new).unwrap_err();
        let committed = dataset.len() > fx.old.len();
        (err.to_string(), committed, work)
    };
    let (before_rename, committed_before, work_before) = fail(fx.rename_op() - 1);
    let (after_rename, committed_after, work_after) = fail(fx.total_ops());
    assert!(!committed_before && committed_after);
    assert_ne!(
        before_rename.replace(&*work_before.path().to_string_lossy(), "DIR"),
        after_rename.replace(&*work_after.path().to_string_lossy(), "DIR"),
        "the caller cannot tell a committed extend from a rolled-back one"
    );
}

#[test]
fn extend_rejected_midway_commits_nothing_and_removes_its_shards() {
    let fx = Fixture::new(KEYED_LZ4);
    let work = fx.copy();
    let dir = work.path();
    let mut dataset = open(dir, "open");

    // Dataset::extend compresses and writes in batches of 1024 records: the first
    // batch is in new shard files when the duplicate key in the second is met.
    let mut bulk = records("bulk", 1100, true, 9, 150, 0);
    bulk.push(bulk[3].clone());
    let err = extend(&mut dataset, &bulk).unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    assert_records(&dataset, &fx.old, "handle");
    assert_records(&open(dir, "reopen"), &fx.old, "reopen");
    assert_eq!(snapshot(dir), fx.base_files, "files left behind");

    // An extend dropped without commit, after writing shards and refusing a
    // duplicate key, removes its files too.
    let mut in_progress = dataset.begin_extend().unwrap();
    for (key, value) in &fx.new {
        in_progress.push(key, value).unwrap();
    }
    let err = in_progress.push(&fx.new[3].0, b"again").unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    let written = assert_files(dir, fx.old_shards, |_| true, "in progress");
    assert!(written.len() >= 4, "{written:?}");
    drop(in_progress);
    assert_records(&open(dir, "after drop"), &fx.old, "after drop");
    assert_eq!(
        snapshot(dir),
        fx.base_files,
        "files left behind by a dropped extend"
    );
}

// ---------------------------------------------------------------------------
// Power loss
// ---------------------------------------------------------------------------

/// Stops the extend after N operations, for every N, and opens what each kind of
/// crash would leave.
fn check_crash_at_every_point(scenario: Scenario) {
    let fx = Fixture::new(scenario);
    let total = fx.total_ops();
    let rename = fx.rename_op();
    assert_eq!(rename + 1, total);
    // No extend on the images needs durability: a storage that skips fsyncs.
    let nosync = |dir: &Path| SimStorage::new(dir, Config::pass()).open(dir);
    // Many crash points and variants leave the same image: each distinct one is
    // checked once (with the outcome it must have).
    let mut checked: HashMap<u64, bool> = HashMap::new();
    for n in 0..=total {
        let work = fx.copy();
        let dir = work.path();
        let storage = fx.storage(dir, Policy::CrashAfter(n), false);
        let mut dataset = storage.open(dir);
        let result = extend(&mut dataset, &fx.new);
        assert_eq!(
            result.is_ok(),
            n == total,
            "crash after {n}/{total}: {result:?}"
        );
        drop(dataset);
        // The model agrees with the real directory (checks the model).
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
            let context = format!("{scenario:?}, {survivors:?} {after}");
            let context = context.as_str();
            let files = storage.files(survivors);

            // The new records appear exactly when the protocol says: once the rename
            // is done if it survives unsynced, else once the directory fsync after it
            // is done.
            let committed = if survivors.keeps_unsynced_rename() {
                n >= rename
            } else {
                n >= total
            };
            let mut hasher = DefaultHasher::new();
            files.hash(&mut hasher);
            if let Some(before) = checked.insert(hasher.finish(), committed) {
                assert_eq!(
                    before, committed,
                    "{context}: the same image, another outcome"
                );
                continue;
            }

            // The pre-extend directory with only the surviving effects applied.
            let image = fx.copy();
            for name in fx.base_files.keys() {
                if !files.contains_key(name) {
                    fs::remove_file(image.path().join(name)).unwrap();
                }
            }
            for (name, bytes) in &files {
                if fx.base_files.get(name) != Some(bytes) {
                    fs::write(image.path().join(name), bytes).unwrap();
                }
            }

            let dataset = Dataset::open(image.path())
                .unwrap_or_else(|e| panic!("{context}: the image does not open: {e}"));
            let (now, later, expected_after) = if committed {
                (
                    fx.old_and_new(),
                    &fx.more,
                    concat(&[&fx.old, &fx.new, &fx.more]),
                )
            } else {
                (fx.old.clone(), &fx.new, fx.old_and_new())
            };
            assert_records(&dataset, &now, context);
            drop(dataset);

            let mut dataset = nosync(image.path());
            extend(&mut dataset, later).unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
            assert_records(&open(image.path(), context), &expected_after, context);
            assert_files(image.path(), dataset.shards(), |_| true, context);
        }
    }
    eprintln!("{scenario:?}: {} distinct crash images", checked.len());
}

#[test]
fn power_loss_at_any_point_of_an_extend_leaves_exactly_old_or_old_plus_new_records() {
    check_crash_at_every_point(KEYED_LZ4);
}

#[test]
fn power_loss_with_short_writes_and_keyless_datasets_leaves_exactly_old_or_old_plus_new() {
    check_crash_at_every_point(Scenario {
        max_write: 700,
        ..KEYED_LZ4
    });
    check_crash_at_every_point(Scenario {
        keyed: false,
        compression: Compression::None,
        ..KEYED_LZ4
    });
}

/// The durability model itself: what was not fsynced does not survive a power loss.
#[test]
fn durability_model_keeps_only_what_was_synced() {
    let work = scratch_dir();
    let dir = work.path();
    fs::write(dir.join("old"), b"old bytes").unwrap();
    let storage = SimStorage::new(dir, Config::pass());

    let mut a = storage.create(&dir.join("a")).unwrap();
    a.write_all(b"synced").unwrap();
    a.sync().unwrap();
    a.write_all(b" unsynced").unwrap();
    storage.sync_dir(dir).unwrap();
    let mut b = storage.create(&dir.join("b")).unwrap();
    b.write_all(b"b").unwrap();
    b.sync().unwrap();
    storage.rename(&dir.join("a"), &dir.join("old")).unwrap();

    let files = |s| storage.files(s).into_iter().collect::<Vec<_>>();
    let entry = |name: &str, bytes: &[u8]| (name.to_owned(), bytes.to_vec());
    assert_eq!(
        files(Survivors::PowerLossUnsyncedLost),
        [entry("a", b"synced"), entry("old", b"old bytes")]
    );
    assert_eq!(
        files(Survivors::PowerLossUnsyncedTorn),
        [entry("a", b"synced uns"), entry("old", b"old bytes")]
    );
    assert_eq!(
        files(Survivors::PowerLossUnsyncedKept),
        [entry("a", b"synced unsynced"), entry("old", b"old bytes")]
    );
    assert_eq!(
        files(Survivors::ProcessCrash),
        [entry("b", b"b"), entry("old", b"synced unsynced")]
    );
    assert_eq!(
        files(Survivors::PowerLossMetadataKept),
        [entry("b", b"b"), entry("old", b"synced")]
    );
    assert_eq!(
        files(Survivors::PowerLossRenamesKept),
        [entry("old", b"synced")]
    );
    storage.remove(&dir.join("b")).unwrap();
    assert_eq!(
        files(Survivors::PowerLossRenamesKept),
        [entry("old", b"synced")]
    );
    assert_eq!(
        files(Survivors::PowerLossMetadataKept),
        [entry("old", b"synced")]
    );
    let mut b = storage.create(&dir.join("b")).unwrap();
    b.write_all(b"b").unwrap();
    b.sync().unwrap();
    storage.sync_dir(dir).unwrap();
    assert_eq!(
        files(Survivors::PowerLossUnsyncedLost),
        [entry("b", b"b"), entry("old", b"synced")]
    );
    assert_eq!(storage.files(Survivors::ProcessCrash), snapshot(dir));
}

// ---------------------------------------------------------------------------
// SIGKILL and a second process
// ---------------------------------------------------------------------------

/// Names the dataset the child process works on.
const CHILD_DATASET_ENV: &str = "BCD_CRASH_TEST_CHILD_DATASET";
/// "extend": extend with [`child_records`], printing progress; "hold-lock": start an
/// extend and wait to be killed.
const CHILD_MODE_ENV: &str = "BCD_CRASH_TEST_CHILD_MODE";
/// Prefix of the child's progress lines on stdout.
const PROGRESS: &str = "bcd-crash-test-progress:";
const CHILD_BATCHES: usize = 24;
const CHILD_BATCH_RECORDS: usize = 24;
/// Shard limit of the child's dataset: its extend writes several shards.
const CHILD_SHARD: u64 = 128 * 1024;

/// What the child adds: 24 batches of 24 records of up to 4 KiB, several shards.
fn child_records() -> Vec<Record> {
    records(
        "child",
        CHILD_BATCHES * CHILD_BATCH_RECORDS,
        true,
        7,
        4096,
        3000,
    )
}

/// Runs in the child process (see [`ChildProcess::spawn`]), which selects it with
/// `--ignored --exact`. Ignored, so that a plain run neither runs nor counts it: it
/// checks nothing without the parent.
#[test]
#[ignore = "a helper process of the SIGKILL tests, run by them"]
fn child_writer_process() {
    let Some(dir) = std::env::var_os(CHILD_DATASET_ENV) else {
        return;
    };
    let mode = std::env::var(CHILD_MODE_ENV).unwrap();
    let progress = |what: &str| {
        let mut out = io::stdout().lock();
        writeln!(out, "{PROGRESS} {what}").unwrap();
        out.flush().unwrap();
    };
    let mut dataset = Dataset::open(&dir).unwrap();
    progress("open");
    let mut extend = dataset.begin_extend().unwrap();
    progress("begin");
    match mode.as_str() {
        "hold-lock" => {
            extend.push(b"held", b"never committed").unwrap();
            progress("locked");
            std::thread::sleep(Duration::from_secs(60));
            panic!("the parent did not kill this process");
        }
        "extend" => {
            for (i, batch) in child_records().chunks(CHILD_BATCH_RECORDS).enumerate() {
                // Compressed on all cores, then written.
                extend.push_batch(batch).unwrap();
                progress(&format!("batch {i}"));
            }
            progress("committing");
            let summary = extend.commit().unwrap();
            assert!(summary.shards >= 3, "{summary:?}");
            progress("committed");
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// A child process, killed (and reaped) when dropped so a failing test leaves none.
struct ChildProcess {
    child: Child,
    /// Its stdout, kept open until it is dead so its prints never hit a closed pipe.
    stdout: BufReader<ChildStdout>,
    /// Progress lines read so far.
    lines: usize,
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ChildProcess {
    /// Re-runs this test binary as `child_writer_process` on `dir`.
    fn spawn(dir: &Path, mode: &str) -> ChildProcess {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "child_writer_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DATASET_ENV, dir)
            .env(CHILD_MODE_ENV, mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        ChildProcess {
            child,
            stdout,
            lines: 0,
        }
    }

    /// Reads stdout until the child has printed `count` progress lines in all, or
    /// its stdout ends; returns how many it printed.
    fn progress(&mut self, count: usize) -> usize {
        let mut line = String::new();
        while self.lines < count {
            line.clear();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            // Search, not prefix: the test harness may print on the same line.
            if line.contains(PROGRESS) {
                self.lines += 1;
            }
        }
        self.lines
    }

    /// SIGKILL (`Child::kill` on Unix), then reap. A child that already exited is
    /// not an error.
    fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }

    fn wait(&mut self) -> ExitStatus {
        self.child.wait().unwrap()
    }
}

/// Whether the child exited by itself, successfully; panics if it failed.
#[cfg(unix)]
fn completed(status: ExitStatus, context: &str) -> bool {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => true,
        (_, Some(9)) => false,
        _ => panic!("{context}: the child failed: {status}"),
    }
}

#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// Let the child finish.
    Never,
    /// Right after reading this many progress lines: 1 "open", 2 "begin",
    /// 3.. one per batch, then "committing", then "committed".
    Line(usize),
    /// This long after the "begin" line (the extend has started).
    Delay(Duration),
}

#[cfg(unix)]
#[test]
fn sigkilled_writer_leaves_exactly_old_or_old_plus_all_new_records() {
    // The dataset every round starts from a copy of: some committed records.
    let base = scratch_dir();
    let options = CreateOptions {
        keyed: true,
        compression: Compression::Lz4,
        max_shard_size: CHILD_SHARD,
    };
    let mut dataset = Dataset::create(base.path(), options).unwrap();
    let old = records("old", 100, true, 5, 4096, 3000);
    extend(&mut dataset, &old).unwrap();
    assert!(dataset.shards() >= 1);
    drop(dataset);
    let base_files = snapshot(base.path());
    let new = child_records();
    let later = records("later", 20, true, 6, 2000, 3000);
    let committed_line = CHILD_BATCHES + 4;

    let mut plan = vec![KillAt::Never];
    plan.extend(
        [0, 1, 2, 3, 4, 6, 9, 12, 15, 18, 21, 24]
            .into_iter()
            .chain([CHILD_BATCHES + 2, CHILD_BATCHES + 3, committed_line])
            .map(KillAt::Line),
    );
    // Spread over the extend as timed in the first round, once that is done.
    let delays = plan.len()..plan.len() + 10;
    let mut outcomes = Vec::new();
    let mut extend_time = Duration::ZERO;
    let mut round = 0;
    while round < delays.end {
        if round == delays.start {
            plan.extend(
                // 0 to 1.5 times it: under load a later run may be slower.
                (0..delays.len()).map(|i| {
                    KillAt::Delay(extend_time.mul_f64(1.5 * i as f64 / (delays.len() - 1) as f64))
                }),
            );
        }
        let kill_at = plan[round];
        round += 1;
        let context = format!("round {round}, kill {kill_at:?}");
        let context = context.as_str();
        let work = write_dir(&base_files);
        let dir = work.path();

        let mut child = ChildProcess::spawn(dir, "extend");
        let status = match kill_at {
            KillAt::Never => {
                child.progress(2);
                let started = Instant::now();
                child.progress(usize::MAX);
                let status = child.wait();
                extend_time = started.elapsed();
                status
            }
            KillAt::Line(count) => {
                child.progress(count);
                child.kill()
            }
            KillAt::Delay(delay) => {
                child.progress(2);
                std::thread::sleep(delay);
                child.kill()
            }
        };
        let lines = child.lines;
        let completed = completed(status, context);
        if let KillAt::Never = kill_at {
            assert!(completed, "{context}: the child was not killed but failed");
            assert_eq!(lines, committed_line, "{context}");
        }

        let mut dataset = open(dir, context);
        let got = contents(&dataset);
        let outcome = classify(&got, &old, &new, context);
        if completed || lines >= committed_line {
            assert_eq!(outcome, Outcome::New, "{context}: commit() had returned");
        }
        let leftovers = assert_files(dir, dataset.shards(), |_| true, context);
        if let KillAt::Never = kill_at {
            eprintln!(
                "child extend: {extend_time:?}, {} new shards",
                dataset.shards() - open(base.path(), "base").shards()
            );
        }
        outcomes.push((kill_at, outcome, leftovers.len()));

        // The killed writer's lock died with it; a later extend succeeds.
        extend(&mut dataset, &later).unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
        let reopened = open(dir, context);
        assert_records(&reopened, &concat(&[&got, &later]), context);
        assert_files(dir, reopened.shards(), |_| true, context);
    }

    for (kill_at, outcome, leftovers) in &outcomes {
        eprintln!("  {kill_at:?}: {outcome:?}, {leftovers} leftover files");
    }
    assert!(outcomes.len() >= 25);
    assert!(
        outcomes.iter().any(|(_, o, _)| *o == Outcome::Old),
        "no kill landed before the commit"
    );
    assert!(outcomes.iter().any(|(_, o, _)| *o == Outcome::New));
}

fn assert_locked(err: &Error, dir: &Path, context: &str) {
    match err {
        Error::Locked { dir: d, lock } => {
            assert_eq!(d, dir, "{context}");
            assert_eq!(lock, &dir.join(LOCK), "{context}");
        }
        other => panic!("{context}: expected Error::Locked, got {other:?}"),
    }
    let message = err.to_string();
    for part in [
        &*dir.to_string_lossy(),
        &*dir.join(LOCK).to_string_lossy(),
        "another writer",
        "retry",
    ] {
        assert!(
            message.contains(part),
            "{context}: {message:?} lacks {part:?}"
        );
    }
}

#[test]
fn second_writer_in_the_same_process_gets_locked_until_the_first_finishes() {
    let work = scratch_dir();
    let dir = work.path();
    let mut first = Dataset::create(
        dir,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    let old = records("old", 10, true, 1, 100, 100);
    extend(&mut first, &old).unwrap();
    let mut second = open(dir, "second");
    let one = records("one", 10, true, 2, 100, 100);
    let two = records("two", 10, true, 3, 100, 100);

    let mut in_progress = first.begin_extend().unwrap();
    for (key, value) in &one {
        in_progress.push(key, value).unwrap();
    }
    let err = extend(&mut second, &two).unwrap_err();
    assert_locked(&err, dir, "while the first extend runs");
    assert!(matches!(second.begin_extend(), Err(Error::Locked { .. })));
    // The refused writer disturbed nothing: the first one commits.
    in_progress.commit().unwrap();
    assert_records(&second, &old, "the refused handle is unchanged");

    // Now the second writer goes ahead, after the first one's records.
    extend(&mut second, &two).unwrap();
    assert_records(&open(dir, "after"), &concat(&[&old, &one, &two]), "after");
}

#[cfg(unix)]
#[test]
fn second_writer_in_another_process_gets_locked_until_the_first_dies() {
    let work = scratch_dir();
    let dir = work.path();
    let mut dataset = Dataset::create(
        dir,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    let old = records("old", 10, true, 1, 100, 100);
    extend(&mut dataset, &old).unwrap();

    let mut child = ChildProcess::spawn(dir, "hold-lock");
    assert_eq!(child.progress(3), 3, "the child did not take the lock");
    let mine = records("mine", 10, true, 2, 100, 100);
    let err = extend(&mut dataset, &mine).unwrap_err();
    assert_locked(&err, dir, "while another process extends");

    assert!(!completed(child.kill(), "hold-lock child"));
    extend(&mut dataset, &mine).unwrap();
    assert_records(&open(dir, "after"), &concat(&[&old, &mine]), "after");
}
