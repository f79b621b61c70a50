//! `bcd ingest` holds a bounded part of a shard's fields (issue 27): a JSON
//! Lines file of 400,000 records with three small fields (a 14-character id,
//! an int64, a float64) goes into one shard, and the peak resident memory of
//! the `bcd ingest` process (its `ru_maxrss`, from `wait4`) is within a fixed
//! margin of the same ingest without fields (`--schema` of no field). Holding
//! the shard's fields, as before, cost about 230 bytes a record: over 90 MB
//! here; now it is about 20 MB.
//!
//! Its own test binary, with nothing else running in it: a child started with
//! `vfork` (as `Command` does) carries its parent's peak into its own
//! `ru_maxrss` at `exec`, so the parent stays small (the input is written as
//! it is made).

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RECORDS: usize = 400_000;
/// The peak RSS with fields may exceed the one without by at most this.
const MARGIN_MB: i64 = 64;

/// Runs `bcd ingest SOURCE --into DEST --keyless ARGS`; returns its peak RSS
/// in MB, after checking it succeeded.
// The child is reaped by `wait4`, for its resource usage, which
// `Child::wait` does not give.
#[allow(clippy::zombie_processes)]
fn peak_rss_mb(source: &Path, dest: &Path, args: &[&str]) -> i64 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bcd"))
        .arg("ingest")
        .arg(source)
        .arg("--into")
        .arg(dest)
        .args(["--keyless", "--quiet", "--compression", "none"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run bcd");
    let pid = child.id() as libc::pid_t;
    // A hang guard, not a race: a run is expected to take seconds.
    let deadline = Instant::now() + Duration::from_secs(900);
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes the status and usage of our own child into
        // the two locals.
        let waited = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(waited >= 0, "wait4: {}", std::io::Error::last_os_error());
        if waited == pid {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("bcd ingest {} did not finish", source.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "bcd ingest {} {args:?} failed ({status})",
        source.display()
    );
    // Linux reports ru_maxrss in KiB.
    usage.ru_maxrss / 1024
}

#[test]
fn an_ingest_with_fields_stays_within_a_fixed_margin_of_one_without() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("records.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&source).unwrap());
    for i in 0..RECORDS {
        writeln!(
            out,
            r#"{{"text": "record {i:012}", "id": "id{i:012}", "n": {}, "x": {}}}"#,
            i * 7,
            i as f64 / 2.0
        )
        .unwrap();
    }
    out.into_inner().unwrap().sync_all().unwrap();
    let no_fields = dir.path().join("no-fields.json");
    std::fs::write(&no_fields, "[]").unwrap();

    let without = peak_rss_mb(
        &source,
        &dir.path().join("without"),
        &["--schema", no_fields.to_str().unwrap()],
    );
    let with = peak_rss_mb(&source, &dir.path().join("with"), &[]);
    eprintln!("peak RSS: {with} MB with fields, {without} MB without");
    assert!(
        with - without <= MARGIN_MB,
        "peak RSS {with} MB with fields, {without} MB without: more than {MARGIN_MB} MB apart"
    );

    // Both hold every record; the fields are all there.
    let fields = dir.path().join("with").join("000000.fields.arrow");
    assert!(fields.metadata().unwrap().len() > RECORDS as u64 * 30);
    assert!(!dir
        .path()
        .join("without")
        .join("000000.fields.arrow")
        .exists());
    let info = Command::new(env!("CARGO_BIN_EXE_bcd"))
        .args(["info", "--json"])
        .arg(dir.path().join("with"))
        .output()
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    assert_eq!(info["records"], RECORDS);
    assert_eq!(info["shards"], 1);
}
