//! Views (issue 22): how fast an expression selects records, and how fast a
//! view opens.
//!
//! ```sh
//! cargo build --release -p bcd-bench
//! target/release/views-bench --dir /work/bench-views --records 100000000 --repeats 5
//! ```
//!
//! Builds once, in `--dir`, a keyless dataset of `--records` records (1-byte
//! values, shards of 4 Mi records) whose fields are `n` (Int64, uniform in 0..10^6),
//! `x` (Float64, uniform in [0, 1)) and `caption` (Utf8: a word of 16, one of
//! them "dog", and a number), written through the pipeline's `FieldsExtend` as
//! every writer does. Then, with the fields files in the page cache (one
//! untimed pass first), the median over `--repeats` of:
//!
//! - `select`: the records an expression selects, evaluated over every shard
//!   on one thread (the fields files mapped, the commit file read): `n < 10000`
//!   (1%), `x < 0.01` (1%), `caption LIKE '%dog%'` (1/16); records per second
//!   of wall time, and per CPU-second of the selecting thread (its on-CPU time
//!   from `/proc/thread-self/schedstat`, which time spent waiting for a core on
//!   a loaded machine does not inflate);
//! - `open`: `Dataset::view` of a view of 10% of the records (its checksum,
//!   order and bound checks, and the last shard's fingerprint), and of one of
//!   10^7 records when the dataset has at least 10^7 (10% of 10^8, or every
//!   record of 10^7); median wall and CPU time of 20 opens.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
use bcd::{Compression, CreateOptions, Dataset};
use bcd_fields::{FieldValue, Fields};
use bcd_pipeline::{FieldsExtend, NewRecord, OnDuplicate};

const SHARD_RECORDS: u64 = 4 << 20;
const BATCH: usize = 1 << 16;
const WORDS: [&str; 16] = [
    "cat", "dog", "ant", "bird", "fish", "tree", "car", "road", "sky", "sea", "cup", "pen", "box",
    "hat", "sun", "key",
];

struct Args {
    dir: PathBuf,
    records: u64,
    repeats: usize,
}

fn args() -> Args {
    let mut out = Args {
        dir: std::env::temp_dir().join("bcd-views-bench"),
        records: 10_000_000,
        repeats: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().expect("a value after each flag");
        match flag.as_str() {
            "--dir" => out.dir = value.into(),
            "--records" => out.records = value.parse().expect("--records N"),
            "--repeats" => out.repeats = value.parse().expect("--repeats N"),
            other => panic!("unknown flag {other}"),
        }
    }
    out
}

/// A SplitMix64 step: the fields' values, the same on every run.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn build(path: &Path, records: u64) {
    let started = Instant::now();
    let options = CreateOptions {
        keyed: false,
        compression: Compression::None,
        // 1-byte values, 4 bytes of .idx each: shards of SHARD_RECORDS records.
        max_shard_size: SHARD_RECORDS,
    };
    let mut dataset = Dataset::create(path, options).expect("create");
    let mut extend = FieldsExtend::begin(&mut dataset, OnDuplicate::Error).expect("begin");
    let names: [Arc<str>; 3] = [Arc::from("n"), Arc::from("x"), Arc::from("caption")];
    let mut start = 0u64;
    while start < records {
        let end = (start + BATCH as u64).min(records);
        let n: ArrayRef = Arc::new(Int64Array::from_iter_values(
            (start..end).map(|i| (mix(i) % 1_000_000) as i64),
        ));
        let x: ArrayRef = Arc::new(Float64Array::from_iter_values(
            (start..end).map(|i| (mix(i ^ 0xABCD) >> 11) as f64 / (1u64 << 53) as f64),
        ));
        let caption: ArrayRef = Arc::new(StringArray::from_iter_values((start..end).map(|i| {
            let word = WORDS[(mix(i ^ 0x1234) % 16) as usize];
            format!("a {word} {}", i % 1000)
        })));
        let fields: Vec<Fields> = (0..(end - start) as usize)
            .map(|row| {
                let mut fields = Fields::new();
                for (name, array) in names.iter().zip([&n, &x, &caption]) {
                    fields.push(name.clone(), FieldValue::Arrow(array.clone(), row));
                }
                fields
            })
            .collect();
        let batch: Vec<NewRecord<'_>> = fields
            .iter()
            .map(|fields| NewRecord {
                key: &[],
                value: b"v",
                fields: std::borrow::Cow::Borrowed(fields),
                origin: &"bench",
            })
            .collect();
        extend.push_batch(&batch).expect("push");
        start = end;
    }
    extend.commit().expect("commit");
    eprintln!(
        "built {records} records in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The calling thread's time on a CPU so far, in seconds (Linux's
/// `/proc/thread-self/schedstat`, first field: nanoseconds).
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let nanos: u64 = stat
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .expect("schedstat's first field");
    nanos as f64 / 1e9
}

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let args = args();
    let path = args.dir.join(format!("ds-{}", args.records));
    if !path.join("manifest.json").exists() {
        std::fs::create_dir_all(&args.dir).expect("--dir");
        let _ = std::fs::remove_dir_all(&path);
        build(&path, args.records);
    }
    let dataset = Dataset::open(&path).expect("open");
    let records = dataset.len() as f64;
    println!(
        "| step | records | selected | median wall s | records/s (wall) | median CPU s | records/s per CPU-second |"
    );
    println!("|---|---|---|---|---|---|---|");
    for expression in ["n < 10000", "x < 0.01", "caption LIKE '%dog%'"] {
        // Warm: the fields files in the page cache.
        let selected = bcd_pipeline::views::select(&dataset, expression)
            .expect("select")
            .len();
        let (walls, cpus): (Vec<f64>, Vec<f64>) = (0..args.repeats)
            .map(|_| {
                let started = Instant::now();
                let cpu = thread_cpu_seconds();
                let view = bcd_pipeline::views::select(&dataset, expression).expect("select");
                let cpu = thread_cpu_seconds() - cpu;
                let wall = started.elapsed().as_secs_f64();
                assert_eq!(view.len(), selected);
                (wall, cpu)
            })
            .unzip();
        let (wall, cpu) = (median(walls), median(cpus));
        println!(
            "| select `{expression}` | {} | {selected} | {wall:.3} | {:.0}M | {cpu:.3} | {:.0}M |",
            dataset.len(),
            records / wall / 1e6,
            records / cpu / 1e6
        );
    }
    let mut views = vec![("tenth", "n < 100000")];
    if dataset.len() >= 100_000_000 {
        // 10^7 of 10^8 records.
        views.push(("ten_million", "n < 100000"));
    } else if dataset.len() >= 10_000_000 {
        // Every record of 10^7: a view file of the same size.
        views.push(("ten_million", "n >= 0"));
    }
    for (name, expression) in views {
        let summary = bcd_pipeline::views::create_view(&dataset, name, expression, true)
            .expect("create the view");
        let (times, cpus): (Vec<f64>, Vec<f64>) = (0..args.repeats.max(5) * 4)
            .map(|_| {
                let started = Instant::now();
                let cpu = thread_cpu_seconds();
                let view = dataset.view(name).expect("open the view");
                let cpu = thread_cpu_seconds() - cpu;
                assert_eq!(view.indices.len() as u64, summary.records);
                (started.elapsed().as_secs_f64(), cpu)
            })
            .unzip();
        let (t, cpu) = (median(times), median(cpus));
        let bytes = std::fs::metadata(path.join(format!("view.{name}")))
            .expect("view file")
            .len();
        println!(
            "| open view `{name}` ({bytes} bytes) | {} | {} | {:.4} | | {cpu:.4} | |",
            dataset.len(),
            summary.records,
            t
        );
    }
}
