//! A blocked Bloom filter over the hashes of a spilled run: the in-memory
//! summary that lets a lookup skip a run that does not hold its hash without
//! reading it. Each hash sets 7 bits of one 512-bit block (one cache line), so a
//! test costs one cache miss; at 10 bits per entry about 1% of the hashes a run
//! does not hold pass (and cost a read of the run).

/// Bits set per hash.
const BITS_SET: u32 = 7;
/// Bits per entry when memory allows.
pub(super) const BITS_PER_ENTRY: u64 = 10;

#[derive(Debug)]
pub(super) struct Filter {
    /// Empty: no filter (every hash may be there).
    blocks: Vec<[u64; 8]>,
}

impl Filter {
    /// A filter for `entries` hashes using `bits_per_entry` bits each (0: none).
    pub(super) fn new(entries: u64, bits_per_entry: u64) -> Filter {
        Filter {
            blocks: vec![[0; 8]; Filter::blocks_for(entries, bits_per_entry)],
        }
    }

    fn blocks_for(entries: u64, bits_per_entry: u64) -> usize {
        match bits_per_entry {
            0 => 0,
            bits => (entries.saturating_mul(bits).div_ceil(512)).max(1) as usize,
        }
    }

    /// The bytes of [`Filter::new`]`(entries, bits_per_entry)`.
    pub(super) fn bytes_for(entries: u64, bits_per_entry: u64) -> usize {
        Filter::blocks_for(entries, bits_per_entry) * 64
    }

    pub(super) fn bytes(&self) -> usize {
        self.blocks.len() * 64
    }

    /// The block and the bits of `hash`. The hash is mixed first: its top bits
    /// are also the table's partition, and runs are sorted by it.
    fn place(&self, hash: u64) -> (usize, impl Iterator<Item = u32>) {
        let mixed = (hash ^ (hash >> 31)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let bits = (hash ^ (hash >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let block = ((u128::from(mixed) * self.blocks.len() as u128) >> 64) as usize;
        (
            block,
            (0..BITS_SET).map(move |i| ((bits >> (9 * i)) & 511) as u32),
        )
    }

    pub(super) fn insert(&mut self, hash: u64) {
        if self.blocks.is_empty() {
            return;
        }
        let (block, bits) = self.place(hash);
        for bit in bits {
            self.blocks[block][(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    pub(super) fn may_contain(&self, hash: u64) -> bool {
        if self.blocks.is_empty() {
            return true;
        }
        let (block, mut bits) = self.place(hash);
        let block = &self.blocks[block];
        bits.all(|bit| block[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_was_inserted_and_passes_about_one_percent_of_the_rest() {
        let hash = |i: u64| crate::index_file::hash_key(&i.to_le_bytes());
        let mut filter = Filter::new(100_000, BITS_PER_ENTRY);
        assert_eq!(filter.bytes(), 125_056);
        for i in 0..100_000 {
            filter.insert(hash(i));
        }
        assert!((0..100_000).all(|i| filter.may_contain(hash(i))));
        let passed = (100_000..200_000)
            .filter(|&i| filter.may_contain(hash(i)))
            .count();
        assert!(passed < 2_000, "{passed} of 100,000 absent hashes passed");
        let none = Filter::new(10, 0);
        assert!(none.may_contain(hash(1)) && none.bytes() == 0);
    }
}
