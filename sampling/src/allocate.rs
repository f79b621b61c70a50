//! Balanced subsets (`bcd export --sample N --balance-by FIELD`): how many records
//! of each class, and which.
//!
//! [`equal_allocation`] gives every class the same count where the classes allow
//! it: a class smaller than its share gives all its records, and what it could
//! not give is spread over the others (water-filling). Counts that cannot be
//! split evenly (the remainder `r` of the last level) go one each to `r` of the
//! classes still above the level, chosen by a Fisher–Yates shuffle of those
//! classes (in class order) with stream `(seed, 0, AllocationRemainder, 0)`.

use crate::rng::{Purpose, Xoshiro256};
use crate::shuffle::Shuffle;
use crate::PlanError;

/// How many records to take from each class (`sizes[c]` records of class `c`) for
/// a subset of `total`: as equal as the sizes allow, deterministic for `seed`.
///
/// Errors if `total` exceeds the records there are.
pub fn equal_allocation(sizes: &[u64], total: u64, seed: u64) -> Result<Vec<u64>, PlanError> {
    let available: u64 = sizes.iter().sum();
    if total > available {
        return Err(PlanError::SampleTooLarge {
            asked: total,
            available,
        });
    }
    let mut take = vec![0u64; sizes.len()];
    // Classes from the smallest up (ties: class order): each gets the even share
    // of what is left, or all it has if that is less.
    let mut by_size: Vec<usize> = (0..sizes.len()).filter(|&c| sizes[c] > 0).collect();
    by_size.sort_by_key(|&c| (sizes[c], c));
    let mut left = total;
    let mut classes_left = by_size.len() as u64;
    let mut at = 0;
    while at < by_size.len() {
        let share = left / classes_left;
        let c = by_size[at];
        if sizes[c] <= share {
            take[c] = sizes[c];
            left -= sizes[c];
            classes_left -= 1;
            at += 1;
        } else {
            break;
        }
    }
    if at < by_size.len() {
        // The rest all have more than the level: each gets it, and the remainder
        // goes one each to classes picked by the seed.
        let level = left / classes_left;
        let mut rest: Vec<usize> = by_size[at..].to_vec();
        rest.sort_unstable();
        for &c in &rest {
            take[c] = level;
        }
        let remainder = (left - level * classes_left) as usize;
        Xoshiro256::stream(seed, 0, Purpose::AllocationRemainder, 0).shuffle(&mut rest);
        for &c in &rest[..remainder] {
            take[c] += 1;
        }
    }
    Ok(take)
}

/// A uniform subset of `count` of `len` records, in record order: the first
/// `count` positions of the record shuffle of `(seed, 0)`, sorted (so it is the
/// set `partition(len, seed=seed, epoch=0, num_samples=count)` yields).
pub fn uniform_subset(len: u64, count: u64, seed: u64) -> Result<Vec<u64>, PlanError> {
    if count > len {
        return Err(PlanError::SampleTooLarge {
            asked: count,
            available: len,
        });
    }
    let mut chosen = vec![0u64; count as usize];
    Shuffle::records(len, seed, 0).fill(0, &mut chosen);
    chosen.sort_unstable();
    Ok(chosen)
}

/// A class-balanced subset of `count` records, in record order: the classes'
/// counts from [`equal_allocation`], and from each class the records that come
/// first in the record shuffle of `(seed, 0)` (a uniform choice within the class).
/// `categories[i]` is record `i`'s class.
pub fn balanced_subset(categories: &[u32], count: u64, seed: u64) -> Result<Vec<u64>, PlanError> {
    let classes = categories
        .iter()
        .map(|&c| c as usize + 1)
        .max()
        .unwrap_or(0);
    let mut sizes = vec![0u64; classes];
    for &c in categories {
        sizes[c as usize] += 1;
    }
    let mut want = equal_allocation(&sizes, count, seed)?;
    let len = categories.len() as u64;
    let order: Vec<u64> = Shuffle::records(len, seed, 0).to_vec();
    let mut chosen = Vec::with_capacity(count as usize);
    for index in order {
        let class = categories[index as usize] as usize;
        if want[class] > 0 {
            want[class] -= 1;
            chosen.push(index);
        }
    }
    chosen.sort_unstable();
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_where_the_classes_allow_it() {
        assert_eq!(
            equal_allocation(&[100, 100, 100], 30, 0).unwrap(),
            [10, 10, 10]
        );
        // The small class gives all it has; the rest is spread evenly.
        assert_eq!(equal_allocation(&[900, 90, 4], 30, 0).unwrap(), [13, 13, 4]);
        assert_eq!(equal_allocation(&[900, 9, 1], 900, 0).unwrap(), [890, 9, 1]);
        // Everything.
        assert_eq!(equal_allocation(&[3, 0, 5], 8, 0).unwrap(), [3, 0, 5]);
        assert!(equal_allocation(&[3, 5], 9, 0).is_err());
    }

    #[test]
    fn the_remainder_goes_to_classes_the_seed_picks() {
        let mut picked = std::collections::HashSet::new();
        for seed in 0..50 {
            let take = equal_allocation(&[50, 50, 50, 50], 10, seed).unwrap();
            assert_eq!(take.iter().sum::<u64>(), 10);
            assert!(take.iter().all(|&t| t == 2 || t == 3));
            // Same seed, same answer.
            assert_eq!(take, equal_allocation(&[50, 50, 50, 50], 10, seed).unwrap());
            picked.insert(take);
        }
        assert_eq!(picked.len(), 6, "all C(4,2) choices occur");
    }

    #[test]
    fn subsets_are_sorted_distinct_and_balanced() {
        let categories: Vec<u32> = (0..1000)
            .map(|i| {
                if i < 900 {
                    0
                } else if i < 990 {
                    1
                } else {
                    2
                }
            })
            .collect();
        let subset = balanced_subset(&categories, 60, 7).unwrap();
        assert_eq!(subset.len(), 60);
        assert!(subset.windows(2).all(|w| w[0] < w[1]));
        let per_class = |c: u32| {
            subset
                .iter()
                .filter(|&&i| categories[i as usize] == c)
                .count()
        };
        assert_eq!((per_class(0), per_class(1), per_class(2)), (25, 25, 10));
        let uniform = uniform_subset(1000, 60, 7).unwrap();
        assert_eq!(uniform.len(), 60);
        assert!(uniform.windows(2).all(|w| w[0] < w[1]));
        assert_ne!(uniform, uniform_subset(1000, 60, 8).unwrap());
    }
}
