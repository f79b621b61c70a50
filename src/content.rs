//! Content hashes: the XXH3-128 of every value (uncompressed), kept beside each
//! shard in the sidecar `NNNNNN.xxh128` (FORMAT.md section 7), 16 bytes per
//! record. They let an extend or a merge leave out a value equal to an earlier
//! record's ([`crate::Dedup::Content`]), and a reader check every value it
//! returns against what was written ([`crate::Dataset::set_verify_content`],
//! `bcd verify --content`).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use twox_hash::XxHash3_128;

use crate::error::{Error, Result};
use crate::format::{parse_sidecar_name, CONTENT_HASH_SIZE, CONTENT_HASH_SUFFIX};
use crate::key_set::{KeySet, SpillDir};
use crate::{Dataset, ShardData};

mod build;
mod verify;

pub use build::ContentIndexSummary;

/// A content hash, in the sidecar's byte order.
pub(crate) type ContentHash = [u8; CONTENT_HASH_SIZE];

/// The environment variable of the test hook that makes every value's content
/// hash the same (see [`force_content_collisions`]).
pub const FORCE_COLLISIONS_ENV: &str = "BCD_TEST_CONTENT_HASH_COLLISIONS";

/// 0: not decided yet (read the environment), 1: off, 2: on.
static FORCED: AtomicU8 = AtomicU8::new(0);

/// A test hook: with `true`, every value gets the same content hash, so that
/// every pair of values collides and only a comparison of their bytes tells
/// them apart (a duplicate is never decided by the hash alone). Processes take
/// it from the environment variable [`FORCE_COLLISIONS_ENV`] set to `1`. Content
/// hashes written meanwhile are that constant, so a dataset written so fails
/// `verify --content` once the hook is off.
#[doc(hidden)]
pub fn force_content_collisions(on: bool) {
    FORCED.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

fn collisions_forced() -> bool {
    match FORCED.load(Ordering::Relaxed) {
        0 => {
            let on = std::env::var_os(FORCE_COLLISIONS_ENV).is_some_and(|v| v == "1");
            force_content_collisions(on);
            on
        }
        state => state == 2,
    }
}

/// The content hash of `value` (its uncompressed bytes).
pub(crate) fn content_hash(value: &[u8]) -> ContentHash {
    if collisions_forced() {
        return [0xC0; CONTENT_HASH_SIZE];
    }
    XxHash3_128::oneshot(value).to_be_bytes()
}

/// The content hashes of `values`, on up to `threads` threads when there are
/// enough bytes to share.
pub(crate) fn content_hashes(values: &[&[u8]], threads: usize) -> Vec<ContentHash> {
    const PER_THREAD: usize = 4 << 20;
    let bytes: usize = values.iter().map(|v| v.len()).sum();
    let threads = threads
        .clamp(1, (bytes / PER_THREAD).max(1))
        .min(values.len().max(1));
    if threads == 1 {
        return values.iter().map(|v| content_hash(v)).collect();
    }
    let mut hashes = vec![[0u8; CONTENT_HASH_SIZE]; values.len()];
    let chunk = values.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for (values, hashes) in values.chunks(chunk).zip(hashes.chunks_mut(chunk)) {
            scope.spawn(move || {
                for (value, hash) in values.iter().zip(hashes) {
                    *hash = content_hash(value);
                }
            });
        }
    });
    hashes
}

/// The 64 bits of a content hash a key set holds: its low half.
pub(crate) fn fingerprint(hash: &ContentHash) -> u64 {
    let mut low = [0u8; 8];
    low.copy_from_slice(&hash[8..]);
    u64::from_be_bytes(low)
}

/// The content hash of record `local` in a shard's content hashes `hashes`
/// (whose length was checked).
pub(crate) fn hash_at(hashes: &[u8], local: u64) -> ContentHash {
    let at = local as usize * CONTENT_HASH_SIZE;
    let mut hash = [0u8; CONTENT_HASH_SIZE];
    hash.copy_from_slice(&hashes[at..at + CONTENT_HASH_SIZE]);
    hash
}

/// Shard `shard`'s content hashes: its sidecar's, or computed from its values
/// when it has none.
pub(crate) fn shard_content_hashes(dataset: &Dataset, shard: u64) -> Result<Vec<u8>> {
    if dataset.map_sidecar(shard, CONTENT_HASH_SUFFIX)?.is_some() {
        return Ok(dataset.content_hashes_of(shard)?.to_vec());
    }
    let first = dataset.shard_first_record(shard);
    let records = dataset.shard_records(shard);
    let mut hashes = Vec::with_capacity(records as usize * CONTENT_HASH_SIZE);
    let mut buffer = Vec::new();
    for record in first..first + records {
        hashes.extend_from_slice(&content_hash(
            dataset.read_value(record as usize, &mut buffer)?,
        ));
    }
    Ok(hashes)
}

/// The hashes of the records `kept` keeps, in order.
pub(crate) fn kept_hashes(hashes: &[u8], kept: &[bool]) -> Vec<u8> {
    hashes
        .chunks_exact(CONTENT_HASH_SIZE)
        .zip(kept)
        .filter(|(_, &k)| k)
        .flat_map(|(hash, _)| hash.iter().copied())
        .collect()
}

impl Dataset {
    /// Whether any committed shard has content hashes beside it: then every
    /// extend writes them for its shards too, so that they keep covering every
    /// record this project writes.
    pub fn keeps_content_hashes(&self) -> Result<bool> {
        let shards = self.shards();
        let entries = std::fs::read_dir(&self.dir).map_err(|e| Error::io("list", &self.dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list", &self.dir, e))?;
            let name = entry.file_name();
            let found = name
                .to_str()
                .and_then(parse_sidecar_name)
                .is_some_and(|(id, suffix)| suffix == CONTENT_HASH_SUFFIX && id < shards);
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The shard holding record `record` (a dataset index below `len()`).
    pub(crate) fn shard_of_record(&self, record: u64) -> u64 {
        self.index
            .shards()
            .partition_point(|s| s.first <= record)
            .saturating_sub(1) as u64
    }

    /// Shard `shard`'s content hashes, mapped, checked to hold one hash per
    /// record: [`Error::NoContentHashes`] when it has none.
    pub fn content_hashes_of(&self, shard: u64) -> Result<ShardData> {
        let path = self.sidecar_path(shard, CONTENT_HASH_SUFFIX);
        let Some(hashes) = self.map_sidecar(shard, CONTENT_HASH_SUFFIX)? else {
            return Err(Error::NoContentHashes {
                path,
                shard,
                dataset: self.dir.clone(),
            });
        };
        let records = self.shard_records(shard);
        let expected = records * CONTENT_HASH_SIZE as u64;
        if hashes.len() as u64 != expected {
            return Err(Error::CorruptContentHashes {
                path,
                reason: format!(
                    "{} bytes for the {records} records of shard {shard} ({expected} expected)",
                    hashes.len()
                ),
            });
        }
        Ok(hashes)
    }

    /// A key set holding the content hash fingerprint of every committed record,
    /// by dataset index (what an extend dropping duplicate values starts from).
    pub(crate) fn committed_value_set(&self, spill: Arc<SpillDir>, budget: u64) -> Result<KeySet> {
        let mut set = KeySet::new(spill, "values", budget);
        for shard in 0..self.shards() {
            let hashes = self.content_hashes_of(shard)?;
            let first = self.shard_first_record(shard);
            for (local, hash) in hashes.chunks_exact(CONTENT_HASH_SIZE).enumerate() {
                let mut hash_bytes = [0u8; CONTENT_HASH_SIZE];
                hash_bytes.copy_from_slice(hash);
                set.insert(fingerprint(&hash_bytes), first + local as u64)?;
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_xxh3_128_in_canonical_byte_order() {
        // xxhash.xxh3_128_hexdigest(b"abc") in Python's xxhash.
        let expected = "06b05ab6733a618578af5f94892f3950";
        let hex: String = content_hash(b"abc")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, expected);
        assert_eq!(fingerprint(&content_hash(b"abc")), 0x78af_5f94_892f_3950);
        let values: Vec<Vec<u8>> = (0..300u32).map(|i| vec![i as u8; 100_000]).collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let parallel = content_hashes(&refs, 4);
        let serial: Vec<ContentHash> = refs.iter().map(|v| content_hash(v)).collect();
        assert_eq!(parallel, serial);
    }

    #[test]
    fn the_hash_equals_xxhash_rusts_xxh3_128_at_every_length_class() {
        // twox-hash (AVX2, chosen at run time) against xxhash-rust's build-time
        // loop: every length up to 2 KiB (the short-input paths and the first
        // stripes), then around block edges and large inputs.
        let bytes = crate::test_bytes::noise((1 << 20) + 1000, 0x9E37_79B9_7F4A_7C15);
        let long = [4095, 4096, 4097, 65_535, 65_536, 100_003, 1 << 20];
        for len in (0..=2048).chain(long) {
            for start in [0, 3] {
                let value = &bytes[start..start + len];
                assert_eq!(
                    content_hash(value),
                    xxhash_rust::xxh3::xxh3_128(value).to_be_bytes(),
                    "length {len} at offset {start}"
                );
            }
        }
    }
}
