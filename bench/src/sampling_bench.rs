//! Sampler construction at scale: the time to compute one rank's part of an epoch
//! (run under GNU `/usr/bin/time -v` for the peak RSS).
//!
//!     sampling-bench N [--world W] [--rank R] [--u64] [--block B] [--drop-last]
//!                      [--classes K] [--weights] [--num-samples S]
//!                      [--sources K] [--resume-from W0]
//!
//! `--sources K`: a mixture of K sources of N/K records each, weighted 1, 2, ..,
//! K, of N samples. `--resume-from W0`: the epoch begun on W0 ranks, each
//! stopped at a different position (rank r at r/W0 of its part), resumed on W.
//!
//! Prints one JSON line: the settings, seconds, and a checksum of the part.

use std::time::Instant;

use bcd_sampling::{Index, Mixture, Order, Plan, PlanError, Weights};

/// The part as `I`, and its checksum.
fn part<I: Index>(fill: impl Fn(&mut Vec<I>) -> Result<(), PlanError>) -> Result<u64, PlanError> {
    let mut part = Vec::new();
    fill(&mut part)?;
    Ok(part.iter().fold(0u64, |acc, &x| {
        acc.wrapping_mul(31).wrapping_add(x.to_u64())
    }))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let len: u64 = args
        .first()
        .ok_or("usage: sampling-bench N [options]")?
        .parse()?;
    let value = |flag: &str| -> Option<u64> {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let world = value("--world").unwrap_or(1);
    let rank = value("--rank").unwrap_or(0);
    let classes = value("--classes");
    // Categories (and weights) are inputs the caller already holds, made
    // before the timing.
    let categories: Option<Vec<u32>> =
        classes.map(|k| (0..len).map(|i| ((i * 2654435761) % k) as u32).collect());
    let order = value("--block").map_or(Order::Shuffled, Order::Blocks);
    let drop_last = has("--drop-last");
    let sources = value("--sources");
    let lengths: Vec<u64> = sources.map_or_else(Vec::new, |k| {
        (0..k).map(|s| len / k + u64::from(s < len % k)).collect()
    });
    let source_weights: Vec<f64> = (0..lengths.len()).map(|s| (s + 1) as f64).collect();
    // The earlier run's positions (made before the timing, as a state holds them).
    let resumed_from: Vec<Vec<u64>> = match value("--resume-from") {
        Some(first_world) => {
            let first = if sources.is_some() {
                Mixture {
                    world_size: first_world,
                    drop_last,
                    order,
                    num_samples: value("--num-samples"),
                    ..Mixture::new(&lengths, &source_weights)
                }
                .per_rank()?
            } else {
                Plan {
                    world_size: first_world,
                    drop_last,
                    order,
                    num_samples: value("--num-samples"),
                    ..Plan::new(len)
                }
                .per_rank()?
            };
            vec![(0..first_world).map(|r| first * r / first_world).collect()]
        }
        None => Vec::new(),
    };
    let plan = Plan {
        seed: 1,
        epoch: 0,
        world_size: world,
        drop_last,
        order,
        categories: categories.as_deref(),
        weights: has("--weights").then_some(Weights::InverseFrequency),
        num_samples: value("--num-samples"),
        resumed_from: &resumed_from,
        ..Plan::new(len)
    };
    let mixture = Mixture {
        seed: 1,
        epoch: 0,
        world_size: world,
        drop_last,
        order,
        num_samples: value("--num-samples"),
        resumed_from: &resumed_from,
        ..Mixture::new(&lengths, &source_weights)
    };
    let start = Instant::now();
    let wide = has("--u64");
    let checksum = match (sources.is_some(), wide) {
        (false, true) => part::<u64>(|out| {
            *out = plan.rank(rank, 0)?;
            Ok(())
        })?,
        (false, false) => part::<u32>(|out| {
            *out = plan.rank(rank, 0)?;
            Ok(())
        })?,
        (true, true) => part::<u64>(|out| {
            *out = mixture.rank(rank, 0)?;
            Ok(())
        })?,
        (true, false) => part::<u32>(|out| {
            *out = mixture.rank(rank, 0)?;
            Ok(())
        })?,
    };
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{{\"records\": {len}, \"world_size\": {world}, \"rank\": {rank}, \"seconds\": {seconds:.4}, \"checksum\": {checksum}}}"
    );
    Ok(())
}
