//! Uniform random permutations of `0..n`, computed in O(n) with cache-friendly
//! passes, any range of positions on its own.
//!
//! A plain Fisher–Yates shuffle of 100 million indices is bound by memory
//! latency: every swap touches a random cache line of a 400 MB array. This is the
//! Rao–Sandelius method instead, which is exactly as uniform:
//!
//! 1. Every element `i` (in index order) is given a bucket `b_i`, uniform in
//!    `0..K`, `K = ceil(n / 2^18)`: element `i` of chunk `c = i / 2^16` draws
//!    `below(K)` from stream `(seed, epoch, buckets purpose, c)`, one draw per
//!    element in order. (With `K = 1` nothing is drawn.)
//! 2. The buckets are laid out in order, each holding its elements in index
//!    order.
//! 3. Each bucket `j` is shuffled by Fisher–Yates ([`Xoshiro256::shuffle`]) with
//!    stream `(seed, epoch, shuffle purpose, j)`.
//!
//! Assigning elements to buckets independently and uniformly, then permuting each
//! bucket uniformly, gives every permutation of `0..n` the same probability. A
//! bucket holds 2^18 elements on average (1 MiB of `u32`), so step 3 runs in
//! cache; steps 1 and 2 stream through memory (2^18 measured fastest for 10^8
//! records, against 2^16 and 2^20: fewer buckets to scatter to, each still
//! shuffled in cache). The steps are split over threads
//! by chunks and buckets, which the result does not depend on.
//!
//! To produce positions `a..b` only (one rank's part of an epoch), step 1 counts
//! every bucket but steps 2 and 3 touch only the buckets that overlap `a..b`.

use std::num::NonZeroUsize;
use std::thread;

use crate::index::Index;
use crate::rng::{Purpose, Xoshiro256};

/// Average bucket size, as a power of two: part of the specification.
pub const BUCKET_SHIFT: u32 = 18;
/// Elements per bucket-choice stream: part of the specification.
pub const CHUNK: u64 = 1 << 16;

/// The number of threads the passes use: the available cores, at most 8.
pub(crate) fn threads() -> usize {
    thread::available_parallelism()
        .map(NonZeroUsize::get)
        .unwrap_or(1)
        .min(8)
}

/// The results of scoped threads, in order; a thread's panic goes on in the
/// caller.
pub(crate) fn join_all<T>(workers: Vec<thread::ScopedJoinHandle<'_, T>>) -> Vec<T> {
    workers
        .into_iter()
        .map(|worker| {
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .collect()
}

/// A uniform random permutation of `0..len`, determined by `(seed, epoch)` and
/// the purposes of its two streams. Making it counts the buckets (one pass over
/// the random numbers, no output); [`Shuffle::fill`] then writes any range.
#[derive(Clone, Debug)]
pub struct Shuffle {
    len: u64,
    seed: u64,
    epoch: u64,
    buckets_purpose: Purpose,
    shuffle_purpose: Purpose,
    /// `K`.
    bucket_count: u64,
    /// Element counts per segment (a run of whole chunks) and bucket:
    /// `segment_counts[s][j]`.
    segment_counts: Vec<Vec<u64>>,
    /// The first chunk of each segment, and the chunk count at the end.
    segment_chunks: Vec<u64>,
    /// Where each bucket starts; `offsets[K] == len`.
    offsets: Vec<u64>,
}

impl Shuffle {
    /// The permutation of records of `(seed, epoch)`.
    pub fn records(len: u64, seed: u64, epoch: u64) -> Shuffle {
        Shuffle::new(
            len,
            seed,
            epoch,
            Purpose::RecordBuckets,
            Purpose::RecordBucketShuffle,
        )
    }

    /// The permutation of blocks of `(seed, epoch)` (for block shuffles).
    pub fn blocks(len: u64, seed: u64, epoch: u64) -> Shuffle {
        Shuffle::new(
            len,
            seed,
            epoch,
            Purpose::BlockBuckets,
            Purpose::BlockBucketShuffle,
        )
    }

    fn new(
        len: u64,
        seed: u64,
        epoch: u64,
        buckets_purpose: Purpose,
        shuffle_purpose: Purpose,
    ) -> Shuffle {
        let bucket_count = len.div_ceil(1 << BUCKET_SHIFT).max(1);
        let chunks = len.div_ceil(CHUNK);
        let segments = (threads() as u64).min(chunks).max(1);
        let segment_chunks: Vec<u64> = (0..=segments).map(|s| s * chunks / segments).collect();
        let segment_counts: Vec<Vec<u64>> = if bucket_count == 1 {
            vec![vec![len]]
        } else {
            thread::scope(|scope| {
                let workers: Vec<_> = segment_chunks
                    .windows(2)
                    .map(|run| {
                        let (first, end) = (run[0], run[1]);
                        scope.spawn(move || {
                            let mut counts = vec![0u64; bucket_count as usize];
                            for chunk in first..end {
                                let mut rng =
                                    Xoshiro256::stream(seed, epoch, buckets_purpose, chunk);
                                for _ in chunk * CHUNK..((chunk + 1) * CHUNK).min(len) {
                                    counts[rng.below(bucket_count) as usize] += 1;
                                }
                            }
                            counts
                        })
                    })
                    .collect();
                join_all(workers)
            })
        };
        let segment_chunks = if bucket_count == 1 {
            vec![0, chunks]
        } else {
            segment_chunks
        };
        let mut offsets = Vec::with_capacity(bucket_count as usize + 1);
        let mut at = 0;
        offsets.push(0);
        for j in 0..bucket_count as usize {
            at += segment_counts.iter().map(|counts| counts[j]).sum::<u64>();
            offsets.push(at);
        }
        debug_assert_eq!(at, len);
        Shuffle {
            len,
            seed,
            epoch,
            buckets_purpose,
            shuffle_purpose,
            bucket_count,
            segment_counts,
            segment_chunks,
            offsets,
        }
    }

    /// The number of elements permuted.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether there is nothing to permute.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bucket holding position `position` (< len).
    fn bucket_of(&self, position: u64) -> usize {
        // The last bucket whose start is at or before the position.
        self.offsets.partition_point(|&start| start <= position) - 1
    }

    /// Writes positions `start .. start + out.len()` of the permutation into `out`.
    ///
    /// # Panics
    /// If the range goes past [`Shuffle::len`], or an index does not fit `I`.
    pub fn fill<I: Index>(&self, start: u64, out: &mut [I]) {
        let end = start + out.len() as u64;
        assert!(end <= self.len, "positions {start}..{end} of {}", self.len);
        assert!(self.len == 0 || self.len - 1 <= I::MAX_INDEX);
        if out.is_empty() {
            return;
        }
        let first = self.bucket_of(start);
        let last = self.bucket_of(end - 1);
        let bucket_range = |j: usize| (self.offsets[j], self.offsets[j + 1]);

        // Buckets that stick out of start..end are built in buffers of their own.
        let (first_start, first_end) = bucket_range(first);
        let first_partial = first_start < start || first_end > end;
        let (last_start, last_end) = bucket_range(last);
        let last_partial = last != first && last_end > end;
        let mut first_buffer = vec![
            I::default();
            if first_partial {
                (first_end - first_start) as usize
            } else {
                0
            }
        ];
        let mut last_buffer = vec![
            I::default();
            if last_partial {
                (last_end - last_start) as usize
            } else {
                0
            }
        ];

        {
            // Each bucket's whole region, in bucket order.
            let mut regions: Vec<&mut [I]> = Vec::with_capacity(last - first + 1);
            let mut rest: &mut [I] = out;
            if first_partial {
                let skip = (first_end.min(end) - start) as usize;
                rest = &mut rest[skip..];
                regions.push(&mut first_buffer);
            }
            let middle_first = if first_partial { first + 1 } else { first };
            let middle_end = if last_partial { last } else { last + 1 };
            for j in middle_first..middle_end {
                let (from, to) = bucket_range(j);
                let (region, tail) = rest.split_at_mut((to - from) as usize);
                regions.push(region);
                rest = tail;
            }
            if last_partial {
                regions.push(&mut last_buffer);
            }
            self.scatter(first, &mut regions);
            self.shuffle_buckets(first, &mut regions);
        }

        if first_partial {
            let from = (start - first_start) as usize;
            let to = (first_end.min(end) - first_start) as usize;
            out[..to - from].copy_from_slice(&first_buffer[from..to]);
        }
        if last_partial {
            let to = (end - last_start) as usize;
            let at = (last_start - start) as usize;
            out[at..].copy_from_slice(&last_buffer[..to]);
        }
    }

    /// Step 2 for buckets `first ..= first + regions.len() - 1`: writes each
    /// element of those buckets, in index order, into its bucket's region.
    fn scatter<I: Index>(&self, first: usize, regions: &mut [&mut [I]]) {
        if self.bucket_count == 1 {
            for (i, slot) in regions[0].iter_mut().enumerate() {
                *slot = I::from_u64(i as u64);
            }
            return;
        }
        // Each segment gets its own consecutive part of every region: the
        // elements of bucket j from earlier segments come first.
        let segments = self.segment_counts.len();
        let last = first + regions.len() - 1;
        let mut parts: Vec<Vec<&mut [I]>> = (0..segments)
            .map(|_| Vec::with_capacity(regions.len()))
            .collect();
        for (r, region) in regions.iter_mut().enumerate() {
            let j = first + r;
            let mut rest: &mut [I] = region;
            for (s, part) in parts.iter_mut().enumerate() {
                let (mine, tail) = rest.split_at_mut(self.segment_counts[s][j] as usize);
                part.push(mine);
                rest = tail;
            }
        }
        let (seed, epoch, purpose, len, k) = (
            self.seed,
            self.epoch,
            self.buckets_purpose,
            self.len,
            self.bucket_count,
        );
        thread::scope(|scope| {
            for (s, mut part) in parts.into_iter().enumerate() {
                let (chunk_first, chunk_end) = (self.segment_chunks[s], self.segment_chunks[s + 1]);
                scope.spawn(move || {
                    let mut cursors = vec![0usize; part.len()];
                    for chunk in chunk_first..chunk_end {
                        let mut rng = Xoshiro256::stream(seed, epoch, purpose, chunk);
                        for i in chunk * CHUNK..((chunk + 1) * CHUNK).min(len) {
                            let j = rng.below(k) as usize;
                            if j >= first && j <= last {
                                let r = j - first;
                                part[r][cursors[r]] = I::from_u64(i);
                                cursors[r] += 1;
                            }
                        }
                    }
                });
            }
        });
    }

    /// Step 3 for buckets `first ..`: each region shuffled with its bucket's
    /// stream, on several threads.
    fn shuffle_buckets<I: Index>(&self, first: usize, regions: &mut [&mut [I]]) {
        let threads = threads().min(regions.len()).max(1);
        let per_thread = regions.len().div_ceil(threads);
        let (seed, epoch, purpose) = (self.seed, self.epoch, self.shuffle_purpose);
        if regions.len() == 1 {
            // One bucket (every permutation of up to 2^18 elements): no thread to
            // start, which would cost more than the shuffle of a small one.
            Xoshiro256::stream(seed, epoch, purpose, first as u64).shuffle(regions[0]);
            return;
        }
        thread::scope(|scope| {
            for (t, run) in regions.chunks_mut(per_thread).enumerate() {
                scope.spawn(move || {
                    for (r, region) in run.iter_mut().enumerate() {
                        let j = first + t * per_thread + r;
                        Xoshiro256::stream(seed, epoch, purpose, j as u64).shuffle(region);
                    }
                });
            }
        });
    }

    /// The whole permutation.
    pub fn to_vec<I: Index>(&self) -> Vec<I> {
        let mut out = vec![I::default(); self.len as usize];
        self.fill(0, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_permutation(values: &[u64], len: u64) -> bool {
        let mut seen = vec![false; len as usize];
        values.len() as u64 == len
            && values
                .iter()
                .all(|&v| v < len && !std::mem::replace(&mut seen[v as usize], true))
    }

    #[test]
    fn a_permutation_holds_every_index_once() {
        for len in [
            0, 1, 2, 3, 100, 65_535, 65_536, 65_537, 262_143, 262_144, 262_145, 600_001,
        ] {
            let order: Vec<u64> = Shuffle::records(len, 9, 2).to_vec();
            assert!(is_permutation(&order, len), "len {len}");
        }
    }

    #[test]
    fn any_range_equals_the_same_positions_of_the_whole() {
        let len = 1_000_003;
        let shuffle = Shuffle::records(len, 1, 5);
        let whole: Vec<u32> = shuffle.to_vec();
        for (start, count) in [
            (0, 1),
            (0, 262_144),
            (12_345, 700_000),
            (999_000, 1_003),
            (262_144, 262_144),
            (300_000, 10),
            (5, 0),
        ] {
            let mut part = vec![0u32; count];
            shuffle.fill(start, &mut part);
            assert_eq!(
                part,
                whole[start as usize..start as usize + count],
                "{start} +{count}"
            );
        }
    }

    #[test]
    fn index_types_give_the_same_order() {
        let shuffle = Shuffle::records(150_000, 3, 0);
        let narrow: Vec<u32> = shuffle.to_vec();
        let wide: Vec<i64> = shuffle.to_vec();
        assert!(narrow.iter().zip(&wide).all(|(&a, &b)| i64::from(a) == b));
    }

    #[test]
    fn seeds_and_epochs_change_the_order_and_nothing_else_does() {
        let a: Vec<u32> = Shuffle::records(1000, 0, 0).to_vec();
        assert_eq!(a, Shuffle::records(1000, 0, 0).to_vec::<u32>());
        assert_ne!(a, Shuffle::records(1000, 0, 1).to_vec::<u32>());
        assert_ne!(a, Shuffle::records(1000, 1, 0).to_vec::<u32>());
        assert_ne!(a, Shuffle::blocks(1000, 0, 0).to_vec::<u32>());
    }

    #[test]
    fn small_permutations_are_uniform() {
        // All 24 orders of 4 elements, over 48,000 seeds: 2,000 each expected,
        // standard deviation ~44; 5 sigma.
        let mut counts = std::collections::HashMap::new();
        for seed in 0..48_000 {
            *counts
                .entry(Shuffle::records(4, seed, 0).to_vec::<u32>())
                .or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 24);
        assert!(
            counts.values().all(|&c| (1_780..=2_220).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn bucketed_permutations_are_uniform_in_position() {
        // Where element 0 lands, over seeds, with three buckets: uniform over the
        // positions (10 bins; 1000 seeds, 100 each expected, standard deviation
        // ~9.5; 5 sigma).
        let len = 3 << BUCKET_SHIFT;
        let mut bins = [0u32; 10];
        for seed in 0..1000 {
            let order: Vec<u32> = Shuffle::records(len, seed, 0).to_vec();
            let at = order.iter().position(|&v| v == 0).unwrap();
            bins[at * 10 / len as usize] += 1;
        }
        assert!(bins.iter().all(|&c| (52..=148).contains(&c)), "{bins:?}");
    }
}
