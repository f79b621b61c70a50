//! Weighted sampling without replacement: Efraimidis and Spirakis' weighted
//! random sampling ("Weighted random sampling with a reservoir", 2006).
//!
//! Record `i` with weight `w_i > 0` gets the key `u_i^(1/w_i)`, `u_i` uniform in
//! (0, 1); the `k` records with the largest keys are a weighted sample without
//! replacement of size `k`, and ordered by decreasing key they are a weighted
//! random order: the first is record `i` with probability `w_i / Σw`, the next
//! is drawn the same way from the rest, and so on. Keys are compared as
//! `ln(u_i) / w_i` (the same order), with [`crate::rng::ln`]; equal keys order by
//! record index. `u_i` is the `(i mod 2^16)`-th [`Xoshiro256::open01`] of stream
//! `(seed, epoch, WeightKeys, i / 2^16)`, drawn for every record, whatever its
//! weight. Records of weight 0 are never chosen.
//!
//! Only the `k` best keys are kept (a heap per thread), so memory is 16 bytes per
//! sampled record, not per record.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::thread;

use crate::rng::{ln, Purpose, Xoshiro256};
use crate::shuffle::{threads, CHUNK};
use crate::PlanError;

/// A record's key: larger first, then the smaller index.
#[derive(Clone, Copy, Debug)]
struct Keyed {
    key: f64,
    index: u64,
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Keyed {}
impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Keyed {
    /// "Greater" is "comes first": a larger key, or the same key and a smaller index.
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .total_cmp(&other.key)
            .then_with(|| other.index.cmp(&self.index))
    }
}

/// A min-heap of the best keys seen.
type Best = BinaryHeap<Reverse<Keyed>>;

/// The weighted random order of `count` of the `len` records (`weight(i)` is
/// record `i`'s weight), for `(seed, epoch)`.
///
/// Errors: a weight that is negative, NaN or infinite, naming the record; more
/// records asked for than have a positive weight.
pub fn weighted_order(
    len: u64,
    weight: &(dyn Fn(u64) -> f64 + Sync),
    count: u64,
    seed: u64,
    epoch: u64,
) -> Result<Vec<u64>, PlanError> {
    let chunks = len.div_ceil(CHUNK);
    let segments = (threads() as u64).min(chunks).max(1);
    let keep = count as usize;
    let results: Vec<Result<(Best, u64), PlanError>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..segments)
            .map(|s| {
                let (first, end) = (s * chunks / segments, (s + 1) * chunks / segments);
                scope.spawn(move || {
                    // A min-heap of the best `keep` keys seen so far.
                    let mut best = BinaryHeap::with_capacity(keep.min(1 << 20) + 1);
                    let mut positive = 0u64;
                    for chunk in first..end {
                        let mut rng = Xoshiro256::stream(seed, epoch, Purpose::WeightKeys, chunk);
                        for index in chunk * CHUNK..((chunk + 1) * CHUNK).min(len) {
                            let u = rng.open01();
                            let w = weight(index);
                            if !(w.is_finite() && w >= 0.0) {
                                return Err(PlanError::BadWeight { index, weight: w });
                            }
                            if w == 0.0 {
                                continue;
                            }
                            positive += 1;
                            if keep == 0 {
                                continue;
                            }
                            let entry = Keyed {
                                key: ln(u) / w,
                                index,
                            };
                            if best.len() < keep {
                                best.push(Reverse(entry));
                            } else if let Some(Reverse(worst)) = best.peek() {
                                if entry > *worst {
                                    best.pop();
                                    best.push(Reverse(entry));
                                }
                            }
                        }
                    }
                    Ok((best, positive))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut all: Vec<Keyed> = Vec::new();
    let mut positive = 0;
    for result in results {
        let (best, count) = result?;
        positive += count;
        all.extend(best.into_iter().map(|Reverse(k)| k));
    }
    if count > positive {
        return Err(PlanError::TooFewWeighted {
            asked: count,
            positive,
        });
    }
    // Best first; the per-thread heaps hold every candidate of the top `count`.
    all.sort_unstable_by(|a, b| b.cmp(a));
    all.truncate(keep);
    Ok(all.into_iter().map(|k| k.index).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_distinct_records_with_positive_weight() {
        let weights: Vec<f64> = (0..1000)
            .map(|i| if i % 3 == 0 { 0.0 } else { i as f64 })
            .collect();
        let order = weighted_order(1000, &|i| weights[i as usize], 600, 1, 0).unwrap();
        assert_eq!(order.len(), 600);
        let mut seen = std::collections::HashSet::new();
        assert!(order.iter().all(|&i| i % 3 != 0 && seen.insert(i)));
        // All 666 positive records, when asked for.
        let all = weighted_order(1000, &|i| weights[i as usize], 666, 1, 0).unwrap();
        assert_eq!(all.len(), 666);
        assert!(matches!(
            weighted_order(1000, &|i| weights[i as usize], 667, 1, 0),
            Err(PlanError::TooFewWeighted {
                asked: 667,
                positive: 666
            })
        ));
    }

    #[test]
    fn refuses_bad_weights_naming_the_record() {
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let err = weighted_order(10, &|i| if i == 7 { bad } else { 1.0 }, 3, 0, 0).unwrap_err();
            assert!(
                matches!(err, PlanError::BadWeight { index: 7, .. }),
                "{err:?}"
            );
        }
    }

    #[test]
    fn the_first_draw_follows_the_weights() {
        // Record i has weight i+1 of 0..4 (sum 10): the first record of the order
        // is i with probability (i+1)/10. 20,000 seeds: 5 sigma bounds.
        let mut firsts = [0u32; 4];
        for seed in 0..20_000 {
            let order = weighted_order(4, &|i| (i + 1) as f64, 4, seed, 0).unwrap();
            firsts[order[0] as usize] += 1;
        }
        for (i, &count) in firsts.iter().enumerate() {
            let p = (i + 1) as f64 / 10.0;
            let mean = 20_000.0 * p;
            let sd = (20_000.0 * p * (1.0 - p)).sqrt();
            assert!((count as f64 - mean).abs() < 5.0 * sd, "{firsts:?}");
        }
    }

    #[test]
    fn the_order_does_not_depend_on_the_thread_split() {
        // Over several chunks (so several segments when cores allow), the result
        // equals a one-pass reference computation of the same keys.
        let len = 5 * CHUNK + 123;
        let weight = |i: u64| 1.0 + (i % 17) as f64;
        let got = weighted_order(len, &weight, 1000, 42, 3).unwrap();
        let mut all = Vec::new();
        for chunk in 0..len.div_ceil(CHUNK) {
            let mut rng = Xoshiro256::stream(42, 3, Purpose::WeightKeys, chunk);
            for index in chunk * CHUNK..((chunk + 1) * CHUNK).min(len) {
                all.push(Keyed {
                    key: ln(rng.open01()) / weight(index),
                    index,
                });
            }
        }
        all.sort_unstable_by(|a, b| b.cmp(a));
        let want: Vec<u64> = all[..1000].iter().map(|k| k.index).collect();
        assert_eq!(got, want);
    }
}
