//! The persisted index (`.bcd-index`): where each record starts and a table from
//! key hash to record number, written beside the shards so that opening a large
//! dataset maps one file instead of reading every key. Every process that opens the
//! dataset shares its pages through the page cache; none holds a private copy.
//!
//! It is a cache, never the truth: the reference neither writes nor reads it, and it
//! is rebuilt when missing, unreadable or stale (the shards it describes are not the
//! ones on disk, as after an extend by the reference). FORMAT.md describes the layout.
//! Whatever its bytes, reading through it cannot panic or reach outside the
//! shards (locations are bounds-checked against the mapped shard), and a lookup
//! only returns a record whose key bytes in the shard equal the key asked for.

use std::fs::{File, Metadata};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::format::{
    index_fields, record_sizes, INDEX_FIELD_SIZE, INDEX_FILE_NAME, INDEX_FILE_TMP_PREFIX,
};
use crate::mapping::Mapping;
use crate::storage::Storage;

const MAGIC: [u8; 8] = *b"BCDINDX1";
const VERSION: u32 = 1;
const HEADER_SIZE: usize = 64;
/// Offset of the checksum: xxh3 of the whole file, this field read as zero.
const CHECKSUM_AT: usize = 40;
const SHARD_ENTRY_SIZE: usize = 40;
const TABLE_ENTRY_SIZE: usize = 16;
/// The key table has about this many entries per bucket.
const ENTRIES_PER_BUCKET: u64 = 4;
const MAX_BUCKET_BITS: u32 = 40;

/// The hash the key table is built on: stable across processes, builds and
/// platforms, since it is stored.
pub(crate) fn hash_key(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// What identifies the committed files of one shard: if a shard's stamp differs from
/// the one recorded, the index file describes other files and is not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShardStamp {
    pub(crate) data_len: u64,
    pub(crate) index_len: u64,
    pub(crate) data_mtime_ns: u64,
    pub(crate) index_mtime_ns: u64,
}

impl ShardStamp {
    pub(crate) fn of(data: &Metadata, index: &Metadata) -> ShardStamp {
        ShardStamp {
            data_len: data.len(),
            index_len: index.len(),
            data_mtime_ns: mtime_ns(data),
            index_mtime_ns: mtime_ns(index),
        }
    }
}

fn mtime_ns(meta: &Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A validated, mapped index file.
#[derive(Debug)]
pub(crate) struct IndexFile {
    map: Mapping,
    /// Shards covered, in order.
    stamps: Vec<ShardStamp>,
    /// First record of each covered shard, then the record count.
    firsts: Vec<u64>,
    bucket_bits: u32,
    starts_at: usize,
    buckets_at: usize,
    entries_at: usize,
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    match bytes.get(offset..offset + 8) {
        Some(b) => u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        None => 0,
    }
}

/// Whether `starts` (little-endian u64, one per record) are where `sizes` (the
/// records' `.idx` entries, as many) put the records, the last ending at
/// `data_len`: the first at 0, and each start minus the one before it the size
/// of the record between them. The differences are taken wrapping, so equal
/// differences make each start the sum of the sizes before it (which cannot
/// wrap: at most 2^32 records of at most 2^33 bytes), as a walk adding the
/// sizes up would find; unlike that walk, each record's test depends on no
/// other's, so the loop is vectorised.
fn starts_agree(starts: &[u8], sizes: &[u8], keyed: bool, data_len: u64) -> bool {
    let (starts, []) = starts.as_chunks::<8>() else {
        return false;
    };
    let (Some(first), Some(last)) = (starts.first(), starts.last()) else {
        return sizes.is_empty() && data_len == 0;
    };
    let u32_le = |b: &[u8]| u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let found = match keyed {
        true => differences(starts, sizes, |s: &[u8; 8]| {
            u32_le(&s[..4]) + u32_le(&s[4..])
        }),
        false => differences(starts, sizes, |s: &[u8; 4]| u32_le(s)),
    };
    let Some((differ, last_len)) = found else {
        return false;
    };
    u64::from_le_bytes(*first) == 0
        && differ == 0
        && u64::from_le_bytes(*last).checked_add(last_len) == Some(data_len)
}

/// For [`starts_agree`]: the differences of neighbouring `starts`, xor-ed
/// with the lengths (`len`) of the `.idx` entries between them, or-ed
/// together (all zero when every pair agrees), and the last entry's length;
/// `None` unless `sizes` holds one whole entry per start.
fn differences<const N: usize>(
    starts: &[[u8; 8]],
    sizes: &[u8],
    len: impl Fn(&[u8; N]) -> u64,
) -> Option<(u64, u64)> {
    let (sizes, []) = sizes.as_chunks::<N>() else {
        return None;
    };
    if sizes.len() != starts.len() {
        return None;
    }
    let nexts = starts[1..].iter().map(|s| u64::from_le_bytes(*s));
    let before = starts.iter().map(|s| u64::from_le_bytes(*s));
    let differ = (nexts.zip(before).zip(sizes)).fold(0u64, |differ, ((next, start), size)| {
        differ | (next.wrapping_sub(start) ^ len(size))
    });
    Some((differ, len(sizes.last()?)))
}

impl IndexFile {
    pub(crate) fn path(dir: &Path) -> PathBuf {
        dir.join(INDEX_FILE_NAME)
    }

    /// Maps and validates `dir`'s index file for a dataset with `keyed` and at least
    /// the shards it covers. `None` when there is none, or it is unreadable, of
    /// another version or inconsistent: the caller then indexes the shards itself.
    /// The shard stamps are not checked here: see [`IndexFile::stamp`].
    pub(crate) fn open(dir: &Path, keyed: bool, shards: u64) -> Option<IndexFile> {
        // A special file in its place is no index file (and must not block).
        let (mut file, metadata) = crate::mapping::open_regular(&Self::path(dir)).ok()?;
        let len = metadata.len();
        if !checksum_matches(&mut file).ok()? {
            return None;
        }
        let map = Mapping::map(&file, len).ok()?;
        Self::parse(map, keyed, shards)
    }

    fn parse(map: Mapping, keyed: bool, max_shards: u64) -> Option<IndexFile> {
        let bytes: &[u8] = &map;
        let header = bytes.get(..HEADER_SIZE)?;
        if header[..8] != MAGIC
            || u32::from_le_bytes([header[8], header[9], header[10], header[11]]) != VERSION
        {
            return None;
        }
        let flags = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
        let shards = u64_at(header, 16);
        let records = u64_at(header, 24);
        let bucket_bits = u32::try_from(u64_at(header, 32)).ok()?;
        let reserved = &header[CHECKSUM_AT + 8..];
        if flags != u32::from(keyed)
            || shards > max_shards
            || bucket_bits > MAX_BUCKET_BITS
            || reserved.iter().any(|&b| b != 0)
        {
            return None;
        }
        let table_len = usize::try_from(shards)
            .ok()?
            .checked_mul(SHARD_ENTRY_SIZE)?;
        let table = bytes.get(HEADER_SIZE..HEADER_SIZE.checked_add(table_len)?)?;

        let entry_size = (INDEX_FIELD_SIZE * index_fields(keyed)) as u64;
        let mut stamps = Vec::with_capacity(table.len() / SHARD_ENTRY_SIZE);
        let mut firsts = Vec::with_capacity(stamps.capacity() + 1);
        let mut first = 0u64;
        for entry in table.chunks_exact(SHARD_ENTRY_SIZE) {
            if u64_at(entry, 0) != first {
                return None;
            }
            let stamp = ShardStamp {
                data_len: u64_at(entry, 8),
                index_len: u64_at(entry, 16),
                data_mtime_ns: u64_at(entry, 24),
                index_mtime_ns: u64_at(entry, 32),
            };
            if !stamp.index_len.is_multiple_of(entry_size) {
                return None;
            }
            firsts.push(first);
            first = first.checked_add(stamp.index_len / entry_size)?;
            stamps.push(stamp);
        }
        if first != records {
            return None;
        }
        firsts.push(records);

        let records = usize::try_from(records).ok()?;
        let starts_at = HEADER_SIZE + table_len;
        let buckets_at = starts_at.checked_add(records.checked_mul(8)?)?;
        let (entries_at, end) = if keyed {
            let buckets = (1usize << bucket_bits).checked_add(1)?;
            let entries_at = buckets_at.checked_add(buckets.checked_mul(8)?)?;
            let end = entries_at.checked_add(records.checked_mul(TABLE_ENTRY_SIZE)?)?;
            (entries_at, end)
        } else {
            (buckets_at, buckets_at)
        };
        if end != bytes.len() {
            return None;
        }
        Some(IndexFile {
            map,
            stamps,
            firsts,
            bucket_bits,
            starts_at,
            buckets_at,
            entries_at,
        })
    }

    /// Number of shards covered.
    pub(crate) fn shards(&self) -> u64 {
        self.stamps.len() as u64
    }

    /// Number of records covered.
    pub(crate) fn records(&self) -> u64 {
        self.firsts.last().copied().unwrap_or(0)
    }

    /// The recorded stamp of covered shard `id`.
    pub(crate) fn stamp(&self, id: u64) -> Option<ShardStamp> {
        self.stamps.get(usize::try_from(id).ok()?).copied()
    }

    /// First record of covered shard `id`.
    pub(crate) fn first(&self, id: u64) -> u64 {
        self.firsts[id as usize]
    }

    /// Where covered record `record` starts in its shard.
    pub(crate) fn start(&self, record: usize) -> u64 {
        u64_at(&self.map, self.starts_at + record * 8)
    }

    /// The records whose key hashes to `hash` (candidates: the caller compares keys).
    pub(crate) fn candidates(&self, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let records = self.records();
        let bucket = bucket_of(hash, self.bucket_bits);
        let low = u64_at(&self.map, self.buckets_at + bucket * 8);
        let high = u64_at(&self.map, self.buckets_at + bucket * 8 + 8).min(records);
        (low..high.max(low)).filter_map(move |i| {
            let at = self.entries_at + i as usize * TABLE_ENTRY_SIZE;
            let record = u64_at(&self.map, at + 8);
            (u64_at(&self.map, at) == hash && record < records).then_some(record)
        })
    }

    /// The key table's `(hash, record)` entries, in their stored order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let table = self
            .map
            .get(self.entries_at..self.entries_at + self.records() as usize * TABLE_ENTRY_SIZE)
            .unwrap_or(&[]);
        table
            .chunks_exact(TABLE_ENTRY_SIZE)
            .map(|e| (u64_at(e, 0), u64_at(e, 8)))
    }

    /// Checks that covered shard `id`'s recorded starts are the ones its sizes
    /// imply: its first record starts at byte 0, each next one where the one before
    /// ends, and the last ends at `data_len`. `sizes` is the shard's `.idx` (of a
    /// keyed dataset or not: [`record_sizes`]). A file that passes locates every
    /// record of the shard exactly where a reader without it would; the
    /// whole-file checksum cannot promise that, since a hostile writer can
    /// recompute it.
    ///
    /// Every reader process checks each shard it reads once, so a DataLoader
    /// worker started for an epoch checks every shard its batches reach: the
    /// check is one pass over the starts and sizes that the compiler vectorises
    /// (each start minus the one before it against the size between them), and
    /// only a shard that fails it is walked record by record to name the
    /// first record out of place.
    pub(crate) fn check_starts(
        &self,
        id: u64,
        sizes: &[u8],
        keyed: bool,
        data_len: u64,
    ) -> Result<(), String> {
        let (first, next) = (self.first(id), self.first(id + 1));
        let records = (next - first) as usize;
        let entry = index_fields(keyed) * INDEX_FIELD_SIZE;
        let at = self.starts_at + first as usize * 8;
        let starts = self.map.get(at..at + records * 8);
        let sizes_of_records = sizes.get(..records * entry);
        if let (Some(starts), Some(sizes)) = (starts, sizes_of_records) {
            if starts_agree(starts, sizes, keyed, data_len) {
                return Ok(());
            }
        }
        self.first_disagreement(id, sizes, keyed, data_len)
    }

    /// [`IndexFile::check_starts`] record by record: the error naming the first
    /// record out of place (or the end), or `Ok` if there is none.
    fn first_disagreement(
        &self,
        id: u64,
        sizes: &[u8],
        keyed: bool,
        data_len: u64,
    ) -> Result<(), String> {
        let (first, next) = (self.first(id), self.first(id + 1));
        let mut expected = 0u64;
        for record in first..next {
            let start = self.start(record as usize);
            if start != expected {
                return Err(format!(
                    "it puts record {} of shard {id} (dataset index {record}) at byte {start}, but the shard's sizes put it at byte {expected}",
                    record - first
                ));
            }
            // Cannot overflow: at most 2^32 records of at most 2^33 bytes.
            let (key, value) = record_sizes(sizes, keyed, (record - first) as usize);
            expected += key + value;
        }
        if expected != data_len {
            return Err(format!(
                "its records of shard {id} end at byte {expected}, but the data file has {data_len} bytes"
            ));
        }
        Ok(())
    }

    /// Checks the key table against the keys: `key_hash(record)` is the hash of
    /// record `record`'s key (`None` if it cannot be read). The entries must be
    /// sorted and unique, each in its bucket, and hold every covered record once
    /// with its key's hash: then a lookup finds every key, as without the file.
    pub(crate) fn check_table(
        &self,
        mut key_hash: impl FnMut(u64) -> Option<u64>,
    ) -> Result<(), String> {
        let records = self.records();
        let bucket_start = |bucket: usize| u64_at(&self.map, self.buckets_at + bucket * 8);
        let buckets = 1usize << self.bucket_bits;
        if bucket_start(0) != 0 || bucket_start(buckets) != records {
            return Err(format!(
                "its buckets span entries {}..{}, not the {records} records",
                bucket_start(0),
                bucket_start(buckets)
            ));
        }
        let mut bucket = 0usize;
        let mut previous: Option<(u64, u64)> = None;
        for (position, (hash, record)) in self.entries().enumerate() {
            let position = position as u64;
            if previous.is_some_and(|p| p >= (hash, record)) {
                return Err(format!(
                    "key table entry {position} (record {record}) is out of order or repeated"
                ));
            }
            previous = Some((hash, record));
            while bucket < buckets && bucket_start(bucket + 1) <= position {
                bucket += 1;
            }
            if bucket_of(hash, self.bucket_bits) != bucket || bucket_start(bucket) > position {
                return Err(format!(
                    "key table entry {position} (record {record}) is not in its hash's bucket"
                ));
            }
            if record >= records {
                return Err(format!(
                    "key table entry {position} names record {record}, past the {records} it covers"
                ));
            }
            if key_hash(record) != Some(hash) {
                return Err(format!(
                    "key table entry {position} gives record {record} a hash its key does not have"
                ));
            }
        }
        // Sorted, unique pairs whose hash is their record's: each record appears at
        // most once, and with `records` entries (the parse checked the length),
        // exactly once.
        Ok(())
    }

    /// Writes an index file for `dir` atomically through `storage`: a temporary
    /// file, synced, then renamed over the old one. `firsts` has one entry per
    /// shard plus the record count; `starts` gives each record's start, and
    /// `entries` the `(hash, record)` pairs sorted, one per record, when keyed.
    /// Both are streams read more than once (the checksum, which sits in the
    /// header, is computed in a first pass; the bucket starts, before the
    /// entries, are counted off the sorted entries as they go by), so nothing
    /// proportional to the record count is held. The directory is not synced:
    /// the file is a cache, and a rename lost to a power failure only means it is
    /// rebuilt.
    pub(crate) fn write(
        storage: &dyn Storage,
        dir: &Path,
        keyed: bool,
        stamps: &[ShardStamp],
        firsts: &[u64],
        starts: Each<'_, u64>,
        entries: Each<'_, (u64, u64)>,
    ) -> io::Result<()> {
        let records = firsts.last().copied().unwrap_or(0);
        let bucket_bits = if keyed { bucket_bits_for(records) } else { 0 };
        let mut header = [0u8; HEADER_SIZE];
        header[..8].copy_from_slice(&MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&u32::from(keyed).to_le_bytes());
        header[16..24].copy_from_slice(&(stamps.len() as u64).to_le_bytes());
        header[24..32].copy_from_slice(&records.to_le_bytes());
        header[32..40].copy_from_slice(&u64::from(bucket_bits).to_le_bytes());
        let body = |out: &mut dyn Write, header: &[u8]| -> io::Result<()> {
            out.write_all(header)?;
            for (stamp, first) in stamps.iter().zip(firsts) {
                for field in [
                    *first,
                    stamp.data_len,
                    stamp.index_len,
                    stamp.data_mtime_ns,
                    stamp.index_mtime_ns,
                ] {
                    out.write_all(&field.to_le_bytes())?;
                }
            }
            let mut written = 0u64;
            starts(&mut |start| {
                written += 1;
                out.write_all(&start.to_le_bytes())
            })?;
            if written != records {
                return Err(mismatch("record starts", written, records));
            }
            if keyed {
                write_buckets(out, bucket_bits, records, entries)?;
                let mut previous: Option<(u64, u64)> = None;
                entries(&mut |(hash, record)| {
                    if previous.is_some_and(|p| p >= (hash, record)) {
                        return Err(io::Error::other(format!(
                            "the key table is not sorted at record {record}"
                        )));
                    }
                    previous = Some((hash, record));
                    out.write_all(&hash.to_le_bytes())?;
                    out.write_all(&record.to_le_bytes())
                })?;
            }
            Ok(())
        };
        // First pass: the checksum, with its own field as zero.
        let mut hashing = HashingWriter {
            inner: io::sink(),
            hasher: Xxh3::new(),
        };
        body(&mut hashing, &header)?;
        let sum = hashing.hasher.digest();
        header[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());

        let temporary = dir.join(format!(
            "{INDEX_FILE_TMP_PREFIX}{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        let result = (|| {
            let file = storage.create(&temporary)?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            body(&mut out, &header)?;
            let mut file = out.into_inner().map_err(|e| e.into_error())?;
            file.sync()?;
            drop(file);
            storage.rename(&temporary, &Self::path(dir))
        })();
        if result.is_err() {
            let _ = storage.remove(&temporary);
        }
        result
    }
}

/// A stream of `T`s read more than once: each call hands every item, in the
/// same order, to its argument, and stops at the argument's first error.
pub(crate) type Each<'a, T> = &'a dyn Fn(&mut dyn FnMut(T) -> io::Result<()>) -> io::Result<()>;

fn mismatch(what: &str, got: u64, records: u64) -> io::Error {
    io::Error::other(format!("{got} {what} for {records} records"))
}

/// The bucket starts of the sorted `entries`: for each bucket `b` of `2^bits`
/// (and one past the last), the number of entries in the buckets before it.
fn write_buckets(
    out: &mut dyn Write,
    bits: u32,
    records: u64,
    entries: Each<'_, (u64, u64)>,
) -> io::Result<()> {
    let buckets = 1usize << bits;
    let mut next = 0usize;
    let mut position = 0u64;
    entries(&mut |(hash, _)| {
        let bucket = bucket_of(hash, bits);
        while next <= bucket {
            out.write_all(&position.to_le_bytes())?;
            next += 1;
        }
        position += 1;
        Ok(())
    })?;
    if position != records {
        return Err(mismatch("key table entries", position, records));
    }
    while next <= buckets {
        out.write_all(&position.to_le_bytes())?;
        next += 1;
    }
    Ok(())
}

/// Writes through to `inner`, hashing everything written, with the checksum
/// field's bytes (still zero when written) hashed as zero.
struct HashingWriter<W> {
    inner: W,
    hasher: Xxh3,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Whether the file's checksum field holds the xxh3 of its whole content, with
/// that field read as zero. Read in chunks rather than mapped, so checking does
/// not leave the file resident in this process.
fn checksum_matches(file: &mut File) -> io::Result<bool> {
    let mut hasher = Xxh3::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut position = 0usize;
    let mut stored = None;
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &mut buffer[..n];
        // Zero the checksum field's bytes, wherever the chunk boundaries fall.
        let field = CHECKSUM_AT..CHECKSUM_AT + 8;
        if position < field.end && position + n > field.start {
            let from = field.start.max(position);
            let to = field.end.min(position + n);
            let saved = stored.get_or_insert([0u8; 8]);
            for at in from..to {
                saved[at - CHECKSUM_AT] = chunk[at - position];
                chunk[at - position] = 0;
            }
        }
        hasher.update(chunk);
        position += n;
    }
    Ok(position >= HEADER_SIZE && stored.map(u64::from_le_bytes) == Some(hasher.digest()))
}

pub(crate) fn bucket_bits_for(records: u64) -> u32 {
    let buckets = (records / ENTRIES_PER_BUCKET).max(1);
    (u64::BITS - (buckets - 1).leading_zeros()).min(MAX_BUCKET_BITS)
}

pub(crate) fn bucket_of(hash: u64, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (hash >> (64 - bits)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::FileSystem;
    use std::fs;

    /// What [`starts_agree`] must answer: the walk adding the sizes up.
    fn walk_agrees(starts: &[u64], lens: &[(u64, u64)], data_len: u64) -> bool {
        let mut expected = 0u64;
        for (&start, &(key, value)) in starts.iter().zip(lens) {
            if start != expected {
                return false;
            }
            expected += key + value;
        }
        expected == data_len
    }

    #[test]
    fn the_vectorised_starts_check_answers_as_the_walk_does() {
        // Random shards (keyed or not, 0-40 records, sizes up to 2^32 - 1),
        // their true starts, then one kind of damage or none: a start moved
        // by a small or a wrapping amount, two starts swapped, a size changed,
        // the data length off by one.
        let noise = crate::test_bytes::noise(2000 * 64, 0x5eed_57a2);
        let mut agreed = 0;
        for (case, draw) in noise.chunks_exact(64).enumerate() {
            let keyed = draw[0] % 2 == 0;
            let records = usize::from(draw[1] % 41);
            let word = |i: usize| {
                let at = 2 + (i * 4) % 56;
                u64::from(u32::from_le_bytes(draw[at..at + 4].try_into().unwrap()))
            };
            let mut lens: Vec<(u64, u64)> = (0..records)
                .map(|i| match draw[2 + i % 60] % 4 {
                    0 => (0, 0),
                    1 => (if keyed { word(i) } else { 0 }, u64::from(u32::MAX)),
                    _ => (if keyed { word(i) % 50 } else { 0 }, word(i + 7) % 5000),
                })
                .collect();
            let mut starts = Vec::with_capacity(records);
            let mut at = 0u64;
            for &(key, value) in &lens {
                starts.push(at);
                at += key + value;
            }
            let mut data_len = at;
            let pick = usize::from(draw[60]) % records.max(1);
            match (draw[61] % 6, records) {
                (_, 0) | (0, _) => {}
                (1, _) => starts[pick] = starts[pick].wrapping_add(1),
                (2, _) => starts[pick] = starts[pick].wrapping_sub(u64::MAX / 2),
                (3, _) => starts.swap(pick, (pick + 1) % records),
                (4, _) => lens[pick].1 ^= 1 << (draw[62] % 32),
                _ => data_len += 1,
            }
            let start_bytes: Vec<u8> = starts.iter().flat_map(|s| s.to_le_bytes()).collect();
            let size_bytes: Vec<u8> = lens
                .iter()
                .flat_map(|&(key, value)| {
                    let key = (key as u32).to_le_bytes();
                    let value = (value as u32).to_le_bytes();
                    match keyed {
                        true => [key, value].concat(),
                        false => value.to_vec(),
                    }
                })
                .collect();
            let want = walk_agrees(&starts, &lens, data_len);
            agreed += usize::from(want);
            assert_eq!(
                starts_agree(&start_bytes, &size_bytes, keyed, data_len),
                want,
                "case {case}: keyed {keyed}, starts {starts:?}, lens {lens:?}, data length {data_len}"
            );
        }
        // Both answers are exercised.
        assert!(agreed > 200 && agreed < 1800, "{agreed} of 2000 agreed");
    }

    #[test]
    fn bucket_bits_grow_with_the_record_count() {
        assert_eq!(bucket_bits_for(0), 0);
        assert_eq!(bucket_bits_for(4), 0);
        assert_eq!(bucket_bits_for(8), 1);
        assert_eq!(bucket_bits_for(10_000_000), 22);
        assert_eq!(bucket_of(u64::MAX, 22), (1 << 22) - 1);
        assert_eq!(bucket_of(u64::MAX, 0), 0);
    }

    fn stamp(index_len: u64) -> ShardStamp {
        ShardStamp {
            data_len: 100,
            index_len,
            data_mtime_ns: 7,
            index_mtime_ns: 8,
        }
    }

    #[test]
    fn written_files_read_back_and_find_every_record() {
        let dir = tempfile::tempdir().unwrap();
        let records = 1000u64;
        let mut entries: Vec<(u64, u64)> = (0..records)
            .map(|r| (hash_key(&r.to_le_bytes()), r))
            .collect();
        entries.sort_unstable();
        let stamps = [stamp(8 * 600), stamp(8 * 400)];
        IndexFile::write(
            &FileSystem,
            dir.path(),
            true,
            &stamps,
            &[0, 600, 1000],
            &|f| (0..records).try_for_each(|r| f(r * 3)),
            &|f| entries.iter().try_for_each(|&e| f(e)),
        )
        .unwrap();
        let file = IndexFile::open(dir.path(), true, 2).unwrap();
        assert_eq!((file.shards(), file.records()), (2, records));
        assert_eq!(file.stamp(1), Some(stamps[1]));
        assert_eq!(file.first(1), 600);
        assert_eq!(file.start(999), 2997);
        for r in 0..records {
            let found: Vec<u64> = file.candidates(hash_key(&r.to_le_bytes())).collect();
            assert_eq!(found, [r]);
        }
        assert_eq!(file.candidates(hash_key(b"absent")).count(), 0);
        assert_eq!(file.entries().collect::<Vec<_>>(), entries);

        // The wrong keying, fewer shards than covered, or any flipped byte make
        // it unusable.
        assert!(IndexFile::open(dir.path(), false, 2).is_none());
        assert!(IndexFile::open(dir.path(), true, 1).is_none());
        let path = IndexFile::path(dir.path());
        let good = fs::read(&path).unwrap();
        for at in (0..good.len()).step_by(31) {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            fs::write(&path, &bad).unwrap();
            assert!(IndexFile::open(dir.path(), true, 2).is_none(), "byte {at}");
        }
        fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(IndexFile::open(dir.path(), true, 2).is_none());
    }

    #[test]
    fn a_corrupt_key_table_yields_no_out_of_range_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut entries: Vec<(u64, u64)> = (0..64u64).map(|r| (hash_key(&[r as u8]), r)).collect();
        entries.sort_unstable();
        IndexFile::write(
            &FileSystem,
            dir.path(),
            true,
            &[stamp(8 * 64)],
            &[0, 64],
            &|f| (0..64).try_for_each(&mut *f),
            &|f| entries.iter().try_for_each(|&e| f(e)),
        )
        .unwrap();
        let path = IndexFile::path(dir.path());
        let mut bytes = fs::read(&path).unwrap();
        let body = HEADER_SIZE + SHARD_ENTRY_SIZE;
        for b in &mut bytes[body..] {
            *b = 0xff;
        }
        fs::write(&path, &bytes).unwrap();
        // A hostile file can carry a matching checksum: parse past it.
        assert!(IndexFile::open(dir.path(), true, 1).is_none());
        let raw = File::open(&path).unwrap();
        let map = Mapping::map(&raw, bytes.len() as u64).unwrap();
        let file = IndexFile::parse(map, true, 1).unwrap();
        for r in 0..64u64 {
            assert!(file.candidates(hash_key(&[r as u8])).all(|c| c < 64));
        }
        assert!(file.candidates(u64::MAX).all(|c| c < 64));
    }
}
