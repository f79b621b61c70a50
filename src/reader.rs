//! The index of a dataset's committed shards: where each record starts, its sizes
//! and a table from key to record number. Keys are never copied.
//!
//! Sizes are read from the mapped `.idx` files. Starts and the key table come from
//! the persisted index file (`index_file.rs`) for the shards it covers, and from
//! memory for the shards after those (all of them when there is no usable file):
//! the "tail", which [`Index::persist`] folds into a new file.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use hashbrown::HashTable;

use crate::error::{DisplayKey, Error, Result};
use crate::format::{index_fields, shard_paths, INDEX_FIELD_SIZE};
use crate::index_file::{self, IndexFile, ShardStamp};
use crate::mapping::Mapping;

/// One committed shard, mapped.
#[derive(Debug)]
pub(crate) struct Shard {
    /// The data file, for messages.
    pub(crate) path: PathBuf,
    pub(crate) data: Mapping,
    /// The `.idx` file: `u32` sizes per record.
    sizes: Mapping,
    /// Dataset index of the shard's first record.
    pub(crate) first: u64,
    stamp: ShardStamp,
}

/// Where records are, without the key table (split out so the table can be
/// updated while keys are read through the layout).
#[derive(Debug)]
struct Layout {
    keyed: bool,
    shards: Vec<Shard>,
    len: usize,
    /// Covers records `0..file.records()` and shards `0..file.shards()`.
    file: Option<IndexFile>,
    /// Starts of the records after the file's.
    tail_starts: Vec<u64>,
}

/// Record locations across all loaded shards.
#[derive(Debug)]
pub(crate) struct Index {
    layout: Layout,
    /// `(hash, record number)` of the tail's keys: the stored hash lets the table
    /// grow, and the file be written, without reading keys back from the shards.
    tail_keys: HashTable<(u64, u64)>,
}

/// Where a record lives.
pub(crate) struct Location<'a> {
    pub(crate) shard: &'a Shard,
    /// The shard's number.
    pub(crate) shard_id: u64,
    pub(crate) key: &'a [u8],
    pub(crate) stored: &'a [u8],
    /// Byte offset of the stored value in the shard's data file.
    pub(crate) value_offset: u64,
}

impl Layout {
    fn file_records(&self) -> usize {
        self.file.as_ref().map_or(0, |f| f.records() as usize)
    }

    /// The record at `index`, which must be `< len`. Errors only if the index file
    /// was tampered with: tail locations were checked when their shards were added.
    fn locate(&self, index: usize) -> Result<Location<'_>> {
        let shard_id = self
            .shards
            .partition_point(|s| s.first <= index as u64)
            .saturating_sub(1);
        let shard = &self.shards[shard_id];
        let local = index - shard.first as usize;
        let fields = index_fields(self.keyed);
        let entry = local * fields * INDEX_FIELD_SIZE;
        let size = |field: usize| -> u64 {
            let at = entry + field * INDEX_FIELD_SIZE;
            shard
                .sizes
                .get(at..at + INDEX_FIELD_SIZE)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
        };
        let key_size = if self.keyed { size(0) } else { 0 };
        let value_size = size(fields - 1);
        let file_records = self.file_records();
        let start = match &self.file {
            Some(file) if index < file_records => file.start(index),
            _ => self.tail_starts[index - file_records],
        };
        let key_end = start.checked_add(key_size);
        let value_end = key_end.and_then(|k| k.checked_add(value_size));
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            return Err(self.bad_location(shard, local));
        };
        let (start, key_end, value_end) = (start as usize, key_end as usize, value_end as usize);
        match (
            shard.data.get(start..key_end),
            shard.data.get(key_end..value_end),
        ) {
            (Some(key), Some(stored)) => Ok(Location {
                shard,
                shard_id: shard_id as u64,
                key,
                stored,
                value_offset: key_end as u64,
            }),
            _ => Err(self.bad_location(shard, local)),
        }
    }

    fn bad_location(&self, shard: &Shard, local: usize) -> Error {
        Error::CorruptShard {
            path: shard.path.clone(),
            reason: format!(
                "record {local} lies outside the data file according to the persisted index {}; delete that file to rebuild it",
                IndexFile::path(shard.path.parent().unwrap_or(Path::new("."))).display()
            ),
        }
    }

    fn key(&self, index: usize) -> Option<&[u8]> {
        self.locate(index).ok().map(|l| l.key)
    }
}

impl Index {
    pub(crate) fn new(keyed: bool) -> Index {
        Index {
            layout: Layout {
                keyed,
                shards: Vec::new(),
                len: 0,
                file: None,
                tail_starts: Vec::new(),
            },
            tail_keys: HashTable::new(),
        }
    }

    /// Indexes shards `0..count` of `dir`, through its index file where that is
    /// usable.
    pub(crate) fn open(dir: &Path, keyed: bool, count: u64) -> Result<Index> {
        if let Some(file) = IndexFile::open(dir, keyed, count) {
            let mut index = Index::new(keyed);
            if index.adopt(dir, file).is_ok() {
                index.add_shards(dir, count, None)?;
                return Ok(index);
            }
        }
        let mut index = Index::new(keyed);
        index.add_shards(dir, count, None)?;
        Ok(index)
    }

    /// Maps the shards `file` covers, if they are the files it describes.
    fn adopt(&mut self, dir: &Path, file: IndexFile) -> Result<()> {
        for id in 0..file.shards() {
            let (data_path, index_path) = shard_paths(dir, id);
            let data = open_shard(&data_path, file.shards())?;
            let sizes = open_shard(&index_path, file.shards())?;
            let stamp = ShardStamp::of(
                &data
                    .metadata()
                    .map_err(|e| Error::io("stat", &data_path, e))?,
                &sizes
                    .metadata()
                    .map_err(|e| Error::io("stat", &index_path, e))?,
            );
            if file.stamp(id) != Some(stamp) {
                return Err(Error::ChangedOnDisk {
                    path: IndexFile::path(dir),
                    reason: format!("shard {id} is not the one it describes"),
                });
            }
            let data_map = map(&data, &data_path, stamp.data_len)?;
            let sizes_map = map(&sizes, &index_path, stamp.index_len)?;
            self.layout.shards.push(Shard {
                path: data_path,
                data: data_map,
                sizes: sizes_map,
                first: file.first(id),
                stamp,
            });
        }
        self.layout.len = file.records() as usize;
        self.layout.file = Some(file);
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.layout.len
    }

    pub(crate) fn shard_count(&self) -> u64 {
        self.layout.shards.len() as u64
    }

    pub(crate) fn shards(&self) -> &[Shard] {
        &self.layout.shards
    }

    /// Whether the records are located through a persisted index file.
    pub(crate) fn uses_file(&self) -> bool {
        self.layout.file.is_some()
    }

    /// Records not covered by the index file.
    pub(crate) fn tail_len(&self) -> usize {
        self.layout.len - self.layout.file_records()
    }

    /// The record at `index`, which must be `< len()`.
    pub(crate) fn locate(&self, index: usize) -> Result<Location<'_>> {
        self.layout.locate(index)
    }

    /// The hash the key table uses for `key`.
    pub(crate) fn hash_key(&self, key: &[u8]) -> u64 {
        index_file::hash_key(key)
    }

    /// Record number of `key`, if present.
    pub(crate) fn position(&self, key: &[u8]) -> Option<usize> {
        let hash = self.hash_key(key);
        find(&self.layout, &self.tail_keys, hash, key)
    }

    /// Maps and indexes shards `self.shard_count()..count` of `dir`. On error the
    /// index is left exactly as it was.
    ///
    /// `known` may give the [`Index::hash_key`] hashes of every key in those shards,
    /// in record order, from a writer that already checked them for duplicates:
    /// then no key is read back from the new shards (which would page in the
    /// values around them).
    pub(crate) fn add_shards(
        &mut self,
        dir: &Path,
        count: u64,
        known: Option<&[u64]>,
    ) -> Result<()> {
        let before = (self.layout.shards.len(), self.layout.len);
        let result = self.try_add_shards(dir, count, known);
        if result.is_err() {
            let layout = &mut self.layout;
            layout.shards.truncate(before.0);
            layout.len = before.1;
            layout
                .tail_starts
                .truncate(before.1 - layout.file_records());
            self.tail_keys.retain(|&mut (_, i)| (i as usize) < before.1);
        }
        result
    }

    fn try_add_shards(&mut self, dir: &Path, count: u64, known: Option<&[u64]>) -> Result<()> {
        let base = self.len();
        let keyed = self.layout.keyed;
        for id in self.shard_count()..count {
            let (data_path, index_path) = shard_paths(dir, id);
            let sizes_file = open_shard(&index_path, count)?;
            let sizes_meta = sizes_file
                .metadata()
                .map_err(|e| Error::io("stat", &index_path, e))?;
            let sizes = map(&sizes_file, &index_path, sizes_meta.len())?;
            let entry_size = INDEX_FIELD_SIZE * index_fields(keyed);
            if sizes.len() % entry_size != 0 {
                return Err(Error::CorruptShard {
                    path: index_path,
                    reason: format!(
                        "{} bytes is not a whole number of {entry_size}-byte index entries ({} dataset)",
                        sizes.len(),
                        if keyed { "keyed" } else { "keyless" }
                    ),
                });
            }
            let data_file = open_shard(&data_path, count)?;
            let data_meta = data_file
                .metadata()
                .map_err(|e| Error::io("stat", &data_path, e))?;
            let stamp = ShardStamp::of(&data_meta, &sizes_meta);
            let data_len = stamp.data_len;
            let first = self.len() as u64;
            let records = sizes.len() / entry_size;
            self.layout.tail_starts.reserve(records);
            let mut offset: u64 = 0;
            for (record, entry) in sizes.chunks_exact(entry_size).enumerate() {
                self.layout.tail_starts.push(offset);
                let record_size: u64 = entry
                    .chunks_exact(INDEX_FIELD_SIZE)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
                    .sum();
                offset += record_size; // cannot overflow: at most 2^32 records x 2^33 bytes
                if offset > data_len {
                    return Err(Error::CorruptShard {
                        path: index_path,
                        reason: format!(
                            "record {record} ends at byte {offset}, past the end of {} ({data_len} bytes)",
                            data_path.display()
                        ),
                    });
                }
            }
            if offset != data_len {
                return Err(Error::CorruptShard {
                    path: data_path,
                    reason: format!(
                        "{data_len} bytes, but its index {} accounts for {offset}",
                        index_path.display()
                    ),
                });
            }
            let data = map(&data_file, &data_path, data_len)?;
            self.layout.shards.push(Shard {
                path: data_path,
                data,
                sizes,
                first,
                stamp,
            });
            self.layout.len += records;
            if keyed {
                let range = first as usize - base..self.len() - base;
                match known.and_then(|hashes| hashes.get(range)) {
                    Some(hashes) => self.index_known_keys(first as usize, hashes),
                    None => self.index_keys(first as usize)?,
                }
            }
        }
        Ok(())
    }

    /// Adds records `from..len()` to the key table by their known hashes.
    fn index_known_keys(&mut self, from: usize, hashes: &[u64]) {
        self.tail_keys.reserve(hashes.len(), |&(h, _)| h);
        for (i, &hash) in (from..).zip(hashes) {
            self.tail_keys
                .insert_unique(hash, (hash, i as u64), |&(h, _)| h);
        }
    }

    /// Adds the keys of records `from..len()` (all in the last shard) to the key
    /// table, rejecting duplicates.
    fn index_keys(&mut self, from: usize) -> Result<()> {
        let Index { layout, tail_keys } = self;
        let Some(shard) = layout.shards.last() else {
            return Ok(());
        };
        // Keys sit between values: without this hint, reading each one would read
        // ahead through the values around it and make the whole shard resident.
        shard.data.advise_random();
        tail_keys.reserve(layout.len - from, |&(h, _)| h);
        // Reading the keys maps pages (and the kernel maps neighbours with them);
        // give them back every RELEASE_EVERY bytes so opening a large keyed dataset
        // does not make its whole size resident.
        const RELEASE_EVERY: u64 = 32 << 20;
        let mut released = 0u64;
        let file_records = layout.file_records();
        for i in from..layout.len {
            let start = layout.tail_starts[i - file_records];
            if start >= released + RELEASE_EVERY {
                shard
                    .data
                    .release(released as usize, (start - released) as usize);
                released = start;
            }
            let key = layout.key(i).unwrap_or_default();
            let hash = index_file::hash_key(key);
            let in_file = layout.file.as_ref().is_some_and(|f| {
                f.candidates(hash)
                    .any(|j| layout.key(j as usize) == Some(key))
            });
            let entry = tail_keys.entry(
                hash,
                |&(h, j)| h == hash && layout.key(j as usize) == Some(key),
                |&(h, _)| h,
            );
            match entry {
                hashbrown::hash_table::Entry::Vacant(slot) if !in_file => {
                    slot.insert((hash, i as u64));
                }
                _ => {
                    return Err(Error::DuplicateKeyInDataset {
                        path: shard.path.clone(),
                        record: i as u64 - shard.first,
                        key: DisplayKey(key.to_vec()),
                    });
                }
            }
        }
        shard
            .data
            .release(released as usize, shard.data.len() - released as usize);
        shard.data.advise_normal();
        Ok(())
    }

    /// Writes an index file covering every loaded shard and switches to it,
    /// dropping the in-memory tail. Nothing changes on error.
    pub(crate) fn persist(&mut self, dir: &Path) -> io::Result<()> {
        let layout = &self.layout;
        let mut entries = Vec::new();
        if layout.keyed {
            let mut tail: Vec<(u64, u64)> = self.tail_keys.iter().copied().collect();
            tail.sort_unstable();
            entries.reserve_exact(layout.len);
            match &layout.file {
                Some(file) => merge_sorted(file.entries(), tail, &mut entries),
                None => entries = tail,
            }
        }
        let stamps: Vec<ShardStamp> = layout.shards.iter().map(|s| s.stamp).collect();
        let mut firsts: Vec<u64> = layout.shards.iter().map(|s| s.first).collect();
        firsts.push(layout.len as u64);
        let file_records = layout.file_records();
        let starts = (0..layout.len).map(|i| match &layout.file {
            Some(file) if i < file_records => file.start(i),
            _ => layout.tail_starts[i - file_records],
        });
        IndexFile::write(dir, layout.keyed, &stamps, &firsts, starts, &entries)?;
        drop(entries);

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
        self.tail_keys = HashTable::new();
        Ok(())
    }
}

fn find(
    layout: &Layout,
    tail_keys: &HashTable<(u64, u64)>,
    hash: u64,
    key: &[u8],
) -> Option<usize> {
    if let Some(file) = &layout.file {
        if let Some(record) = file
            .candidates(hash)
            .find(|&r| layout.key(r as usize) == Some(key))
        {
            return Some(record as usize);
        }
    }
    tail_keys
        .find(hash, |&(h, i)| {
            h == hash && layout.key(i as usize) == Some(key)
        })
        .map(|&(_, i)| i as usize)
}

/// Merges two sorted runs into `out`.
fn merge_sorted(
    first: impl Iterator<Item = (u64, u64)>,
    second: Vec<(u64, u64)>,
    out: &mut Vec<(u64, u64)>,
) {
    let mut second = second.into_iter().peekable();
    for entry in first {
        while let Some(&next) = second.peek() {
            if next < entry {
                out.push(next);
                second.next();
            } else {
                break;
            }
        }
        out.push(entry);
    }
    out.extend(second);
}

fn map(file: &File, path: &Path, len: u64) -> Result<Mapping> {
    let mapping = Mapping::map(file, len).map_err(|e| Error::io("mmap", path, e))?;
    if mapping.len() as u64 != len {
        // Only possible if the file changed between stat and mmap.
        return Err(Error::CorruptShard {
            path: path.to_owned(),
            reason: format!(
                "changed size while being opened ({len} then {} bytes)",
                mapping.len()
            ),
        });
    }
    Ok(mapping)
}

fn open_shard(path: &Path, shards: u64) -> Result<File> {
    File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::MissingShard {
            path: path.to_owned(),
            shards,
        },
        _ => Error::io("open", path, e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_order_and_every_entry() {
        let mut out = Vec::new();
        merge_sorted(
            [(1, 0), (5, 1), (9, 2)].into_iter(),
            vec![(0, 3), (5, 4), (10, 5)],
            &mut out,
        );
        assert_eq!(out, [(0, 3), (1, 0), (5, 1), (5, 4), (9, 2), (10, 5)]);
    }
}
