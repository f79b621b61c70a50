//! A rank's part of an epoch, a [`Plan`](crate::Plan)'s or a
//! [`Mixture`](crate::Mixture)'s: how many entries each rank gets and which,
//! for an epoch begun by this run (the first run's layout, [`FirstRun`]) or
//! resumed after earlier runs ([`crate::elastic`]). A plan and a mixture each
//! describe their epoch's list; splitting it over the ranks happens here only.

use crate::elastic::{resumed_into, resumed_per_rank, FirstRun};
use crate::index::Index;
use crate::PlanError;

/// `m` for a list of `len` entries on `world` ranks: `⌈len / W⌉` (the last
/// entries repeat the first ones), or `⌊len / W⌋` with `drop_last` (the last
/// `len mod W` are left out).
pub(crate) fn split_len(len: u64, world: u64, drop_last: bool) -> u64 {
    if drop_last {
        len / world
    } else {
        len.div_ceil(world)
    }
}

/// An epoch as the current run sees it: its first run, and the positions of the
/// earlier runs of the epoch (empty for an epoch begun by this run).
pub(crate) struct Epoch<'a, F> {
    pub first: F,
    pub resumed_from: &'a [Vec<u64>],
    pub world_size: u64,
    pub drop_last: bool,
}

impl<F: FirstRun> Epoch<'_, F> {
    /// `m`, the entries each rank of the current run gets.
    pub fn per_rank(&self) -> Result<u64, PlanError> {
        if self.resumed_from.is_empty() {
            self.first.first_per_rank(self.world_size)
        } else {
            resumed_per_rank(
                &self.first,
                self.resumed_from,
                self.world_size,
                self.drop_last,
            )
        }
    }

    /// Writes rank `rank`'s part from position `start` on into `out`, which must
    /// hold exactly `m - start` entries of a type that holds every index.
    pub fn fill<I: Index>(&self, rank: u64, start: u64, out: &mut [I]) -> Result<(), PlanError> {
        if self.resumed_from.is_empty() {
            self.first
                .first_rank_into(self.world_size, rank, start, out)
        } else {
            check_index_type::<I>(self.first.records()?)?;
            resumed_into(
                &self.first,
                self.resumed_from,
                self.world_size,
                self.drop_last,
                rank,
                start,
                out,
            )
        }
    }

    /// [`Epoch::fill`] into a new vector, `fill` being the caller's
    /// [`Index`]-dispatched way to it.
    pub fn new_part<I: Index>(
        &self,
        start: u64,
        fill: impl FnOnce(&mut [I]) -> Result<(), PlanError>,
    ) -> Result<Vec<I>, PlanError> {
        let per_rank = self.per_rank()?;
        let mut out = vec![I::default(); per_rank.saturating_sub(start) as usize];
        fill(&mut out)?;
        Ok(out)
    }
}

/// Errors unless `I` holds every index below `records`.
pub(crate) fn check_index_type<I: Index>(records: u64) -> Result<(), PlanError> {
    if records > 0 && records - 1 > I::MAX_INDEX {
        return Err(PlanError::IndexType { len: records });
    }
    Ok(())
}
