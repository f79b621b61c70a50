//! No command panics when stdout or stderr cannot be written: a closed pipe
//! (`| head -c0`) ends the command quietly with status 0, another write error
//! (`> /dev/full`) with status 1 and a message saying whether the data was
//! committed, and a failing stderr is ignored.
//!
//! A closed pipe is made deterministic: the test creates the pipe and closes its
//! read end before bcd starts, so bcd's write gets EPIPE, never a reader.

#![cfg(target_os = "linux")]

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use bcd::Dataset;

mod common;
use common::*;

/// Where a stream of bcd goes.
#[derive(Clone, Copy, Debug)]
enum Sink {
    /// A pipe whose read end is already closed (`| head -c0`).
    ClosedPipe,
    /// `/dev/full`: every write fails with ENOSPC.
    Full,
    /// Captured by the test.
    Captured,
}

impl Sink {
    fn stdio(self) -> Stdio {
        match self {
            Sink::ClosedPipe => {
                let (reader, writer) = std::io::pipe().unwrap();
                drop(reader);
                writer.into()
            }
            Sink::Full => OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap()
                .into(),
            Sink::Captured => Stdio::piped(),
        }
    }
}

/// A finished run: status and whatever was captured.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

fn bcd(args: &[&str], stdout: Sink, stderr: Sink) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_bcd"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout.stdio())
        .stderr(stderr.stdio())
        .output()
        .expect("run bcd");
    let ran = Ran {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_ne!(
        ran.status.code(),
        Some(101),
        "bcd {args:?} panicked: {}",
        ran.stderr
    );
    assert!(
        ran.status.code().is_some(),
        "bcd {args:?}: {:?}",
        ran.status
    );
    assert!(
        !ran.stderr.contains("panicked"),
        "bcd {args:?}: {}",
        ran.stderr
    );
    ran
}

/// A directory tree of three files.
fn tree(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("a")).unwrap();
    std::fs::write(tree.join("a/1.txt"), b"one").unwrap();
    std::fs::write(tree.join("a/2.txt"), b"two").unwrap();
    std::fs::write(tree.join("b.txt"), b"three").unwrap();
    tree
}

fn committed_records(dataset: &Path) -> usize {
    Dataset::open(dataset).unwrap().len()
}

/// `bcd ingest DIR --into d --json > /dev/full` committed, then could not print:
/// exit 1 saying the ingest was committed (a retry must not re-ingest blindly).
#[test]
fn ingest_json_summary_to_a_full_device_exits_1_saying_it_was_committed() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let ds = dir.path().join("d");
    let ran = bcd(
        &["ingest", s(&tree), "--into", s(&ds), "--json"],
        Sink::Full,
        Sink::Captured,
    );
    assert_eq!(ran.status.code(), Some(1), "{}", ran.stderr);
    assert!(
        ran.stderr.starts_with("bcd: ")
            && ran.stderr.contains("was committed; writing its summary")
            && ran.stderr.contains("No space left on device"),
        "{}",
        ran.stderr
    );
    assert_eq!(committed_records(&ds), 3);
}

/// `bcd ingest DIR --into d --json | head -c0`: a closed pipe is not an error.
#[test]
fn ingest_json_summary_into_a_closed_pipe_exits_0_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let ds = dir.path().join("d");
    let ran = bcd(
        &["ingest", s(&tree), "--into", s(&ds), "--json"],
        Sink::ClosedPipe,
        Sink::Captured,
    );
    assert_eq!(ran.status.code(), Some(0), "{}", ran.stderr);
    assert_eq!(ran.stderr, "");
    assert_eq!(committed_records(&ds), 3);
}

/// `2>/dev/full`: the summary, progress and error messages go to stderr; losing
/// them changes nothing else.
#[test]
fn a_full_stderr_never_panics_and_keeps_the_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let ds = dir.path().join("d");
    // Success (its summary goes to stderr).
    let ran = bcd(
        &["ingest", s(&tree), "--into", s(&ds)],
        Sink::Captured,
        Sink::Full,
    );
    assert_eq!(ran.status.code(), Some(0));
    assert_eq!(committed_records(&ds), 3);
    // Failure: the duplicate message is lost, the status is not.
    let ran = bcd(
        &["ingest", s(&tree), "--into", s(&ds)],
        Sink::Captured,
        Sink::Full,
    );
    assert_eq!(ran.status.code(), Some(1));
    assert_eq!(committed_records(&ds), 3);
    // A usage error found after parsing, and one clap finds.
    let ran = bcd(
        &["ingest", s(&tree), "--into", s(&ds), "--delimiter", ";"],
        Sink::Captured,
        Sink::Full,
    );
    assert_eq!(ran.status.code(), Some(2));
    let ran = bcd(&["ingest", "--no-such-flag"], Sink::Captured, Sink::Full);
    assert_eq!(ran.status.code(), Some(2));
    // verify: its problems go to stderr.
    let ran = bcd(
        &["verify", s(&dir.path().join("missing"))],
        Sink::Captured,
        Sink::Full,
    );
    assert_eq!(ran.status.code(), Some(1));
    // Both streams full.
    for args in [&["verify", s(&ds)][..], &["info", s(&ds)], &["ls", s(&ds)]] {
        let ran = bcd(args, Sink::Full, Sink::Full);
        assert_eq!(ran.status.code(), Some(1), "{args:?}");
    }
    // Export's summary goes to stderr.
    let out = dir.path().join("out.tar");
    let ran = bcd(
        &["export", s(&ds), "--to", s(&out)],
        Sink::Captured,
        Sink::Full,
    );
    assert_eq!(ran.status.code(), Some(0));
    assert!(out.exists());
}

/// Every command that writes to stdout: a closed pipe exits 0 and says nothing;
/// a full device exits 1 and says what failed.
#[test]
fn every_stdout_command_exits_0_on_a_closed_pipe_and_1_on_a_full_device() {
    let dir = tempfile::tempdir().unwrap();
    let tree = tree(dir.path());
    let ds = dir.path().join("d");
    let ran = bcd(
        &["ingest", s(&tree), "--into", s(&ds), "--quiet"],
        Sink::Captured,
        Sink::Captured,
    );
    assert!(ran.status.success(), "{}", ran.stderr);
    let commands: [&[&str]; 6] = [
        &["verify", s(&ds)],
        &["info", s(&ds)],
        &["info", s(&ds), "--json"],
        &["ls", s(&ds)],
        &["get", s(&ds), "b.txt"],
        &["export", s(&ds), "--to", "-"],
    ];
    for args in commands {
        let ran = bcd(args, Sink::ClosedPipe, Sink::Captured);
        assert_eq!(ran.status.code(), Some(0), "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stderr, "", "{args:?}");

        let ran = bcd(args, Sink::Full, Sink::Captured);
        assert_eq!(ran.status.code(), Some(1), "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.starts_with("bcd: ") && ran.stderr.contains("No space left on device"),
            "{args:?}: {}",
            ran.stderr
        );
        assert_eq!(ran.stderr.lines().count(), 1, "{args:?}: {}", ran.stderr);
    }
    let ran = bcd(&["verify", s(&ds)], Sink::Full, Sink::Captured);
    assert!(ran.stderr.contains("verified ok"), "{}", ran.stderr);
    // Nothing above changed the dataset.
    assert_eq!(committed_records(&ds), 3);
    let ran = bcd(&["verify", s(&ds)], Sink::Captured, Sink::Captured);
    assert!(ran.stdout.starts_with("ok: 3 records"), "{}", ran.stdout);
}

/// The panic hook does not print with `eprintln!` (a panic while printing a panic
/// aborts). No command is known to panic, so this checks the source.
#[test]
fn the_cli_never_prints_with_macros_that_panic() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for mac in ["println!", "print!", "eprintln!", "eprint!"] {
                assert!(
                    !code.contains(mac),
                    "{}:{}: {mac} panics when its stream fails: {line}",
                    path.display(),
                    n + 1
                );
            }
        }
    }
}
