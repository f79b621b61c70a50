//! What identifies a shard's content cheaply, so files written beside a shard
//! (sidecars, commit files) can be matched with it: a sidecar left by a writer that
//! crashed before its commit, whose shard number another writer (the reference,
//! which knows nothing of sidecars) then reused, must not describe the new shard.

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// Bytes hashed at each end of a data file (FORMAT.md, "Fields").
pub const EDGE_BYTES: usize = 4096;

/// The fingerprint of one shard: its record count, the length of its data file,
/// the xxh3-64 of its whole `.idx` file, and the xxh3-64 of its data file's edges:
/// the whole file when it holds at most `2 * EDGE_BYTES` bytes, else its first
/// and last [`EDGE_BYTES`] bytes, concatenated.
///
/// Two shards with equal fingerprints have the same record count and the same size
/// of every key and value, and agree on their first and last 4 KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ShardFingerprint {
    /// Records in the shard.
    pub records: u64,
    /// Length of the data file (`.bin`).
    pub data_len: u64,
    /// xxh3-64 of the index file (`.idx`).
    pub index_xxh3: u64,
    /// xxh3-64 of the data file's edges.
    pub edges_xxh3: u64,
}

impl ShardFingerprint {
    /// The fingerprint of a shard whose files hold `data` and `index`, with
    /// `records` records.
    pub fn of(records: u64, data: &[u8], index: &[u8]) -> ShardFingerprint {
        ShardFingerprint {
            records,
            data_len: data.len() as u64,
            index_xxh3: xxh3_64(index),
            edges_xxh3: edges_hash(data),
        }
    }
}

impl ShardFingerprint {
    /// The fingerprint of a shard of `records` records whose `.idx` file holds
    /// `index` and whose data file is `data_len` bytes, given only that file's
    /// edges (see [`edge_ranges`]): what a reader that has not loaded the data
    /// file computes.
    pub fn of_edges(records: u64, data_len: u64, edges: &[&[u8]], index: &[u8]) -> Self {
        let mut hasher = Xxh3::new();
        for edge in edges {
            hasher.update(edge);
        }
        ShardFingerprint {
            records,
            data_len,
            index_xxh3: xxh3_64(index),
            edges_xxh3: hasher.digest(),
        }
    }
}

/// The byte ranges of a `data_len`-byte data file whose bytes, concatenated, the
/// fingerprint hashes: the whole file, or its first and last [`EDGE_BYTES`].
pub fn edge_ranges(data_len: u64) -> Vec<std::ops::Range<u64>> {
    let edge = EDGE_BYTES as u64;
    match data_len <= 2 * edge {
        true => std::iter::once(0..data_len).collect(),
        false => vec![0..edge, data_len - edge..data_len],
    }
}

fn edges_hash(data: &[u8]) -> u64 {
    if data.len() <= 2 * EDGE_BYTES {
        return xxh3_64(data);
    }
    let mut hasher = Xxh3::new();
    hasher.update(&data[..EDGE_BYTES]);
    hasher.update(&data[data.len() - EDGE_BYTES..]);
    hasher.digest()
}

/// Computes a shard's fingerprint from the bytes written to it, in order, without
/// keeping them.
#[derive(Clone)]
pub(crate) struct FingerprintBuilder {
    records: u64,
    data_len: u64,
    index: Xxh3,
    /// The first `2 * EDGE_BYTES` bytes of data.
    head: Vec<u8>,
    /// The last `EDGE_BYTES` bytes of data, as a ring starting at `tail_at`
    /// once full.
    tail: Box<[u8; EDGE_BYTES]>,
    tail_at: usize,
}

impl Default for FingerprintBuilder {
    fn default() -> Self {
        FingerprintBuilder {
            records: 0,
            data_len: 0,
            index: Xxh3::new(),
            head: Vec::new(),
            tail: Box::new([0; EDGE_BYTES]),
            tail_at: 0,
        }
    }
}

impl FingerprintBuilder {
    /// Data bytes appended to the data file.
    pub(crate) fn data(&mut self, mut bytes: &[u8]) {
        self.data_len += bytes.len() as u64;
        let room = (2 * EDGE_BYTES).saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        if bytes.len() > EDGE_BYTES {
            bytes = &bytes[bytes.len() - EDGE_BYTES..];
        }
        // Copy into the ring, wrapping once at most.
        let first = bytes.len().min(EDGE_BYTES - self.tail_at);
        self.tail[self.tail_at..self.tail_at + first].copy_from_slice(&bytes[..first]);
        self.tail[..bytes.len() - first].copy_from_slice(&bytes[first..]);
        self.tail_at = (self.tail_at + bytes.len()) % EDGE_BYTES;
    }

    /// Bytes appended to the index file, for `records` more records.
    pub(crate) fn index(&mut self, bytes: &[u8], records: u64) {
        self.index.update(bytes);
        self.records += records;
    }

    pub(crate) fn finish(&self) -> ShardFingerprint {
        let edges_xxh3 = if self.data_len <= 2 * EDGE_BYTES as u64 {
            xxh3_64(&self.head)
        } else {
            let mut hasher = Xxh3::new();
            hasher.update(&self.head[..EDGE_BYTES]);
            hasher.update(&self.tail[self.tail_at..]);
            hasher.update(&self.tail[..self.tail_at]);
            hasher.digest()
        };
        ShardFingerprint {
            records: self.records,
            data_len: self.data_len,
            index_xxh3: self.index.digest(),
            edges_xxh3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprint from the edges alone agrees with the definition at every
    /// length around the boundaries.
    #[test]
    fn edges_alone_match_definition() {
        let data: Vec<u8> = (0..3 * EDGE_BYTES as u32 + 17)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let index = b"sizes";
        for len in [
            0,
            1,
            EDGE_BYTES,
            2 * EDGE_BYTES,
            2 * EDGE_BYTES + 1,
            data.len(),
        ] {
            let data = &data[..len];
            let edges: Vec<&[u8]> = edge_ranges(len as u64)
                .into_iter()
                .map(|r| &data[r.start as usize..r.end as usize])
                .collect();
            assert_eq!(
                ShardFingerprint::of_edges(3, len as u64, &edges, index),
                ShardFingerprint::of(3, data, index),
                "length {len}"
            );
        }
    }

    /// The streaming builder agrees with the definition for every data length
    /// around the edges' boundaries and every way of cutting the writes.
    #[test]
    fn builder_matches_definition() {
        let data: Vec<u8> = (0..3 * EDGE_BYTES as u32 + 17)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let index = b"0123456789abcdef";
        for len in [
            0,
            1,
            100,
            EDGE_BYTES,
            2 * EDGE_BYTES - 1,
            2 * EDGE_BYTES,
            2 * EDGE_BYTES + 1,
            data.len(),
        ] {
            for chunk in [1, 7, 100, EDGE_BYTES - 1, EDGE_BYTES + 3, 3 * EDGE_BYTES] {
                let mut builder = FingerprintBuilder::default();
                for piece in data[..len].chunks(chunk) {
                    builder.data(piece);
                }
                builder.index(&index[..8], 1);
                builder.index(&index[8..], 1);
                assert_eq!(
                    builder.finish(),
                    ShardFingerprint::of(2, &data[..len], index),
                    "len {len}, chunk {chunk}"
                );
            }
        }
    }

    #[test]
    fn edges_matter_and_middle_does_not() {
        let mut data = vec![0u8; 3 * EDGE_BYTES];
        let base = ShardFingerprint::of(1, &data, b"");
        data[EDGE_BYTES + 10] = 1;
        assert_eq!(ShardFingerprint::of(1, &data, b""), base);
        let last = data.len() - 1;
        data[last] = 1;
        assert_ne!(ShardFingerprint::of(1, &data, b""), base);
    }
}
