//! The category-aware interleave: the order in which one rank takes its records
//! class by class, so that every prefix of its epoch holds each class in its
//! proportion of the whole epoch, to within one record.
//!
//! # The guarantee
//!
//! Let the epoch's list (all `W` ranks together, `T = m W` entries) hold `N_c`
//! entries of class `c`, `p_c = N_c / T`. [`Dealing`] decides how many of them
//! each rank takes: `k_c = ⌊N_c / W⌋` or `⌈N_c / W⌉` (the floor or ceiling of the
//! rank's share `m p_c`), summing to `m` on every rank and to `N_c` over the
//! ranks. [`Interleave`] then yields a class for each of the rank's `m` slots such
//! that, writing `C_c(t)` for the slots of class `c` among the first `t`,
//!
//! ```text
//! ⌊t p_c⌋ ≤ C_c(t) ≤ ⌈t p_c⌉      for every class c and every t in 0..=m,
//! ```
//!
//! so `|C_c(t) − t p_c| < 1`: every prefix of every rank's epoch is within one
//! record of the class's share of the whole epoch.
//!
//! Which classes a rank rounds up matters: not every rounding can be scheduled.
//! With shares 149, 83, 50, 19 of `T = 301` over 7 ranks (`m = 43`), a rank
//! taking 22, 11, 8, 2 would need, after 42 slots, 21 of class 0, 11 of class 1,
//! 7 of class 2 and 2 of class 3 (the bounds at `t = 42` and at `t = 43` leave no
//! other choice): 41 records for 42 slots. The dealing below never gives a rank
//! such a rounding.
//!
//! # Proof
//!
//! Give the `j`-th record of class `c` (`1 ≤ j ≤ k_c`) the window of slots
//! `[r_j, d_j]` with `r_j = ⌊(j−1)/p_c⌋ + 1` (release) and `d_j = ⌈j/p_c⌉`
//! (deadline; a deadline past `m` means `m`).
//!
//! 1. *Windows give the bound.* For an integer `t`, `d_j ≤ t ⟺ j ≤ t p_c`, so
//!    by slot `t < m` at least `⌊t p_c⌋` records of `c` were placed (`⌊t p_c⌋ ≤
//!    ⌊m p_c⌋ ≤ k_c`, so they exist), and at `t = m` all `k_c`; and
//!    `r_j ≤ t ⟺ j − 1 < t p_c`, so at most `⌈t p_c⌉` were.
//! 2. *When windows can all be met* (Hall's condition for unit jobs with integer
//!    windows: for every `1 ≤ a ≤ b ≤ m`, at most `b − a + 1` windows lie inside
//!    `[a, b]`). A record of `c` released at `a` or later has `j ≥ ⌈(a−1)p_c⌉ + 1`.
//!    - If `b < m`, its deadline is at most `b` only if `j ≤ ⌊b p_c⌋`: at most
//!      `⌊b p_c⌋ − ⌈(a−1) p_c⌉ ≤ (b − a + 1) p_c` records of `c`, and summed over
//!      the classes (`Σ p_c = 1`) at most `b − a + 1`. Always met.
//!    - If `b = m`, every record released at `a` or later counts: with
//!      `s = m − a + 1` slots left, the condition is `Σ_c (k_c − ⌈(m−s) p_c⌉)⁺ ≤ s` (the
//!      *tail condition*). Write `a_c(s) = ⌊m p_c⌋ − ⌈(m−s) p_c⌉` and `Z_s = {c :
//!      a_c(s) ≥ 0}`. A class rounded down adds `a_c(s)⁺`, a class rounded up adds
//!      one more exactly when `c ∈ Z_s`, so the tail condition says: the rank
//!      rounds up at most `cap(s) = s − Σ_{c∈Z_s} a_c(s)` classes of `Z_s`.
//!      This can fail (the example above), and the dealing is what meets it.
//! 3. *The dealing meets the tail condition on every rank.* `a_c(s)` grows with
//!    `s`, so the sets `Z_s` are nested: `c ∈ Z_s ⟺ s ≥ s*_c` with `s*_c = m −
//!    ⌊⌊m p_c⌋ / p_c⌋`. Class `c` is rounded up on `u_c = N_c mod W` ranks,
//!    `W · frac(m p_c)` of them. [`Dealing`] lists each class `u_c` times, classes
//!    in increasing `(s*_c, c)`, and deals the list to the ranks in turn (entry
//!    `i` to rank `i mod W`); since `u_c < W` no rank gets a class twice, and
//!    every rank gets `m − Σ_c ⌊m p_c⌋` of them. `Z_s` is a prefix of that list,
//!    of length `Q = W Σ_{c∈Z_s} frac(m p_c)`, so each rank rounds up at most
//!    `⌈Q / W⌉` classes of `Z_s`, and `Q / W ≤ cap(s)`: for `c ∈ Z_s`,
//!    `a_c(s) + frac(m p_c) = m p_c − ⌈(m−s) p_c⌉ ≤ s p_c`, so
//!    `Σ_{c∈Z_s} (a_c(s) + frac(m p_c)) ≤ s`. As `cap(s)` is an integer,
//!    `⌈Q / W⌉ ≤ cap(s)` too.
//! 4. *Earliest deadline first meets them.* At each slot, [`Interleave`] places
//!    the released record with the earliest deadline (ties: the lower class).
//!    Suppose a record misses its deadline `d`. Let `t₀` be the last slot before
//!    `d` that was empty or held a record with deadline after `d` (0 if none).
//!    Every record placed in slots `t₀+1 ..= d` has a deadline `≤ d` and was
//!    released after `t₀` (else EDF would have placed it at `t₀`), and so has the
//!    one that missed: `d − t₀ + 1` windows inside `[t₀+1, d]`, against steps 2
//!    and 3. With `m` records for `m` slots and every deadline at most `m`, no slot
//!    is left empty either.
//!
//! All of it is integer arithmetic: `r_j = ⌊(j−1)T / N_c⌋ + 1`,
//! `d_j = ⌈j T / N_c⌉` and `s*_c = m − ⌊⌊N_c / W⌋ T / N_c⌋`, in 128 bits. Time
//! `O(m log K)` for `K` classes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::PlanError;

/// How the epoch's entries are dealt to the ranks: grouped by class, classes in
/// increasing `(s*_c, c)` (see the module documentation), entries in epoch order
/// within each class, and the `i`-th entry of that grouped list to rank `i mod W`.
/// Every rank so takes `⌊N_c / W⌋` or `⌈N_c / W⌉` entries of class `c`, and a
/// rounding its [`Interleave`] can schedule.
#[derive(Clone, Debug)]
pub struct Dealing {
    world_size: u64,
    /// `N_c`.
    shares: Vec<u64>,
    /// Where each class starts in the grouped list.
    group_start: Vec<u64>,
}

impl Dealing {
    /// The dealing of an epoch holding `shares[c]` entries of class `c` to
    /// `world_size` ranks. Errors unless `world_size > 0` divides the total (every
    /// rank takes the same number of entries) and there are fewer than 2^32
    /// classes.
    pub fn new(shares: &[u64], world_size: u64) -> Result<Dealing, PlanError> {
        let total = shares
            .iter()
            .try_fold(0u64, |sum, &n| sum.checked_add(n))
            .ok_or(PlanError::InterleaveCounts)?;
        if world_size == 0 || total % world_size != 0 || shares.len() > u32::MAX as usize {
            return Err(PlanError::InterleaveCounts);
        }
        let per_rank = total / world_size;
        // s*_c = m − ⌊⌊N_c / W⌋ T / N_c⌋: the number of last slots from which on
        // rounding class c up costs one of the rank's tail slots.
        let tail = |n: u64| -> u64 {
            if n == 0 {
                return 0;
            }
            let floor = u128::from(n / world_size) * u128::from(total) / u128::from(n);
            per_rank - floor as u64
        };
        let mut order: Vec<usize> = (0..shares.len()).collect();
        order.sort_by_key(|&c| (tail(shares[c]), c));
        let mut group_start = vec![0; shares.len()];
        let mut at = 0;
        for c in order {
            group_start[c] = at;
            at += shares[c];
        }
        Ok(Dealing {
            world_size,
            shares: shares.to_vec(),
            group_start,
        })
    }

    /// `N_c`, the epoch's entries of each class.
    pub fn shares(&self) -> &[u64] {
        &self.shares
    }

    /// Where class `class` starts in the grouped list.
    pub fn group_start(&self, class: usize) -> u64 {
        self.group_start[class]
    }

    /// The entries of class `class` that rank `rank` takes.
    pub fn count(&self, class: usize, rank: u64) -> u64 {
        let start = self.group_start[class];
        self.below(start + self.shares[class], rank) - self.below(start, rank)
    }

    /// Positions `x < end` of the grouped list with `x ≡ rank (mod W)`.
    fn below(&self, end: u64, rank: u64) -> u64 {
        let world = u128::from(self.world_size);
        ((u128::from(end) + world - 1 - u128::from(rank)) / world) as u64
    }
}

/// The class of each slot of one rank's epoch (see the module documentation):
/// an iterator of `m` class numbers.
#[derive(Clone, Debug)]
pub struct Interleave {
    total: u64,
    /// `N_c`.
    shares: Vec<u64>,
    /// `k_c`.
    counts: Vec<u64>,
    /// Records of each class placed so far.
    placed: Vec<u64>,
    /// The next slot (1-based).
    slot: u64,
    slots: u64,
    /// (release, class) of each class's next record, not yet released.
    pending: BinaryHeap<Reverse<(u64, u32)>>,
    /// (deadline, class) of each class's next record, released.
    ready: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Interleave {
    /// The interleave of rank `rank` under `dealing`. Errors if `rank` is not
    /// below the dealing's number of ranks.
    pub fn new(dealing: &Dealing, rank: u64) -> Result<Interleave, PlanError> {
        if rank >= dealing.world_size {
            return Err(PlanError::Rank {
                rank,
                world_size: dealing.world_size,
            });
        }
        let counts: Vec<u64> = (0..dealing.shares.len())
            .map(|c| dealing.count(c, rank))
            .collect();
        let total: u64 = dealing.shares.iter().sum();
        let slots: u64 = counts.iter().sum();
        debug_assert_eq!(slots * dealing.world_size, total);
        let mut interleave = Interleave {
            total,
            shares: dealing.shares.clone(),
            counts,
            placed: vec![0; dealing.shares.len()],
            slot: 1,
            slots,
            pending: BinaryHeap::new(),
            ready: BinaryHeap::new(),
        };
        for class in 0..interleave.counts.len() {
            if interleave.counts[class] > 0 {
                interleave
                    .pending
                    .push(Reverse((interleave.release(class, 1), class as u32)));
            }
        }
        Ok(interleave)
    }

    /// `k_c`: the entries of each class this rank takes.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// `r_j` of class `class`.
    fn release(&self, class: usize, j: u64) -> u64 {
        let n = u128::from(self.shares[class]);
        ((u128::from(j - 1) * u128::from(self.total)) / n) as u64 + 1
    }

    /// `d_j` of class `class`.
    fn deadline(&self, class: usize, j: u64) -> u64 {
        let n = u128::from(self.shares[class]);
        (u128::from(j) * u128::from(self.total))
            .div_ceil(n)
            .min(u128::from(u64::MAX)) as u64
    }
}

impl Iterator for Interleave {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.slot > self.slots {
            return None;
        }
        while let Some(&Reverse((release, class))) = self.pending.peek() {
            if release > self.slot {
                break;
            }
            self.pending.pop();
            let j = self.placed[class as usize] + 1;
            self.ready
                .push(Reverse((self.deadline(class as usize, j), class)));
        }
        // The proof says a released record is always there (the dealing meets the
        // tail condition); if it were not, the earliest pending one keeps the
        // output a valid order (and the property tests would fail on the bound).
        let class = match self.ready.pop() {
            Some(Reverse((_, class))) => class,
            None => {
                let Reverse((_, class)) = self.pending.pop()?;
                class
            }
        };
        let c = class as usize;
        self.placed[c] += 1;
        if self.placed[c] < self.counts[c] {
            let release = self.release(c, self.placed[c] + 1);
            self.pending.push(Reverse((release, class)));
        }
        self.slot += 1;
        Some(class)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.slots + 1 - self.slot) as usize;
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks ⌊t p⌋ ≤ C(t) ≤ ⌈t p⌉ for every prefix.
    fn assert_quota(sequence: &[u32], shares: &[u64], total: u64) {
        let mut seen = vec![0u64; shares.len()];
        for (t, &class) in sequence.iter().enumerate() {
            seen[class as usize] += 1;
            let t = t as u64 + 1;
            for (c, &n) in shares.iter().enumerate() {
                let exact = u128::from(t) * u128::from(n);
                let (floor, ceil) = (exact / u128::from(total), exact.div_ceil(u128::from(total)));
                assert!(
                    (floor..=ceil).contains(&u128::from(seen[c])),
                    "class {c} has {} after {t} slots, share {n}/{total}",
                    seen[c]
                );
            }
        }
    }

    /// Every rank's interleave under `dealing`, checked against the bound.
    fn assert_every_rank_within_one(shares: &[u64], world: u64) {
        let dealing = Dealing::new(shares, world).unwrap();
        let total: u64 = shares.iter().sum();
        let mut dealt = vec![0u64; shares.len()];
        for rank in 0..world {
            let interleave = Interleave::new(&dealing, rank).unwrap();
            let sequence: Vec<u32> = interleave.collect();
            assert_eq!(sequence.len() as u64, total / world);
            assert_quota(&sequence, shares, total);
            for &class in &sequence {
                dealt[class as usize] += 1;
            }
        }
        assert_eq!(dealt, shares, "the ranks together take every entry");
    }

    #[test]
    fn a_single_rank_of_a_skewed_epoch_stays_within_one_of_every_share() {
        assert_every_rank_within_one(&[900, 90, 10], 1);
    }

    #[test]
    fn the_rounding_that_cannot_be_scheduled_is_never_dealt() {
        // The counterexample of issue 26: dealt by class code, a rank took
        // 22, 11, 8, 2 and had 22 of class 0 after 42 slots.
        let shares = [149, 83, 50, 19];
        let dealing = Dealing::new(&shares, 7).unwrap();
        for rank in 0..7 {
            let counts: Vec<u64> = (0..4).map(|c| dealing.count(c, rank)).collect();
            assert_ne!(counts, [22, 11, 8, 2], "rank {rank}");
        }
        assert_every_rank_within_one(&shares, 7);
    }

    #[test]
    fn every_small_epoch_on_every_world_size_stays_within_one() {
        // Exhaustive: every split of T ≤ 24 entries into up to four classes
        // (zero shares included), on every world size dividing T.
        for total in 1u64..=24 {
            for a in 0..=total {
                for b in 0..=total - a {
                    for c in 0..=total - a - b {
                        let shares = [a, b, c, total - a - b - c];
                        for world in (1..=total).filter(|w| total % w == 0) {
                            assert_every_rank_within_one(&shares, world);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn dealings_that_cannot_be_made_are_refused() {
        assert!(Dealing::new(&[5, 4], 2).is_err(), "9 entries over 2 ranks");
        assert!(Dealing::new(&[1, 1], 0).is_err());
        let dealing = Dealing::new(&[1, 1], 2).unwrap();
        assert!(Interleave::new(&dealing, 2).is_err());
    }

    #[test]
    fn one_class_and_empty_ranks() {
        let dealing = Dealing::new(&[6], 2).unwrap();
        assert_eq!(
            Interleave::new(&dealing, 0).unwrap().collect::<Vec<_>>(),
            [0, 0, 0]
        );
        let dealing = Dealing::new(&[0, 0], 1).unwrap();
        assert_eq!(Interleave::new(&dealing, 0).unwrap().count(), 0);
        let dealing = Dealing::new(&[], 3).unwrap();
        assert_eq!(Interleave::new(&dealing, 1).unwrap().count(), 0);
    }
}
