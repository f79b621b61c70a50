//! The merge's key check: the parts' sorted key tables merged in hash order
//! against the target's, keys read only where two hashes meet.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::options::MergeOnDuplicate;
use super::placement::{Part, Plan, Planned};
use crate::dataset::Dataset;
use crate::error::{DisplayKey, Error, Result};
use crate::format::INDEX_FILE_NAME;

/// Where a record is: its dataset (`None` for the target) and its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    part: Option<usize>,
    record: u64,
}

/// The outcome of the key check.
pub(super) struct KeyCheck {
    /// Per part, its records dropped as duplicates, sorted.
    pub(super) dropped: Vec<Vec<u64>>,
}

impl Dataset {
    /// Checks every part's keys against the target's and the earlier parts', in
    /// hash order: the parts' sorted key tables are merged (a heap of one cursor
    /// per part), and keys are read only where hashes meet.
    pub(super) fn check_keys(&self, parts: &[Part], policy: MergeOnDuplicate) -> Result<KeyCheck> {
        let mut dropped = vec![Vec::new(); parts.len()];
        if !self.keyed() {
            return Ok(KeyCheck { dropped });
        }
        // One bit per part record: the key tables must list each exactly once.
        let mut seen: Vec<Vec<u64>> = Vec::with_capacity(parts.len());
        for part in parts {
            seen.push(vec![0; part.dataset.len().div_ceil(64)]);
        }
        let mut cursors: Vec<_> = parts
            .iter()
            .map(|p| p.dataset.index.key_entries())
            .collect();
        let mut heap = BinaryHeap::with_capacity(parts.len());
        for (part, cursor) in cursors.iter_mut().enumerate() {
            if let Some((hash, record)) = cursor.next() {
                heap.push(Reverse((hash, part, record)));
            }
        }
        let mut group: Vec<Place> = Vec::new();
        let mut reported: Option<(Place, Place)> = None;
        while let Some(Reverse((hash, part, record))) = heap.pop() {
            if let Some((next_hash, next_record)) = cursors[part].next() {
                heap.push(Reverse((next_hash, part, next_record)));
            }
            let listed = usize::try_from(record)
                .ok()
                .filter(|&r| r < parts[part].dataset.len())
                .filter(|&r| seen[part][r / 64] & (1 << (r % 64)) == 0);
            let Some(r) = listed else {
                return Err(bad_key_table(&parts[part].dataset));
            };
            seen[part][r / 64] |= 1 << (r % 64);
            group.push(Place {
                part: Some(part),
                record,
            });
            if heap.peek().is_some_and(|Reverse((h, _, _))| *h == hash) {
                continue;
            }
            for (second, first) in self.duplicates_in(hash, &group, parts)? {
                match policy {
                    // The one reported is the first in merge order, whatever the
                    // hashes' order.
                    MergeOnDuplicate::Error => {
                        if reported.is_none_or(|(s, _)| second < s) {
                            reported = Some((second, first));
                        }
                    }
                    MergeOnDuplicate::Skip => {
                        dropped[second.part.expect("a part")].push(second.record)
                    }
                }
            }
            group.clear();
        }
        if let Some((second, first)) = reported {
            return Err(self.duplicate_error(parts, first, second));
        }
        // A table that leaves a record out (a damaged index file) would let its
        // key through unchecked.
        for (part, seen) in seen.iter().enumerate() {
            let len = parts[part].dataset.len();
            let listed: usize = seen.iter().map(|w| w.count_ones() as usize).sum();
            if listed != len {
                return Err(bad_key_table(&parts[part].dataset));
            }
        }
        for d in &mut dropped {
            d.sort_unstable();
        }
        Ok(KeyCheck { dropped })
    }

    /// The duplicates among `group` (part records whose keys hash to `hash`, in
    /// merge order): each as (second copy, first copy).
    fn duplicates_in(
        &self,
        hash: u64,
        group: &[Place],
        parts: &[Part],
    ) -> Result<Vec<(Place, Place)>> {
        let in_target: Vec<u64> = self.index.candidates(hash).collect();
        if group.len() == 1 && in_target.is_empty() {
            return Ok(Vec::new());
        }
        let key_of = |place: Place| -> Result<&[u8]> {
            match place.part {
                None => self.key_at(place.record as usize),
                Some(p) => parts[p].dataset.key_at(place.record as usize),
            }
        };
        let mut found = Vec::new();
        for (j, &place) in group.iter().enumerate() {
            let key = key_of(place)?;
            let mut first = None;
            for &record in &in_target {
                let candidate = Place { part: None, record };
                if key_of(candidate)? == key {
                    first = Some(candidate);
                    break;
                }
            }
            if first.is_none() {
                for &earlier in &group[..j] {
                    if key_of(earlier)? == key {
                        first = Some(earlier);
                        break;
                    }
                }
            }
            if let Some(first) = first {
                found.push((place, first));
            }
        }
        Ok(found)
    }

    fn duplicate_error(&self, parts: &[Part], first: Place, second: Place) -> Error {
        let dataset = |place: Place| match place.part {
            None => self,
            Some(p) => &parts[p].dataset,
        };
        let locate = |place: Place| {
            let dataset = dataset(place);
            let shard = shard_of(dataset, place.record);
            (
                dataset.shard_data_path(shard),
                place.record - dataset.shard_first_record(shard),
            )
        };
        let key = dataset(second)
            .key_at(second.record as usize)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let (first, first_record) = locate(first);
        let (second, second_record) = locate(second);
        Error::DuplicateKeyInMerge {
            key: DisplayKey(key),
            first,
            first_record,
            second,
            second_record,
        }
    }
}

/// Where each part record goes in the target: its new dataset index, or none
/// (dropped).
pub(super) struct Renumbering {
    /// Per part, per shard: where its records go; `None` for a shard left out.
    shards: Vec<Vec<Option<ShardNumbers>>>,
}

/// Where the records of one placed part shard go.
struct ShardNumbers {
    /// The dataset index its first kept record gets.
    first: u64,
    /// For a rewritten shard, the rank of each record among the kept ones
    /// (`None` where dropped).
    ranks: Option<Vec<Option<u32>>>,
}

impl Renumbering {
    /// The renumbering of `plan`, the target having `target_len` records.
    pub(super) fn new(target_len: u64, parts: &[Part], plan: &[Planned]) -> Renumbering {
        let mut shards: Vec<Vec<Option<ShardNumbers>>> = parts
            .iter()
            .map(|p| (0..p.dataset.shards()).map(|_| None).collect())
            .collect();
        let mut next = target_len;
        for planned in plan {
            let ranks = match &planned.plan {
                Plan::Move => None,
                Plan::Rewrite(kept) => {
                    let mut rank = 0u32;
                    Some(
                        kept.iter()
                            .map(|&k| {
                                k.then(|| {
                                    rank += 1;
                                    rank - 1
                                })
                            })
                            .collect(),
                    )
                }
            };
            shards[planned.part][planned.from as usize] = Some(ShardNumbers { first: next, ranks });
            next += planned.records;
        }
        Renumbering { shards }
    }

    /// The target's dataset index of record `record` of part `part`.
    pub(super) fn of(&self, parts: &[Part], part: usize, record: u64) -> Option<u64> {
        let dataset = &parts[part].dataset;
        let shard = shard_of(dataset, record);
        let local = record - dataset.shard_first_record(shard);
        let ShardNumbers { first, ranks } = self.shards[part].get(shard as usize)?.as_ref()?;
        match ranks {
            None => Some(first + local),
            Some(ranks) => Some(first + u64::from((*ranks.get(local as usize)?)?)),
        }
    }
}

/// The `(hash, record)` of every record the target gains, by its index in the
/// target, sorted: the parts' key tables merged in hash order (as the check
/// reads them), the dropped records left out. Nothing per record is held.
pub(super) fn gained_keys(
    parts: &[Part],
    renumbering: &Renumbering,
    out: &mut dyn FnMut((u64, u64)) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut cursors: Vec<_> = parts
        .iter()
        .map(|p| p.dataset.index.key_entries())
        .collect();
    let mut heap = BinaryHeap::with_capacity(parts.len());
    for (part, cursor) in cursors.iter_mut().enumerate() {
        if let Some((hash, record)) = cursor.next() {
            heap.push(Reverse((hash, part, record)));
        }
    }
    // Equal hashes come out part by part, each part's in record order: so in
    // the order of their new indexes too.
    while let Some(Reverse((hash, part, record))) = heap.pop() {
        if let Some((next_hash, next_record)) = cursors[part].next() {
            heap.push(Reverse((next_hash, part, next_record)));
        }
        if let Some(new) = renumbering.of(parts, part, record) {
            out((hash, new))?;
        }
    }
    Ok(())
}

/// The shard holding record `record` of `dataset`.
fn shard_of(dataset: &Dataset, record: u64) -> u64 {
    dataset
        .index
        .shards()
        .partition_point(|s| s.first <= record)
        .saturating_sub(1) as u64
}

fn bad_key_table(dataset: &Dataset) -> Error {
    Error::CorruptIndexFile {
        path: dataset.dir.join(INDEX_FILE_NAME),
        reason: "its key table does not list every record exactly once".into(),
    }
}
