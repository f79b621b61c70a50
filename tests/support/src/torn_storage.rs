//! A disk that tears writes: the faulty storage of the read-back tests, which
//! must find a torn file before anything is committed.

use std::io::{self, Write};
use std::path::Path;

use bcd::storage::{FileSystem, Storage, StorageFile};

/// A disk that silently loses the second half of every write to files whose
/// name `torn` picks, and reports success.
#[derive(Debug)]
pub struct TornWrites {
    /// Which file names (the last component) are torn.
    pub torn: fn(&str) -> bool,
}

struct TornFile(Box<dyn StorageFile>);

impl Write for TornFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(&buf[..buf.len() / 2])?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl StorageFile for TornFile {
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync()
    }
}

impl Storage for TornWrites {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = FileSystem.create(path)?;
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        Ok(match (self.torn)(name) {
            true => Box::new(TornFile(file)),
            false => file,
        })
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        FileSystem.sync_dir(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        FileSystem.remove(path)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.hard_link(from, to)
    }
    fn copy(&self, from: &Path, to: &Path) -> io::Result<()> {
        FileSystem.copy(from, to)
    }
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        FileSystem.remove_dir(dir)
    }
}
