//! A set of `(hash, record)` fingerprints under a memory budget: what an extend
//! checks each new key against (the keys pushed earlier in the same extend), and
//! each new value against when it drops duplicate contents. No key or value is
//! held: a hash that matches names candidate records, which the caller confirms
//! against the bytes on disk.
//!
//! The fingerprints live in an in-memory table (`table.rs`, 12 bytes each, 13.5
//! to 15.2 bytes with its free slots). When the table, the summaries of the
//! spilled runs and the filter a spill would build beside the table would pass
//! the budget, the table is written out as a sorted run
//! (`run.rs`, 16 bytes an entry) to the spill directory `.bcd-spill/` inside the
//! dataset and emptied; what stays in memory of a run is a Bloom filter (10 bits
//! an entry while a quarter of the budget allows, fewer after) and the first
//! hash of every 4 KiB block. A lookup tests the table and each run's filter, and
//! reads a block of the runs whose filter lets the hash through. More than
//! [`MAX_RUNS`] runs are merged into one, so a lookup tests at most that many
//! filters. Reading the set in order ([`KeySet::sorted`]) merges the table with
//! the runs: the sorted key table a commit writes into the persisted index.
//!
//! Memory is the budget, whatever the count: past it, entries cost 16 bytes of
//! disk and a little over a byte of filter each, and the filters shrink as the
//! runs grow. Run files are temporary: removed when the set is dropped, and,
//! when a process dies first, by the next writer (under the dataset's lock,
//! [`remove_spill_leftovers`]) or `gc`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::SPILL_DIR;
use crate::storage::Storage;

mod filter;
mod run;
mod table;

pub(crate) use run::read_at;
use run::{Run, RunCursor, RunWriter};
use table::Table;
pub(crate) use table::MAX_RECORD;

/// More spilled runs than this are merged into one.
const MAX_RUNS: usize = 4;
/// Budgets below this are raised to it (the table's partitions take as much
/// again in bookkeeping).
pub(crate) const MIN_MEMORY_LIMIT: u64 = 64 << 10;

/// The spill directory of one writer: made on the first spill, removed when the
/// last key set using it is dropped.
#[derive(Debug)]
pub(crate) struct SpillDir {
    path: PathBuf,
    storage: Arc<dyn Storage>,
    created: Mutex<bool>,
    next: AtomicU64,
}

impl SpillDir {
    /// The spill directory of the dataset in `dataset_dir`.
    pub(crate) fn new(dataset_dir: &Path, storage: Arc<dyn Storage>) -> Arc<SpillDir> {
        Arc::new(SpillDir {
            path: dataset_dir.join(SPILL_DIR),
            storage,
            created: Mutex::new(false),
            next: AtomicU64::new(0),
        })
    }

    /// A new file name in it for a run of `name`, the directory made first.
    fn file(&self, name: &str) -> Result<PathBuf> {
        let mut created = self.created.lock().unwrap_or_else(|e| e.into_inner());
        if !*created {
            self.storage
                .create_dir(&self.path)
                .map_err(|e| Error::io("create the spill directory", &self.path, e))?;
            *created = true;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Ok(self.path.join(format!("{name}-{n:06}.run")))
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        // Best effort, and only once empty (a run whose removal failed stays):
        // the next writer or gc removes what is left.
        let created = *self.created.get_mut().unwrap_or_else(|e| e.into_inner());
        if created && spill_leftovers(&self.path).is_ok_and(|files| files.is_empty()) {
            let _ = self.storage.remove_dir(&self.path);
        }
    }
}

/// Removes what a writer that died while spilling left in `dataset_dir`'s spill
/// directory, and the directory. Called with the dataset's writer lock held, so
/// no writer is using it.
pub(crate) fn remove_spill_leftovers(storage: &dyn Storage, dataset_dir: &Path) -> Result<()> {
    let dir = dataset_dir.join(SPILL_DIR);
    for file in spill_leftovers(&dir)? {
        storage
            .remove(&file)
            .map_err(|e| Error::io("remove spilled keys", &file, e))?;
    }
    if dir.is_dir() {
        storage
            .remove_dir(&dir)
            .map_err(|e| Error::io("remove the spill directory", &dir, e))?;
    }
    Ok(())
}

/// The files in the spill directory `dir`, sorted (none if it is missing).
pub(crate) fn spill_leftovers(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        files.push(entry.map_err(|e| Error::io("list", dir, e))?.path());
    }
    files.sort();
    Ok(files)
}

/// A set of `(hash, record)` fingerprints under a memory budget (see the module
/// documentation).
#[derive(Debug)]
pub(crate) struct KeySet {
    table: Table,
    runs: Vec<Run>,
    spill: Arc<SpillDir>,
    /// Names its run files.
    name: &'static str,
    budget: u64,
    len: u64,
}

impl KeySet {
    /// An empty set spilling to `spill` (its run files named after `name`) past
    /// `budget` bytes.
    pub(crate) fn new(spill: Arc<SpillDir>, name: &'static str, budget: u64) -> KeySet {
        KeySet {
            table: Table::new(),
            runs: Vec::new(),
            spill,
            name,
            budget: budget.max(MIN_MEMORY_LIMIT),
            len: 0,
        }
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Runs spilled to disk and not merged away.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Bytes held in memory: the table's entries and the runs' summaries.
    pub(crate) fn memory(&self) -> u64 {
        (self.table.bytes() + self.runs.iter().map(Run::memory).sum::<usize>()) as u64
    }

    /// Bytes of the filter a spill of the table would build now, while the
    /// table is still held: the set spills before the two together pass the
    /// budget (at 300M keys under 4 GiB, a filter of 357 MB beside a full table
    /// took the process 330 MiB past it).
    pub(crate) fn spill_filter_bytes(&self) -> u64 {
        let others: usize = self.runs.iter().map(Run::filter_bytes).sum();
        let entries = self.table.len();
        filter::Filter::bytes_for(entries, self.filter_bits(entries, others)) as u64
    }

    /// Bits per entry of the filter of a run of `entries` entries: as many as
    /// a quarter of the budget allows beside the other runs' filters (`others`
    /// bytes), at most [`filter::BITS_PER_ENTRY`].
    fn filter_bits(&self, entries: u64, others: usize) -> u64 {
        let room = (self.budget / 4).saturating_sub(others as u64);
        (room.saturating_mul(8) / entries.max(1)).min(filter::BITS_PER_ENTRY)
    }

    /// Adds `(hash, record)`, a pair not in the set, spilling the table to disk
    /// first if it is full. `record` must be at most [`MAX_RECORD`].
    pub(crate) fn insert(&mut self, hash: u64, record: u64) -> Result<()> {
        if record > MAX_RECORD {
            return Err(Error::TooLarge {
                what: "record number",
                size: record,
                limit: MAX_RECORD,
            });
        }
        self.table.insert(hash, record);
        self.len += 1;
        if self.memory() + self.spill_filter_bytes() > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Appends the records whose hash is `hash` to `out` (candidates: compare
    /// the keys).
    pub(crate) fn candidates(&self, hash: u64, out: &mut Vec<u64>) -> Result<()> {
        self.table.find(hash, out);
        for run in &self.runs {
            run.find(hash, out)
                .map_err(|e| Error::io("read spilled keys", run.path(), e))?;
        }
        Ok(())
    }

    /// Every entry, sorted by `(hash, record)`; each call reads the set anew.
    pub(crate) fn sorted(&self) -> Result<Sorted<'_>> {
        let mut runs = Vec::with_capacity(self.runs.len());
        for run in &self.runs {
            let mut cursor = run
                .cursor()
                .map_err(|e| Error::io("open spilled keys", run.path(), e))?;
            let head = cursor.next().transpose().map_err(spill_read)?;
            runs.push((head, cursor));
        }
        let mut table: Box<dyn Iterator<Item = (u64, u64)> + '_> = Box::new(self.table.sorted());
        let table_head = table.next();
        Ok(Sorted {
            table,
            table_head,
            runs,
        })
    }

    /// Writes the table out as a run and empties it; merges the runs when there
    /// are too many.
    fn spill(&mut self) -> Result<()> {
        if self.table.len() == 0 {
            return Ok(());
        }
        let entries = self.table.len();
        let others: usize = self.runs.iter().map(Run::filter_bytes).sum();
        let table = &self.table;
        let run = self.write_run(entries, others, |writer| {
            table
                .sorted()
                .try_for_each(|(hash, record)| writer.push(hash, record))
        })?;
        self.table.clear();
        self.runs.push(run);
        if self.runs.len() > MAX_RUNS {
            self.merge_runs()?;
        }
        Ok(())
    }

    /// Merges every run into one.
    fn merge_runs(&mut self) -> Result<()> {
        let entries: u64 = self.runs.iter().map(Run::len).sum();
        let runs = &self.runs;
        let merged = self.write_run(entries, 0, |writer| {
            let mut cursors = Vec::new();
            for run in runs {
                let mut cursor = run
                    .cursor()
                    .map_err(|e| Error::io("open spilled keys", run.path(), e))?;
                let head = cursor.next().transpose().map_err(spill_read)?;
                cursors.push((head, cursor));
            }
            while let Some(next) = pop_smallest(&mut cursors)? {
                writer.push(next.0, next.1)?;
            }
            Ok(())
        })?;
        for run in std::mem::replace(&mut self.runs, vec![merged]) {
            self.remove_run(run);
        }
        Ok(())
    }

    /// A new run of `entries` entries that `fill` writes (see
    /// [`KeySet::create_run`]); its file is removed if anything fails.
    fn write_run(
        &self,
        entries: u64,
        others: usize,
        fill: impl FnOnce(&mut RunWriter) -> Result<()>,
    ) -> Result<Run> {
        let mut writer = self.create_run(entries, others)?;
        let path = writer.path().to_owned();
        let written = fill(&mut writer).and_then(|()| {
            writer
                .finish()
                .map_err(|e| Error::io("write spilled keys", &path, e))
        });
        if written.is_err() {
            // Best effort: a leftover is removed by the next writer or gc.
            let _ = self.spill.storage.remove(&path);
        }
        written
    }

    /// A new run file for `entries` entries, its filter as large as a quarter of
    /// the budget allows beside the other runs' filters (`others` bytes).
    fn create_run(&self, entries: u64, others: usize) -> Result<RunWriter> {
        let bits = self.filter_bits(entries, others);
        let path = self.spill.file(self.name)?;
        RunWriter::create(self.spill.storage.as_ref(), path.clone(), entries, bits)
            .map_err(|e| Error::io("create spilled keys", &path, e))
    }

    fn remove_run(&self, run: Run) {
        let path = run.path().to_owned();
        drop(run);
        // Best effort: a leftover is removed by the next writer or gc.
        let _ = self.spill.storage.remove(&path);
    }
}

impl Drop for KeySet {
    fn drop(&mut self) {
        for run in std::mem::take(&mut self.runs) {
            self.remove_run(run);
        }
    }
}

fn spill_read(error: std::io::Error) -> Error {
    Error::io("read spilled keys", Path::new(SPILL_DIR), error)
}

type Cursor = (Option<(u64, u64)>, RunCursor);

/// The smallest head of `cursors`, advancing its cursor.
fn pop_smallest(cursors: &mut [Cursor]) -> Result<Option<(u64, u64)>> {
    let Some(at) = (0..cursors.len())
        .filter(|&i| cursors[i].0.is_some())
        .min_by_key(|&i| cursors[i].0)
    else {
        return Ok(None);
    };
    let (head, cursor) = &mut cursors[at];
    let next = cursor.next().transpose().map_err(spill_read)?;
    Ok(std::mem::replace(head, next))
}

/// A key set read in order: [`KeySet::sorted`].
pub(crate) struct Sorted<'a> {
    table: Box<dyn Iterator<Item = (u64, u64)> + 'a>,
    table_head: Option<(u64, u64)>,
    runs: Vec<Cursor>,
}

impl Iterator for Sorted<'_> {
    type Item = Result<(u64, u64)>;

    fn next(&mut self) -> Option<Result<(u64, u64)>> {
        let run_min = self.runs.iter().filter_map(|c| c.0).min();
        match (self.table_head, run_min) {
            (Some(t), Some(r)) if r < t => pop_smallest(&mut self.runs).transpose(),
            (Some(t), _) => {
                self.table_head = self.table.next();
                Some(Ok(t))
            }
            (None, Some(_)) => pop_smallest(&mut self.runs).transpose(),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests;
