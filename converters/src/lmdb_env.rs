//! An LMDB environment opened through liblmdb (`lmdb-master-sys`, the C
//! library `heed` links), read-only and without its lock file, walked in key
//! order by one cursor. The `unsafe` of this crate's LMDB reading is all here.
//!
//! Before liblmdb opens the file, its meta pages are checked
//! ([`crate::lmdb_meta`]); before it walks a tree, the tree's pages are
//! ([`crate::lmdb_tree`]); while it reads, every key and value it returns is
//! checked to lie within the file's bytes before it is touched, keys must come
//! in strictly increasing order (a tree whose pages point back at each other
//! would otherwise repeat them), and when the walk ends the meta pages are read
//! again: a writer that committed twice since the snapshot may have reused
//! pages the walk read, and the read is refused.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::ptr;

use lmdb_master_sys as ffi;

use crate::lmdb_meta::{self, Meta, META_LEN};
use crate::lmdb_tree;
use crate::regular_file::{open_regular, read_exact_at, ReadRegularError};
use crate::SourceError;

/// The named databases opened at once: the one read.
const MAX_DBS: ffi::MDB_dbi = 1;

/// The data file of an environment named by `path`: `path/data.mdb` for a
/// directory, else `path` itself (an environment made with `subdir=False`).
pub fn data_file(path: &Path) -> (PathBuf, bool) {
    if path.is_dir() {
        (path.join("data.mdb"), true)
    } else {
        (path.to_path_buf(), false)
    }
}

/// An entry: its key and value, borrowed from liblmdb's mapping.
pub type Entry<'a> = (&'a [u8], &'a [u8]);

/// An environment with one read transaction and one cursor on the database read.
pub struct LmdbReader {
    file: PathBuf,
    /// Kept open for re-reading the meta pages at the end.
    handle: File,
    page_size: u64,
    env: *mut ffi::MDB_env,
    txn: *mut ffi::MDB_txn,
    cursor: *mut ffi::MDB_cursor,
    /// The process's mappings of the file, `[start, end)` each, clipped to the
    /// file's size: liblmdb's is one of them.
    maps: Vec<(usize, usize)>,
    snapshot: u64,
    started: bool,
    finished: bool,
    last_key: Vec<u8>,
}

// SAFETY: the handles are used by one thread at a time (the reader owns them
// and `next` takes `&mut self`); the environment is opened with MDB_NOTLS, so
// the read transaction is not tied to the thread that began it, and with
// MDB_NOLOCK, so it holds no reader slot of any thread.
unsafe impl Send for LmdbReader {}

fn lmdb_message(code: i32) -> String {
    // SAFETY: mdb_strerror returns a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(ffi::mdb_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

/// A key as messages show it: printable ASCII, other bytes escaped.
pub fn show_key(key: &[u8]) -> String {
    format!("key \"{}\"", key.escape_ascii())
}

impl LmdbReader {
    fn corrupt(&self, location: String, reason: String) -> SourceError {
        SourceError::Corrupt {
            file: self.file.display().to_string(),
            location,
            reason,
        }
    }

    fn after_last(&self) -> String {
        if self.started && !self.last_key.is_empty() {
            format!("after {}", show_key(&self.last_key))
        } else {
            "the first entry".into()
        }
    }

    /// The data file read.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Opens the environment at `path` (a directory holding `data.mdb`, or the
    /// data file) and the database `name` (`None`: the unnamed one).
    pub fn open(path: &Path, name: Option<&str>) -> Result<LmdbReader, SourceError> {
        let (file, subdir) = data_file(path);
        let display = file.display().to_string();
        let (handle, size) = open_regular(&file).map_err(|error| match error {
            ReadRegularError::Io(source) => SourceError::Io {
                path: file.clone(),
                source,
            },
            ReadRegularError::NotRegular(kind) => SourceError::Invalid {
                file: display.clone(),
                location: "the file".into(),
                reason: format!("is {kind}, not a regular file; only regular files are read"),
            },
            ReadRegularError::TooLarge(_) => unreachable!("open_regular does not bound the size"),
        })?;
        let corrupt = |reason: String| SourceError::Corrupt {
            file: display.clone(),
            location: "the meta pages".into(),
            reason,
        };
        let page0 = read_meta(&handle, &file, 0, size)?;
        let page_size = lmdb_meta::page_size(&page0).map_err(|e| corrupt(e.to_string()))?;
        let page1 = read_meta(&handle, &file, u64::from(page_size), size)?;
        lmdb_meta::pick(page0, page1, size).map_err(|e| corrupt(e.to_string()))?;
        let mut reader = LmdbReader {
            file: file.clone(),
            handle,
            page_size: u64::from(page_size),
            env: ptr::null_mut(),
            txn: ptr::null_mut(),
            cursor: ptr::null_mut(),
            maps: Vec::new(),
            snapshot: 0,
            started: false,
            finished: false,
            last_key: Vec::new(),
        };
        reader.open_env(path, subdir, size)?;
        reader.check_trees(name, size)?;
        reader.open_db(name)?;
        Ok(reader)
    }

    /// Walks the trees liblmdb is to read in the transaction's snapshot (the
    /// main database's, and the named one's): see [`crate::lmdb_tree`].
    fn check_trees(&self, name: Option<&str>, size: u64) -> Result<(), SourceError> {
        let meta = [0, self.page_size]
            .into_iter()
            .map(|offset| read_meta(&self.handle, &self.file, offset, size))
            .collect::<Result<Vec<Meta>, SourceError>>()?
            .into_iter()
            .find(|meta| meta.txnid == self.snapshot)
            .ok_or_else(|| SourceError::Invalid {
                file: self.file.display().to_string(),
                location: "the environment".into(),
                reason: "a writer committed twice while it was opened; ingest again while no process writes to it".into(),
            })?;
        let corrupt = |location: &str, error: lmdb_tree::WalkError| match error {
            lmdb_tree::WalkError::Io(source) => SourceError::Io {
                path: self.file.clone(),
                source,
            },
            lmdb_tree::WalkError::Tree(error) => self.corrupt(location.into(), error.to_string()),
        };
        let psize = self.page_size as usize;
        let mut read =
            |page: u64, buf: &mut [u8]| read_exact_at(&self.handle, buf, page * self.page_size);
        let main = lmdb_tree::Tree {
            root: meta.main.root,
            depth: meta.main.depth,
            entries: meta.main.entries,
        };
        let walked = lmdb_tree::walk(main, psize, meta.last_page, &mut read)
            .map_err(|e| corrupt("the main database's tree", e))?;
        let names = || {
            walked
                .named
                .iter()
                .map(|n| format!("\"{}\"", n.name.escape_ascii()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(name) = name else {
            if !walked.named.is_empty() {
                return Err(SourceError::Invalid {
                    file: self.file.display().to_string(),
                    location: "the environment".into(),
                    reason: format!(
                        "it holds named databases ({}); read one of them with `lmdb_db` NAME",
                        names()
                    ),
                });
            }
            return self.refuse_dupsort(meta.main.flags);
        };
        let Some(named) = walked.named.iter().find(|n| n.name == name.as_bytes()) else {
            let known = if walked.named.is_empty() {
                "it holds no named databases".to_string()
            } else {
                format!("its named databases: {}", names())
            };
            return Err(SourceError::Invalid {
                file: self.file.display().to_string(),
                location: "the environment".into(),
                reason: format!("no database named {name:?} ({known})"),
            });
        };
        self.refuse_dupsort(named.flags)?;
        let tree = lmdb_tree::Tree {
            root: named.root,
            depth: named.depth,
            entries: named.entries,
        };
        if tree.root != lmdb_meta::NO_PAGE && (tree.depth == 0 || tree.depth > lmdb_meta::MAX_DEPTH)
        {
            return Err(self.corrupt(
                format!("the database {name:?}"),
                format!("depth {} is not 1 to {}", tree.depth, lmdb_meta::MAX_DEPTH),
            ));
        }
        lmdb_tree::walk(tree, psize, meta.last_page, &mut read)
            .map_err(|e| corrupt(&format!("the database {name:?}'s tree"), e))?;
        Ok(())
    }

    fn refuse_dupsort(&self, flags: u16) -> Result<(), SourceError> {
        if flags & lmdb_meta::DUPSORT != 0 {
            return Err(SourceError::Invalid {
                file: self.file.display().to_string(),
                location: "the database".into(),
                reason: "it is a MDB_DUPSORT database (a key may hold several values); bcd keys are unique".into(),
            });
        }
        Ok(())
    }

    fn check(&self, code: i32, location: &str) -> Result<(), SourceError> {
        match code {
            0 => Ok(()),
            code if code > 0 => Err(SourceError::Io {
                path: self.file.clone(),
                source: std::io::Error::from_raw_os_error(code),
            }),
            code => Err(self.corrupt(location.into(), lmdb_message(code))),
        }
    }

    fn open_env(&mut self, path: &Path, subdir: bool, size: u64) -> Result<(), SourceError> {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            SourceError::Usage(format!("{}: a path with a NUL byte", path.display()))
        })?;
        // Map exactly the file's pages (liblmdb would map the size the meta
        // page records, terabytes for some writers): the checks above keep
        // every page in use within it.
        // SAFETY: sysconf has no preconditions.
        let os_page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            size if size > 0 => size as u64,
            _ => 4096,
        };
        let map_size = size.div_ceil(os_page) * os_page;
        let mut flags = ffi::MDB_RDONLY | ffi::MDB_NOLOCK | ffi::MDB_NOTLS;
        if !subdir {
            flags |= ffi::MDB_NOSUBDIR;
        }
        // SAFETY: each call gets the handle mdb_env_create made (closed by Drop,
        // also after a failed open, as liblmdb asks) and a NUL-terminated path.
        unsafe {
            let code = ffi::mdb_env_create(&mut self.env);
            self.check(code, "opening the environment")?;
            self.check(
                ffi::mdb_env_set_mapsize(self.env, map_size as ffi::mdb_size_t),
                "opening the environment",
            )?;
            self.check(
                ffi::mdb_env_set_maxdbs(self.env, MAX_DBS),
                "opening the environment",
            )?;
            self.check(
                ffi::mdb_env_open(self.env, c_path.as_ptr(), flags, 0o444),
                "opening the environment",
            )?;
            let code =
                ffi::mdb_txn_begin(self.env, ptr::null_mut(), ffi::MDB_RDONLY, &mut self.txn);
            self.check(code, "beginning a read transaction")?;
            self.snapshot = ffi::mdb_txn_id(self.txn) as u64;
        }
        // Where liblmdb mapped the file (mdb_env_info does not say: its
        // address is the meta page's fixed one, 0): the process's mappings of
        // this file, by device and inode.
        self.maps = file_mappings(&self.handle).map_err(|source| SourceError::Io {
            path: self.file.clone(),
            source,
        })?;
        if self.maps.is_empty() {
            return Err(SourceError::Io {
                path: self.file.clone(),
                source: std::io::Error::other(
                    "liblmdb's mapping of the file is not in /proc/self/maps",
                ),
            });
        }
        Ok(())
    }

    /// Opens the database checked by [`Self::check_trees`] and a cursor on it.
    fn open_db(&mut self, name: Option<&str>) -> Result<(), SourceError> {
        let c_name = match name {
            Some(name) => Some(CString::new(name).map_err(|_| {
                SourceError::Usage(format!("the LMDB database name {name:?} holds a NUL byte"))
            })?),
            None => None,
        };
        let mut dbi: ffi::MDB_dbi = 0;
        // SAFETY: txn is the live read transaction; the name is NUL-terminated
        // or null; the main database's tree was walked.
        let code = unsafe {
            ffi::mdb_dbi_open(
                self.txn,
                c_name.as_ref().map_or(ptr::null(), |n| n.as_ptr()),
                0,
                &mut dbi,
            )
        };
        self.check(code, "opening the database")?;
        // SAFETY: txn and dbi are live; the cursor is closed by Drop.
        unsafe {
            let code = ffi::mdb_cursor_open(self.txn, dbi, &mut self.cursor);
            self.check(code, "opening a cursor")?;
        }
        Ok(())
    }

    /// The bytes an `MDB_val` points at, if they lie within the file's mapping.
    fn slice(&self, val: &ffi::MDB_val) -> Option<&[u8]> {
        let start = val.mv_data as usize;
        let end = start.checked_add(val.mv_size)?;
        if val.mv_size == 0 {
            return Some(&[]);
        }
        if !self.maps.iter().any(|&(lo, hi)| lo <= start && end <= hi) {
            return None;
        }
        // SAFETY: the range lies within a mapping of the file's bytes (liblmdb's,
        // which lives as long as the environment, as long as self), and
        // is not written while this borrow lasts (the environment is read-only
        // here; a writer in another process is the README's documented limit).
        Some(unsafe { std::slice::from_raw_parts(start as *const u8, val.mv_size) })
    }

    /// The next entry in key order: `Ok(None)` at the end (after the meta pages
    /// were read again to check that no writer reused the pages read).
    pub fn next_entry(&mut self) -> Result<Option<Entry<'_>>, SourceError> {
        if self.finished {
            return Ok(None);
        }
        let op = if self.started {
            ffi::MDB_NEXT
        } else {
            ffi::MDB_FIRST
        };
        let (mut key, mut value) = (empty_val(), empty_val());
        // SAFETY: the cursor is live; key and value are written by liblmdb.
        let code = unsafe { ffi::mdb_cursor_get(self.cursor, &mut key, &mut value, op) };
        if code == ffi::MDB_NOTFOUND {
            self.finished = true;
            self.check_unchanged()?;
            return Ok(None);
        }
        let location = self.after_last();
        self.check(code, &location)?;
        self.started = true;
        let out_of_map = |what: &str, val: &ffi::MDB_val| {
            format!(
                "the {what} ({} bytes) lies outside the file's pages",
                val.mv_size
            )
        };
        let Some(key_bytes) = self.slice(&key) else {
            return Err(self.corrupt(location, out_of_map("key", &key)));
        };
        if !self.last_key.is_empty() && key_bytes <= &self.last_key[..] {
            return Err(self.corrupt(
                location,
                format!(
                    "{} is not after it: the tree's keys are out of order",
                    show_key(key_bytes)
                ),
            ));
        }
        let key_location = format!("at {}", show_key(key_bytes));
        if self.slice(&value).is_none() {
            return Err(self.corrupt(key_location, out_of_map("value", &value)));
        }
        let key_copy = key_bytes.to_vec();
        self.last_key = key_copy;
        let key = self.slice(&key).expect("checked above");
        let value = self.slice(&value).expect("checked above");
        Ok(Some((key, value)))
    }

    /// Refuses a walk during which a writer may have reused its pages: one
    /// commit after the snapshot cannot (liblmdb frees a page for reuse only
    /// two transactions later), a second can.
    fn check_unchanged(&self) -> Result<(), SourceError> {
        let size = self
            .handle
            .metadata()
            .map_err(|source| SourceError::Io {
                path: self.file.clone(),
                source,
            })?
            .len();
        let latest = [0, self.page_size]
            .into_iter()
            .filter_map(|offset| read_meta(&self.handle, &self.file, offset, size).ok())
            .map(|meta| meta.txnid)
            .max()
            .unwrap_or(self.snapshot);
        if latest > self.snapshot.saturating_add(1) {
            return Err(SourceError::Invalid {
                file: self.file.display().to_string(),
                location: "the environment".into(),
                reason: format!(
                    "a writer committed {} transactions while it was read (snapshot {}, now {}); what was read may mix them: ingest again while no process writes to it",
                    latest - self.snapshot,
                    self.snapshot,
                    latest
                ),
            });
        }
        Ok(())
    }
}

/// The ranges where this process maps `file` (from offset 0, clipped to its
/// size, so no byte of them lies past the file's end), from /proc/self/maps.
#[cfg(target_os = "linux")]
fn file_mappings(file: &File) -> std::io::Result<Vec<(usize, usize)>> {
    use std::os::unix::fs::MetadataExt;
    let metadata = file.metadata()?;
    let (dev, ino, size) = (metadata.dev(), metadata.ino(), metadata.len());
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut out = Vec::new();
    for line in maps.lines() {
        let mut parts = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(offset), Some(device), Some(inode)) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        let parsed = (|| {
            let (lo, hi) = range.split_once('-')?;
            let lo = usize::from_str_radix(lo, 16).ok()?;
            let hi = usize::from_str_radix(hi, 16).ok()?;
            let offset = u64::from_str_radix(offset, 16).ok()?;
            let (dmaj, dmin) = device.split_once(':')?;
            let dmaj = u32::from_str_radix(dmaj, 16).ok()?;
            let dmin = u32::from_str_radix(dmin, 16).ok()?;
            let inode: u64 = inode.parse().ok()?;
            Some((lo, hi, offset, dmaj, dmin, inode))
        })();
        let Some((lo, hi, offset, dmaj, dmin, inode)) = parsed else {
            continue;
        };
        if offset == 0 && inode == ino && dmaj == major && dmin == minor {
            let end = lo.saturating_add(usize::try_from(size).unwrap_or(usize::MAX));
            out.push((lo, hi.min(end)));
        }
    }
    Ok(out)
}

#[cfg(not(target_os = "linux"))]
fn file_mappings(_file: &File) -> std::io::Result<Vec<(usize, usize)>> {
    Err(std::io::Error::other(
        "reading LMDB needs /proc/self/maps (Linux) to check liblmdb's pointers",
    ))
}

fn empty_val() -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: 0,
        mv_data: ptr::null_mut(),
    }
}

/// Reads and parses the meta page at `offset`.
fn read_meta(handle: &File, file: &Path, offset: u64, size: u64) -> Result<Meta, SourceError> {
    let page = u8::from(offset != 0);
    if size < offset + META_LEN as u64 {
        return Err(SourceError::Corrupt {
            file: file.display().to_string(),
            location: "the meta pages".into(),
            reason: lmdb_meta::MetaError::TooShort { page, size }.to_string(),
        });
    }
    let mut bytes = [0u8; META_LEN];
    read_exact_at(handle, &mut bytes, offset).map_err(|source| SourceError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    lmdb_meta::parse(&bytes, page).map_err(|error| SourceError::Corrupt {
        file: file.display().to_string(),
        location: "the meta pages".into(),
        reason: error.to_string(),
    })
}

impl Drop for LmdbReader {
    fn drop(&mut self) {
        // SAFETY: each handle is null or live, and is released once, the
        // cursor before its transaction before the environment.
        unsafe {
            if !self.cursor.is_null() {
                ffi::mdb_cursor_close(self.cursor);
            }
            if !self.txn.is_null() {
                ffi::mdb_txn_abort(self.txn);
            }
            if !self.env.is_null() {
                ffi::mdb_env_close(self.env);
            }
        }
    }
}
