//! A partition's slots: on the heap while small, past [`MAPPED_BYTES`] in an
//! anonymous mapping of their own, so that the block a partition leaves when it
//! grows goes back to the system at once.
//!
//! On the heap, the blocks a growing table frees (each partition grows by an
//! eighth, one at a time) leave holes in the allocator's arena that the next,
//! larger blocks do not fit: at 300 million keys under a 4 GiB budget the
//! process held 5.3 GB for 4 GiB of slots. Mapped, the resident memory is the
//! slots, rounded up to pages.

use std::ops::{Deref, DerefMut};

use memmap2::MmapMut;

use super::{Slot, SLOT_BYTES};

/// Blocks of at least this many bytes are mapped.
const MAPPED_BYTES: usize = 64 << 10;
/// The unit a mapping's memory is counted in.
const PAGE: usize = 4096;

/// `len` slots, on the heap or mapped.
#[derive(Debug)]
pub(super) enum Block {
    Heap(Vec<Slot>),
    Mapped { map: MmapMut, len: usize },
}

impl Default for Block {
    fn default() -> Block {
        Block::Heap(Vec::new())
    }
}

impl Block {
    /// `len` empty slots.
    pub(super) fn empty_slots(len: usize) -> Block {
        let bytes = len * SLOT_BYTES;
        if bytes >= MAPPED_BYTES {
            // A mapping that cannot be made falls back to the heap, which fails
            // as any allocation does.
            if let Ok(map) = MmapMut::map_anon(bytes) {
                let mut block = Block::Mapped { map, len };
                block.fill(Slot::EMPTY);
                return block;
            }
        }
        Block::Heap(vec![Slot::EMPTY; len])
    }

    /// The memory the block holds: its capacity on the heap, its pages mapped.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Block::Heap(vec) => vec.capacity() * SLOT_BYTES,
            Block::Mapped { map, .. } => map.len().next_multiple_of(PAGE),
        }
    }
}

impl Deref for Block {
    type Target = [Slot];

    fn deref(&self) -> &[Slot] {
        match self {
            Block::Heap(vec) => vec,
            // SAFETY: the mapping is page-aligned (more than `Slot`'s 4 bytes),
            // holds `len * SLOT_BYTES` bytes, lives as long as `self`, and any
            // bytes are a valid `Slot` (three `u32`s).
            Block::Mapped { map, len } => unsafe {
                std::slice::from_raw_parts(map.as_ptr().cast::<Slot>(), *len)
            },
        }
    }
}

impl DerefMut for Block {
    fn deref_mut(&mut self) -> &mut [Slot] {
        match self {
            Block::Heap(vec) => vec,
            // SAFETY: as in `deref`; the borrow of `self` is unique.
            Block::Mapped { map, len } => unsafe {
                std::slice::from_raw_parts_mut(map.as_mut_ptr().cast::<Slot>(), *len)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_blocks_are_on_the_heap_and_large_ones_mapped_and_both_start_empty() {
        for (len, mapped) in [
            (0, false),
            (12, false),
            (5461, false),
            (5462, true),
            (100_000, true),
        ] {
            let mut block = Block::empty_slots(len);
            assert_eq!(matches!(block, Block::Mapped { .. }), mapped, "{len} slots");
            assert_eq!(block.len(), len);
            assert!(block.iter().all(|s| s.is_empty()));
            assert!(block.bytes() >= len * SLOT_BYTES);
            if len > 0 {
                block[len - 1] = Slot::new(7, 9);
                assert_eq!((block[len - 1].residual(), block[len - 1].record()), (7, 9));
            }
        }
        assert_eq!(Block::empty_slots(100_000).bytes(), 1_200_128);
    }
}
