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
    /// `Storage::hard_link` (named by the new name).
    HardLink,
    /// `Storage::copy` (named by the copy).
    Copy,
    /// `Storage::remove_dir`.
    RemoveDir,
    /// `Storage::create_dir`.
    CreateDir,
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
    /// Hard links fail as across file systems (`ErrorKind::CrossesDevices`), so a
    /// merge copies.
    pub no_hard_links: bool,
}

impl Config {
    /// Nothing fails, writes are whole, syncs stay in the model.
    pub fn pass() -> Config {
        Config {
            policy: Policy::Pass,
            fail_removes: false,
            max_write: usize::MAX,
            real_sync: false,
            no_hard_links: false,
        }
    }
}

/// A file's contents: what is durable (as of its last fsync) and what is current.
#[derive(Clone, Debug, Default)]
struct Inode {
    synced: Vec<u8>,
    current: Vec<u8>,
}

/// A change to a directory not yet made durable by its fsync.
#[derive(Clone, Debug)]
enum DirChange {
    /// A new entry: a created file, a hard link or a copy.
    Create,
    Rename {
        from: String,
        to: String,
        inode: usize,
    },
    Remove(String),
}

/// One watched directory's entries: as a process sees them now, as of its last
/// fsync, and the changes since.
#[derive(Clone, Debug, Default)]
struct DirModel {
    /// Name -> inode, as a process sees it now.
    live: BTreeMap<String, usize>,
    /// Name -> inode as of the directory's last fsync.
    durable: BTreeMap<String, usize>,
    /// Directory changes since the last directory fsync, in order.
    pending: Vec<DirChange>,
}

/// The watched directories as the operations left them, and as a crash would.
/// Inodes are shared by all of them, so a hard link names the same contents.
#[derive(Debug)]
struct Model {
    /// The first directory watched (the dataset's): operations there are named
    /// by file name alone.
    dir: PathBuf,
    dirs: BTreeMap<PathBuf, DirModel>,
    inodes: Vec<Inode>,
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
    fn new(dir: &Path) -> Model {
        let mut model = Model {
            dir: dir.to_owned(),
            dirs: BTreeMap::new(),
            inodes: Vec::new(),
        };
        model.watch(dir);
        model
    }

    /// Watches `dir` too, its files as they are now taken as durable.
    fn watch(&mut self, dir: &Path) {
        let mut watched = DirModel::default();
        for (name, bytes) in snapshot(dir) {
            self.inodes.push(Inode {
                synced: bytes.clone(),
                current: bytes,
            });
            watched.live.insert(name, self.inodes.len() - 1);
        }
        watched.durable = watched.live.clone();
        self.dirs.insert(dir.to_owned(), watched);
    }

    /// The watched directory of `path` and its name there.
    fn entry(&self, path: &Path) -> (PathBuf, String) {
        let dir = path.parent().unwrap_or(Path::new(""));
        assert!(
            self.dirs.contains_key(dir),
            "the writer touched {}, outside the watched directories",
            path.display()
        );
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        (dir.to_owned(), name)
    }

    /// How operations on `path` are named: the file name in the dataset
    /// directory ("." for itself), else the path relative to the dataset
    /// directory's parent.
    fn op_name(&self, path: &Path) -> String {
        if path == self.dir {
            return ".".to_owned();
        }
        if path.parent() == Some(self.dir.as_path()) {
            return path.file_name().unwrap().to_str().unwrap().to_owned();
        }
        let base = self.dir.parent().unwrap_or(Path::new(""));
        path.strip_prefix(base)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }

    fn dir_mut(&mut self, dir: &Path) -> &mut DirModel {
        self.dirs.get_mut(dir).expect("a watched directory")
    }

    /// A new, empty file; an existing name is unlinked first (its inode, which
    /// another name may share, is left as it is), as `Storage::create` does.
    fn create(&mut self, path: &Path) -> usize {
        self.new_inode(path, Inode::default())
    }

    /// Names `path` a new inode holding `contents`, unlinking any file there.
    fn new_inode(&mut self, path: &Path, contents: Inode) -> usize {
        let (dir, name) = self.entry(path);
        self.inodes.push(contents);
        let inode = self.inodes.len() - 1;
        let watched = self.dir_mut(&dir);
        if watched.live.insert(name.clone(), inode).is_some() {
            watched.pending.push(DirChange::Remove(name));
        }
        watched.pending.push(DirChange::Create);
        inode
    }

    /// A second name for `from`'s inode (which must be watched).
    fn hard_link(&mut self, from: &Path, to: &Path) {
        let (from_dir, from_name) = self.entry(from);
        let inode = self.dirs[&from_dir].live[&from_name];
        let (dir, name) = self.entry(to);
        let watched = self.dir_mut(&dir);
        assert!(!watched.live.contains_key(&name), "link over {name}");
        watched.live.insert(name, inode);
        watched.pending.push(DirChange::Create);
    }

    /// A new inode holding `bytes`, durably, named `to`.
    fn copy(&mut self, bytes: Vec<u8>, to: &Path) {
        let contents = Inode {
            synced: bytes.clone(),
            current: bytes,
        };
        self.new_inode(to, contents);
    }

    fn rename(&mut self, from: &Path, to: &Path) {
        let ((dir, from), (to_dir, to)) = (self.entry(from), self.entry(to));
        assert_eq!(dir, to_dir, "a rename across directories");
        let watched = self.dir_mut(&dir);
        let inode = watched.live.remove(&from).expect("renamed file exists");
        watched.live.insert(to.clone(), inode);
        watched.pending.push(DirChange::Rename { from, to, inode });
    }

    fn remove(&mut self, path: &Path) {
        let (dir, name) = self.entry(path);
        let watched = self.dir_mut(&dir);
        if watched.live.remove(&name).is_some() {
            watched.pending.push(DirChange::Remove(name));
        }
    }

    fn sync_dir(&mut self, dir: &Path) {
        let watched = self.dir_mut(dir);
        watched.durable = watched.live.clone();
        watched.pending.clear();
    }

    fn files(&self, dir: &Path, survivors: Survivors) -> BTreeMap<String, Vec<u8>> {
        let watched = self
            .dirs
            .get(dir)
            .unwrap_or_else(|| panic!("{} is not watched", dir.display()));
        let entries = match survivors {
            Survivors::ProcessCrash | Survivors::PowerLossMetadataKept => watched.live.clone(),
            Survivors::PowerLossRenamesKept => {
                let mut entries = watched.durable.clone();
                for change in &watched.pending {
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
            _ => watched.durable.clone(),
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
        let name = self.model.op_name(path);
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
            model: Model::new(dir),
        })))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    /// Every operation asked for so far, failed ones included, in order.
    pub fn ops(&self) -> Vec<Op> {
        self.state().ops.clone()
    }

    /// The dataset directory's files, by name, as the kind of crash `survivors`
    /// would leave them now.
    pub fn files(&self, survivors: Survivors) -> BTreeMap<String, Vec<u8>> {
        let state = self.state();
        state.model.files(&state.model.dir, survivors)
    }

    /// Watches another directory too (a part of a merge), its files as they are
    /// now taken as durable; before the writer touches it.
    pub fn watch(&self, dir: &Path) {
        self.state().model.watch(dir);
    }

    /// [`SimStorage::files`] of another watched directory.
    pub fn files_in(&self, dir: &Path, survivors: Survivors) -> BTreeMap<String, Vec<u8>> {
        self.state().model.files(dir, survivors)
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
        if state.config.real_sync {
            FileSystem.sync_dir(dir)?;
        }
        state.model.sync_dir(dir);
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

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::HardLink, to)?;
        if state.config.no_hard_links {
            return Err(io::Error::from(io::ErrorKind::CrossesDevices));
        }
        FileSystem.hard_link(from, to)?;
        state.model.hard_link(from, to);
        Ok(())
    }

    fn copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::Copy, to)?;
        let bytes = std::fs::read(from)?;
        let mut file = FileSystem.create(to)?;
        file.write_all(&bytes)?;
        if state.config.real_sync {
            file.sync()?;
        }
        state.model.copy(bytes, to);
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::RemoveDir, dir)?;
        assert!(
            state.model.dirs.get(dir).is_none_or(|d| d.live.is_empty()),
            "removing the directory {} with files in it",
            dir.display()
        );
        FileSystem.remove_dir(dir)
    }

    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state();
        state.begin(OpKind::CreateDir, dir)?;
        FileSystem.create_dir(dir)?;
        // A directory of temporary files (spilled key runs): watched, so the
        // writer may create files in it, and empty when made.
        if !state.model.dirs.contains_key(dir) {
            state.model.watch(dir);
        }
        Ok(())
    }
}
