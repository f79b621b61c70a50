//! An explicit base list laid out over ranks by class: step 3 of
//! [`Plan`](crate::Plan) with categories, for the plan's own base list and for
//! the rest of an epoch resumed on other ranks ([`crate::elastic`]).

use std::collections::HashMap;

use crate::index::Index;
use crate::interleave::{Dealing, Interleave};
use crate::interleave_chunks::classes_into;
use crate::PlanError;

/// An epoch list `E[p] = list[p mod L]` of `per_rank · world` entries, dealt to
/// the ranks by class and interleaved (step 3 with categories, for any base
/// list: the plan's, or the rest of a resumed epoch).
pub(crate) struct Dealt<I: Index> {
    /// The base list grouped by class (classes in order, each class's entries
    /// in base-list order).
    grouped: Vec<I>,
    /// Where each class starts in `grouped`; one more entry at the end.
    in_base: Vec<u64>,
    dealing: Dealing,
    world: u64,
    per_rank: u64,
}

impl<I: Index> Dealt<I> {
    /// The dealing of `list` (`class_of` gives each entry's class, below
    /// `class_count`) to `world` ranks of `per_rank` entries each.
    pub(crate) fn new(
        list: &[I],
        class_of: impl Fn(I) -> usize,
        class_count: usize,
        world: u64,
        per_rank: u64,
    ) -> Result<Dealt<I>, PlanError> {
        let total = per_rank * world;
        // The base list grouped by class (a counting sort: classes in order, each
        // class's entries in base-list order). The work is bounded by the base
        // list and this rank's part, never by the epoch's T = m W entries (a
        // huge world size with few records would otherwise loop W times).
        let mut in_base = vec![0u64; class_count + 1];
        for &entry in list {
            in_base[class_of(entry) + 1] += 1;
        }
        for c in 0..class_count {
            in_base[c + 1] += in_base[c];
        }
        // N_c: the base list's class counts, times its full repetitions, plus the
        // first `rest` entries again. The class's occurrences in E are its base
        // entries cycled: E is the base list repeated, and the last, partial
        // repetition holds the first entries of each class.
        let len = (list.len() as u64).max(1);
        let (repeats, rest) = (total / len, (total % len) as usize);
        let mut shares: Vec<u64> = (0..class_count)
            .map(|c| (in_base[c + 1] - in_base[c]) * repeats)
            .collect();
        let mut grouped = vec![I::default(); list.len()];
        let mut next = in_base.clone();
        for (position, &entry) in list.iter().enumerate() {
            let c = class_of(entry);
            shares[c] += u64::from(position < rest);
            grouped[next[c] as usize] = entry;
            next[c] += 1;
        }
        Ok(Dealt {
            grouped,
            in_base,
            dealing: Dealing::new(&shares, world)?,
            world,
            per_rank,
        })
    }

    /// Rank `rank`'s part from position `start` on (`out` holds the rest).
    pub(crate) fn rank_into(&self, rank: u64, start: u64, out: &mut [I]) -> Result<(), PlanError> {
        let (world, per_rank) = (self.world, self.per_rank);
        let classes = self.in_base.len() - 1;
        let in_base = &self.in_base;
        // Where each class starts in the dealt list, and how many of its entries
        // fall to this rank: occurrences i ≡ rank − start (mod W) of the class.
        let interleave = Interleave::new(&self.dealing, rank)?;
        let counts = interleave.counts().to_vec();
        // This rank's entries, class by class, each class in E order.
        let mut bucket_start = Vec::with_capacity(classes + 1);
        let mut sum = 0;
        for &count in &counts {
            bucket_start.push(sum);
            sum += count;
        }
        bucket_start.push(sum);
        debug_assert_eq!(sum, per_rank);
        let mut mine = vec![I::default(); per_rank as usize];
        for c in 0..classes {
            let in_class = in_base[c + 1] - in_base[c];
            let shift = self.dealing.group_start(c) % world;
            let first = if rank >= shift {
                rank - shift
            } else {
                rank + (world - shift)
            };
            for j in 0..counts[c] {
                let occurrence = first + j * world;
                let entry = self.grouped[(in_base[c] + occurrence % in_class) as usize];
                mine[(bucket_start[c] + j) as usize] = entry;
            }
        }
        // Each slot's class, then in place the class's next entry.
        let mut taken = classes_into(&self.dealing, rank, start, out)?;
        for slot in out.iter_mut() {
            let c = slot.to_u64() as usize;
            *slot = mine[(bucket_start[c] + taken[c]) as usize];
            taken[c] += 1;
        }
        Ok(())
    }
}

/// The classes' codes, numbered in increasing order of code.
pub(crate) struct Classes {
    /// Dense codes map to themselves.
    direct: bool,
    map: HashMap<u32, usize>,
    count: usize,
}

impl Classes {
    pub(crate) fn new(categories: &[u32]) -> Classes {
        let max = categories
            .iter()
            .copied()
            .max()
            .map_or(0, |m| m as usize + 1);
        if max <= categories.len().saturating_mul(4).max(1 << 16) {
            return Classes {
                direct: true,
                map: HashMap::new(),
                count: max,
            };
        }
        let mut codes: Vec<u32> = categories.to_vec();
        codes.sort_unstable();
        codes.dedup();
        Classes {
            direct: false,
            count: codes.len(),
            map: codes.into_iter().enumerate().map(|(i, c)| (c, i)).collect(),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }

    #[inline]
    pub(crate) fn class(&self, code: u32) -> usize {
        if self.direct {
            code as usize
        } else {
            self.map[&code]
        }
    }
}
