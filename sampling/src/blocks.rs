//! Block shuffles: the records cut into blocks of `block_size` consecutive
//! records, the blocks put in a random order, and the records of each block
//! shuffled among themselves, so a reader moves through the dataset one region
//! (one shard, on cold caches or network storage) at a time.
//!
//! Block `k` holds records `k·s .. min((k+1)·s, n)` (`s` the block size; only
//! the last block may be shorter). The block order is the permutation of
//! `0..ceil(n/s)` of [`Shuffle::blocks`]; block `k`'s records are shuffled by
//! Fisher–Yates with stream `(seed, epoch, WithinBlock, k)`.

use crate::index::Index;
use crate::rng::{Purpose, Xoshiro256};
use crate::shuffle::Shuffle;

/// The block order of one epoch; [`BlockShuffle::fill`] writes any range of it.
#[derive(Clone, Debug)]
pub struct BlockShuffle {
    len: u64,
    block_size: u64,
    seed: u64,
    epoch: u64,
    /// Block ids in epoch order.
    order: Vec<u64>,
    /// The slot of the last block (the only one that may be short).
    short_slot: u64,
}

impl BlockShuffle {
    /// The block shuffle of `len` records in blocks of `block_size` (> 0).
    pub fn new(len: u64, block_size: u64, seed: u64, epoch: u64) -> BlockShuffle {
        assert!(block_size > 0);
        let blocks = len.div_ceil(block_size);
        let order: Vec<u64> = Shuffle::blocks(blocks, seed, epoch).to_vec();
        let short_slot = order
            .iter()
            .position(|&k| k + 1 == blocks)
            .map_or(0, |slot| slot as u64);
        BlockShuffle {
            len,
            block_size,
            seed,
            epoch,
            order,
            short_slot,
        }
    }

    fn block_len(&self, block: u64) -> u64 {
        (self.len - block * self.block_size).min(self.block_size)
    }

    /// The first position of slot `slot`.
    fn slot_start(&self, slot: u64) -> u64 {
        let full = slot * self.block_size;
        if slot > self.short_slot {
            let last = self.order.len() as u64 - 1;
            full - (self.block_size - self.block_len(last))
        } else {
            full
        }
    }

    /// The slot holding position `position` (< len).
    fn slot_of(&self, position: u64) -> u64 {
        let short_start = self.slot_start(self.short_slot);
        let short_end = short_start + self.block_len(self.order.len() as u64 - 1);
        if position < short_end {
            (position / self.block_size).min(self.short_slot)
        } else {
            self.short_slot + 1 + (position - short_end) / self.block_size
        }
    }

    /// Writes positions `start .. start + out.len()` of the epoch's order.
    ///
    /// # Panics
    /// If the range goes past the record count.
    pub fn fill<I: Index>(&self, start: u64, out: &mut [I]) {
        let end = start + out.len() as u64;
        assert!(end <= self.len, "positions {start}..{end} of {}", self.len);
        if out.is_empty() {
            return;
        }
        let mut block = Vec::with_capacity(self.block_size.min(self.len) as usize);
        let mut slot = self.slot_of(start);
        let mut at = start;
        while at < end {
            let id = self.order[slot as usize];
            let first = id * self.block_size;
            block.clear();
            block.extend((first..first + self.block_len(id)).map(I::from_u64));
            Xoshiro256::stream(self.seed, self.epoch, Purpose::WithinBlock, id).shuffle(&mut block);
            let slot_start = self.slot_start(slot);
            let from = (at - slot_start) as usize;
            let to = ((end - slot_start) as usize).min(block.len());
            let written = (at - start) as usize;
            out[written..written + to - from].copy_from_slice(&block[from..to]);
            at += (to - from) as u64;
            slot += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_stay_together_and_every_record_appears_once() {
        for (len, size) in [
            (0, 3),
            (1, 1),
            (10, 3),
            (10, 5),
            (10, 20),
            (1000, 7),
            (1000, 1),
        ] {
            let shuffle = BlockShuffle::new(len, size, 4, 1);
            let mut order = vec![0u64; len as usize];
            shuffle.fill(0, &mut order);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..len).collect::<Vec<_>>(), "{len}/{size}");
            // Each run of a block's length holds exactly one block's records.
            let mut at = 0;
            while at < order.len() {
                let block = order[at] / size;
                let run = BlockShuffle::block_len(&shuffle, block) as usize;
                assert!(order[at..at + run].iter().all(|&r| r / size == block));
                at += run;
            }
        }
    }

    #[test]
    fn any_range_equals_the_same_positions_of_the_whole() {
        let shuffle = BlockShuffle::new(1003, 10, 2, 2);
        let mut whole = vec![0u32; 1003];
        shuffle.fill(0, &mut whole);
        for start in 0..1003 {
            for count in [0, 1, 9, 10, 11, 57] {
                if start + count <= 1003 {
                    let mut part = vec![0u32; count];
                    shuffle.fill(start as u64, &mut part);
                    assert_eq!(part, whole[start..start + count]);
                }
            }
        }
    }
}
