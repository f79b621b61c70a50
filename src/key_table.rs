//! The in-memory key table: `(hash, record)` pairs sorted by hash, with a
//! directory of where each bucket (the hash's top bits) starts. It is the layout of
//! the index file's table, so a lookup costs one or two cache misses either way,
//! and it is built by sorting, which on millions of keys is several times faster
//! than inserting each into a hash table at a random place.

use crate::index_file::{bucket_bits_for, bucket_of};

#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    entries: Vec<(u64, u64)>,
    /// `buckets[b]..buckets[b + 1]` are the entries of bucket `b`; empty when
    /// there are no entries.
    buckets: Vec<usize>,
    bits: u32,
}

impl KeyTable {
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, sorted by `(hash, record)`.
    pub(crate) fn entries(&self) -> &[(u64, u64)] {
        &self.entries
    }

    /// The records whose key hashes to `hash`.
    pub(crate) fn candidates(&self, hash: u64) -> impl Iterator<Item = u64> + '_ {
        let range = match self.entries.is_empty() {
            true => 0..0,
            false => {
                let bucket = bucket_of(hash, self.bits);
                self.buckets[bucket]..self.buckets[bucket + 1]
            }
        };
        self.entries[range]
            .iter()
            .filter(move |&&(h, _)| h == hash)
            .map(|&(_, record)| record)
    }

    /// Adds `run`, sorted.
    pub(crate) fn add_sorted(&mut self, run: Vec<(u64, u64)>) {
        if run.is_empty() {
            return;
        }
        if self.entries.is_empty() {
            self.entries = run;
        } else {
            let old = std::mem::take(&mut self.entries);
            let mut merged = Vec::with_capacity(old.len() + run.len());
            merge_sorted(old.into_iter(), run, &mut merged);
            self.entries = merged;
        }
        self.rebuild_buckets();
    }

    /// Drops the entries of records `len` and after.
    pub(crate) fn truncate_records(&mut self, len: u64) {
        let before = self.entries.len();
        self.entries.retain(|&(_, record)| record < len);
        if self.entries.len() != before {
            self.rebuild_buckets();
        }
    }

    fn rebuild_buckets(&mut self) {
        self.bits = bucket_bits_for(self.entries.len() as u64);
        self.buckets.clear();
        self.buckets.resize((1usize << self.bits) + 1, 0);
        for &(hash, _) in &self.entries {
            self.buckets[bucket_of(hash, self.bits) + 1] += 1;
        }
        for i in 1..self.buckets.len() {
            self.buckets[i] += self.buckets[i - 1];
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_file::hash_key;

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

    #[test]
    fn finds_every_record_after_runs_are_added_and_truncated() {
        let mut table = KeyTable::default();
        assert_eq!(table.candidates(hash_key(b"x")).count(), 0);
        let run = |records: std::ops::Range<u64>| {
            let mut run: Vec<(u64, u64)> =
                records.map(|r| (hash_key(&r.to_le_bytes()), r)).collect();
            run.sort_unstable();
            run
        };
        table.add_sorted(run(0..1000));
        table.add_sorted(run(1000..1300));
        for r in 0..1300u64 {
            assert_eq!(
                table
                    .candidates(hash_key(&r.to_le_bytes()))
                    .collect::<Vec<_>>(),
                [r]
            );
        }
        table.truncate_records(1100);
        assert_eq!(
            table.candidates(hash_key(&1200u64.to_le_bytes())).count(),
            0
        );
        assert_eq!(
            table
                .candidates(hash_key(&1099u64.to_le_bytes()))
                .collect::<Vec<_>>(),
            [1099]
        );
        assert!(table.entries().windows(2).all(|w| w[0] < w[1]));
    }
}
