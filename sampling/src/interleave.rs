//! The category-aware interleave: the order in which one rank takes its records
//! class by class, so that every prefix of its epoch holds each class in its
//! proportion, to within one record.
//!
//! # The guarantee
//!
//! Let the epoch's list (all ranks together, `T` entries) hold `N_c` entries of
//! class `c`, `p_c = N_c / T`, and let this rank take `m` entries, `k_c` of them
//! of class `c`, with `⌊m p_c⌋ ≤ k_c ≤ ⌈m p_c⌉` and `Σ k_c = m` (the dealing in
//! [`crate::plan`] gives exactly this). [`Interleave`] yields a class for each of
//! the `m` slots such that, writing `C_c(t)` for the slots of class `c` among the
//! first `t`,
//!
//! ```text
//! ⌊t p_c⌋ ≤ C_c(t) ≤ ⌈t p_c⌉      for every class c and every t in 0..=m,
//! ```
//!
//! so `|C_c(t) − t p_c| < 1`: every prefix of every rank's epoch is within one
//! record of the class's share of the whole epoch.
//!
//! # Proof
//!
//! Give the `j`-th record of class `c` (`1 ≤ j ≤ k_c`) the window of slots
//! `[r_j, d_j]` with `r_j = ⌊(j−1)/p_c⌋ + 1` (release) and `d_j = ⌈j/p_c⌉`
//! (deadline; a deadline past `m` means `m`).
//!
//! 1. *Windows give the bound.* For an integer `t`, `d_j ≤ t ⟺ j ≤ t p_c`, so
//!    by slot `t` at least `⌊t p_c⌋` records of `c` were placed (`⌊t p_c⌋ ≤
//!    ⌊m p_c⌋ ≤ k_c`, so they exist); and `r_j ≤ t ⟺ j − 1 < t p_c`, so at most
//!    `⌈t p_c⌉` were.
//! 2. *Windows can all be met* (Hall's condition for unit jobs with integer
//!    windows: for every `1 ≤ a ≤ b ≤ m`, at most `b − a + 1` windows lie inside
//!    `[a, b]`). A record of `c` released at `a` or later has `j ≥ ⌈(a−1)p_c⌉ + 1`.
//!    If `b < m`, its deadline is at most `b` only if `j ≤ ⌊b p_c⌋`: at most
//!    `⌊b p_c⌋ − ⌈(a−1) p_c⌉ ≤ (b − a + 1) p_c` records of `c`, and summed over
//!    the classes (`Σ p_c = 1`) at most `b − a + 1`. If `b = m`, at most
//!    `k_c − ⌈(a−1) p_c⌉` records of `c`, in all at most
//!    `m − (a − 1) Σ p_c = b − a + 1`.
//! 3. *Earliest deadline first meets them.* At each slot, [`Interleave`] places
//!    the released record with the earliest deadline (ties: the lower class).
//!    Suppose a record misses its deadline `d`. Let `t₀` be the last slot before
//!    `d` that was empty or held a record with deadline after `d` (0 if none).
//!    Every record placed in slots `t₀+1 ..= d` has a deadline `≤ d` and was
//!    released after `t₀` (else EDF would have placed it at `t₀`), and so has the
//!    one that missed: `d − t₀ + 1` windows inside `[t₀+1, d]`, against step 2.
//!    With `m` records for `m` slots, no slot is left empty either.
//!
//! All of it is integer arithmetic: `r_j = ⌊(j−1)T / N_c⌋ + 1` and
//! `d_j = ⌈j T / N_c⌉`, in 128 bits. Time `O(m log K)` for `K` classes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::PlanError;

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
    /// The interleave of a rank holding `counts[c]` records of class `c`, when the
    /// whole epoch holds `shares[c]` (summing to `total`).
    ///
    /// Errors if the counts are not a rounding of the rank's proportional share
    /// (`⌊m N_c / T⌋ ≤ k_c ≤ ⌈m N_c / T⌉`), or the shares do not sum to `total`.
    pub fn new(counts: &[u64], shares: &[u64], total: u64) -> Result<Interleave, PlanError> {
        let slots: u64 = counts.iter().sum();
        let share_sum: u64 = shares.iter().sum();
        let valid = counts.len() == shares.len()
            && share_sum == total
            && slots <= total
            && counts.len() <= u32::MAX as usize
            && counts.iter().zip(shares).all(|(&k, &n)| {
                let exact = u128::from(slots) * u128::from(n);
                let (floor, ceil) = (
                    exact / u128::from(total.max(1)),
                    exact.div_ceil(u128::from(total.max(1))),
                );
                (floor..=ceil).contains(&u128::from(k))
            });
        if !valid {
            return Err(PlanError::InterleaveCounts);
        }
        let mut interleave = Interleave {
            total,
            shares: shares.to_vec(),
            counts: counts.to_vec(),
            placed: vec![0; counts.len()],
            slot: 1,
            slots,
            pending: BinaryHeap::new(),
            ready: BinaryHeap::new(),
        };
        for (class, &k) in counts.iter().enumerate() {
            if k > 0 {
                interleave
                    .pending
                    .push(Reverse((interleave.release(class, 1), class as u32)));
            }
        }
        Ok(interleave)
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
        // The proof says a released record is always there; if it were not, the
        // earliest pending one keeps the output a valid order (and the property
        // tests would fail on the bound).
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

    #[test]
    fn a_single_rank_of_a_skewed_epoch_stays_within_one_of_every_share() {
        let shares = [900, 90, 10];
        let sequence: Vec<u32> = Interleave::new(&shares, &shares, 1000).unwrap().collect();
        assert_eq!(sequence.len(), 1000);
        assert_quota(&sequence, &shares, 1000);
    }

    #[test]
    fn counts_that_are_not_a_rounding_of_the_share_are_refused() {
        assert!(Interleave::new(&[5, 5], &[9, 1], 10).is_err());
        assert!(Interleave::new(&[1, 1], &[1, 1], 3).is_err());
        assert!(Interleave::new(&[1], &[1, 1], 2).is_err());
    }

    #[test]
    fn one_class_and_empty_ranks() {
        assert_eq!(
            Interleave::new(&[3], &[6], 6).unwrap().collect::<Vec<_>>(),
            [0, 0, 0]
        );
        assert_eq!(Interleave::new(&[0, 0], &[1, 1], 2).unwrap().count(), 0);
        assert_eq!(Interleave::new(&[], &[], 0).unwrap().count(), 0);
    }
}
