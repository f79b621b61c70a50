//! The in-memory part of a key set: `(hash, record)` fingerprints in 4096
//! partitions by the hash's top 12 bits, each an *ordered* linear-probing table
//! (Amble and Knuth's ordered hash table): an entry sits at or after its home
//! slot, and the occupied slots of a partition are sorted. So a lookup stops at
//! the first slot past the hash it looks for, reading the table in order is a
//! sorted run (what a spill writes and a commit indexes), and growing a
//! partition is one sequential pass.
//!
//! An entry takes 12 bytes: the partition stands for the hash's top 12 bits, so
//! a slot holds the other 52 and a 44-bit record number. Partitions grow by an
//! eighth at 90% load, one at a time, so the table holds 13.5 to 15.2 bytes per
//! entry and never needs a second copy of itself. A partition's slots past 64
//! KiB are mapped on their own (`block.rs`), so the memory the table counts is
//! the memory it holds.

mod block;

use block::Block;

/// Bits of the hash that choose the partition.
const PARTITION_BITS: u32 = 12;
const PARTITIONS: usize = 1 << PARTITION_BITS;
/// Bits of the hash a slot holds.
const RESIDUAL_BITS: u32 = 64 - PARTITION_BITS;
/// Bits of the record number a slot holds.
const RECORD_BITS: u32 = 44;
/// The largest record number a key set holds: all ones marks an empty slot.
pub(crate) const MAX_RECORD: u64 = (1 << RECORD_BITS) - 2;
/// Bytes of one slot.
pub(crate) const SLOT_BYTES: usize = std::mem::size_of::<Slot>();
/// A partition grows when more than `MAX_LOAD_PERCENT` of its home slots are
/// taken.
const MAX_LOAD_PERCENT: usize = 90;
/// Home slots of a partition's first allocation.
const MIN_HOMES: usize = 4;

/// `residual << RECORD_BITS | record`, 96 bits, most significant word first: the
/// order of the words is the order of `(hash, record)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
struct Slot([u32; 3]);

impl Slot {
    const EMPTY: Slot = Slot([u32::MAX; 3]);

    fn new(residual: u64, record: u64) -> Slot {
        let value = (u128::from(residual) << RECORD_BITS) | u128::from(record);
        Slot([(value >> 64) as u32, (value >> 32) as u32, value as u32])
    }

    fn value(self) -> u128 {
        (u128::from(self.0[0]) << 64) | (u128::from(self.0[1]) << 32) | u128::from(self.0[2])
    }

    fn residual(self) -> u64 {
        (self.value() >> RECORD_BITS) as u64
    }

    fn record(self) -> u64 {
        self.value() as u64 & ((1 << RECORD_BITS) - 1)
    }

    fn is_empty(self) -> bool {
        self == Slot::EMPTY
    }
}

/// One partition: `homes` home slots and an overflow area after them.
#[derive(Debug, Default)]
struct Partition {
    slots: Block,
    homes: usize,
    len: usize,
}

impl Partition {
    fn home(&self, residual: u64) -> usize {
        ((u128::from(residual) * self.homes as u128) >> RESIDUAL_BITS) as usize
    }

    /// Slots for `homes` home positions: the overflow takes runs that pass the
    /// last home slot (at 90% load, short ones).
    fn allocate(homes: usize) -> Block {
        Block::empty_slots(homes + homes / 64 + 8)
    }

    /// Inserts; returns the change in allocated bytes.
    fn insert(&mut self, slot: Slot) -> isize {
        let before = self.slots.bytes() as isize;
        if self.slots.is_empty() {
            self.homes = MIN_HOMES;
            self.slots = Partition::allocate(MIN_HOMES);
        }
        let value = slot.value();
        loop {
            let mut at = self.home(slot.residual());
            // Past the smaller entries (an empty slot is larger than any entry).
            while at < self.slots.len() && self.slots[at].value() < value {
                at += 1;
            }
            let free = (at..self.slots.len()).find(|&i| self.slots[i].is_empty());
            let Some(free) = free else {
                self.grow();
                continue;
            };
            self.slots.copy_within(at..free, at + 1);
            self.slots[at] = slot;
            self.len += 1;
            break;
        }
        if self.len * 100 > self.homes * MAX_LOAD_PERCENT {
            self.grow();
        }
        self.slots.bytes() as isize - before
    }

    /// Rebuilds with an eighth more home slots (more overflow if the entries do
    /// not fit). The entries are read in order and each put at its home or just
    /// after the one before, which keeps both invariants.
    fn grow(&mut self) {
        let mut homes = (self.homes + self.homes / 8).max(self.homes + MIN_HOMES);
        let old = std::mem::take(&mut self.slots);
        'rebuild: loop {
            let mut slots = Partition::allocate(homes);
            let grown = Partition {
                slots: Block::default(),
                homes,
                len: 0,
            };
            let mut next = 0usize;
            for &slot in old.iter().filter(|s| !s.is_empty()) {
                let at = grown.home(slot.residual()).max(next);
                if at >= slots.len() {
                    homes += homes / 8 + MIN_HOMES;
                    continue 'rebuild;
                }
                slots[at] = slot;
                next = at + 1;
            }
            self.slots = slots;
            self.homes = homes;
            return;
        }
    }

    /// The records of the entries whose residual is `residual`.
    fn find(&self, residual: u64, out: &mut Vec<u64>) {
        if self.slots.is_empty() {
            return;
        }
        let low = Slot::new(residual, 0).value();
        let high = Slot::new(residual, MAX_RECORD).value();
        let mut at = self.home(residual);
        while at < self.slots.len() && self.slots[at].value() < low {
            at += 1;
        }
        while at < self.slots.len() && self.slots[at].value() <= high {
            out.push(self.slots[at].record());
            at += 1;
        }
    }
}

/// The in-memory fingerprints of a key set.
#[derive(Debug)]
pub(super) struct Table {
    partitions: Vec<Partition>,
    len: u64,
    /// Bytes the partitions' blocks hold.
    bytes: usize,
}

impl Table {
    pub(super) fn new() -> Table {
        let mut partitions = Vec::with_capacity(PARTITIONS);
        partitions.resize_with(PARTITIONS, Partition::default);
        Table {
            partitions,
            len: 0,
            bytes: 0,
        }
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Bytes allocated for entries, mapped blocks counted by the page (the
    /// partitions' bookkeeping, 96 KiB, aside).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds `(hash, record)`; `record` must be at most [`MAX_RECORD`] and the
    /// pair new.
    pub(super) fn insert(&mut self, hash: u64, record: u64) {
        debug_assert!(record <= MAX_RECORD);
        let (partition, residual) = split(hash);
        let grown = self.partitions[partition].insert(Slot::new(residual, record));
        self.bytes = (self.bytes as isize + grown) as usize;
        self.len += 1;
    }

    /// Appends the records of the entries whose hash is `hash` to `out`.
    pub(super) fn find(&self, hash: u64, out: &mut Vec<u64>) {
        let (partition, residual) = split(hash);
        self.partitions[partition].find(residual, out);
    }

    /// Every entry, sorted by `(hash, record)`.
    pub(super) fn sorted(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.partitions
            .iter()
            .enumerate()
            .flat_map(|(partition, p)| {
                p.slots.iter().filter(|s| !s.is_empty()).map(move |s| {
                    (
                        ((partition as u64) << RESIDUAL_BITS) | s.residual(),
                        s.record(),
                    )
                })
            })
    }

    /// Empties the table and frees its memory.
    pub(super) fn clear(&mut self) {
        for partition in &mut self.partitions {
            *partition = Partition::default();
        }
        self.len = 0;
        self.bytes = 0;
    }
}

fn split(hash: u64) -> (usize, u64) {
    (
        (hash >> RESIDUAL_BITS) as usize,
        hash & ((1 << RESIDUAL_BITS) - 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(i: u64) -> u64 {
        crate::index_file::hash_key(&i.to_le_bytes())
    }

    #[test]
    fn a_slot_is_twelve_bytes_and_keeps_hash_and_record() {
        assert_eq!(SLOT_BYTES, 12);
        let slot = Slot::new((1 << RESIDUAL_BITS) - 1, MAX_RECORD);
        assert_eq!(slot.residual(), (1 << RESIDUAL_BITS) - 1);
        assert_eq!(slot.record(), MAX_RECORD);
        assert!(!slot.is_empty());
        assert!(slot.value() < Slot::EMPTY.value());
    }

    #[test]
    fn finds_every_entry_and_reads_back_sorted() {
        let mut table = Table::new();
        let mut expected = Vec::new();
        for i in 0..50_000u64 {
            // Some hashes repeat (collisions), in both orders of records.
            let hash = if i % 1000 == 7 { mix(i - 1) } else { mix(i) };
            table.insert(hash, 50_000 - i);
            expected.push((hash, 50_000 - i));
        }
        expected.sort_unstable();
        assert_eq!(table.sorted().collect::<Vec<_>>(), expected);
        let mut found = Vec::new();
        for chunk in expected.chunk_by(|a, b| a.0 == b.0) {
            found.clear();
            table.find(chunk[0].0, &mut found);
            found.sort_unstable();
            assert_eq!(found, chunk.iter().map(|e| e.1).collect::<Vec<_>>());
        }
        found.clear();
        table.find(mix(1 << 40), &mut found);
        assert!(found.is_empty());
    }

    /// 13.5 to 15.2 bytes per entry once partitions are past their first sizes
    /// (a few hundred entries each), whenever it is measured.
    #[test]
    fn holds_at_most_sixteen_bytes_per_entry() {
        let mut table = Table::new();
        let mut most: f64 = 0.0;
        for i in 0..2_000_000u64 {
            table.insert(mix(i), i);
            if i >= 1_000_000 && i % 10_000 == 0 {
                most = most.max(table.bytes() as f64 / table.len() as f64);
            }
        }
        assert!(most <= 16.0, "{most} bytes per entry");
    }

    /// Entries of one partition, enough for its slots to be mapped (past 64
    /// KiB) and grow mapped several times: every entry found, read back in
    /// order, and the bytes counted those of the pages held.
    #[test]
    fn a_partition_grown_into_mapped_blocks_keeps_every_entry() {
        let mut table = Table::new();
        let mut expected = Vec::new();
        for i in 0..60_000u64 {
            let hash = mix(i) >> PARTITION_BITS;
            table.insert(hash, i);
            expected.push((hash, i));
        }
        assert!(matches!(table.partitions[0].slots, Block::Mapped { .. }));
        let held: usize = table.partitions.iter().map(|p| p.slots.bytes()).sum();
        assert_eq!(table.bytes(), held);
        assert_eq!(table.bytes() % 4096, 0);
        expected.sort_unstable();
        assert_eq!(table.sorted().collect::<Vec<_>>(), expected);
        let mut found = Vec::new();
        for &(hash, record) in expected.iter().step_by(97) {
            found.clear();
            table.find(hash, &mut found);
            assert_eq!(found, [record]);
        }
        table.clear();
        assert_eq!((table.len(), table.bytes()), (0, 0));
    }

    #[test]
    fn extreme_hashes_and_records() {
        let mut table = Table::new();
        for (hash, record) in [
            (u64::MAX, MAX_RECORD),
            (0, 0),
            (u64::MAX, 0),
            (0, MAX_RECORD),
        ] {
            table.insert(hash, record);
        }
        let mut found = Vec::new();
        table.find(u64::MAX, &mut found);
        found.sort_unstable();
        assert_eq!(found, [0, MAX_RECORD]);
        found.clear();
        table.find(0, &mut found);
        found.sort_unstable();
        assert_eq!(found, [0, MAX_RECORD]);
        assert_eq!(
            table.sorted().collect::<Vec<_>>(),
            [
                (0, 0),
                (0, MAX_RECORD),
                (u64::MAX, 0),
                (u64::MAX, MAX_RECORD)
            ]
        );
        table.clear();
        assert_eq!((table.len(), table.bytes()), (0, 0));
    }
}
