//! A simulated [`Storage`] for crash tests: it passes every operation to the
//! real [`FileSystem`] while logging it, fails operations as its [`Policy`] says
//! (fault injection), and models what a crash would leave ([`Survivors`]): file
//! contents are durable as of the file's last fsync, directory entries as of the
//! directory's last fsync.
//!
//! It follows redb's crash tests: run a writer through it, then rebuild the
//! directory from [`SimStorage::files`] for one kind of crash, reopen it and check.
//! The storage watches one directory (the dataset's); a writer touching a file
//! elsewhere fails the test.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bcd::storage::{FileSystem, Storage, StorageFile};
use bcd::{Dataset, OpenOptions};

use crate::snapshot;

/// What a storage operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// `Storage::create` of a file.
    Create,
    /// One call of `Write::write` on a file.
    Write,
    /// `StorageFile::sync` (fsync of a file).
    SyncFile,
    /// `Storage::sync_dir` (fsync of the directory).
    SyncDir,
    /// `Storage::rename`.
    Rename,
    /// `Storage::remove`.
    Remove,
}

/// One storage operation, as the writer asked for it.
#[derive(Clone, Debug)]
pub struct Op {
    /// What it does.
    pub kind: OpKind,
    /// The file (the source of a rename, the directory of a directory fsync).
    pub path: PathBuf,
    /// Its name in the dataset directory, "." for the directory itself.
    pub name: String,
}

impl Op {
    /// The operation independently of where the dataset is.
    pub fn key(&self) -> (OpKind, &str) {
        (self.kind, &self.name)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}", self.kind, self.name)
    }
}

/// Which operations fail.
#[derive(Clone, Copy, Debug)]
pub enum Policy {
    /// Every operation succeeds.
    Pass,
    /// Operation number `n` (1-based) fails with an error and has no effect; the
    /// others succeed.
    FailOnce(usize),
    /// The process "dies" after `n` operations: every later one fails and has no
    /// effect.
    CrashAfter(usize),
}

/// How a [`SimStorage`] behaves.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Which operations fail.
    pub policy: Policy,
    /// Every remove also fails (cleanup after a failure cannot delete anything).
    pub fail_removes: bool,
    /// A write call writes at most this many bytes (short writes).
    pub max_write: usize,
    /// Whether file and directory syncs reach the real file system. The durability
    /// model does not need them; skipping them keeps the power-loss loop fast.
    pub real_sync: bool,
}

impl Config {
    /// Nothing fails, writes are whole, syncs stay in the model.
    pub fn pass() -> Config {
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
pub enum Survivors {
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

/// Every kind of crash [`Survivors`] models.
pub const ALL_SURVIVORS: [Survivors; 6] = [
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
    pub fn keeps_unsynced_rename(self) -> bool {
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
pub struct SimStorage(Arc<Mutex<State>>);

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SimStorage")
    }
}

impl SimStorage {
    /// Storage for the dataset in `dir`, whose current files are taken as durable.
    pub fn new(dir: &Path, config: Config) -> SimStorage {
        SimStorage(Arc::new(Mutex::new(State {
            config,
            ops: Vec::new(),
            model: Model::load(dir),
        })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// Every operation asked for so far, failed ones included, in order.
    pub fn ops(&self) -> Vec<Op> {
        self.state().ops.clone()
    }

    /// The directory's files, by name, as the kind of crash `survivors` would
    /// leave them now.
    pub fn files(&self, survivors: Survivors) -> BTreeMap<String, Vec<u8>> {
        self.state().model.files(survivors)
    }

    /// Opens the dataset in `dir` writing through this storage, with the default
    /// open options.
    pub fn open(&self, dir: &Path) -> Dataset {
        self.open_with(dir, OpenOptions::default())
    }

    /// Opens the dataset in `dir` writing through this storage, with `options`
    /// (for instance to have every extend rewrite the persisted index).
    pub fn open_with(&self, dir: &Path, options: OpenOptions) -> Dataset {
        let mut dataset = Dataset::open_with(dir, options, Arc::new(self.clone()))
            .unwrap_or_else(|e| panic!("open {} through SimStorage: {e}", dir.display()));
        // One compression thread: the cores are better spent on the many iterations
        // of a crash test.
        dataset.set_threads(1);
        dataset
    }
}

/// A file created through a [`SimStorage`].
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
