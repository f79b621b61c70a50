//! The interleave computed record by record in deadline order instead of slot
//! by slot: the same order as [`Interleave`](crate::Interleave), in about a
//! third of the instructions.
//!
//! [`Interleave`](crate::Interleave) places, at each slot, the released record
//! of earliest deadline (ties: the lower class): earliest deadline first (EDF),
//! one decision per slot among all classes. For records that each take one
//! slot, EDF places every record where this does: take the records in order of
//! (deadline, class) and put each in the earliest free slot at or after its
//! release. *Proof*, by induction over that order: let record `J` be placed by
//! EDF at slot `s`. At every slot from `J`'s release to `s − 1`, `J` was
//! released and not placed, so EDF placed a record before `J` in the order
//! there, which by induction this placement also put there; and no record
//! before `J` is at `s`. So `s` is the earliest slot at or after `J`'s release
//! left free by the records before it.
//!
//! The records are taken in deadline order by marking, a block of deadlines at
//! a time, the classes due at each (a bitmask per deadline, up to 64 classes);
//! the free slots are a ring of bits from the first free slot on. A run that
//! would leave a slot empty, place a record past its deadline or past the ring
//! (all of which the interleave's proof rules out from a state the order
//! reaches) returns `None`, and the caller runs [`Interleave`](crate::Interleave)
//! instead.

use crate::index::Index;
use crate::interleave::{Dealing, Progress};

/// Slots of the ring of free slots (a power of two): a record is placed at most
/// this far past the first free slot.
const RING: u64 = 1 << 16;
/// Deadlines marked at a time.
const BLOCK: u64 = 1 << 12;

/// Runs the interleave of a rank with `counts[c]` records of class `c` under
/// `dealing`, from the state after `from` slots in which class `c` placed
/// `placed[c]` records, to slot `to`: writes the classes of the last
/// `out.len()` slots before `to` into `out` and returns the state at `to`, or
/// `None` (see the module documentation).
pub(crate) fn run_by_deadline<I: Index>(
    dealing: &Dealing,
    counts: &[u64],
    placed: &[u64],
    from: u64,
    to: u64,
    out: &mut [I],
) -> Option<Vec<u64>> {
    let classes = counts.len();
    let total: u64 = dealing.shares().iter().sum();
    if classes > 64 || total >= 1 << 62 || placed.iter().sum::<u64>() != from {
        return None;
    }
    if from >= to {
        return Some(placed.to_vec());
    }
    let out_start = to - out.len() as u64;
    let start = |c: usize| Progress::after(placed[c], counts[c], dealing.shares()[c], total);
    // `marker` runs ahead marking deadlines, `taker` places the records.
    let mut taker: Vec<Progress> = (0..classes).map(start).collect();
    let mut marker = taker.clone();
    let mut marked_deadline: Vec<u64> = marker
        .iter_mut()
        .map(|next| {
            if next.left() > 0 {
                next.take().1 - 1
            } else {
                u64::MAX
            }
        })
        .collect();
    let mut state = placed.to_vec();
    // Bit `s mod RING` for slot `s`: set for a slot taken, and for the slots
    // before the first free one in its word; a word the first free slot has
    // left is cleared for the ring's next turn.
    let mut ring = vec![0u64; (RING / 64) as usize];
    let word = |slot: u64| ((slot / 64) % (RING / 64)) as usize;
    // The first free slot.
    let mut free = from;
    let mut due = vec![0u64; BLOCK as usize];
    let mut block = marked_deadline.iter().copied().min()?;
    while free < to {
        // Mark the classes due in this block of deadlines.
        let end = block.checked_add(BLOCK)?;
        let mut any = false;
        for (c, deadline) in marked_deadline.iter_mut().enumerate() {
            while *deadline < end {
                due[(*deadline - block) as usize] |= 1 << c;
                any = true;
                *deadline = if marker[c].left() > 0 {
                    marker[c].take().1 - 1
                } else {
                    u64::MAX
                };
            }
        }
        if !any {
            // No record left to fill the free slots: a slot stays empty.
            return None;
        }
        for (offset, bits) in due.iter_mut().enumerate() {
            let deadline = block + offset as u64;
            let mut bits = std::mem::take(bits);
            while bits != 0 {
                let c = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                // 0-based: the release slot `r_j` is position `r_j − 1`.
                let (release, due_at) = taker[c].take();
                let release = release - 1;
                debug_assert_eq!(due_at - 1, deadline);
                // The earliest free slot at or after the release.
                let slot = first_free(&ring, release.max(free));
                if slot > deadline || slot - free >= RING - 64 {
                    return None;
                }
                ring[word(slot)] |= 1 << (slot % 64);
                if slot < to {
                    state[c] += 1;
                    if slot >= out_start {
                        out[(slot - out_start) as usize] = I::from_u64(c as u64);
                    }
                }
                if slot == free {
                    let next = first_free(&ring, free);
                    for passed in free / 64..next / 64 {
                        ring[word(passed * 64)] = 0;
                    }
                    free = next;
                }
                if free >= to {
                    return Some(state);
                }
            }
        }
        block = end;
    }
    Some(state)
}

/// The first slot at or after `from` whose bit is clear.
#[inline]
fn first_free(ring: &[u64], from: u64) -> u64 {
    let words = ring.len() as u64;
    let mut at = from / 64;
    let mut bits = ring[(at % words) as usize] | ((1u64 << (from % 64)) - 1);
    while bits == u64::MAX {
        at += 1;
        bits = ring[(at % words) as usize];
    }
    at * 64 + u64::from((!bits).trailing_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interleave::Interleave;
    use crate::tests::xorshift as stream;

    #[test]
    fn deadline_order_places_what_the_slots_place() {
        // From slot 0 and from the true state at any slot, to any later slot:
        // the same classes and the same state as the interleave slot by slot.
        let mut next = stream(0x9E37_79B9_7F4A_7C15);
        let mut compared = 0;
        for case in 0..600 {
            let classes = 1 + (next() % 20) as usize;
            let world = 1 + next() % 4;
            let mut shares: Vec<u64> = (0..classes)
                .map(|_| match next() % 6 {
                    0 => 0,
                    1 => next() % 5,
                    2 => next() % 100,
                    _ => next() % 5000,
                })
                .collect();
            let total: u64 = shares.iter().sum();
            shares[0] += (world - total % world) % world + world;
            let dealing = Dealing::new(&shares, world).unwrap();
            let rank = next() % world;
            let sequential: Vec<u32> = Interleave::new(&dealing, rank).unwrap().collect();
            let counts = Interleave::new(&dealing, rank).unwrap().counts().to_vec();
            let slots = sequential.len() as u64;
            let from = next() % (slots + 1);
            let to = from + next() % (slots - from + 1);
            let written = next() % (to - from + 1);
            let mut placed = vec![0u64; classes];
            for &class in &sequential[..from as usize] {
                placed[class as usize] += 1;
            }
            let mut out = vec![u32::MAX; written as usize];
            let Some(state) = run_by_deadline(&dealing, &counts, &placed, from, to, &mut out)
            else {
                panic!(
                    "case {case}: {shares:?} over {world}, rank {rank}: gave up from a true state"
                );
            };
            let mut expected = placed.clone();
            for &class in &sequential[from as usize..to as usize] {
                expected[class as usize] += 1;
            }
            assert_eq!(state, expected, "case {case}");
            assert_eq!(
                out,
                sequential[(to - written) as usize..to as usize],
                "case {case}: {shares:?} over {world}, rank {rank}, {from}..{to}"
            );
            compared += written;
        }
        assert!(compared > 100_000);
    }

    #[test]
    fn from_any_other_state_it_places_what_the_slots_place_or_gives_up() {
        // States the order never reaches (a class ahead of its share, another
        // behind): the same as the interleave resumed there, or None.
        let mut next = stream(0xD1B5_4A32_D192_ED03);
        let (mut same, mut gave_up) = (0, 0);
        for case in 0..600 {
            let classes = 2 + (next() % 6) as usize;
            let shares: Vec<u64> = (0..classes).map(|_| 1 + next() % 300).collect();
            let dealing = Dealing::new(&shares, 1).unwrap();
            let counts = shares.clone();
            let placed: Vec<u64> = counts.iter().map(|&k| next() % (k + 1)).collect();
            let from: u64 = placed.iter().sum();
            let slots: u64 = counts.iter().sum();
            let mut out = vec![u32::MAX; (slots - from) as usize];
            match run_by_deadline(&dealing, &counts, &placed, from, slots, &mut out) {
                Some(state) => {
                    let expected: Vec<u32> =
                        Interleave::resumed(&dealing, 0, &placed).unwrap().collect();
                    assert_eq!(out, expected, "case {case}: {shares:?} from {placed:?}");
                    assert_eq!(state, counts);
                    same += 1;
                }
                None => gave_up += 1,
            }
        }
        assert!(same > 0 && gave_up > 0, "{same} same, {gave_up} gave up");
    }
}
