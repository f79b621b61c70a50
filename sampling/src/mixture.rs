//! Mixtures: one epoch drawn from several sources in fixed proportions.
//!
//! A [`Mixture`] of `K` sources (source `k` holds `n_k` records and has weight
//! `w_k`) numbers its samples in one index space, the sources back to back:
//! record `i` of source `k` is `o_k + i`, `o_k = n_0 + … + n_{k−1}`
//! ([`Mixture::offsets`], [`Mixture::source_of`]). One epoch over `W` ranks:
//!
//! 1. **Its size.** `N` samples (`num_samples`, default `n_0 + … + n_{K−1}`);
//!    each rank takes `m = ⌈N / W⌉` (or `⌊N / W⌋` with `drop_last`), so the
//!    epoch holds `T = m W` samples: the padding draws a few more in the same
//!    proportions rather than repeating.
//! 2. **The shares.** Source `k` gives `N_k = C_k − C_{k−1}` samples, with
//!    `C_k = min(T, ⌊T · (S_k / S)⌋)`, `S_k = w_0 + … + w_k` (summed in order),
//!    `S = S_{K−1}`, `C_{K−1} = T` and `C_{−1} = 0`, all in IEEE-754 double
//!    arithmetic (correctly rounded, so the same everywhere). The `C_k` never
//!    decrease, the shares sum to `T`, and each is within one of its exact share
//!    `T w_k / S`.
//! 3. **Each source's draws** `L_k`, `N_k` entries: pass `p` over the source is
//!    the [`Order`] of its `n_k` records (a [`Shuffle`], a [`BlockShuffle`] or
//!    record order) with seed `s_k = stream_key(seed, epoch, MixSource, k)` and
//!    epoch `p`, and `L_k[j]` is entry `j mod n_k` of pass `⌊j / n_k⌋`. A source
//!    whose share is at most its size is sampled without replacement (the first
//!    `N_k` records of one permutation); a smaller one is repeated, each pass a
//!    new permutation.
//! 4. **The ranks' parts.** The sources are the classes of the category-aware
//!    interleave: [`Dealing`] gives rank `r` `⌊N_k / W⌋` or `⌈N_k / W⌉` samples
//!    of source `k`, the ranks taking consecutive runs of `L_k` in rank order
//!    (rank `r` takes `L_k[a .. a + count]`, `a` the counts of the ranks before
//!    it), and [`Interleave`] orders each rank's samples so that every prefix of
//!    `t` samples holds `⌊t N_k / T⌋` to `⌈t N_k / T⌉` of source `k` (its proof
//!    is in [`crate::Interleave`]'s module).
//!
//! Every rank gets `m` samples; together the ranks take every entry of every
//! `L_k` once. With `resumed_from`, the epoch continues on other ranks as
//! [`crate::elastic`] describes, the rest dealt by source.

use std::thread;

use crate::blocks::BlockShuffle;
use crate::elastic::{Classifier, FirstRun};
use crate::index::Index;
use crate::interleave::{Dealing, Interleave};
use crate::interleave_chunks::classes_into;
use crate::part::{split_len, Epoch};
use crate::plan::Order;
use crate::rng::{stream_key, Purpose};
use crate::shuffle::Shuffle;
use crate::PlanError;

/// One epoch of a mixture, as described in the module documentation.
#[derive(Clone, Copy, Debug)]
pub struct Mixture<'a> {
    /// The records of each source.
    pub lengths: &'a [u64],
    /// Each source's weight (finite, at least 0; one of them positive). Only
    /// their ratios matter.
    pub weights: &'a [f64],
    /// Samples per epoch over all ranks (default: the sum of `lengths`).
    pub num_samples: Option<u64>,
    /// The seed: with the epoch, it determines every random choice.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// The number of ranks (> 0) of the current run.
    pub world_size: u64,
    /// `m = ⌊N / W⌋` instead of `⌈N / W⌉`.
    pub drop_last: bool,
    /// The order of each pass over a source.
    pub order: Order,
    /// The positions each rank of each earlier run of this epoch had reached
    /// (see [`crate::elastic`]); empty for an epoch begun by this run.
    pub resumed_from: &'a [Vec<u64>],
}

impl<'a> Mixture<'a> {
    /// A shuffled epoch 0 with seed 0 on one rank, of `lengths[k]` records from
    /// source `k` in proportion to `weights[k]`.
    pub fn new(lengths: &'a [u64], weights: &'a [f64]) -> Mixture<'a> {
        Mixture {
            lengths,
            weights,
            num_samples: None,
            seed: 0,
            epoch: 0,
            world_size: 1,
            drop_last: false,
            order: Order::Shuffled,
            resumed_from: &[],
        }
    }

    /// Checks the settings against each other.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.world_size == 0 {
            return Err(PlanError::WorldSize);
        }
        if self.order == Order::Blocks(0) {
            return Err(PlanError::BlockSize);
        }
        if self.weights.len() != self.lengths.len() {
            return Err(PlanError::SourcesLength {
                weights: self.weights.len() as u64,
                sources: self.lengths.len() as u64,
            });
        }
        if self.lengths.len() > u32::MAX as usize {
            return Err(PlanError::SourcesCount);
        }
        self.total_records()?;
        let mut positive = false;
        for (source, (&weight, &len)) in self.weights.iter().zip(self.lengths).enumerate() {
            if !(weight.is_finite() && weight >= 0.0) {
                return Err(PlanError::SourceWeight {
                    source: source as u64,
                    weight,
                });
            }
            if weight > 0.0 && len == 0 {
                return Err(PlanError::EmptySource {
                    source: source as u64,
                });
            }
            positive |= weight > 0.0;
        }
        if !positive {
            return Err(PlanError::NoSourceWeight);
        }
        if !self.weights.iter().sum::<f64>().is_finite() {
            return Err(PlanError::SourceWeightsTotal);
        }
        Ok(())
    }

    /// The records of all sources together.
    fn total_records(&self) -> Result<u64, PlanError> {
        self.lengths
            .iter()
            .try_fold(0u64, |sum, &n| sum.checked_add(n))
            .ok_or(PlanError::SourcesTotal)
    }

    /// `N`, the samples of an epoch (before the padding to a multiple of the
    /// first run's ranks).
    pub fn samples(&self) -> Result<u64, PlanError> {
        self.validate()?;
        match self.num_samples {
            Some(n) => Ok(n),
            None => self.total_records(),
        }
    }

    /// `m` of the epoch laid out on `world` ranks.
    fn per_rank_on(&self, world: u64) -> Result<u64, PlanError> {
        let samples = self.samples()?;
        if world == 0 {
            return Err(PlanError::WorldSize);
        }
        Ok(split_len(samples, world, self.drop_last))
    }

    /// `m`, the samples each rank of the current run gets.
    pub fn per_rank(&self) -> Result<u64, PlanError> {
        self.epoch().per_rank()
    }

    /// The epoch as the current run sees it: its first run (this mixture's
    /// settings) and the runs before this one.
    fn epoch(&self) -> Epoch<'a, Mixture<'a>> {
        Epoch {
            first: *self,
            resumed_from: self.resumed_from,
            world_size: self.world_size,
            drop_last: self.drop_last,
        }
    }

    /// Where each source starts in the index space, and the total at the end
    /// (`K + 1` entries).
    pub fn offsets(&self) -> Result<Vec<u64>, PlanError> {
        self.validate()?;
        let mut offsets = Vec::with_capacity(self.lengths.len() + 1);
        let mut at = 0;
        offsets.push(0);
        for &n in self.lengths {
            at += n;
            offsets.push(at);
        }
        Ok(offsets)
    }

    /// The source and record of the sample `index` of the index space, given
    /// [`Mixture::offsets`]; `None` past the last source.
    pub fn source_of(offsets: &[u64], index: u64) -> Option<(usize, u64)> {
        if offsets.last().is_none_or(|&end| index >= end) {
            return None;
        }
        // The last source starting at or before the index (sources of no
        // records start where the next one does).
        let source = offsets.partition_point(|&start| start <= index) - 1;
        Some((source, index - offsets[source]))
    }

    /// `N_k` of an epoch of `total` samples (step 2 of the module documentation).
    pub fn shares(&self, total: u64) -> Result<Vec<u64>, PlanError> {
        self.validate()?;
        let sum: f64 = self.weights.iter().sum();
        let last = self.weights.len() - 1;
        let mut shares = Vec::with_capacity(self.weights.len());
        let (mut running, mut before) = (0.0f64, 0u64);
        for (k, &w) in self.weights.iter().enumerate() {
            running += w;
            let cumulative = if k == last {
                total
            } else {
                // `as` saturates: a float past 2^64 is u64::MAX, cut to T.
                ((total as f64 * (running / sum)).floor() as u64).min(total)
            };
            let cumulative = cumulative.max(before);
            shares.push(cumulative - before);
            before = cumulative;
        }
        Ok(shares)
    }

    /// Rank `rank`'s part from position `start` on, as a new vector of indices
    /// in the index space ([`Mixture::source_of`] splits them).
    pub fn rank<I: Index>(&self, rank: u64, start: u64) -> Result<Vec<I>, PlanError> {
        self.epoch()
            .new_part(start, |out| self.rank_into(rank, start, out))
    }

    /// Writes rank `rank`'s part from position `start` on into `out`, which must
    /// hold exactly `m - start` entries.
    pub fn rank_into<I: Index>(
        &self,
        rank: u64,
        start: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        I::fill_mixture(self, rank, start, out)
    }

    /// [`Mixture::rank_into`], instantiated for each index type by
    /// [`Index::fill_mixture`] in this crate.
    pub(crate) fn fill_rank<I: Index>(
        &self,
        rank: u64,
        start: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        self.epoch().fill(rank, start, out)
    }

    /// The first `count` entries of `L_k` from `from` on, as indices of the
    /// index space.
    fn draws<I: Index>(&self, source: usize, offset: u64, from: u64, out: &mut [I]) {
        let n = self.lengths[source];
        let seed = stream_key(self.seed, self.epoch, Purpose::MixSource, source as u64);
        let mut done = 0usize;
        while done < out.len() {
            let at = from + done as u64;
            let (pass, position) = (at / n, at % n);
            let run = ((n - position) as usize).min(out.len() - done);
            let part = &mut out[done..done + run];
            match self.order {
                Order::Sequential => {
                    for (slot, i) in part.iter_mut().zip(position..) {
                        *slot = I::from_u64(i);
                    }
                }
                Order::Shuffled => Shuffle::records(n, seed, pass).fill(position, part),
                Order::Blocks(size) => BlockShuffle::new(n, size, seed, pass).fill(position, part),
            }
            for slot in part.iter_mut() {
                *slot = I::from_u64(slot.to_u64() + offset);
            }
            done += run;
        }
    }
}

/// The entries of group `start .. start + len` of a dealing to `world` ranks
/// (entry `x` to rank `x mod W`) that go to the ranks before `rank`.
fn dealt_before(start: u64, len: u64, world: u64, rank: u64) -> u64 {
    let below = |x: u64| -> u128 {
        let (x, world, rank) = (u128::from(x), u128::from(world), u128::from(rank));
        (x / world) * rank + (x % world).min(rank)
    };
    (below(start + len) - below(start)) as u64
}

impl FirstRun for Mixture<'_> {
    fn first_per_rank(&self, world: u64) -> Result<u64, PlanError> {
        self.per_rank_on(world)
    }

    fn records(&self) -> Result<u64, PlanError> {
        self.validate()?;
        self.total_records()
    }

    fn first_fill<I: Index>(
        &self,
        world: u64,
        rank: u64,
        start: u64,
        per_rank: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        // The draws wait in the narrowest type that holds them (half the memory
        // of 64-bit output below 2^32 records).
        if self.total_records()? <= 1 << 32 {
            self.gather::<I, u32>(world, rank, start, per_rank, out)
        } else {
            self.gather::<I, u64>(world, rank, start, per_rank, out)
        }
    }

    fn classifier(&self) -> Result<Option<Classifier<'_>>, PlanError> {
        Ok(Some(Classifier::Sources(self.offsets()?)))
    }
}

impl Mixture<'_> {
    /// Step 4 for rank `rank` of `world` (see [`FirstRun::first_rank_into`]),
    /// the draws kept as `J` until each slot takes its own.
    fn gather<I: Index, J: Index>(
        &self,
        world: u64,
        rank: u64,
        start: u64,
        per_rank: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        let shares = self.shares(per_rank * world)?;
        let offsets = self.offsets()?;
        let dealing = Dealing::new(&shares, world)?;
        let interleave = Interleave::new(&dealing, rank)?;
        let counts = interleave.counts().to_vec();
        // This rank's draws of each source, back to back: source k's run of L_k
        // after the runs of the ranks before it.
        let mut bucket_start = Vec::with_capacity(counts.len() + 1);
        let mut sum = 0u64;
        for &count in &counts {
            bucket_start.push(sum);
            sum += count;
        }
        bucket_start.push(sum);
        let mut mine = vec![J::default(); per_rank as usize];
        let mut buckets: Vec<(usize, &mut [J])> = Vec::with_capacity(counts.len());
        let mut rest: &mut [J] = &mut mine;
        for (source, &count) in counts.iter().enumerate() {
            let (bucket, tail) = rest.split_at_mut(count as usize);
            rest = tail;
            if count > 0 {
                buckets.push((source, bucket));
            }
        }
        // The interleave on threads of its own, writing each slot's source into
        // `out` (a class fits any index type: fewer than 2^32 sources), while the
        // draws of the sources are made on the others (a shuffle uses the cores
        // on its own only for sources of more than 2^18 records).
        let threads = crate::shuffle::threads().min(buckets.len()).max(1);
        let per_thread = buckets.len().div_ceil(threads);
        let skipped = thread::scope(|scope| {
            let classes = scope.spawn(|| classes_into(&dealing, rank, start, out));
            for group in buckets.chunks_mut(per_thread.max(1)) {
                let (dealing, offsets) = (&dealing, &offsets);
                scope.spawn(move || {
                    for (source, bucket) in group.iter_mut() {
                        let from = dealt_before(
                            dealing.group_start(*source),
                            dealing.shares()[*source],
                            world,
                            rank,
                        );
                        self.draws(*source, offsets[*source], from, bucket);
                    }
                });
            }
            classes
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })?;
        // Each slot takes its source's next draw, in place.
        let mut taken: Vec<u64> = bucket_start[..counts.len()]
            .iter()
            .zip(&skipped)
            .map(|(start, skipped)| start + skipped)
            .collect();
        for slot in out.iter_mut() {
            let c = slot.to_u64() as usize;
            *slot = I::from_u64(mine[taken[c] as usize].to_u64());
            taken[c] += 1;
        }
        Ok(())
    }
}
