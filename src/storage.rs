//! The file-system operations a writer performs, behind a small trait so tests can
//! inject failures at any write or fsync and simulate a crash by keeping only what
//! was durable. Reading does not go through it: readers open and map files directly.
//!
//! A merge (`merge.rs`) also moves files between directories: it links or copies a
//! part's files into the target and removes them from the part afterwards, all
//! through this trait.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// A file being written.
pub trait StorageFile: Write + Send {
    /// Makes everything written so far durable (`fsync`).
    fn sync(&mut self) -> io::Result<()>;
}

/// Where a writer's files go. [`FileSystem`] is the real one.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Creates `path` as a new file. A file already there is unlinked first,
    /// never written through: it is a leftover of an interrupted write, and may be
    /// a hard link to a committed file of another dataset (a merge killed before
    /// its commit leaves links to its parts' shards past the target's count).
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Makes the directory's entries (created, renamed, removed files) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file; a missing file is not an error.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Gives the file `from` a second name `to` (a hard link: no byte is copied),
    /// failing if `to` exists. Fails (`ErrorKind::CrossesDevices` and others) where
    /// the two are on different file systems or links are not supported. The new
    /// entry is durable once `to`'s directory is fsynced.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Creates `to` as a new file (unlinking any file there first, as
    /// [`Storage::create`]) with the contents of `from`, and fsyncs it. The new
    /// entry is durable once `to`'s directory is fsynced.
    fn copy(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes an empty directory; a missing one is not an error.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Creates the directory `dir` (its parent must exist); one already there is
    /// not an error. Writers make only temporary directories this way (the
    /// spilled key runs of a large extend, `.bcd-spill/`), so its entry is not
    /// made durable.
    fn create_dir(&self, dir: &Path) -> io::Result<()> {
        match fs::create_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
            other => other,
        }
    }
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileSystem;

struct OsFile {
    file: File,
    /// Bytes written so far.
    written: u64,
    /// Writeback has been started for bytes before this offset.
    kicked: u64,
}

/// Start writing dirty pages to disk every this many bytes, so the fsync at commit
/// finds little left to do instead of the whole shard.
pub const WRITEBACK_EVERY: u64 = 8 << 20;

/// Asks the kernel to start (not wait for) writing bytes `start..end` of
/// `file` to disk: a large file's fsync then finds little left to do. Only a
/// hint: errors surface at the fsync. Nothing where the system has no such call.
pub fn start_writeback(file: &File, start: u64, end: u64) {
    #[cfg(target_os = "linux")]
    if end > start {
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range only reads its integer arguments; the fd is
        // `file`'s, open for the duration of the call.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                start as libc::off64_t,
                (end - start) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, start, end);
}

impl OsFile {
    fn new(file: File) -> OsFile {
        OsFile {
            file,
            written: 0,
            kicked: 0,
        }
    }

    /// Starts writeback of what was written since the last call, every
    /// [`WRITEBACK_EVERY`] bytes.
    fn start_writeback(&mut self) {
        if self.written - self.kicked >= WRITEBACK_EVERY {
            start_writeback(&self.file, self.kicked, self.written);
            self.kicked = self.written;
        }
    }
}

impl Write for OsFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        self.start_writeback();
        Ok(n)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let n = self.file.write_vectored(bufs)?;
        self.written += n as u64;
        self.start_writeback();
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl StorageFile for OsFile {
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }
}

/// A new file at `path`, whatever was there: an existing file is unlinked, and
/// the new one created exclusively (`O_EXCL`), so no write goes through an old
/// name to a file another name shares.
fn create_new(path: &Path) -> io::Result<File> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    OpenOptions::new().write(true).create_new(true).open(path)
}

impl Storage for FileSystem {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(OsFile::new(create_new(path)?)))
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut source = File::open(from)?;
        let mut copy = create_new(to)?;
        // io::copy between files uses copy_file_range where it can (as fs::copy
        // does): a reflink or a server-side copy on file systems that have them,
        // never through this process's memory.
        io::copy(&mut source, &mut copy)?;
        copy.sync_all()
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        match fs::remove_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leftover that is a hard link to another dataset's committed file is
    /// replaced, not written through: the other name keeps its bytes.
    #[test]
    fn create_and_copy_replace_a_hard_link_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let committed = dir.path().join("committed");
        let source = dir.path().join("source");
        fs::write(&committed, b"committed bytes").unwrap();
        fs::write(&source, b"copied").unwrap();
        for (i, via_copy) in [false, true].into_iter().enumerate() {
            let leftover = dir.path().join(format!("leftover-{i}"));
            fs::hard_link(&committed, &leftover).unwrap();
            if via_copy {
                FileSystem.copy(&source, &leftover).unwrap();
            } else {
                let mut file = FileSystem.create(&leftover).unwrap();
                file.write_all(b"new").unwrap();
                file.sync().unwrap();
            }
            assert_eq!(fs::read(&committed).unwrap(), b"committed bytes");
            let expected: &[u8] = if via_copy { b"copied" } else { b"new" };
            assert_eq!(fs::read(&leftover).unwrap(), expected);
        }
    }
}
