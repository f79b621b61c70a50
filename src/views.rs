//! A dataset's views (FORMAT.md, "Views"): listing them, reading one and
//! checking it belongs to the dataset as it is, writing one all-or-nothing
//! through [`Storage`](crate::storage::Storage), dropping one. Which records a
//! view selects is decided above the store (the pipeline evaluates
//! expressions over the fields); the store keeps the list.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{
    is_view_name, parse_view_file_name, view_file_path, MAX_VIEW_EXPRESSION, VIEW_FILE_TMP_PREFIX,
    VIEW_HEADER_LEN,
};
use crate::mapping::{open_regular, Mapping};
use crate::view_file::{View, ViewBinding};
use crate::{Dataset, ShardData};

/// Numbers the temporary files of view writes within a process.
static TEMPORARIES: AtomicU64 = AtomicU64::new(0);

impl Dataset {
    /// The names of the dataset's views, sorted.
    pub fn view_names(&self) -> Result<Vec<String>> {
        view_names_in(&self.dir)
    }

    /// The state of the dataset a view evaluated now is over: its records, its
    /// shards and the last one's fingerprint.
    pub fn view_binding(&self) -> Result<ViewBinding> {
        let shards = self.shards();
        let last_shard = match shards {
            0 => None,
            n => Some(self.shard_fingerprint(n - 1)?),
        };
        Ok(ViewBinding {
            records: self.len() as u64,
            shards,
            last_shard,
        })
    }

    /// The view `name`, checked against itself ([`View::decode`]) and against
    /// this dataset: it must have been evaluated over a state this dataset holds
    /// (its records, with its last shard unchanged), else
    /// [`Error::StaleView`]. The file is mapped, not read.
    pub fn view(&self, name: &str) -> Result<View> {
        check_name(name)?;
        let path = view_file_path(&self.dir, name);
        let (file, metadata) = match open_regular(&path) {
            Ok(opened) => opened,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NoSuchView {
                    dir: self.dir.clone(),
                    name: name.to_owned(),
                    available: listing(&self.view_names()?),
                })
            }
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        // No view of this dataset is larger (bounded before it is mapped).
        let limit = max_view_file_len(self.len() as u64);
        if metadata.len() > limit {
            return Err(Error::CorruptView {
                path,
                reason: format!(
                    "{} bytes, more than any view of a dataset of {} records takes ({limit})",
                    metadata.len(),
                    self.len()
                ),
            });
        }
        let mapping =
            Mapping::load(file, metadata.len()).map_err(|e| Error::io("read", &path, e))?;
        let view = View::decode(Arc::new(ShardData(Arc::new(mapping)))).map_err(|e| {
            Error::CorruptView {
                path: path.clone(),
                reason: e.0,
            }
        })?;
        self.check_view(&view, name, &path)?;
        Ok(view)
    }

    /// Refuses `view` unless this dataset holds the state it was evaluated over.
    fn check_view(&self, view: &View, name: &str, path: &Path) -> Result<()> {
        let mismatch = view.binding.mismatch(
            self.len() as u64,
            self.shards(),
            |shard| self.shard_first_record(shard),
            |shard| self.shard_fingerprint(shard),
        )?;
        match mismatch {
            None => Ok(()),
            Some(reason) => Err(Error::StaleView {
                path: path.to_owned(),
                name: name.to_owned(),
                reason,
            }),
        }
    }

    /// Writes `view` as the view `name`, all or nothing: to a temporary file,
    /// fsynced and read back, then given its name (with `replace`, over a view
    /// of that name; without, failing with [`Error::ViewExists`] if there is
    /// one), and the directory fsynced. The view must belong to this dataset
    /// (as [`Dataset::view`] checks). Takes no lock: a view is one file,
    /// replaced whole, and the dataset's records are not touched.
    pub fn write_view(&self, name: &str, view: &View, replace: bool) -> Result<()> {
        check_name(name)?;
        let path = view_file_path(&self.dir, name);
        if let Some(expression) = &view.expression {
            if expression.len() > MAX_VIEW_EXPRESSION {
                return Err(Error::InvalidOption(format!(
                    "the expression of view {name:?} is {} bytes, more than the {MAX_VIEW_EXPRESSION} a view file holds",
                    expression.len()
                )));
            }
        }
        self.check_view(view, name, &path)?;
        let bytes = view.encode();
        let temporary = self.dir.join(format!(
            "{VIEW_FILE_TMP_PREFIX}{name}.tmp-{}-{}",
            std::process::id(),
            TEMPORARIES.fetch_add(1, Ordering::Relaxed)
        ));
        let result = self.install_view(&temporary, &path, name, &bytes, replace);
        let _ = self.storage.remove(&temporary);
        result?;
        self.storage
            .sync_dir(&self.dir)
            .map_err(|e| Error::io("fsync directory", &self.dir, e))
    }

    fn install_view(
        &self,
        temporary: &Path,
        path: &Path,
        name: &str,
        bytes: &[u8],
        replace: bool,
    ) -> Result<()> {
        let storage = &self.storage;
        let mut file = storage
            .create(temporary)
            .map_err(|e| Error::io("create", temporary, e))?;
        file.write_all(bytes)
            .map_err(|e| Error::io("write", temporary, e))?;
        file.sync().map_err(|e| Error::io("fsync", temporary, e))?;
        drop(file);
        read_back(temporary, bytes)?;
        let exists = || Error::ViewExists {
            path: path.to_owned(),
            name: name.to_owned(),
        };
        if replace {
            return storage
                .rename(temporary, path)
                .map_err(|e| Error::io("rename into place", temporary, e));
        }
        // A link fails if the name is taken: no other writer's view can be
        // replaced between a check and the rename.
        match storage.hard_link(temporary, path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists()),
            // A file system without hard links.
            Err(_) if path.exists() => Err(exists()),
            Err(_) => storage
                .rename(temporary, path)
                .map_err(|e| Error::io("rename into place", temporary, e)),
        }
    }

    /// Removes the view `name` (its file, then the directory fsynced).
    pub fn drop_view(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let path = view_file_path(&self.dir, name);
        if !path.is_file() {
            return Err(Error::NoSuchView {
                dir: self.dir.clone(),
                name: name.to_owned(),
                available: listing(&self.view_names()?),
            });
        }
        self.storage
            .remove(&path)
            .map_err(|e| Error::io("remove", &path, e))?;
        self.storage
            .sync_dir(&self.dir)
            .map_err(|e| Error::io("fsync directory", &self.dir, e))
    }
}

/// The largest view file of a dataset of `records` records: the header, the
/// longest expression and 8 bytes per record.
pub fn max_view_file_len(records: u64) -> u64 {
    (VIEW_HEADER_LEN + MAX_VIEW_EXPRESSION) as u64 + records.saturating_mul(8)
}

/// The names of the view files in `dir`, sorted.
pub(crate) fn view_names_in(dir: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        if let Some(name) = entry.file_name().to_str().and_then(parse_view_file_name) {
            names.push(name.to_owned());
        }
    }
    names.sort_unstable();
    Ok(names)
}

fn check_name(name: &str) -> Result<()> {
    match is_view_name(name) {
        true => Ok(()),
        false => Err(Error::InvalidViewName {
            name: name.to_owned(),
        }),
    }
}

fn listing(names: &[String]) -> String {
    match names.is_empty() {
        true => "none".to_owned(),
        false => names.join(", "),
    }
}

/// Reads the file just written back from disk: it must hold `bytes` and
/// decode as a view.
fn read_back(path: &Path, bytes: &[u8]) -> Result<()> {
    let (file, metadata) = open_regular(path).map_err(|e| Error::io("open", path, e))?;
    let mapping = Mapping::load(file, metadata.len()).map_err(|e| Error::io("read", path, e))?;
    let differs = |reason: String| Error::CorruptView {
        path: path.to_owned(),
        reason: format!("written, but it does not read back: {reason}"),
    };
    if &mapping[..] != bytes {
        return Err(differs(format!(
            "{} bytes read, not the {} written",
            mapping.len(),
            bytes.len()
        )));
    }
    View::decode(Arc::new(ShardData(Arc::new(mapping)))).map_err(|e| differs(e.0))?;
    Ok(())
}
