//! Mixtures and elastic resumes, checked on random settings: each source its
//! share, every draw of every source taken once over the ranks, every prefix of
//! every rank within one sample of each source's share, resuming from any
//! position; an epoch resumed on another number of ranks covers exactly what the
//! earlier ranks had not consumed; and the documented algorithm, written out
//! plainly, gives the same orders.

use std::collections::HashMap;

use bcd_sampling::rng::{stream_key, Purpose};
use bcd_sampling::{
    BlockShuffle, Dealing, Interleave, Mixture, Order, Plan, PlanError, Shuffle, Weights,
};
use proptest::prelude::*;

/// `default` cases, unless `PROPTEST_CASES` asks for another number (`make soak`).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn multiset(values: impl IntoIterator<Item = u64>) -> HashMap<u64, usize> {
    let mut counts = HashMap::new();
    for v in values {
        *counts.entry(v).or_insert(0) += 1;
    }
    counts
}

fn order_strategy() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Sequential),
        Just(Order::Shuffled),
        (1u64..40).prop_map(Order::Blocks),
    ]
}

/// Sources of 0 to 300 records, with weights from a small set (0 for the
/// empty ones).
fn sources_strategy() -> impl Strategy<Value = (Vec<u64>, Vec<f64>)> {
    prop::collection::vec(
        (
            0u64..300,
            prop::sample::select(vec![0.0, 0.5, 1.0, 2.0, 3.7, 10.0]),
        ),
        1..7,
    )
    .prop_map(|sources| {
        let mut lengths: Vec<u64> = sources.iter().map(|s| s.0).collect();
        let mut weights: Vec<f64> = sources
            .iter()
            .map(|&(n, w)| if n == 0 { 0.0 } else { w })
            .collect();
        if weights.iter().all(|&w| w == 0.0) {
            lengths[0] = lengths[0].max(1);
            weights[0] = 1.0;
        }
        (lengths, weights)
    })
}

fn offsets(lengths: &[u64]) -> Vec<u64> {
    let mut out = vec![0];
    for &n in lengths {
        out.push(out.last().unwrap() + n);
    }
    out
}

fn source_of(offsets: &[u64], index: u64) -> usize {
    (0..offsets.len() - 1)
        .rev()
        .find(|&k| offsets[k] <= index && index < offsets[k + 1])
        .unwrap()
}

/// The documented algorithm, written out plainly: every rank's part.
fn spec_mixture(mix: &Mixture<'_>) -> Vec<Vec<u64>> {
    let world = mix.world_size;
    let samples = mix.num_samples.unwrap_or(mix.lengths.iter().sum());
    let per_rank = if mix.drop_last {
        samples / world
    } else {
        samples.div_ceil(world)
    };
    let total = per_rank * world;
    // Step 2: cumulative shares in doubles.
    let sum: f64 = mix.weights.iter().sum();
    let mut running = 0.0;
    let mut cumulative = vec![];
    for (k, &w) in mix.weights.iter().enumerate() {
        running += w;
        cumulative.push(if k + 1 == mix.weights.len() {
            total
        } else {
            ((total as f64 * (running / sum)).floor() as u64).min(total)
        });
    }
    let shares: Vec<u64> = (0..cumulative.len())
        .map(|k| cumulative[k] - if k == 0 { 0 } else { cumulative[k - 1] })
        .collect();
    // Step 3: each source's draws, pass after pass.
    let starts = offsets(mix.lengths);
    let draws: Vec<Vec<u64>> = (0..mix.lengths.len())
        .map(|k| {
            let n = mix.lengths[k];
            let seed = stream_key(mix.seed, mix.epoch, Purpose::MixSource, k as u64);
            let pass = |p: u64| -> Vec<u64> {
                match mix.order {
                    Order::Sequential => (0..n).collect(),
                    Order::Shuffled => Shuffle::records(n, seed, p).to_vec(),
                    Order::Blocks(size) => {
                        let mut out = vec![0u64; n as usize];
                        BlockShuffle::new(n, size, seed, p).fill(0, &mut out);
                        out
                    }
                }
            };
            let mut list = vec![];
            let mut p = 0;
            while (list.len() as u64) < shares[k] {
                list.extend(pass(p).into_iter().map(|i| i + starts[k]));
                p += 1;
            }
            list.truncate(shares[k] as usize);
            list
        })
        .collect();
    // Step 4: consecutive runs of each source's draws in rank order, interleaved.
    let dealing = Dealing::new(&shares, world).unwrap();
    let mut taken_before = vec![0u64; shares.len()];
    (0..world)
        .map(|rank| {
            let mut next: Vec<u64> = taken_before.clone();
            let part: Vec<u64> = Interleave::new(&dealing, rank)
                .unwrap()
                .map(|k| {
                    let entry = draws[k as usize][next[k as usize] as usize];
                    next[k as usize] += 1;
                    entry
                })
                .collect();
            for (k, before) in taken_before.iter_mut().enumerate() {
                *before += dealing.count(k, rank);
            }
            part
        })
        .collect()
}

/// Checks ⌊t N_k/T⌋ ≤ C_k(t) ≤ ⌈t N_k/T⌉ for every prefix of `part`.
fn assert_prefixes_within_one(
    part: &[u64],
    class_of: impl Fn(u64) -> usize,
    shares: &[u64],
    total: u64,
) -> Result<(), TestCaseError> {
    let mut seen = vec![0u64; shares.len()];
    for (t, &entry) in part.iter().enumerate() {
        seen[class_of(entry)] += 1;
        let t = t as u64 + 1;
        for (k, &share) in shares.iter().enumerate() {
            let exact = u128::from(t) * u128::from(share);
            let (floor, ceil) = (exact / u128::from(total), exact.div_ceil(u128::from(total)));
            prop_assert!(
                (floor..=ceil).contains(&u128::from(seen[k])),
                "class {k}: {} after {t} entries; share {share} of {total}",
                seen[k]
            );
        }
    }
    Ok(())
}

fn mix_parts(mix: &Mixture<'_>) -> Vec<Vec<u64>> {
    (0..mix.world_size)
        .map(|r| mix.rank(r, 0).unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(300)))]

    #[test]
    fn each_source_gives_its_share_and_every_prefix_is_within_one_sample(
        (lengths, weights) in sources_strategy(),
        num_samples in proptest::option::of(0u64..1500),
        world in 1u64..8,
        seed in any::<u64>(),
        epoch in 0u64..4,
        drop_last in any::<bool>(),
        order in order_strategy(),
        start in 0u64..400,
    ) {
        let mix = Mixture {
            num_samples, seed, epoch, world_size: world, drop_last, order,
            ..Mixture::new(&lengths, &weights)
        };
        let per_rank = mix.per_rank().unwrap();
        let total = per_rank * world;
        let shares = mix.shares(total).unwrap();
        prop_assert_eq!(shares.iter().sum::<u64>(), total);
        let sum: f64 = weights.iter().sum();
        for (k, &share) in shares.iter().enumerate() {
            let exact = total as f64 * weights[k] / sum;
            prop_assert!((share as f64 - exact).abs() < 1.0 + 1e-9, "source {k}: {share} for {exact}");
        }
        let parts = mix_parts(&mix);
        prop_assert_eq!(&parts, &spec_mixture(&mix));
        let starts = offsets(&lengths);
        for part in &parts {
            prop_assert_eq!(part.len() as u64, per_rank);
            assert_prefixes_within_one(part, |e| source_of(&starts, e), &shares, total)?;
        }
        // Each source's draws: without replacement up to its size, else every
        // record ⌊N_k / n_k⌋ or ⌈N_k / n_k⌉ times.
        let all = multiset(parts.iter().flatten().copied());
        for (k, &share) in shares.iter().enumerate() {
            let n = lengths[k];
            for record in starts[k]..starts[k + 1] {
                let times = all.get(&record).copied().unwrap_or(0) as u64;
                prop_assert!(times == share / n || times == share.div_ceil(n), "record {record}: {times} times, share {share} of {n}");
            }
        }
        // Resuming from any position gives the rest of the part.
        let start = start.min(per_rank);
        for (rank, part) in parts.iter().enumerate() {
            let rest: Vec<u64> = mix.rank(rank as u64, start).unwrap();
            prop_assert_eq!(&rest[..], &part[start as usize..]);
        }
    }

    #[test]
    fn a_plan_resumed_on_other_ranks_takes_exactly_what_was_not_consumed(
        len in 0u64..700,
        world in 1u64..9,
        next in 1u64..9,
        seed in any::<u64>(),
        drop_last in any::<bool>(),
        order in order_strategy(),
        balanced in any::<bool>(),
        weighted in any::<bool>(),
        fractions in prop::collection::vec(0.0f64..=1.0, 8),
        lockstep in any::<bool>(),
    ) {
        let categories: Vec<u32> = (0..len).map(|i| (i * 7 % 11 % 4) as u32).collect();
        let plan = Plan {
            seed,
            epoch: 2,
            world_size: world,
            drop_last,
            order,
            categories: balanced.then_some(&categories[..]),
            weights: (weighted && balanced).then_some(Weights::InverseFrequency),
            num_samples: (weighted && balanced).then_some(len / 2),
            ..Plan::new(len)
        };
        let per_rank = plan.per_rank().unwrap();
        let positions: Vec<u64> = (0..world as usize)
            .map(|r| (fractions[if lockstep { 0 } else { r }] * per_rank as f64) as u64)
            .collect();
        let old: Vec<Vec<u64>> = (0..world).map(|r| plan.rank(r, 0).unwrap()).collect();
        let runs = vec![positions.clone()];
        let resumed = Plan { world_size: next, resumed_from: &runs, ..plan };
        let parts: Vec<Vec<u64>> = (0..next).map(|r| resumed.rank(r, 0).unwrap()).collect();
        let class_of = |e: u64| categories[e as usize] as usize;
        check_resumed(&old, &positions, &parts, resumed.per_rank().unwrap(), next, drop_last, balanced.then_some((&class_of, 4)))?;
        for (r, part) in parts.iter().enumerate() {
            let start = (fractions[r % 8] * part.len() as f64) as u64;
            prop_assert_eq!(&resumed.rank::<u64>(r as u64, start).unwrap()[..], &part[start as usize..]);
        }
    }

    #[test]
    fn a_mixture_resumed_on_other_ranks_takes_exactly_what_was_not_consumed(
        (lengths, weights) in sources_strategy(),
        num_samples in proptest::option::of(0u64..900),
        world in 1u64..9,
        next in 1u64..9,
        seed in any::<u64>(),
        drop_last in any::<bool>(),
        fractions in prop::collection::vec(0.0f64..=1.0, 8),
        lockstep in any::<bool>(),
    ) {
        let mix = Mixture { num_samples, seed, world_size: world, drop_last, ..Mixture::new(&lengths, &weights) };
        let per_rank = mix.per_rank().unwrap();
        let positions: Vec<u64> = (0..world as usize)
            .map(|r| (fractions[if lockstep { 0 } else { r }] * per_rank as f64) as u64)
            .collect();
        let old = mix_parts(&mix);
        let runs = vec![positions.clone()];
        let resumed = Mixture { world_size: next, resumed_from: &runs, ..mix };
        let parts = mix_parts(&resumed);
        let starts = offsets(&lengths);
        let class_of = |e: u64| source_of(&starts, e);
        check_resumed(&old, &positions, &parts, resumed.per_rank().unwrap(), next, drop_last, Some((&class_of, lengths.len())))?;
    }

    #[test]
    fn an_epoch_resumed_twice_takes_the_rest_of_the_second_run(
        len in 1u64..500,
        worlds in prop::collection::vec(1u64..7, 3),
        seed in any::<u64>(),
        balanced in any::<bool>(),
        fractions in prop::collection::vec(0.0f64..=1.0, 12),
    ) {
        let categories: Vec<u32> = (0..len).map(|i| (i % 3) as u32).collect();
        let plan = Plan {
            seed,
            world_size: worlds[0],
            categories: balanced.then_some(&categories[..]),
            ..Plan::new(len)
        };
        let first_m = plan.per_rank().unwrap();
        let first: Vec<u64> = (0..worlds[0] as usize).map(|r| (fractions[r] * first_m as f64) as u64).collect();
        let one_run = vec![first.clone()];
        let second = Plan { world_size: worlds[1], resumed_from: &one_run, ..plan };
        let second_m = second.per_rank().unwrap();
        let second_parts: Vec<Vec<u64>> = (0..worlds[1]).map(|r| second.rank(r, 0).unwrap()).collect();
        let then: Vec<u64> = (0..worlds[1] as usize).map(|r| (fractions[6 + r] * second_m as f64) as u64).collect();
        let two_runs = vec![first, then.clone()];
        let third = Plan { world_size: worlds[2], resumed_from: &two_runs, ..plan };
        let third_parts: Vec<Vec<u64>> = (0..worlds[2]).map(|r| third.rank(r, 0).unwrap()).collect();
        let class_of = |e: u64| categories[e as usize] as usize;
        check_resumed(&second_parts, &then, &third_parts, third.per_rank().unwrap(), worlds[2], false, balanced.then_some((&class_of, 3)))?;
    }
}

/// Checks the parts of a run resumed on `next` ranks against the parts `old` of
/// the run before, stopped at `positions`: the same ranks in step continue their
/// parts; otherwise the new parts lay out the rest `R` (the old parts from their
/// positions on) as an epoch of `m'` entries per rank: together exactly
/// `E'[p] = R[p mod |R|]`, in order when not dealt by class, and with classes
/// every prefix within one of each class's share of `E'`.
fn check_resumed(
    old: &[Vec<u64>],
    positions: &[u64],
    parts: &[Vec<u64>],
    per_rank: u64,
    next: u64,
    drop_last: bool,
    classes: Option<(&dyn Fn(u64) -> usize, usize)>,
) -> Result<(), TestCaseError> {
    prop_assert!(parts.iter().all(|p| p.len() as u64 == per_rank));
    if old.len() as u64 == next && positions.windows(2).all(|w| w[0] == w[1]) {
        for (part, was) in parts.iter().zip(old) {
            prop_assert_eq!(&part[..], &was[positions[0] as usize..]);
        }
        return Ok(());
    }
    let rest: Vec<u64> = old
        .iter()
        .zip(positions)
        .flat_map(|(part, &c)| part[c as usize..].iter().copied())
        .collect();
    let expected_m = if drop_last {
        rest.len() as u64 / next
    } else {
        (rest.len() as u64).div_ceil(next)
    };
    prop_assert_eq!(per_rank, expected_m);
    let total = per_rank * next;
    let epoch: Vec<u64> = (0..total)
        .map(|p| rest[(p % rest.len() as u64) as usize])
        .collect();
    let together: Vec<u64> = parts.iter().flatten().copied().collect();
    match classes {
        None => prop_assert_eq!(together, epoch),
        Some((class_of, count)) => {
            prop_assert_eq!(multiset(together), multiset(epoch.iter().copied()));
            let mut shares = vec![0u64; count];
            for &e in &epoch {
                shares[class_of(e)] += 1;
            }
            for part in parts {
                assert_prefixes_within_one(part, class_of, &shares, total)?;
            }
        }
    }
    // Exactly the rest, each once, but the padding (fewer than `next`
    // entries) or what drop_last leaves out (fewer than `next`).
    let covered = multiset(parts.iter().flatten().copied());
    let wanted = multiset(rest.iter().copied());
    let missing: usize = wanted
        .iter()
        .map(|(e, &n)| n.saturating_sub(covered.get(e).copied().unwrap_or(0)))
        .sum();
    let extra: usize = covered
        .iter()
        .map(|(e, &n)| n.saturating_sub(wanted.get(e).copied().unwrap_or(0)))
        .sum();
    prop_assert!((missing as u64) < next.max(1) && (extra as u64) < next.max(1));
    let exact_side = if drop_last { extra } else { missing };
    prop_assert_eq!(exact_side, 0);
    Ok(())
}

/// One old run's parts and a resumed run's, for the named cases below.
fn resume_plan(plan: Plan<'_>, positions: &[u64], next: u64) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    let old = (0..plan.world_size)
        .map(|r| plan.rank(r, 0).unwrap())
        .collect();
    let runs = vec![positions.to_vec()];
    let resumed = Plan {
        world_size: next,
        resumed_from: &runs,
        ..plan
    };
    let new = (0..next).map(|r| resumed.rank(r, 0).unwrap()).collect();
    (old, new)
}

fn consumed_and_resumed(
    old: &[Vec<u64>],
    positions: &[u64],
    new: &[Vec<u64>],
) -> (HashMap<u64, usize>, HashMap<u64, usize>) {
    let consumed = old
        .iter()
        .zip(positions)
        .flat_map(|(p, &c)| p[..c as usize].iter().copied());
    (
        multiset(consumed.chain(new.iter().flatten().copied())),
        multiset(old.iter().flatten().copied()),
    )
}

#[test]
fn eight_ranks_resumed_on_three_take_the_rest_of_the_epoch_each_once() {
    // 8 ranks of 125 entries, stopped unevenly; 3 new ranks: the consumed
    // entries and the new parts together are the epoch, each once (1000 records
    // over 8 ranks: no padding; the rest, 1000 − 436 = 564, splits into 188 × 3).
    let plan = Plan {
        seed: 3,
        epoch: 1,
        world_size: 8,
        ..Plan::new(1000)
    };
    let positions = [40, 41, 60, 55, 70, 50, 60, 60];
    let (old, new) = resume_plan(plan, &positions, 3);
    assert!(new.iter().all(|p| p.len() == 188));
    let (seen, epoch) = consumed_and_resumed(&old, &positions, &new);
    assert_eq!(seen, epoch);
    assert!(epoch.values().all(|&n| n == 1));
}

#[test]
fn two_ranks_resumed_on_five_take_the_rest_of_the_epoch_each_once() {
    let categories: Vec<u32> = (0..1003).map(|i| u32::from(i % 10 == 0)).collect();
    let plan = Plan {
        seed: 8,
        world_size: 2,
        drop_last: true,
        categories: Some(&categories),
        ..Plan::new(1003)
    };
    // 2 × 501 (one record left out by drop_last); 2 ranks at 100 and 96 leave
    // 806 = 5 × 161 + 1: drop_last leaves one more out.
    let positions = [100, 96];
    let (old, new) = resume_plan(plan, &positions, 5);
    assert!(new.iter().all(|p| p.len() == 161));
    let (seen, epoch) = consumed_and_resumed(&old, &positions, &new);
    let extra: usize = seen
        .iter()
        .map(|(e, &n)| n.saturating_sub(epoch.get(e).copied().unwrap_or(0)))
        .sum();
    let missing: usize = epoch
        .iter()
        .map(|(e, &n)| n.saturating_sub(seen.get(e).copied().unwrap_or(0)))
        .sum();
    assert_eq!((extra, missing), (0, 1));
}

#[test]
fn a_mixture_resumed_from_eight_ranks_on_three_and_from_two_on_five() {
    let lengths = [500u64, 90, 7000, 33];
    let weights = [0.5, 0.2, 0.25, 0.05];
    for (world, next, positions) in [
        (8u64, 3u64, vec![10u64, 0, 125, 125, 60, 61, 62, 5]),
        (2, 5, vec![1000, 2004]),
    ] {
        let mix = Mixture {
            seed: 21,
            epoch: 4,
            world_size: world,
            ..Mixture::new(&lengths, &weights)
        };
        let old = mix_parts(&mix);
        let runs = vec![positions.clone()];
        let resumed = Mixture {
            world_size: next,
            resumed_from: &runs,
            ..mix
        };
        let new = mix_parts(&resumed);
        let (seen, epoch) = consumed_and_resumed(&old, &positions, &new);
        // No padding here: the rest splits evenly, so exactly the epoch.
        let rest: u64 = old
            .iter()
            .zip(&positions)
            .map(|(p, &c)| p.len() as u64 - c)
            .sum();
        assert_eq!(rest % next, 0, "the case is chosen to split evenly");
        assert_eq!(seen, epoch, "{world} -> {next}");
        // And every new rank keeps each source within one of its share of the rest.
        let starts = offsets(&lengths);
        let mut shares = vec![0u64; 4];
        for e in new.iter().flatten() {
            shares[source_of(&starts, *e)] += 1;
        }
        for part in &new {
            assert_prefixes_within_one(part, |e| source_of(&starts, e), &shares, rest).unwrap();
        }
    }
}

#[test]
fn a_small_source_is_repeated_with_a_new_permutation_each_pass() {
    // 10 records with half the weight of 1000 samples: 500 draws, 50 passes.
    let lengths = [10u64, 990];
    let weights = [1.0, 1.0];
    let mix = Mixture {
        seed: 4,
        ..Mixture::new(&lengths, &weights)
    };
    let part: Vec<u64> = mix.rank(0, 0).unwrap();
    let small: Vec<u64> = part.iter().copied().filter(|&i| i < 10).collect();
    assert_eq!(small.len(), 500);
    let passes: Vec<&[u64]> = small.chunks(10).collect();
    for pass in &passes {
        let mut sorted = pass.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }
    let distinct: std::collections::HashSet<&[u64]> = passes.iter().copied().collect();
    assert!(distinct.len() > 40, "each pass its own permutation");
    // The large source is sampled without replacement: 500 distinct records.
    let large = multiset(part.iter().copied().filter(|&i| i >= 10));
    assert_eq!(large.len(), 500);
}

#[test]
fn a_mixture_on_a_huge_world_size_costs_only_what_the_rank_returns() {
    let lengths = [3u64, 5];
    let weights = [1.0, 1.0];
    let mix = Mixture {
        world_size: 1 << 40,
        ..Mixture::new(&lengths, &weights)
    };
    assert_eq!(mix.per_rank().unwrap(), 1);
    for rank in [0, 1, 7, (1 << 40) - 1] {
        let part: Vec<u64> = mix.rank(rank, 0).unwrap();
        assert_eq!(part.len(), 1);
        assert!(part[0] < 8);
    }
}

#[test]
fn pinned_mixture_orders_never_change() {
    // A change here changes every user's mixtures: it needs a new format of the
    // orders, not an updated constant.
    let lengths = [4u64, 6, 3];
    let weights = [2.0, 1.0, 1.0];
    let mix = Mixture {
        seed: 7,
        epoch: 1,
        num_samples: Some(12),
        world_size: 2,
        ..Mixture::new(&lengths, &weights)
    };
    assert_eq!(mix.shares(12).unwrap(), [6, 3, 3]);
    assert_eq!(mix_parts(&mix), PINNED_MIX);
    let runs = vec![vec![2, 4]];
    let resumed = Mixture {
        world_size: 3,
        resumed_from: &runs,
        ..mix
    };
    assert_eq!(mix_parts(&resumed), PINNED_MIX_RESUMED);
}

// Source 0 (4 records, 6 draws) is repeated: a pass of 4, then 2 of the next;
// sources 1 and 2 give 3 each (indices 4..10 and 10..13).
const PINNED_MIX: [[u64; 6]; 2] = [[1, 8, 0, 10, 2, 7], [3, 6, 3, 11, 2, 12]];
// The rest [0, 10, 2, 7] ++ [2, 12] dealt by source to 3 ranks.
const PINNED_MIX_RESUMED: [[u64; 2]; 3] = [[0, 7], [2, 10], [2, 12]];

#[test]
fn mixture_settings_that_cannot_work_are_errors_naming_the_field() {
    let cases: Vec<(Vec<u64>, Vec<f64>, &str)> = vec![
        (
            vec![3, 4],
            vec![1.0],
            "`weights` has 1 entries for 2 sources",
        ),
        (vec![3, 4], vec![1.0, -1.0], "source 1 has weight -1"),
        (vec![3, 4], vec![1.0, f64::NAN], "source 1 has weight NaN"),
        (
            vec![3, 4],
            vec![0.0, 0.0],
            "no source has a positive weight",
        ),
        (vec![], vec![], "no source has a positive weight"),
        (vec![3, 0], vec![1.0, 1.0], "source 1 has no records"),
        (
            vec![3, 4],
            vec![1e308, 1e308],
            "add up to more than the largest double",
        ),
        (
            vec![u64::MAX, 1],
            vec![1.0, 1.0],
            "more than 2^64 - 1 records",
        ),
    ];
    for (lengths, weights, message) in cases {
        let error = Mixture::new(&lengths, &weights)
            .rank::<u64>(0, 0)
            .unwrap_err();
        assert!(
            error.to_string().contains(message),
            "{error} lacks {message:?}"
        );
    }
    let (lengths, weights) = ([10u64, 10], [1.0, 1.0]);
    let mix = Mixture::new(&lengths, &weights);
    assert_eq!(
        Mixture {
            world_size: 0,
            ..mix
        }
        .per_rank(),
        Err(PlanError::WorldSize)
    );
    assert_eq!(
        Mixture {
            order: Order::Blocks(0),
            ..mix
        }
        .per_rank(),
        Err(PlanError::BlockSize)
    );
    assert_eq!(
        mix.rank::<u64>(1, 0),
        Err(PlanError::Rank {
            rank: 1,
            world_size: 1
        })
    );
    // A source with weight 0 may be empty; it then gives nothing.
    let (lengths, weights) = ([10u64, 0], [1.0, 0.0]);
    assert_eq!(
        Mixture::new(&lengths, &weights)
            .rank::<u64>(0, 0)
            .unwrap()
            .len(),
        10
    );
    // Resumed runs: positions past the parts, runs without ranks.
    let past = vec![vec![21, 0]];
    let two = Mixture {
        world_size: 2,
        ..mix
    };
    let error = Mixture {
        resumed_from: &past,
        ..two
    }
    .per_rank()
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "`resumed_from`: rank 0 of run 0 is at position 21, past the end of its 10 entries"
    );
    let empty = vec![vec![3, 3], vec![]];
    let error = Plan {
        resumed_from: &empty,
        ..Plan::new(10)
    }
    .per_rank()
    .unwrap_err();
    assert_eq!(error, PlanError::ResumedRanks { run: 1 });
}
