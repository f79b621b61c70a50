//! The in-memory index of a dataset's committed shards: where each record starts,
//! its sizes, and a hash table from key to record number. Keys are not copied: the
//! table holds record numbers and hashes key bytes straight from the mapped shards.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use crate::error::{DisplayKey, Error, Result};
use crate::format::{index_fields, shard_paths, INDEX_FIELD_SIZE};
use crate::mapping::Mapping;
use std::hash::BuildHasher;

/// One committed shard, mapped.
#[derive(Debug)]
pub(crate) struct Shard {
    /// The data file, for messages.
    pub(crate) path: PathBuf,
    pub(crate) data: Mapping,
    /// Dataset index of the shard's first record.
    pub(crate) first: u64,
}

/// Record locations across all loaded shards.
#[derive(Debug)]
pub(crate) struct Index {
    keyed: bool,
    pub(crate) shards: Vec<Shard>,
    /// Offset of each record (its key, or value when keyless) in its shard.
    starts: Vec<u64>,
    /// Key sizes; empty when keyless.
    key_sizes: Vec<u32>,
    value_sizes: Vec<u32>,
    /// `(hash, record number)`: the stored hash lets the table grow without
    /// reading keys back from the shards.
    keys: HashTable<(u64, u64)>,
    hasher: RandomState,
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

impl Index {
    pub(crate) fn new(keyed: bool) -> Index {
        Index {
            keyed,
            shards: Vec::new(),
            starts: Vec::new(),
            key_sizes: Vec::new(),
            value_sizes: Vec::new(),
            keys: HashTable::new(),
            hasher: RandomState::default(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.value_sizes.len()
    }

    pub(crate) fn shard_count(&self) -> u64 {
        self.shards.len() as u64
    }

    /// The record at `index`, which must be `< len()`.
    pub(crate) fn locate(&self, index: usize) -> Location<'_> {
        let shard_no = self
            .shards
            .partition_point(|s| s.first <= index as u64)
            .saturating_sub(1);
        let shard = &self.shards[shard_no];
        let start = self.starts[index] as usize;
        let key_size = if self.keyed {
            self.key_sizes[index] as usize
        } else {
            0
        };
        let value_end = start + key_size + self.value_sizes[index] as usize;
        // In bounds: open checked that each shard's sizes sum to its length.
        Location {
            shard,
            shard_id: shard_no as u64,
            key: &shard.data[start..start + key_size],
            stored: &shard.data[start + key_size..value_end],
            value_offset: (start + key_size) as u64,
        }
    }

    /// The hash the key table uses for `key`.
    pub(crate) fn hash_key(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Record number of `key`, if present.
    pub(crate) fn position(&self, key: &[u8]) -> Option<usize> {
        let hash = self.hash_key(key);
        self.keys
            .find(hash, |&(h, i)| {
                h == hash && self.locate(i as usize).key == key
            })
            .map(|&(_, i)| i as usize)
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
        let before = (self.shards.len(), self.len());
        let result = self.try_add_shards(dir, count, known);
        if result.is_err() {
            self.shards.truncate(before.0);
            self.starts.truncate(before.1);
            self.key_sizes
                .truncate(if self.keyed { before.1 } else { 0 });
            self.value_sizes.truncate(before.1);
            self.keys.retain(|&mut (_, i)| (i as usize) < before.1);
        }
        result
    }

    fn try_add_shards(&mut self, dir: &Path, count: u64, known: Option<&[u64]>) -> Result<()> {
        let base = self.len();
        for id in self.shard_count()..count {
            let (data_path, index_path) = shard_paths(dir, id);
            let sizes = read_index(&index_path, count, self.keyed)?;
            let fields = index_fields(self.keyed);
            let records = sizes.len() / fields;

            let data_file = open_shard(&data_path, count)?;
            let data_len = data_file
                .metadata()
                .map_err(|e| Error::io("stat", &data_path, e))?
                .len();

            let first = self.len() as u64;
            self.starts.reserve(records);
            self.value_sizes.reserve(records);
            let mut offset: u64 = 0;
            for (record, entry) in sizes.chunks_exact(fields).enumerate() {
                self.starts.push(offset);
                let record_size: u64 = entry.iter().map(|&s| s as u64).sum();
                if self.keyed {
                    self.key_sizes.push(entry[0]);
                }
                self.value_sizes.push(entry[fields - 1]);
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
            let data =
                Mapping::map(&data_file, data_len).map_err(|e| Error::io("mmap", &data_path, e))?;
            if data.len() as u64 != data_len {
                // Only possible if the file changed between stat and mmap.
                return Err(Error::CorruptShard {
                    path: data_path,
                    reason: format!(
                        "changed size while being opened ({data_len} then {} bytes)",
                        data.len()
                    ),
                });
            }
            self.shards.push(Shard {
                path: data_path,
                data,
                first,
            });
            if self.keyed {
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
        self.keys.reserve(hashes.len(), |&(h, _)| h);
        for (i, &hash) in (from..).zip(hashes) {
            self.keys.insert_unique(hash, (hash, i as u64), |&(h, _)| h);
        }
    }

    /// Adds the keys of records `from..len()` to the key table, rejecting duplicates.
    fn index_keys(&mut self, from: usize) -> Result<()> {
        let Index {
            keys,
            hasher,
            shards,
            starts,
            key_sizes,
            ..
        } = self;
        let key_of = |i: usize| -> &[u8] {
            let shard_no = shards
                .partition_point(|s| s.first <= i as u64)
                .saturating_sub(1);
            let start = starts[i] as usize;
            &shards[shard_no].data[start..start + key_sizes[i] as usize]
        };
        // Keys sit between values: without this hint, reading each one would read
        // ahead through the values around it and make the whole shard resident.
        if let Some(shard) = shards.last() {
            shard.data.advise_random();
        }
        keys.reserve(starts.len() - from, |&(h, _)| h);
        // Reading the keys maps pages (and the kernel maps neighbours with them);
        // give them back every RELEASE_EVERY bytes so opening a large keyed dataset
        // does not make its whole size resident.
        const RELEASE_EVERY: u64 = 32 << 20;
        let mut released = 0u64;
        for (i, &start) in starts.iter().enumerate().skip(from) {
            if start >= released + RELEASE_EVERY {
                if let Some(shard) = shards.last() {
                    shard
                        .data
                        .release(released as usize, (start - released) as usize);
                }
                released = start;
            }
            let key = key_of(i);
            let hash = hasher.hash_one(key);
            match keys.entry(
                hash,
                |&(h, j)| h == hash && key_of(j as usize) == key,
                |&(h, _)| h,
            ) {
                hashbrown::hash_table::Entry::Occupied(_) => {
                    let shard = &shards[shards.len() - 1];
                    return Err(Error::DuplicateKeyInDataset {
                        path: shard.path.clone(),
                        record: i as u64 - shard.first,
                        key: DisplayKey(key.to_vec()),
                    });
                }
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert((hash, i as u64));
                }
            }
        }
        if let Some(shard) = shards.last() {
            shard
                .data
                .release(released as usize, shard.data.len() - released as usize);
            shard.data.advise_normal();
        }
        Ok(())
    }
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

/// Reads an .idx file as `u32` sizes, checking its length is whole entries.
fn read_index(path: &Path, shards: u64, keyed: bool) -> Result<Vec<u32>> {
    let mut file = open_shard(path, shards)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    let entry = INDEX_FIELD_SIZE * index_fields(keyed);
    if bytes.len() % entry != 0 {
        return Err(Error::CorruptShard {
            path: path.to_owned(),
            reason: format!(
                "{} bytes is not a whole number of {entry}-byte index entries ({} dataset)",
                bytes.len(),
                if keyed { "keyed" } else { "keyless" }
            ),
        });
    }
    Ok(bytes
        .chunks_exact(INDEX_FIELD_SIZE)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}
