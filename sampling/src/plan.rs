//! One epoch of one rank: which records, in which order.
//!
//! A [`Plan`] describes the epoch; [`Plan::rank_into`] writes one rank's part
//! of it from any position on (resuming costs the computation, never a read of
//! the dataset). The epoch is built in three steps:
//!
//! 1. **The base list** of `L` records:
//!    - with `weights`: the weighted random order of [`weighted_order`] of
//!      `num_samples` records (default: every record of positive weight);
//!    - otherwise the records in [`Order`] (the identity, the shuffle of
//!      [`Shuffle::records`] or the [`BlockShuffle`]), cut to its first
//!      `num_samples` entries when that is given.
//! 2. **The epoch list** of `T = m·W` entries (`W` ranks, `m` per rank): the base
//!    list repeated cyclically, `E[p] = base[p mod L]`, with `m = ⌈L / W⌉`
//!    (the last entries repeat the first ones, as `DistributedSampler` pads),
//!    or with `drop_last` `m = ⌊L / W⌋` (the last `L mod W` entries are left out).
//! 3. **The ranks' parts.** Rank `r` takes `E[r·m .. (r+1)·m]`, in order. With
//!    `categories` (the category-aware shuffle), instead: the entries of `E` are
//!    grouped by class (classes in the order of [`Dealing`], entries in `E`
//!    order within each), and the `i`-th entry of that grouped list goes to rank
//!    `i mod W`. Each rank thus gets `⌊N_c / W⌋` or `⌈N_c / W⌉` of the `N_c`
//!    entries of class `c` (which classes it rounds up is what the order of the
//!    groups decides), and takes them in the order of [`Interleave`]: each
//!    class's entries in `E` order, classes interleaved so that every prefix of
//!    `t` entries holds `⌊t N_c / T⌋` to `⌈t N_c / T⌉` of class `c`.
//!
//! Every index appears in the ranks' parts together exactly as often as in `E`:
//! once per epoch for every record of the base list, plus the repeated padding
//! (fewer than `W` entries, unless `L < W`), minus what `drop_last` leaves out.
//! Every rank gets `m` entries.

use crate::blocks::BlockShuffle;
use crate::dealt::{Classes, Dealt};
use crate::elastic::{Classifier, FirstRun};
use crate::index::Index;
use crate::part::{split_len, Epoch};
use crate::shuffle::Shuffle;
use crate::weighted::weighted_order;
use crate::PlanError;

/// The order of the records before ranks take their parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Record order.
    Sequential,
    /// A uniform random permutation ([`Shuffle::records`]).
    Shuffled,
    /// Blocks of this many consecutive records in random order, shuffled within
    /// ([`BlockShuffle`]).
    Blocks(u64),
}

/// Per-record weights for weighted sampling without replacement.
#[derive(Clone, Copy, Debug)]
pub enum Weights<'a> {
    /// The weight of each record (finite, at least 0).
    PerRecord(&'a [f64]),
    /// Each record weighs 1 / the number of records of its class (needs
    /// categories): every class is drawn equally often.
    InverseFrequency,
}

/// One epoch, as described in the module documentation.
#[derive(Clone, Copy, Debug)]
pub struct Plan<'a> {
    /// Records in the dataset.
    pub len: u64,
    /// The seed: with the epoch, it determines every random choice.
    pub seed: u64,
    /// The epoch.
    pub epoch: u64,
    /// The number of ranks (> 0).
    pub world_size: u64,
    /// Leave out the last `L mod W` entries instead of padding.
    pub drop_last: bool,
    /// The record order (ignored with `weights`).
    pub order: Order,
    /// Each record's class (its code), for the category-aware interleave and for
    /// [`Weights::InverseFrequency`].
    pub categories: Option<&'a [u32]>,
    /// Weighted sampling without replacement.
    pub weights: Option<Weights<'a>>,
    /// The size of the base list, over all ranks (default: every record, or
    /// every record of positive weight).
    pub num_samples: Option<u64>,
    /// The positions each rank of each earlier run of this epoch had reached,
    /// for an epoch resumed on other ranks (see [`crate::elastic`]); empty for
    /// an epoch begun by this run. `world_size` is the current run's.
    pub resumed_from: &'a [Vec<u64>],
}

impl<'a> Plan<'a> {
    /// A shuffled epoch 0 of `len` records with seed 0 on one rank, padded.
    pub fn new(len: u64) -> Plan<'a> {
        Plan {
            len,
            seed: 0,
            epoch: 0,
            world_size: 1,
            drop_last: false,
            order: Order::Shuffled,
            categories: None,
            weights: None,
            num_samples: None,
            resumed_from: &[],
        }
    }

    /// Checks the settings against each other and the record count.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.world_size == 0 {
            return Err(PlanError::WorldSize);
        }
        if self.order == Order::Blocks(0) {
            return Err(PlanError::BlockSize);
        }
        if let Some(categories) = self.categories {
            if categories.len() as u64 != self.len {
                return Err(PlanError::CategoriesLength {
                    got: categories.len() as u64,
                    expected: self.len,
                });
            }
        }
        match self.weights {
            Some(Weights::PerRecord(weights)) if weights.len() as u64 != self.len => {
                return Err(PlanError::WeightsLength {
                    got: weights.len() as u64,
                    expected: self.len,
                })
            }
            Some(Weights::InverseFrequency) if self.categories.is_none() => {
                return Err(PlanError::InverseFrequencyNeedsCategories)
            }
            _ => {}
        }
        if let (None, Some(asked)) = (self.weights, self.num_samples) {
            if asked > self.len {
                return Err(PlanError::SampleTooLarge {
                    asked,
                    available: self.len,
                });
            }
        }
        Ok(())
    }

    /// `L`, the length of the base list.
    pub fn list_len(&self) -> Result<u64, PlanError> {
        self.validate()?;
        Ok(match (self.weights, self.num_samples) {
            (_, Some(count)) => count,
            (Some(Weights::PerRecord(weights)), None) => {
                let mut positive = 0;
                for (index, &w) in weights.iter().enumerate() {
                    if !(w.is_finite() && w >= 0.0) {
                        return Err(PlanError::BadWeight {
                            index: index as u64,
                            weight: w,
                        });
                    }
                    positive += u64::from(w > 0.0);
                }
                positive
            }
            _ => self.len,
        })
    }

    /// `m`, the entries each rank (of the current run) gets.
    pub fn per_rank(&self) -> Result<u64, PlanError> {
        self.epoch().per_rank()
    }

    /// The epoch as the current run sees it: its first run (the plan without
    /// `resumed_from`) and the runs before this one.
    fn epoch(&self) -> Epoch<'a, FirstPlan<'a>> {
        Epoch {
            first: FirstPlan(Plan {
                resumed_from: &[],
                ..*self
            }),
            resumed_from: self.resumed_from,
            world_size: self.world_size,
            drop_last: self.drop_last,
        }
    }

    /// Checks that `rank` is one of the plan's ranks (below `world_size`).
    pub fn check_rank(&self, rank: u64) -> Result<(), PlanError> {
        if self.world_size == 0 {
            return Err(PlanError::WorldSize);
        }
        if rank >= self.world_size {
            return Err(PlanError::Rank {
                rank,
                world_size: self.world_size,
            });
        }
        Ok(())
    }

    /// Rank `rank`'s part from position `start` on, as a new vector.
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
        I::fill_rank(self, rank, start, out)
    }

    /// [`Plan::rank_into`], instantiated for each index type by
    /// [`Index::fill_rank`] in this crate.
    pub(crate) fn fill_rank<I: Index>(
        &self,
        rank: u64,
        start: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        self.epoch().fill(rank, start, out)
    }

    /// Steps 1 to 3 of the first run (`world_size` ranks of `per_rank`
    /// entries) for rank `rank` from `start` on, into `out` (checked).
    fn first_fill<I: Index>(
        &self,
        rank: u64,
        start: u64,
        per_rank: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        let list_len = self.list_len()?;
        let base = Base::new(self, list_len)?;
        match self.categories {
            Some(categories) => self.balanced_into(&base, categories, rank, per_rank, start, out),
            None => {
                let first = rank * per_rank + start;
                base.fill_cyclic(first, out);
                Ok(())
            }
        }
    }

    /// Step 3 with categories: the rank's entries of the grouped list, interleaved.
    fn balanced_into<I: Index>(
        &self,
        base: &Base,
        categories: &[u32],
        rank: u64,
        per_rank: u64,
        start: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        let classes = Classes::new(categories);
        let mut list = vec![I::default(); base.len as usize];
        base.fill(0, &mut list);
        let class_of = |entry: I| classes.class(categories[entry.to_u64() as usize]);
        Dealt::new(&list, class_of, classes.count(), self.world_size, per_rank)?
            .rank_into(rank, start, out)
    }
}

/// A plan without `resumed_from`: the first run of an epoch.
struct FirstPlan<'a>(Plan<'a>);

impl FirstRun for FirstPlan<'_> {
    fn first_per_rank(&self, world: u64) -> Result<u64, PlanError> {
        if world == 0 {
            return Err(PlanError::WorldSize);
        }
        Ok(split_len(self.0.list_len()?, world, self.0.drop_last))
    }

    fn records(&self) -> Result<u64, PlanError> {
        Ok(self.0.len)
    }

    fn first_fill<I: Index>(
        &self,
        world: u64,
        rank: u64,
        start: u64,
        per_rank: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        Plan {
            world_size: world,
            ..self.0
        }
        .first_fill(rank, start, per_rank, out)
    }

    fn classifier(&self) -> Result<Option<Classifier<'_>>, PlanError> {
        self.0.validate()?;
        Ok(self.0.categories.map(|categories| Classifier::Categories {
            classes: Classes::new(categories),
            categories,
        }))
    }
}

/// Step 1: the base list, any range of it.
struct Base {
    len: u64,
    kind: BaseKind,
}

enum BaseKind {
    Sequential,
    Shuffled(Shuffle),
    Blocks(BlockShuffle),
    Weighted(Vec<u64>),
}

impl Base {
    fn new(plan: &Plan<'_>, len: u64) -> Result<Base, PlanError> {
        let kind = match plan.weights {
            Some(weights) => {
                let order = match weights {
                    Weights::PerRecord(w) => {
                        weighted_order(plan.len, &|i| w[i as usize], len, plan.seed, plan.epoch)?
                    }
                    Weights::InverseFrequency => {
                        let categories = plan
                            .categories
                            .ok_or(PlanError::InverseFrequencyNeedsCategories)?;
                        let classes = Classes::new(categories);
                        let mut sizes = vec![0u64; classes.count()];
                        for &code in categories {
                            sizes[classes.class(code)] += 1;
                        }
                        let weight =
                            |i: u64| 1.0 / sizes[classes.class(categories[i as usize])] as f64;
                        weighted_order(plan.len, &weight, len, plan.seed, plan.epoch)?
                    }
                };
                BaseKind::Weighted(order)
            }
            None => match plan.order {
                Order::Sequential => BaseKind::Sequential,
                Order::Shuffled => {
                    BaseKind::Shuffled(Shuffle::records(plan.len, plan.seed, plan.epoch))
                }
                Order::Blocks(size) => {
                    BaseKind::Blocks(BlockShuffle::new(plan.len, size, plan.seed, plan.epoch))
                }
            },
        };
        Ok(Base { len, kind })
    }

    /// Positions `start .. start + out.len()` of the base list (within `len`).
    fn fill<I: Index>(&self, start: u64, out: &mut [I]) {
        match &self.kind {
            BaseKind::Sequential => {
                for (slot, index) in out.iter_mut().zip(start..) {
                    *slot = I::from_u64(index);
                }
            }
            BaseKind::Shuffled(shuffle) => shuffle.fill(start, out),
            BaseKind::Blocks(blocks) => blocks.fill(start, out),
            BaseKind::Weighted(order) => {
                for (slot, &index) in out.iter_mut().zip(&order[start as usize..]) {
                    *slot = I::from_u64(index);
                }
            }
        }
    }

    /// Positions `first ..` of the epoch list `E[p] = base[p mod L]`.
    fn fill_cyclic<I: Index>(&self, first: u64, out: &mut [I]) {
        let mut done = 0;
        while done < out.len() {
            let position = (first + done as u64) % self.len;
            let run = ((self.len - position) as usize).min(out.len() - done);
            self.fill(position, &mut out[done..done + run]);
            done += run;
        }
    }
}
