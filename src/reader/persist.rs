//! Indexing shards whose keys a writer already checked and gives sorted, and
//! writing the persisted index: from the old file, the in-memory tail and the
//! new shards' sizes and sorted keys, as streams (`IndexFile::write`), so that
//! neither holds anything per record.

use std::io;
use std::path::Path;

use super::{FilePolicy, Index, RELEASE_EVERY};
use crate::error::{Error, Result};
use crate::format::{idx_records, index_fields, record_sizes, INDEX_FIELD_SIZE};
use crate::index_file::{Each, IndexFile, ShardStamp};
use crate::key_table::KeyTable;
use crate::shard::Shard;
use crate::storage::Storage;

impl Index {
    /// [`Index::add_shards`] of shards whose keys come sorted.
    pub(super) fn add_shards_sorted(
        &mut self,
        dir: &Path,
        count: u64,
        sorted: Each<'_, (u64, u64)>,
        file: Option<(&dyn Storage, FilePolicy)>,
    ) -> Result<()> {
        let first_new = self.layout.shards.len();
        // Checked, but no starts kept: the file, if written, has them.
        self.add_shard_files(dir, count, None, false)?;
        if let Some((storage, _)) = file.filter(|(_, policy)| self.wants_file(*policy)) {
            if self
                .persist_with(storage, dir, Some((first_new, sorted)))
                .is_ok()
            {
                return Ok(());
            }
        }
        self.fill_tail_starts(first_new)?;
        let mut new = Vec::new();
        sorted(&mut |entry| {
            new.push(entry);
            Ok(())
        })
        .map_err(|e| Error::io("index the new records", dir, e))?;
        self.tail_keys.add_sorted(new);
        Ok(())
    }

    /// The starts of the records of shards `from..`, which were added without.
    fn fill_tail_starts(&mut self, from: usize) -> Result<()> {
        let layout = &mut self.layout;
        for shard in &layout.shards[from..] {
            let sizes = shard.sizes()?;
            let mut start = 0u64;
            for local in 0..idx_records(sizes.len() as u64, layout.keyed, &shard.path)? {
                layout.tail_starts.push(start);
                let (key, value) = record_sizes(sizes, layout.keyed, local as usize);
                start += key + value;
            }
        }
        Ok(())
    }

    /// Whether `policy` wants the persisted index (re)written now: records it
    /// does not cover, in a dataset large enough, and many enough to be worth
    /// rewriting a file that covers the rest.
    pub(crate) fn wants_file(&self, policy: FilePolicy) -> bool {
        let over = |records: u64, bytes: u64| {
            policy.min_records.is_some_and(|n| records >= n)
                || policy.min_bytes.is_some_and(|n| bytes >= n)
        };
        let tail_records = self.tail_len() as u64;
        let stored: u64 = self.layout.shards.iter().map(Shard::data_len).sum();
        if tail_records == 0 || !over(self.len() as u64, stored) {
            return false;
        }
        let tail_bytes = self.tail_stored_bytes();
        !self.uses_file()
            || tail_records >= policy.min_tail
            || policy.min_bytes.is_some_and(|n| tail_bytes >= n)
    }

    /// Writes an index file covering every loaded shard and switches to it,
    /// dropping the in-memory tail. Nothing changes on error.
    pub(crate) fn persist(&mut self, storage: &dyn Storage, dir: &Path) -> io::Result<()> {
        self.persist_with(storage, dir, None)
    }

    /// [`Index::persist`]; `added` gives the shards from which on were added
    /// without starts or keys, and their keys' `(hash, record)` sorted.
    fn persist_with(
        &mut self,
        storage: &dyn Storage,
        dir: &Path,
        added: Option<(usize, Each<'_, (u64, u64)>)>,
    ) -> io::Result<()> {
        let layout = &self.layout;
        let (first_new, sorted) = match added {
            Some((first, sorted)) => (first, Some(sorted)),
            None => (layout.shards.len(), None),
        };
        let stamps: Vec<ShardStamp> = layout.shards.iter().map(|s| s.stamp).collect();
        let mut firsts: Vec<u64> = layout.shards.iter().map(|s| s.first).collect();
        firsts.push(layout.len as u64);
        let file_records = layout.file_records();
        let starts = |out: &mut dyn FnMut(u64) -> io::Result<()>| -> io::Result<()> {
            if let Some(file) = &layout.file {
                (0..file_records).try_for_each(|i| out(file.start(i)))?;
            }
            layout.tail_starts.iter().try_for_each(|&s| out(s))?;
            for shard in &layout.shards[first_new..] {
                let sizes = shard.sizes().map_err(io::Error::other)?;
                let entry = INDEX_FIELD_SIZE * index_fields(layout.keyed);
                let records = sizes.len() / entry;
                let mut start = 0u64;
                // A shard's `.idx` is read through once: its pages go back as
                // it goes, so that they never all count against the writer.
                let mut released = 0usize;
                for local in 0..records {
                    if local * entry >= released + RELEASE_EVERY as usize {
                        sizes.release(released, local * entry - released);
                        released = local * entry;
                    }
                    out(start)?;
                    let (key, value) = record_sizes(sizes, layout.keyed, local);
                    start += key + value;
                }
                sizes.release(0, sizes.len());
            }
            Ok(())
        };
        let entries = |out: &mut dyn FnMut((u64, u64)) -> io::Result<()>| -> io::Result<()> {
            if !layout.keyed {
                return Ok(());
            }
            let mut old = self.key_entries().peekable();
            if let Some(sorted) = sorted {
                sorted(&mut |entry| {
                    while let Some(earlier) = old.next_if(|&o| o < entry) {
                        out(earlier)?;
                    }
                    out(entry)
                })?;
            }
            old.try_for_each(out)
        };
        IndexFile::write(
            storage,
            dir,
            layout.keyed,
            &stamps,
            &firsts,
            &starts,
            &entries,
        )?;

        // Another process may have replaced it meanwhile: switch only to a file
        // describing exactly these shards.
        let written = IndexFile::open(dir, layout.keyed, self.shard_count())
            .filter(|f| {
                (0..f.shards())
                    .map(|id| f.stamp(id))
                    .eq(stamps.iter().copied().map(Some))
            })
            .filter(|f| f.records() == layout.len as u64);
        let Some(written) = written else {
            return Err(io::Error::other(
                "the index file changed while being written",
            ));
        };
        self.layout.file = Some(written);
        self.layout.tail_starts = Vec::new();
        self.tail_keys = KeyTable::default();
        Ok(())
    }
}
