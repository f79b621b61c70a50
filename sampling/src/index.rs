//! The integer types an order can be written as.

use crate::{Mixture, Plan, PlanError};

/// A record index as stored in an output array: `u32` halves the memory of an
/// order of fewer than 2^32 records, `u64` and `i64` take any (the callers check
/// that every index fits before choosing `u32`).
pub trait Index: Copy + Default + Send + Sync + 'static {
    /// The index `value` (which the caller has checked fits).
    fn from_u64(value: u64) -> Self;
    /// The index as a `u64`.
    fn to_u64(self) -> u64;
    /// The largest index this type holds.
    const MAX_INDEX: u64;
    /// [`Plan::rank_into`] for this type, compiled in this crate (with its
    /// optimisation settings) rather than in each caller's.
    #[doc(hidden)]
    fn fill_rank(plan: &Plan<'_>, rank: u64, start: u64, out: &mut [Self])
        -> Result<(), PlanError>;
    /// [`Mixture::rank_into`] for this type, compiled in this crate.
    #[doc(hidden)]
    fn fill_mixture(
        mixture: &Mixture<'_>,
        rank: u64,
        start: u64,
        out: &mut [Self],
    ) -> Result<(), PlanError>;
}

impl Index for u32 {
    #[inline]
    fn from_u64(value: u64) -> u32 {
        debug_assert!(value <= u64::from(u32::MAX));
        value as u32
    }
    #[inline]
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    const MAX_INDEX: u64 = u32::MAX as u64;
    fn fill_rank(plan: &Plan<'_>, rank: u64, start: u64, out: &mut [u32]) -> Result<(), PlanError> {
        plan.fill_rank(rank, start, out)
    }
    fn fill_mixture(
        mixture: &Mixture<'_>,
        rank: u64,
        start: u64,
        out: &mut [u32],
    ) -> Result<(), PlanError> {
        mixture.fill_rank(rank, start, out)
    }
}

impl Index for u64 {
    #[inline]
    fn from_u64(value: u64) -> u64 {
        value
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self
    }
    const MAX_INDEX: u64 = u64::MAX;
    fn fill_rank(plan: &Plan<'_>, rank: u64, start: u64, out: &mut [u64]) -> Result<(), PlanError> {
        plan.fill_rank(rank, start, out)
    }
    fn fill_mixture(
        mixture: &Mixture<'_>,
        rank: u64,
        start: u64,
        out: &mut [u64],
    ) -> Result<(), PlanError> {
        mixture.fill_rank(rank, start, out)
    }
}

impl Index for i64 {
    #[inline]
    fn from_u64(value: u64) -> i64 {
        debug_assert!(value <= i64::MAX as u64);
        value as i64
    }
    #[inline]
    fn to_u64(self) -> u64 {
        self as u64
    }
    const MAX_INDEX: u64 = i64::MAX as u64;
    fn fill_rank(plan: &Plan<'_>, rank: u64, start: u64, out: &mut [i64]) -> Result<(), PlanError> {
        plan.fill_rank(rank, start, out)
    }
    fn fill_mixture(
        mixture: &Mixture<'_>,
        rank: u64,
        start: u64,
        out: &mut [i64],
    ) -> Result<(), PlanError> {
        mixture.fill_rank(rank, start, out)
    }
}
