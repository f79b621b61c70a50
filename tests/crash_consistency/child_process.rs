//! SIGKILL: this test binary re-runs itself as a child that extends a dataset
//! ([`child_writer_process`]) and is killed at about 25 different moments.

use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::{read_all, snapshot, Record};

use crate::{
    assert_files, assert_records, classify, concat, extend, open, records, scratch_dir, write_dir,
    Outcome,
};

/// Names the dataset the child process works on.
const CHILD_DATASET_ENV: &str = "BCD_CRASH_TEST_CHILD_DATASET";
/// "extend": extend with [`child_records`], printing progress; "hold-lock": start an
/// extend and wait to be killed.
const CHILD_MODE_ENV: &str = "BCD_CRASH_TEST_CHILD_MODE";
/// Prefix of the child's progress lines on stdout.
const PROGRESS: &str = "bcd-crash-test-progress:";
const CHILD_BATCHES: usize = 24;
const CHILD_BATCH_RECORDS: usize = 24;
/// Shard limit of the child's dataset: its extend writes several shards.
const CHILD_SHARD: u64 = 128 * 1024;

/// What the child adds: 24 batches of 24 records of up to 4 KiB, several shards.
fn child_records() -> Vec<Record> {
    records(
        "child",
        CHILD_BATCHES * CHILD_BATCH_RECORDS,
        true,
        7,
        4096,
        3000,
    )
}

/// Runs in the child process (see [`ChildProcess::spawn`]), which selects it with
/// `--ignored --exact`. Ignored, so that a plain run neither runs nor counts it: it
/// checks nothing without the parent.
#[test]
#[ignore = "a helper process of the SIGKILL tests, run by them"]
fn child_writer_process() {
    let Some(dir) = std::env::var_os(CHILD_DATASET_ENV) else {
        return;
    };
    let mode = std::env::var(CHILD_MODE_ENV).unwrap();
    let progress = |what: &str| {
        let mut out = io::stdout().lock();
        writeln!(out, "{PROGRESS} {what}").unwrap();
        out.flush().unwrap();
    };
    let mut dataset = Dataset::open(&dir).unwrap();
    progress("open");
    let mut extend = dataset.begin_extend().unwrap();
    progress("begin");
    match mode.as_str() {
        "hold-lock" => {
            extend.push(b"held", b"never committed").unwrap();
            progress("locked");
            std::thread::sleep(Duration::from_secs(60));
            panic!("the parent did not kill this process");
        }
        "extend" => {
            for (i, batch) in child_records().chunks(CHILD_BATCH_RECORDS).enumerate() {
                // Compressed on all cores, then written.
                extend.push_batch(batch).unwrap();
                progress(&format!("batch {i}"));
            }
            progress("committing");
            let summary = extend.commit().unwrap();
            assert!(summary.shards >= 3, "{summary:?}");
            progress("committed");
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// The name the test harness knows [`child_writer_process`] by: its path from
/// the crate root, as `--exact` needs it (`child_process::child_writer_process`).
fn child_writer_test_name() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_crate, module)| module);
    format!("{module}::child_writer_process")
}

/// A child process, killed (and reaped) when dropped so a failing test leaves none.
pub(crate) struct ChildProcess {
    child: Child,
    /// Its stdout, kept open until it is dead so its prints never hit a closed pipe.
    stdout: BufReader<ChildStdout>,
    /// Progress lines read so far.
    lines: usize,
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ChildProcess {
    /// Re-runs this test binary as `child_writer_process` on `dir`.
    pub(crate) fn spawn(dir: &Path, mode: &str) -> ChildProcess {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                &child_writer_test_name(),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DATASET_ENV, dir)
            .env(CHILD_MODE_ENV, mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        ChildProcess {
            child,
            stdout,
            lines: 0,
        }
    }

    /// Reads stdout until the child has printed `count` progress lines in all, or
    /// its stdout ends; returns how many it printed.
    pub(crate) fn progress(&mut self, count: usize) -> usize {
        let mut line = String::new();
        while self.lines < count {
            line.clear();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                break;
            }
            // Search, not prefix: the test harness may print on the same line.
            if line.contains(PROGRESS) {
                self.lines += 1;
            }
        }
        self.lines
    }

    /// SIGKILL (`Child::kill` on Unix), then reap. A child that already exited is
    /// not an error.
    pub(crate) fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().unwrap()
    }

    fn wait(&mut self) -> ExitStatus {
        self.child.wait().unwrap()
    }
}

/// Whether the child exited by itself, successfully; panics if it failed.
#[cfg(unix)]
pub(crate) fn completed(status: ExitStatus, context: &str) -> bool {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(0), _) => true,
        (_, Some(9)) => false,
        _ => panic!("{context}: the child failed: {status}"),
    }
}

#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// Let the child finish.
    Never,
    /// Right after reading this many progress lines: 1 "open", 2 "begin",
    /// 3.. one per batch, then "committing", then "committed".
    Line(usize),
    /// This long after the "begin" line (the extend has started).
    Delay(Duration),
}

#[cfg(unix)]
#[test]
fn sigkilled_writer_leaves_exactly_old_or_old_plus_all_new_records() {
    let _guard = crate::alone_while_starting_processes();
    // The dataset every round starts from a copy of: some committed records.
    let base = scratch_dir();
    let options = CreateOptions {
        keyed: true,
        compression: Compression::Lz4,
        max_shard_size: CHILD_SHARD,
    };
    let mut dataset = Dataset::create(base.path(), options).unwrap();
    let old = records("old", 100, true, 5, 4096, 3000);
    extend(&mut dataset, &old).unwrap();
    assert!(dataset.shards() >= 1);
    drop(dataset);
    let base_files = snapshot(base.path());
    let new = child_records();
    let later = records("later", 20, true, 6, 2000, 3000);
    let committed_line = CHILD_BATCHES + 4;

    let mut plan = vec![KillAt::Never];
    plan.extend(
        [0, 1, 2, 3, 4, 6, 9, 12, 15, 18, 21, 24]
            .into_iter()
            .chain([CHILD_BATCHES + 2, CHILD_BATCHES + 3, committed_line])
            .map(KillAt::Line),
    );
    // Spread over the extend as timed in the first round, once that is done.
    let delays = plan.len()..plan.len() + 10;
    let mut outcomes = Vec::new();
    let mut extend_time = Duration::ZERO;
    let mut round = 0;
    while round < delays.end {
        if round == delays.start {
            plan.extend(
                // 0 to 1.5 times it: under load a later run may be slower.
                (0..delays.len()).map(|i| {
                    KillAt::Delay(extend_time.mul_f64(1.5 * i as f64 / (delays.len() - 1) as f64))
                }),
            );
        }
        let kill_at = plan[round];
        round += 1;
        let context = format!("round {round}, kill {kill_at:?}");
        let context = context.as_str();
        let work = write_dir(&base_files);
        let dir = work.path();

        let mut child = ChildProcess::spawn(dir, "extend");
        let status = match kill_at {
            KillAt::Never => {
                child.progress(2);
                let started = Instant::now();
                child.progress(usize::MAX);
                let status = child.wait();
                extend_time = started.elapsed();
                status
            }
            KillAt::Line(count) => {
                child.progress(count);
                child.kill()
            }
            KillAt::Delay(delay) => {
                child.progress(2);
                std::thread::sleep(delay);
                child.kill()
            }
        };
        let lines = child.lines;
        let completed = completed(status, context);
        if let KillAt::Never = kill_at {
            assert!(completed, "{context}: the child was not killed but failed");
            assert_eq!(lines, committed_line, "{context}");
        }

        let mut dataset = open(dir, context);
        let got = read_all(&dataset);
        let outcome = classify(&got, &old, &new, context);
        if completed || lines >= committed_line {
            assert_eq!(outcome, Outcome::New, "{context}: commit() had returned");
        }
        let leftovers = assert_files(dir, dataset.shards(), |_| true, context);
        if let KillAt::Never = kill_at {
            eprintln!(
                "child extend: {extend_time:?}, {} new shards",
                dataset.shards() - open(base.path(), "base").shards()
            );
        }
        outcomes.push((kill_at, outcome, leftovers.len()));

        // The killed writer's lock died with it; a later extend succeeds.
        extend(&mut dataset, &later).unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
        let reopened = open(dir, context);
        assert_records(&reopened, &concat(&[&got, &later]), context);
        assert_files(dir, reopened.shards(), |_| true, context);
    }

    for (kill_at, outcome, leftovers) in &outcomes {
        eprintln!("  {kill_at:?}: {outcome:?}, {leftovers} leftover files");
    }
    assert!(outcomes.len() >= 25);
    assert!(
        outcomes.iter().any(|(_, o, _)| *o == Outcome::Old),
        "no kill landed before the commit"
    );
    assert!(outcomes.iter().any(|(_, o, _)| *o == Outcome::New));
}
