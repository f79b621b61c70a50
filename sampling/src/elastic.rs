//! Elastic resume: an epoch begun on `W` ranks, continued on `W'`.
//!
//! A run that stopped with rank `r` of its `W` ranks at position `c_r` of its
//! part `P_r` (the entries it had consumed) leaves the *rest* of the epoch, the
//! parts from their positions on, rank by rank:
//!
//! ```text
//! R = P_0[c_0..] ++ P_1[c_1..] ++ … ++ P_{W−1}[c_{W−1}..]
//! ```
//!
//! The next run, on `W'` ranks, lays `R` out as [`Plan`](crate::Plan) lays out
//! a base list (its steps 2 and 3): the epoch list `E'[p] = R[p mod |R|]` of
//! `m' W'` entries, `m' = ⌈|R| / W'⌉` (or `⌊|R| / W'⌋` with `drop_last`), cut
//! into contiguous parts, or, for a plan with categories and for a
//! [`Mixture`](crate::Mixture) (whose classes are its sources), dealt to the
//! ranks by class and interleaved ([`Dealing`](crate::Dealing),
//! [`Interleave`](crate::Interleave)). So the `W'` ranks together take every
//! entry the `W` ranks had not consumed, once (plus, as in any epoch, fewer than
//! `W'` entries repeated as padding, or with `drop_last` fewer than `W'` left
//! out), every rank the same count, and a balanced epoch or a mixture stays one:
//! every prefix of a new rank's part holds each class (source) within one entry
//! of its share of the rest.
//!
//! One exception keeps a resume on as many ranks what it always was: when `W' =
//! W` and every rank stopped at the same position `c` (ranks that step together),
//! rank `r` continues its own part, `P_r[c..]`.
//!
//! A resumed run may stop and be resumed again: `resumed_from` lists the
//! positions of every earlier run of the epoch, the first run's first, each run
//! one position per rank (so run `i` had `resumed_from[i].len()` ranks). The
//! current run's ranks are the plan's `world_size`. Each run's rest is computed
//! from the one before, so a resume costs the computation of the whole epoch
//! (every rank's part of the first run), never a read of the data.

use crate::dealt::{Classes, Dealt};
use crate::index::Index;
use crate::part::{check_index_type, split_len};
use crate::{check_part, PlanError};

/// The class of each entry, for dealing a rest by class.
pub(crate) enum Classifier<'a> {
    /// Records by their category code.
    Categories {
        classes: Classes,
        categories: &'a [u32],
    },
    /// A mixture's samples by source: where each source starts, and the end.
    Sources(Vec<u64>),
}

impl Classifier<'_> {
    fn count(&self) -> usize {
        match self {
            Classifier::Categories { classes, .. } => classes.count(),
            Classifier::Sources(offsets) => offsets.len() - 1,
        }
    }

    #[inline]
    fn class(&self, entry: u64) -> usize {
        match self {
            Classifier::Categories {
                classes,
                categories,
            } => classes.class(categories[entry as usize]),
            Classifier::Sources(offsets) => offsets.partition_point(|&start| start <= entry) - 1,
        }
    }
}

/// What the elastic resume needs of an epoch's first run: a [`Plan`] or a
/// [`Mixture`] without `resumed_from`.
///
/// [`Plan`]: crate::Plan
/// [`Mixture`]: crate::Mixture
pub(crate) trait FirstRun {
    /// `m`, the entries of each rank, of the first run on `world` ranks.
    fn first_per_rank(&self, world: u64) -> Result<u64, PlanError>;
    /// The records the entries index: every entry is below it.
    fn records(&self) -> Result<u64, PlanError>;
    /// Rank `rank`'s part of the first run on `world` ranks (`per_rank`
    /// entries each), from `start` on, into `out`, which
    /// [`FirstRun::first_rank_into`] has checked.
    fn first_fill<I: Index>(
        &self,
        world: u64,
        rank: u64,
        start: u64,
        per_rank: u64,
        out: &mut [I],
    ) -> Result<(), PlanError>;
    /// The classes the rest is dealt by (`None`: contiguous parts).
    fn classifier(&self) -> Result<Option<Classifier<'_>>, PlanError>;

    /// Rank `rank`'s part of the first run on `world` ranks, from `start` on,
    /// after checking the rank, the position, `out`'s length and its index type.
    fn first_rank_into<I: Index>(
        &self,
        world: u64,
        rank: u64,
        start: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        let per_rank = self.first_per_rank(world)?;
        check_part(per_rank, world, rank, start, out)?;
        check_index_type::<I>(self.records()?)?;
        if out.is_empty() {
            return Ok(());
        }
        self.first_fill(world, rank, start, per_rank, out)
    }
}

/// Whether run `positions` (of `world` ranks) followed by `next_world` ranks
/// continues each rank's part: the same ranks, all at the same position.
fn lockstep(positions: &[u64], next_world: u64) -> bool {
    positions.len() as u64 == next_world && positions.windows(2).all(|w| w[0] == w[1])
}

/// The ranks of the run after run `run` (the current run's after the last).
fn next_world(runs: &[Vec<u64>], run: usize, world_size: u64) -> Result<u64, PlanError> {
    let world = match runs.get(run + 1) {
        Some(positions) => positions.len() as u64,
        None => world_size,
    };
    match world {
        0 if run + 1 < runs.len() => Err(PlanError::ResumedRanks {
            run: run as u64 + 1,
        }),
        0 => Err(PlanError::WorldSize),
        world => Ok(world),
    }
}

/// `m` of the current run, after the runs `runs` (not empty), checking every
/// position against its run's parts.
pub(crate) fn resumed_per_rank(
    first: &impl FirstRun,
    runs: &[Vec<u64>],
    world_size: u64,
    drop_last: bool,
) -> Result<u64, PlanError> {
    let Some(first_run) = runs.first() else {
        return Err(PlanError::ResumedRanks { run: 0 });
    };
    if first_run.is_empty() {
        return Err(PlanError::ResumedRanks { run: 0 });
    }
    let mut per_rank = first.first_per_rank(first_run.len() as u64)?;
    for (run, positions) in runs.iter().enumerate() {
        let mut rest = 0u64;
        for (rank, &position) in positions.iter().enumerate() {
            if position > per_rank {
                return Err(PlanError::ResumedPosition {
                    run: run as u64,
                    rank: rank as u64,
                    position,
                    per_rank,
                });
            }
            rest = rest.saturating_add(per_rank - position);
        }
        let world = next_world(runs, run, world_size)?;
        per_rank = if lockstep(positions, world) {
            per_rank - positions[0]
        } else {
            split_len(rest, world, drop_last)
        };
    }
    Ok(per_rank)
}

/// The parts of one run.
enum Layout<I> {
    /// The first run's parts on `world` ranks, each from `skip` on.
    First { world: u64, skip: u64 },
    /// Every rank's part of `per_rank` entries, back to back, each from `skip` on.
    Flat {
        parts: Vec<I>,
        per_rank: u64,
        skip: u64,
    },
}

impl<I: Index> Layout<I> {
    /// Rank `rank`'s part from `from` (counted after the skip) into `out`.
    fn part_into(
        &self,
        first: &impl FirstRun,
        rank: u64,
        from: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        match self {
            Layout::First { world, skip } => first.first_rank_into(*world, rank, skip + from, out),
            Layout::Flat {
                parts,
                per_rank,
                skip,
            } => {
                let at = (rank * per_rank + skip + from) as usize;
                out.copy_from_slice(&parts[at..at + out.len()]);
                Ok(())
            }
        }
    }

    /// The rest `R` after rank `r` (of parts of `part_len` entries after the
    /// skip) consumed `positions[r]`.
    fn rest(
        &self,
        first: &impl FirstRun,
        positions: &[u64],
        part_len: u64,
    ) -> Result<Vec<I>, PlanError> {
        let total: u64 = positions.iter().map(|&c| part_len - c).sum();
        let mut rest = vec![I::default(); total as usize];
        let mut at = 0usize;
        for (rank, &position) in positions.iter().enumerate() {
            let len = (part_len - position) as usize;
            self.part_into(first, rank as u64, position, &mut rest[at..at + len])?;
            at += len;
        }
        Ok(rest)
    }

    fn skip(&mut self, by: u64) {
        match self {
            Layout::First { skip, .. } | Layout::Flat { skip, .. } => *skip += by,
        }
    }
}

/// The rest `rest` laid out on `world` ranks of `per_rank` entries: dealt by
/// class, or cut into contiguous parts of `E'[p] = rest[p mod |R|]`.
enum Split<'r, I: Index> {
    Dealt(Dealt<I>),
    Contiguous(&'r [I]),
}

impl<'r, I: Index> Split<'r, I> {
    fn new(
        first: &impl FirstRun,
        rest: &'r [I],
        world: u64,
        per_rank: u64,
    ) -> Result<Split<'r, I>, PlanError> {
        Ok(match first.classifier()? {
            Some(classifier) => Split::Dealt(Dealt::new(
                rest,
                |entry: I| classifier.class(entry.to_u64()),
                classifier.count(),
                world,
                per_rank,
            )?),
            None => Split::Contiguous(rest),
        })
    }

    fn rank_into(
        &self,
        rank: u64,
        per_rank: u64,
        start: u64,
        out: &mut [I],
    ) -> Result<(), PlanError> {
        match self {
            Split::Dealt(dealt) => dealt.rank_into(rank, start, out),
            Split::Contiguous(rest) => {
                let len = rest.len() as u64;
                let first = rank * per_rank + start;
                for (slot, p) in out.iter_mut().zip(first..) {
                    *slot = rest[(p % len) as usize];
                }
                Ok(())
            }
        }
    }
}

/// Rank `rank`'s part of the current run from `start` on, after the runs
/// `runs` (not empty): see the module documentation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn resumed_into<I: Index>(
    first: &impl FirstRun,
    runs: &[Vec<u64>],
    world_size: u64,
    drop_last: bool,
    rank: u64,
    start: u64,
    out: &mut [I],
) -> Result<(), PlanError> {
    let per_rank = resumed_per_rank(first, runs, world_size, drop_last)?;
    check_part(per_rank, world_size, rank, start, out)?;
    let mut layout: Layout<I> = Layout::First {
        world: runs[0].len() as u64,
        skip: 0,
    };
    let mut part_len = first.first_per_rank(runs[0].len() as u64)?;
    for (run, positions) in runs.iter().enumerate() {
        let world = next_world(runs, run, world_size)?;
        if lockstep(positions, world) {
            layout.skip(positions[0]);
            part_len -= positions[0];
            continue;
        }
        let rest = layout.rest(first, positions, part_len)?;
        let next_len = split_len(rest.len() as u64, world, drop_last);
        let split = Split::new(first, &rest, world, next_len)?;
        if run + 1 == runs.len() {
            // The current run: only this rank's part.
            return split.rank_into(rank, next_len, start, out);
        }
        let mut parts = vec![I::default(); (next_len * world) as usize];
        for (r, part) in parts.chunks_exact_mut(next_len.max(1) as usize).enumerate() {
            split.rank_into(r as u64, next_len, 0, part)?;
        }
        layout = Layout::Flat {
            parts,
            per_rank: next_len,
            skip: 0,
        };
        part_len = next_len;
    }
    layout.part_into(first, rank, start, out)
}
