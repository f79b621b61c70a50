//! The merge's content check ([`Dedup::Content`](crate::Dedup::Content)): each
//! part record the key check kept is looked up, by its content hash, among the
//! target's records and the kept records before it (earlier parts, then earlier
//! in its own part); a hash that matches is confirmed by the full hash, then the
//! bytes.

use super::placement::Part;
use crate::content::{content_hash, fingerprint, hash_at, shard_content_hashes, ContentHash};
use crate::dataset::Dataset;
use crate::error::Result;
use crate::format::CONTENT_HASH_SUFFIX;
use crate::key_set::SpillDir;
use crate::manifest::Compression;

/// A record of the merge: in the target (`None`) or a part, and its index there.
pub(super) type Place = (Option<usize>, u64);

/// The outcome of the content check.
pub(super) struct ValueCheck {
    /// Per part, its records left out for their value, sorted.
    pub(super) dropped: Vec<Vec<u64>>,
    /// Each of them (part, record) with the record it repeats, in merge order.
    pub(super) found: Vec<(usize, u64, Place)>,
}

impl Dataset {
    /// Checks the values of the parts' records not in `key_dropped` (per part,
    /// sorted) against the target's and each other's, in merge order.
    pub(super) fn check_values(
        &self,
        parts: &[Part],
        key_dropped: &[Vec<u64>],
    ) -> Result<ValueCheck> {
        let spill = SpillDir::new(&self.dir, self.storage.clone());
        let mut set = self.committed_value_set(spill, self.memory_limit())?;
        // One numbering for the set: the target's records, then each part's.
        let mut offsets = Vec::with_capacity(parts.len());
        let mut next = self.len() as u64;
        for part in parts {
            offsets.push(next);
            next += part.dataset.len() as u64;
        }
        let place_of = |number: u64| -> Place {
            match offsets.partition_point(|&o| o <= number) {
                0 => (None, number),
                at => (Some(at - 1), number - offsets[at - 1]),
            }
        };
        let mut check = ValueCheck {
            dropped: vec![Vec::new(); parts.len()],
            found: Vec::new(),
        };
        let mut candidates = Vec::new();
        for (p, part) in parts.iter().enumerate() {
            let dataset = &part.dataset;
            let mut key_dropped = key_dropped[p].iter().peekable();
            for shard in 0..dataset.shards() {
                let hashes = shard_content_hashes(dataset, shard)?;
                let first = dataset.shard_first_record(shard);
                for local in 0..dataset.shard_records(shard) {
                    let record = first + local;
                    if key_dropped.next_if_eq(&&record).is_some() {
                        continue;
                    }
                    let hash = hash_at(&hashes, local);
                    let fp = fingerprint(&hash);
                    candidates.clear();
                    set.candidates(fp, &mut candidates)?;
                    candidates.sort_unstable();
                    let mut repeats = None;
                    for &candidate in &candidates {
                        let place = place_of(candidate);
                        if self.merge_content_hash(parts, place)? == hash
                            && self.same_value(parts, place, (Some(p), record))?
                        {
                            repeats = Some(place);
                            break;
                        }
                    }
                    match repeats {
                        Some(of) => {
                            check.dropped[p].push(record);
                            check.found.push((p, record, of));
                        }
                        None => set.insert(fp, offsets[p] + record)?,
                    }
                }
            }
        }
        Ok(check)
    }

    /// The dataset a place is in.
    pub(super) fn dataset_of<'a>(&'a self, parts: &'a [Part], place: Place) -> &'a Dataset {
        match place.0 {
            None => self,
            Some(p) => &parts[p].dataset,
        }
    }

    /// The content hash of the record at `place`: from its shard's content
    /// hashes (a part shard without them: computed from the value).
    fn merge_content_hash(&self, parts: &[Part], place: Place) -> Result<ContentHash> {
        let dataset = self.dataset_of(parts, place);
        let shard = dataset.shard_of_record(place.1);
        let local = place.1 - dataset.shard_first_record(shard);
        if place.0.is_some() && dataset.map_sidecar(shard, CONTENT_HASH_SUFFIX)?.is_none() {
            return Ok(content_hash(&dataset.at(place.1 as usize)?));
        }
        Ok(hash_at(&dataset.content_hashes_of(shard)?, local))
    }

    /// Whether the records at `a` and `b` hold the same value (equal stored
    /// bytes, or equal once decompressed).
    fn same_value(&self, parts: &[Part], a: Place, b: Place) -> Result<bool> {
        let (first, second) = (self.dataset_of(parts, a), self.dataset_of(parts, b));
        let (a, b) = (a.1 as usize, b.1 as usize);
        if first.stored_at(a)? == second.stored_at(b)? {
            return Ok(true);
        }
        Ok(self.compression() == Compression::Lz4 && first.at(a)? == second.at(b)?)
    }
}
