//! Sampler construction at scale: the time to compute one rank's part of an epoch
//! (run under GNU `/usr/bin/time -v` for the peak RSS).
//!
//!     sampling-bench N [--world W] [--rank R] [--u64] [--block B] [--drop-last]
//!                      [--classes K] [--weights]
//!
//! Prints one JSON line: the settings, seconds, and a checksum of the part.

use std::time::Instant;

use bcd_sampling::{Order, Plan, Weights};

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
    let plan = Plan {
        seed: 1,
        epoch: 0,
        world_size: world,
        drop_last: has("--drop-last"),
        order: value("--block").map_or(Order::Shuffled, Order::Blocks),
        categories: categories.as_deref(),
        weights: has("--weights").then_some(Weights::InverseFrequency),
        num_samples: value("--num-samples"),
        ..Plan::new(len)
    };
    let start = Instant::now();
    let checksum = if has("--u64") {
        let part: Vec<u64> = plan.rank(rank, 0)?;
        part.iter()
            .fold(0u64, |acc, &x| acc.wrapping_mul(31).wrapping_add(x))
    } else {
        let part: Vec<u32> = plan.rank(rank, 0)?;
        part.iter().fold(0u64, |acc, &x| {
            acc.wrapping_mul(31).wrapping_add(u64::from(x))
        })
    };
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{{\"records\": {len}, \"world_size\": {world}, \"rank\": {rank}, \"seconds\": {seconds:.4}, \"checksum\": {checksum}}}"
    );
    Ok(())
}
