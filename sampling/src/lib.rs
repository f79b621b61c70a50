//! Deterministic epoch orders for training on one or many ranks: which records
//! each rank reads in each epoch, and in which order.
//!
//! Everything is a pure function of its settings and `(seed, epoch)`, specified
//! down to the bit ([`rng`] for the random numbers, each module for how it uses
//! them), so every process, machine and version computes the same order, and a
//! run resumes mid-epoch by computing its rank's part again from a position,
//! never by reading the records it skips.
//!
//! - [`Shuffle`]: uniform permutations in O(n) with cache-friendly passes (about
//!   4 bytes per record as `u32`), any range of positions on its own.
//! - [`BlockShuffle`]: blocks of consecutive records in random order, shuffled
//!   within, for reads that stay in one region of the dataset.
//! - [`weighted_order`]: weighted sampling without replacement (Efraimidis and
//!   Spirakis' keys `u^(1/w)`), which with inverse class frequencies draws every
//!   class equally often.
//! - [`Dealing`] and [`Interleave`]: the category-aware order, with its proof
//!   that every prefix of every rank's epoch holds each class within one record
//!   of its share of the whole epoch.
//! - [`Plan`]: one epoch over `W` ranks (exactly once per epoch, equal counts,
//!   padding or `drop_last`), from any position.
//! - [`Mixture`]: one epoch drawn from several sources in fixed proportions,
//!   each source its share, interleaved as the category-aware order is.
//! - [`elastic`]: an epoch begun on `W` ranks and resumed on `W'`: the new
//!   ranks take exactly what the old ones had not consumed.
//! - [`equal_allocation`], [`balanced_subset`], [`uniform_subset`]: subsets for
//!   evaluation sets, equal per class where the classes allow.
//!
//! ```
//! use bcd_sampling::{Order, Plan};
//!
//! let plan = Plan { seed: 7, epoch: 3, world_size: 4, order: Order::Shuffled, ..Plan::new(10) };
//! let parts: Vec<Vec<u64>> = (0..4).map(|rank| plan.rank(rank, 0)).collect::<Result<_, _>>()?;
//! assert!(parts.iter().all(|part| part.len() == 3)); // 10 records padded to 12
//! // Resuming rank 2 after one record gives the rest of its part.
//! assert_eq!(plan.rank::<u64>(2, 1)?, parts[2][1..]);
//! # Ok::<(), bcd_sampling::PlanError>(())
//! ```
//!
//! This crate knows nothing of datasets: it orders the numbers `0..n`.

#![warn(missing_docs)]

mod allocate;
mod blocks;
mod dealt;
pub mod elastic;
mod index;
mod interleave;
mod interleave_chunks;
mod interleave_fit;
mod mixture;
mod part;
mod plan;
pub mod rng;
mod shuffle;
mod weighted;

use std::fmt;

pub use allocate::{balanced_subset, equal_allocation, uniform_subset};
pub use blocks::BlockShuffle;
pub use index::Index;
pub use interleave::{Dealing, Interleave};
pub use mixture::Mixture;
pub use plan::{Order, Plan, Weights};
pub use shuffle::{Shuffle, BUCKET_SHIFT, CHUNK};
pub use weighted::weighted_order;

/// Why an epoch or a subset cannot be made. Messages name settings by field
/// (`world_size`, `num_samples`, ...), which each front end spells its way.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PlanError {
    /// `world_size` is 0.
    WorldSize,
    /// `rank` is not below `world_size`.
    Rank {
        /// The rank asked for.
        rank: u64,
        /// The number of ranks.
        world_size: u64,
    },
    /// `block_size` is 0.
    BlockSize,
    /// `categories` does not have one entry per record.
    CategoriesLength {
        /// Entries given.
        got: u64,
        /// Records.
        expected: u64,
    },
    /// `weights` does not have one entry per record.
    WeightsLength {
        /// Entries given.
        got: u64,
        /// Records.
        expected: u64,
    },
    /// Inverse-frequency weights without categories.
    InverseFrequencyNeedsCategories,
    /// A weight that is negative, NaN or infinite.
    BadWeight {
        /// The record.
        index: u64,
        /// Its weight.
        weight: f64,
    },
    /// More weighted samples asked for than records have a positive weight.
    TooFewWeighted {
        /// `num_samples`.
        asked: u64,
        /// Records of positive weight.
        positive: u64,
    },
    /// A sample larger than what it is drawn from.
    SampleTooLarge {
        /// The sample size asked for.
        asked: u64,
        /// Records there are.
        available: u64,
    },
    /// A resume position past the rank's part.
    Start {
        /// The position.
        start: u64,
        /// The rank's part.
        per_rank: u64,
    },
    /// An output buffer of the wrong length.
    OutputLength {
        /// Its length.
        got: u64,
        /// The entries to write.
        expected: u64,
    },
    /// An index type too narrow for the record count.
    IndexType {
        /// Records.
        len: u64,
    },
    /// Class shares that cannot be dealt equally to the ranks (a total that is
    /// not a multiple of the world size: a bug in the caller of
    /// [`Dealing::new`]).
    InterleaveCounts,
    /// A mixture's `weights` and sources differ in number.
    SourcesLength {
        /// Weights given.
        weights: u64,
        /// Sources.
        sources: u64,
    },
    /// A mixture source's weight that is negative, NaN or infinite.
    SourceWeight {
        /// The source.
        source: u64,
        /// Its weight.
        weight: f64,
    },
    /// A mixture whose weights are all 0 (or that has no source).
    NoSourceWeight,
    /// A mixture whose weights add up to more than the largest double.
    SourceWeightsTotal,
    /// A mixture source of no records with a positive weight.
    EmptySource {
        /// The source.
        source: u64,
    },
    /// A mixture's sources hold more than 2^64 − 1 records together.
    SourcesTotal,
    /// A mixture of 2^32 sources or more.
    SourcesCount,
    /// A run of `resumed_from` with no ranks.
    ResumedRanks {
        /// The run (0 is the first).
        run: u64,
    },
    /// A position of `resumed_from` past the end of its rank's part.
    ResumedPosition {
        /// The run (0 is the first).
        run: u64,
        /// The rank.
        rank: u64,
        /// Its position.
        position: u64,
        /// The entries of each rank's part in that run.
        per_rank: u64,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::WorldSize => write!(f, "`world_size` must be at least 1"),
            PlanError::Rank { rank, world_size } => write!(
                f,
                "`rank` {rank} is out of range for a `world_size` of {world_size} (ranks are 0 to {})",
                world_size.saturating_sub(1)
            ),
            PlanError::BlockSize => write!(f, "`block_size` must be at least 1"),
            PlanError::CategoriesLength { got, expected } => write!(
                f,
                "`categories` has {got} entries for {expected} records; give one per record"
            ),
            PlanError::WeightsLength { got, expected } => write!(
                f,
                "`weights` has {got} entries for {expected} records; give one per record"
            ),
            PlanError::InverseFrequencyNeedsCategories => write!(
                f,
                "inverse-frequency `weights` need the records' categories (`categories` or `balance_by`)"
            ),
            PlanError::BadWeight { index, weight } => write!(
                f,
                "`weights`: record {index} has weight {weight}; weights must be finite and at least 0"
            ),
            PlanError::TooFewWeighted { asked, positive } => write!(
                f,
                "`num_samples` is {asked}, but only {positive} records have a positive weight (sampling is without replacement)"
            ),
            PlanError::SampleTooLarge { asked, available } => write!(
                f,
                "a sample of {asked} records was asked for, but there are only {available}"
            ),
            PlanError::Start { start, per_rank } => write!(
                f,
                "resume position {start} is past the end of the rank's {per_rank} entries"
            ),
            PlanError::OutputLength { got, expected } => write!(
                f,
                "the output holds {got} entries, but {expected} are to be written"
            ),
            PlanError::IndexType { len } => write!(
                f,
                "{len} records do not fit the output's index type; use 64-bit indices"
            ),
            PlanError::InterleaveCounts => write!(
                f,
                "internal error: class shares whose total is not a multiple of the world size"
            ),
            PlanError::SourcesLength { weights, sources } => write!(
                f,
                "`weights` has {weights} entries for {sources} sources; give one per source"
            ),
            PlanError::SourceWeight { source, weight } => write!(
                f,
                "`weights`: source {source} has weight {weight}; weights must be finite and at least 0"
            ),
            PlanError::NoSourceWeight => write!(
                f,
                "`weights`: no source has a positive weight, so there is nothing to draw from"
            ),
            PlanError::SourceWeightsTotal => write!(
                f,
                "`weights` add up to more than the largest double; scale them down (only their ratios matter)"
            ),
            PlanError::EmptySource { source } => write!(
                f,
                "source {source} has no records but a positive weight; give it weight 0 or leave it out"
            ),
            PlanError::SourcesTotal => write!(
                f,
                "the sources hold more than 2^64 - 1 records together"
            ),
            PlanError::SourcesCount => write!(f, "a mixture takes fewer than 2^32 sources"),
            PlanError::ResumedRanks { run } => write!(
                f,
                "`resumed_from`: run {run} lists no ranks (each run lists one position per rank)"
            ),
            PlanError::ResumedPosition {
                run,
                rank,
                position,
                per_rank,
            } => write!(
                f,
                "`resumed_from`: rank {rank} of run {run} is at position {position}, past the end of its {per_rank} entries"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// The entries of a rank's part of `per_rank` entries from position `start` on,
/// checking that `rank` is one of `world_size` ranks and `start` within the part.
pub fn part_len(per_rank: u64, world_size: u64, rank: u64, start: u64) -> Result<u64, PlanError> {
    if world_size == 0 {
        return Err(PlanError::WorldSize);
    }
    if rank >= world_size {
        return Err(PlanError::Rank { rank, world_size });
    }
    per_rank
        .checked_sub(start)
        .ok_or(PlanError::Start { start, per_rank })
}

/// [`part_len`], and that `out` holds exactly that many entries.
pub(crate) fn check_part<I>(
    per_rank: u64,
    world_size: u64,
    rank: u64,
    start: u64,
    out: &[I],
) -> Result<(), PlanError> {
    let expected = part_len(per_rank, world_size, rank, start)?;
    if out.len() as u64 != expected {
        return Err(PlanError::OutputLength {
            got: out.len() as u64,
            expected,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A xorshift64 stream: the cases of the unit tests.
    pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }
}
