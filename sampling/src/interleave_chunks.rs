//! One rank's interleave computed in chunks on several threads, equal to the
//! sequential [`Interleave`] slot for slot.
//!
//! The interleave places one record per slot, each chosen from the state before
//! it, so it is a chain: at 10^8 slots of a mixture of 10 sources, 1.6 CPU-s
//! slot by slot, 1.0 in deadline order ([`run_by_deadline`]), on one core.
//! What breaks the chain is that the state after `t` slots is only the number
//! of records each class has placed ([`Interleave::resumed`] starts from any
//! such state), and that two runs of the same order from different states
//! after the same slot meet again: both keep every class within one record of
//! its share, and once the records due in the longest window of a class
//! (`⌈T / N_c⌉ + 2` slots) have been placed in both, they have in practice
//! placed the same ones.
//!
//! So the rank's `m` slots are cut into chunks, one per thread, and the chunk
//! of slots `b .. b'` (after the first) starts [`WARM_UP_WINDOWS`] longest
//! windows before `b`, from the state nearest the shares (each class at
//! `⌊a N_c / T⌋` records after `a` slots, the remaining slots to the classes of
//! largest remainders), runs to `b` without writing, keeps the state it reached
//! at `b`, and writes its slots. Then, in chunk order, each chunk's state at
//! `b` is compared with the state at which the chunk before it ended, computed
//! from slot 0: equal, the chunk's slots are the order's (the same state gives
//! the same slots); different, the chunk is computed again from the true state.
//! The result is the sequential order in every case; the guess decides only the
//! time, and a guess that never meets costs one more sequential pass.

use std::thread;

use crate::index::Index;
use crate::interleave::{Dealing, Interleave};
use crate::interleave_fit::run_by_deadline;
use crate::shuffle::{join_all, threads};
use crate::PlanError;

/// A chunk starts this many of the longest windows of a class before its
/// first slot. Runs from different states met within one longest window in
/// every case tried (2 to 16 classes, random shares); four leave room.
const WARM_UP_WINDOWS: u64 = 4;

/// Below this many slots a rank's interleave is computed on one thread (the
/// threads would cost more than they save).
const PARALLEL_SLOTS: u64 = 1 << 20;

/// Writes the class of each of rank `rank`'s slots from `start` on into `out`
/// (`m − start` entries, `m` the rank's slots under `dealing`), as the
/// sequential [`Interleave`] yields them, and returns the records each class
/// placed in the slots before `start`.
pub(crate) fn classes_into<I: Index>(
    dealing: &Dealing,
    rank: u64,
    start: u64,
    out: &mut [I],
) -> Result<Vec<u64>, PlanError> {
    let chunks = Chunks {
        count: threads() as u64,
        warm_up: None,
        min_slots: PARALLEL_SLOTS,
    };
    Ok(classes_in_chunks(dealing, rank, start, out, chunks)?.0)
}

/// How [`classes_in_chunks`] cuts the slots.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunks {
    /// The most chunks.
    pub count: u64,
    /// Slots run before a chunk's first (default: [`WARM_UP_WINDOWS`] longest
    /// windows).
    pub warm_up: Option<u64>,
    /// The fewest slots of a chunk.
    pub min_slots: u64,
}

/// [`classes_into`] cut as `chunks` says; also returns the number of chunks
/// computed again.
pub(crate) fn classes_in_chunks<I: Index>(
    dealing: &Dealing,
    rank: u64,
    start: u64,
    out: &mut [I],
    chunks: Chunks,
) -> Result<(Vec<u64>, usize), PlanError> {
    let chunks_min_slots = chunks.min_slots;
    let first = Interleave::new(dealing, rank)?;
    let counts = first.counts().to_vec();
    let slots: u64 = counts.iter().sum();
    let expected = slots.checked_sub(start).ok_or(PlanError::Start {
        start,
        per_rank: slots,
    })?;
    if out.len() as u64 != expected {
        return Err(PlanError::OutputLength {
            got: out.len() as u64,
            expected,
        });
    }
    let total: u64 = dealing.shares().iter().sum();
    // The longest window of a class this rank has records of.
    let window = counts
        .iter()
        .zip(dealing.shares())
        .filter(|&(&count, _)| count > 0)
        .map(|(_, &n)| total.div_ceil(n).saturating_add(2))
        .max()
        .unwrap_or(0);
    let warm_up = chunks
        .warm_up
        .unwrap_or(window.saturating_mul(WARM_UP_WINDOWS));
    let Chunks { count: chunks, .. } = chunks;
    // Chunks of at least `min_slots` slots, each at least 8 warm-ups long.
    let worth = chunks > 1
        && slots >= chunks.saturating_mul(chunks_min_slots)
        && warm_up.saturating_mul(8) <= slots / chunks;
    let zero = vec![0; counts.len()];
    if !worth {
        let skipped = run::<I>(dealing, rank, &counts, &zero, (0, start), &mut [])?;
        run(dealing, rank, &counts, &skipped, (start, slots), out)?;
        return Ok((skipped, 0));
    }
    // Chunk boundaries: equal parts of the rank's slots, and `start`.
    let mut bounds: Vec<u64> = (0..=chunks).map(|i| slots * i / chunks).collect();
    bounds.push(start);
    bounds.sort_unstable();
    bounds.dedup();

    // Each chunk's output (empty before `start`).
    let mut parts: Vec<&mut [I]> = Vec::with_capacity(bounds.len());
    let mut rest = out;
    for run in bounds.windows(2) {
        let len = if run[0] >= start { run[1] - run[0] } else { 0 };
        let (part, tail) = rest.split_at_mut(len as usize);
        parts.push(part);
        rest = tail;
    }

    // (The state at the chunk's first slot it started from, the state at its
    // end), per chunk; the first chunk starts from slot 0.
    let runs: Vec<(Option<Vec<u64>>, Vec<u64>)> = {
        let bounds = &bounds;
        let counts = &counts;
        thread::scope(|scope| {
            let workers: Vec<_> = parts
                .iter_mut()
                .enumerate()
                .map(|(i, part)| {
                    let zero = &zero;
                    scope.spawn(move || -> Result<_, PlanError> {
                        let (from, to) = (bounds[i], bounds[i + 1]);
                        let at_from = if i == 0 {
                            zero.clone()
                        } else {
                            let a = from.saturating_sub(warm_up);
                            let Some(guess) = guess(dealing, counts, a) else {
                                return Ok((None, Vec::new()));
                            };
                            run::<I>(dealing, rank, counts, &guess, (a, from), &mut [])?
                        };
                        let end = run(dealing, rank, counts, &at_from, (from, to), part)?;
                        Ok((Some(at_from), end))
                    })
                })
                .collect();
            join_all(workers).into_iter().collect::<Result<Vec<_>, _>>()
        })?
    };

    // In chunk order: a chunk that started from another state than the true
    // one is computed again from the true one.
    let mut truth = vec![0; counts.len()];
    let mut skipped = None;
    let mut recomputed = 0;
    for (i, (at_from, end)) in runs.into_iter().enumerate() {
        if bounds[i] == start {
            skipped = Some(truth.clone());
        }
        truth = if at_from.as_ref() == Some(&truth) {
            end
        } else {
            recomputed += 1;
            let run_bounds = (bounds[i], bounds[i + 1]);
            run(dealing, rank, &counts, &truth, run_bounds, &mut *parts[i])?
        };
    }
    Ok((skipped.unwrap_or(truth), recomputed))
}

/// Runs rank `rank`'s interleave from the state after `from` slots (class `c`
/// having placed `placed[c]` records) to slot `to`, writing the classes of the
/// last `out.len()` slots into `out`, and returns the state at `to`: in
/// deadline order ([`run_by_deadline`]) where it can, else slot by slot.
fn run<I: Index>(
    dealing: &Dealing,
    rank: u64,
    counts: &[u64],
    placed: &[u64],
    (from, to): (u64, u64),
    out: &mut [I],
) -> Result<Vec<u64>, PlanError> {
    if let Some(state) = run_by_deadline(dealing, counts, placed, from, to, out) {
        return Ok(state);
    }
    let mut interleave = Interleave::resumed(dealing, rank, placed)?;
    let silent = (to - from) as usize - out.len();
    for _ in 0..silent {
        interleave.next();
    }
    for (slot, class) in out.iter_mut().zip(interleave.by_ref()) {
        *slot = I::from_u64(u64::from(class));
    }
    Ok(interleave.placed())
}

/// The state nearest the shares after `a` slots: class `c` at `⌊a N_c / T⌋`
/// records (at most its count), the slots left over to the classes of largest
/// `a N_c mod T` (ties: the lower class) that have records left; `None` if
/// they cannot take them all.
fn guess(dealing: &Dealing, counts: &[u64], a: u64) -> Option<Vec<u64>> {
    let total = u128::from(dealing.shares().iter().sum::<u64>());
    let mut state = Vec::with_capacity(counts.len());
    let mut remainders = Vec::with_capacity(counts.len());
    for (c, (&count, &n)) in counts.iter().zip(dealing.shares()).enumerate() {
        let product = u128::from(a) * u128::from(n);
        let floor = (product / total.max(1)) as u64;
        state.push(floor.min(count));
        if floor < count {
            remainders.push((std::cmp::Reverse(product % total.max(1)), c));
        }
    }
    let mut left = a.checked_sub(state.iter().sum())?;
    remainders.sort_unstable();
    for &(_, c) in &remainders {
        if left == 0 {
            break;
        }
        state[c] += 1;
        left -= 1;
    }
    (left == 0).then_some(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::xorshift as stream;

    /// The sequential order of rank `rank` from `start` on, and the classes'
    /// records before `start`.
    fn sequential(dealing: &Dealing, rank: u64, start: u64) -> (Vec<u32>, Vec<u64>) {
        let all: Vec<u32> = Interleave::new(dealing, rank).unwrap().collect();
        let mut before = vec![0u64; dealing.shares().len()];
        for &class in &all[..start as usize] {
            before[class as usize] += 1;
        }
        (all[start as usize..].to_vec(), before)
    }

    fn chunked(
        dealing: &Dealing,
        rank: u64,
        start: u64,
        chunks: Chunks,
    ) -> (Vec<u32>, Vec<u64>, usize) {
        let slots: u64 = Interleave::new(dealing, rank)
            .unwrap()
            .counts()
            .iter()
            .sum();
        let mut out = vec![u32::MAX; (slots - start) as usize];
        let (before, recomputed) =
            classes_in_chunks(dealing, rank, start, &mut out, chunks).unwrap();
        (out, before, recomputed)
    }

    #[test]
    fn chunks_give_the_sequential_order_from_any_start() {
        let mut next = stream(0x2545_F491_4F6C_DD1D);
        let mut recomputed = 0;
        for case in 0..400 {
            let classes = 1 + (next() % 12) as usize;
            let world = 1 + next() % 4;
            let mut shares: Vec<u64> = (0..classes)
                .map(|_| match next() % 5 {
                    0 => next() % 3,
                    1 => next() % 40,
                    _ => next() % 4000,
                })
                .collect();
            let total: u64 = shares.iter().sum();
            shares[0] += (world - total % world) % world + world;
            let dealing = Dealing::new(&shares, world).unwrap();
            let rank = next() % world;
            let slots: u64 = Interleave::new(&dealing, rank)
                .unwrap()
                .counts()
                .iter()
                .sum();
            let start = next() % (slots + 1);
            let (expected, expected_before) = sequential(&dealing, rank, start);
            // Warm-ups from none (every guess is likely wrong: the chunks are
            // computed again) to the default.
            let warm_up = [Some(0), Some(1 + next() % 50), None][case % 3];
            let chunks = Chunks {
                count: 1 + next() % 6,
                warm_up,
                min_slots: 1,
            };
            let (got, before, again) = chunked(&dealing, rank, start, chunks);
            recomputed += again;
            assert!(
                got == expected && before == expected_before,
                "case {case}: {shares:?} over {world}, rank {rank} from {start}, {chunks:?}"
            );
        }
        assert!(recomputed > 0, "the cases compute some chunks again");
    }

    #[test]
    fn a_mixture_of_ten_meets_its_guesses() {
        // The shares of 10 sources weighted 1..10 (T = 5,500,000): with the
        // default warm-up, every chunk's guessed start is the true state.
        let shares: Vec<u64> = (1..=10).map(|w| w * 100_000).collect();
        for world in [1, 4] {
            let dealing = Dealing::new(&shares, world).unwrap();
            for rank in [0, world - 1] {
                let chunks = Chunks {
                    count: 8,
                    warm_up: None,
                    min_slots: 1,
                };
                let (got, _, recomputed) = chunked(&dealing, rank, 12_345, chunks);
                assert_eq!(got, sequential(&dealing, rank, 12_345).0);
                assert_eq!(recomputed, 0, "world {world}, rank {rank}");
            }
        }
    }

    #[test]
    fn wrong_lengths_and_starts_are_errors() {
        let dealing = Dealing::new(&[3, 3], 1).unwrap();
        let chunks = Chunks {
            count: 2,
            warm_up: None,
            min_slots: 1,
        };
        let mut out = vec![0u32; 5];
        assert!(classes_in_chunks(&dealing, 0, 0, &mut out, chunks).is_err());
        assert!(classes_in_chunks(&dealing, 0, 7, &mut [0u32; 0], chunks).is_err());
        assert!(classes_in_chunks(&dealing, 1, 0, &mut [0u32; 6], chunks).is_err());
    }
}
