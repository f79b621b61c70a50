//! `bcd ingest` stopped by SIGINT, SIGTERM and SIGKILL, at kill points the test
//! controls: the ingest reads a tar from a pipe (stdin or a FIFO) that the test
//! holds open without ever closing it, so the run cannot finish by itself, and the
//! test signals it once it has reached a state it can see (the FIFO opened by the
//! reader, the dataset created, a given shard file written). No test races a timer
//! against the process; the only time limits are hang detectors.
//!
//! Exit status after SIGINT, SIGTERM or SIGHUP: 130, whatever the ingest was doing
//! (blocked in a read, writing shards); nothing is committed, a dataset the run
//! created is removed, an existing one is left as it was.

#![cfg(unix)]

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bcd::Dataset;
use serde_json::Value;

use bcd_test_support::{read_all, snapshot_names, tree_snapshot, Rng};

mod common;
use common::*;

/// How long a state the test waits for may take to come: only a hang detector.
const HANG: Duration = Duration::from_secs(60);

/// Size of each generated member.
const BIG_MEMBER: usize = 1 << 20;
/// Members the held ingests are fed before they block: 40 MiB, five batches of
/// `--jobs 1` (8 MiB each), about ten 4 MiB shards.
const FED_MEMBERS: usize = 40;

/// Member `i`: a 2 KiB random block plus the member number, repeated to 1 MiB.
fn big_value(block: &[u8], i: usize) -> Vec<u8> {
    repeat_to(&[block, format!("{i:08}").as_bytes()].concat(), BIG_MEMBER)
}

fn big_name(i: usize) -> Vec<u8> {
    format!("big/{i:06}.bin").into_bytes()
}

/// The `.cls` member of sample `i` in an ingest with `--samples`: a field.
fn big_class(i: usize) -> Vec<u8> {
    format!("big/{i:06}.cls").into_bytes()
}

/// Writes generated members `0..members` (no end-of-archive marker), each
/// followed by its `.cls` member (the number modulo 7) when `samples`.
fn write_big_members(out: &mut impl Write, members: usize, samples: bool) -> io::Result<()> {
    let block = Rng::new(99).bytes(2048);
    for i in 0..members {
        write_member(out, &big_name(i), &big_value(&block, i))?;
        if samples {
            write_member(out, &big_class(i), (i % 7).to_string().as_bytes())?;
        }
    }
    out.flush()
}

/// The flags that make an ingest read the generated members as WebDataset
/// samples: the `.bin` member the value, the `.cls` member a field.
const SAMPLES: [&str; 3] = ["--samples", "--value-ext", "bin"];

/// Waits until `path` exists; fails the test if `child` exits first or after
/// [`HANG`].
fn wait_for_file(child: &mut Child, path: &Path) {
    let deadline = Instant::now() + HANG;
    while !path.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("bcd exited ({status}) before {} appeared", path.display());
        }
        assert!(
            Instant::now() < deadline,
            "{} did not appear: bcd hangs",
            path.display()
        );
        thread::sleep(Duration::from_millis(2));
    }
}

fn send(child: &Child, signal: libc::c_int) {
    // SAFETY: kill only sends a signal, to the child this test started and has not
    // reaped (so its pid is not reused).
    let result = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(result, 0, "kill: {}", io::Error::last_os_error());
}

/// An ingest of a tar on stdin, fed `members` generated members on a thread and
/// never given the end of the archive: the pipe stays open until [`Self::close`],
/// so the run blocks in its read once it has taken everything.
struct HeldIngest {
    child: Option<Child>,
    feeder: JoinHandle<ChildStdin>,
}

impl HeldIngest {
    fn spawn(into: &Path, members: usize, extra: &[&str]) -> HeldIngest {
        let mut args = vec!["ingest", "-", "--into", s(into), "--quiet", "--jobs", "1"];
        args.extend_from_slice(extra);
        let samples = extra.contains(&"--samples");
        let mut child = spawn(&args, true, None);
        let mut stdin = child.stdin.take().unwrap();
        let feeder = thread::spawn(move || {
            // Fails once bcd is gone; the kill point does not depend on it.
            let _ = write_big_members(&mut stdin, members, samples);
            stdin
        });
        HeldIngest {
            child: Some(child),
            feeder,
        }
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().unwrap()
    }

    /// Waits for the run's end (after the test signalled it), then closes the pipe.
    fn finish(mut self, what: &str) -> Run {
        let run = finish(self.child.take().unwrap(), what);
        drop(self.feeder.join().unwrap());
        run
    }
}

/// A keyed dataset at `dir/name` holding six small records, stored uncompressed in
/// 4 MiB shards, so that an ingest of 1 MiB members into it starts a new shard
/// every few members: the test can wait for the Nth new shard file. With
/// `samples`, each record has a `cls` field.
fn existing_dataset(dir: &Path, name: &str, samples: bool) -> PathBuf {
    let path = dir.join(name);
    let archive = dir.join(format!("{name}.tar"));
    let mut tar = Vec::new();
    for i in 0..6 {
        let value = [b'a' + i; 100];
        if samples {
            write_member(&mut tar, format!("small/{i}.bin").as_bytes(), &value).unwrap();
            write_member(&mut tar, format!("small/{i}.cls").as_bytes(), b"9").unwrap();
        } else {
            write_member(&mut tar, format!("small/{i}").as_bytes(), &value).unwrap();
        }
    }
    tar.extend_from_slice(&[0; 1024]);
    std::fs::write(&archive, tar).unwrap();
    let mut args = vec![
        "ingest",
        s(&archive),
        "--into",
        s(&path),
        "--quiet",
        "--compression",
        "none",
        "--max-shard-size",
        "4M",
    ];
    if samples {
        args.extend(SAMPLES);
    }
    let run = finish(spawn(&args, false, None), "ingest (the existing dataset)");
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(Dataset::open(&path).unwrap().shards(), 1);
    path
}

/// Asserts an interrupted run: exit 130, the message, no panic.
fn assert_interrupted(run: &Run, what: &str) {
    assert_eq!(
        run.status.code(),
        Some(130),
        "{what}: status {:?}; stderr: {}",
        run.status,
        run.stderr
    );
    assert!(run.stderr.contains("interrupted"), "{what}: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{what}: {}", run.stderr);
}

/// The settings of [`existing_dataset`], for a dataset a run creates (and accepted,
/// being equal, by the existing one).
const NEW_LIKE_EXISTING: &[&str] = &["--compression", "none", "--max-shard-size", "4M"];

const SIGNALS: [(libc::c_int, &str); 2] = [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")];

/// Stopped while writing shards and then blocked reading its input: every
/// signal ends the run with 130, removes the dataset it created and leaves an
/// existing one byte for byte as it was.
#[test]
fn sigint_or_sigterm_while_writing_shards_exits_130_and_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let existing = existing_dataset(dir.path(), "existing", false);
    let before = tree_snapshot(&existing);
    for (signal, name) in SIGNALS {
        let new = dir.path().join(format!("new-{name}"));
        // The second shard file of each run: batches have been written.
        for (ds, second_new_shard) in [(&existing, "000002.bin"), (&new, "000001.bin")] {
            let mut held = HeldIngest::spawn(ds, FED_MEMBERS, NEW_LIKE_EXISTING);
            wait_for_file(held.child(), &ds.join(second_new_shard));
            send(held.child.as_ref().unwrap(), signal);
            let what = format!("{name} into {}", ds.display());
            let run = held.finish(&what);
            assert_interrupted(&run, &what);
            assert!(
                run.stderr.contains("interrupted; nothing was committed"),
                "{what}: {}",
                run.stderr
            );
        }
        assert_eq!(
            tree_snapshot(&existing),
            before,
            "{name}: the dataset changed"
        );
        assert_eq!(
            tree_snapshot(&new),
            None,
            "{name}: the run left the dataset it created"
        );
    }
}

/// `sleep 30 | bcd ingest - --into d`: the run is blocked in read(2) on an empty
/// pipe and must still end at once.
#[test]
fn a_signal_ends_an_ingest_blocked_reading_an_empty_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let existing = existing_dataset(dir.path(), "existing", false);
    let before = tree_snapshot(&existing);
    for (signal, name) in SIGNALS {
        // Into a new dataset: once it exists, the run is past its setup.
        let new = dir.path().join(format!("new-{name}"));
        let mut held = HeldIngest::spawn(&new, 0, &[]);
        wait_for_file(held.child(), &new.join(bcd::format::MANIFEST_NAME));
        send(held.child.as_ref().unwrap(), signal);
        let run = held.finish(name);
        assert_interrupted(&run, name);
        assert_eq!(tree_snapshot(&new), None, "{name}: the new dataset is left");

        // Into an existing dataset: no file shows the run is under way, but a
        // pipe does. Half of an 8 MiB member fills it many times over, so once
        // it is written bcd has read most of it (its handler is installed) and
        // waits in read(2) for the rest.
        let mut child = spawn(
            &["ingest", "-", "--into", s(&existing), "--quiet"],
            true,
            None,
        );
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(&ustar_header(b"half", 8 << 20, b'0'))
            .unwrap();
        stdin.write_all(&vec![7; 4 << 20]).unwrap();
        let feeder = thread::spawn(move || stdin);
        let held = HeldIngest {
            child: Some(child),
            feeder,
        };
        send(held.child.as_ref().unwrap(), signal);
        let run = held.finish(name);
        assert_interrupted(&run, name);
        assert_eq!(
            tree_snapshot(&existing),
            before,
            "{name}: the dataset changed"
        );
    }
}

/// A tar source that is a FIFO nobody writes to: opening its write end returns
/// once bcd has opened it for reading, so bcd is then blocked in its read.
#[test]
fn a_signal_ends_an_ingest_blocked_reading_a_fifo() {
    let dir = tempfile::tempdir().unwrap();
    for (signal, name) in SIGNALS {
        let fifo = dir.path().join(format!("{name}.tar"));
        let path = std::ffi::CString::new(s(&fifo)).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let new = dir.path().join(format!("new-{name}"));
        let mut child = spawn(
            &["ingest", s(&fifo), "--into", s(&new), "--quiet"],
            false,
            None,
        );
        let writer = open_fifo_writer(&mut child, &fifo);
        wait_for_file(&mut child, &new.join(bcd::format::MANIFEST_NAME));
        send(&child, signal);
        let run = finish(child, name);
        drop(writer);
        assert_interrupted(&run, name);
        assert_eq!(tree_snapshot(&new), None, "{name}: the new dataset is left");
    }
}

/// Opens the write end of `fifo` once `child` has opened its read end (a
/// non-blocking open fails with ENXIO until then).
fn open_fifo_writer(child: &mut Child, fifo: &Path) -> std::fs::File {
    let deadline = Instant::now() + HANG;
    loop {
        match OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(file) => return file,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("opening {}: {e}", fifo.display()),
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("bcd exited ({status}) without opening {}", fifo.display());
        }
        assert!(Instant::now() < deadline, "bcd never opened the FIFO");
        thread::sleep(Duration::from_millis(2));
    }
}

/// SIGKILL, which no handler sees, at two points of a long ingest into an existing
/// dataset: when its first new shard file appears, and when its fourth does (many
/// batches written, the run blocked waiting for more input). The dataset reads as
/// before each time, only files an interrupted extend may leave are new, and a
/// complete re-run overwrites them and commits everything.
#[test]
fn sigkill_during_a_long_ingest_leaves_the_dataset_as_it_was_and_a_rerun_completes() {
    sigkill_during_a_long_ingest(false);
}

/// The same with fields: WebDataset samples whose `.cls` members are stored in
/// fields files beside each shard, statistics files and commit files. At every
/// kill point the committed records and their fields read exactly as before.
#[test]
fn sigkill_during_an_ingest_with_fields_leaves_records_and_fields_as_they_were() {
    sigkill_during_a_long_ingest(true);
}

/// `bcd ls DS --fields`: every record's key and fields, one JSON object a line.
fn listed_fields(ds: &Path) -> Vec<Value> {
    let run = finish(
        spawn(&["ls", s(ds), "--fields"], false, None),
        "ls --fields",
    );
    assert!(run.status.success(), "{}", run.stderr);
    run.stdout
        .split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect()
}

fn sigkill_during_a_long_ingest(samples: bool) {
    let dir = tempfile::tempdir().unwrap();
    let ds = existing_dataset(dir.path(), "ds", samples);
    let before = tree_snapshot(&ds).unwrap();
    let original = read_all(&Dataset::open(&ds).unwrap());
    let original_fields = listed_fields(&ds);
    if samples {
        assert_eq!(original_fields[0]["cls"], 9, "{original_fields:?}");
    }
    let extra: &[&str] = if samples { &SAMPLES } else { &[] };

    for kill_point in ["000001.bin", "000004.bin"] {
        let mut held = HeldIngest::spawn(&ds, FED_MEMBERS, extra);
        wait_for_file(held.child(), &ds.join(kill_point));
        held.child().kill().unwrap(); // SIGKILL
        let label = format!("killed when {kill_point} appeared");
        let run = held.finish(&label);
        assert_eq!(run.status.signal(), Some(libc::SIGKILL), "{label}");

        let after = tree_snapshot(&ds).unwrap();
        for (name, bytes) in &before {
            assert!(
                after.get(name) == Some(bytes),
                "{label}: {} changed",
                name.display()
            );
        }
        assert!(after.contains_key(Path::new(kill_point)), "{label}");
        for name in snapshot_names(&after) {
            assert!(
                before.contains_key(Path::new(&name)) || is_leftover(&name, 1),
                "{label}: unexpected file {name}"
            );
        }
        assert_eq!(read_all(&Dataset::open(&ds).unwrap()), original, "{label}");
        assert_eq!(listed_fields(&ds), original_fields, "{label}");
        let verify = finish(spawn(&["verify", s(&ds)], false, None), "verify");
        assert!(verify.status.success(), "{label}: {}", verify.stderr);
    }

    // A complete run overwrites the leftovers and commits everything.
    let mut args = vec!["ingest", "-", "--into", s(&ds), "--quiet", "--json"];
    args.extend(extra);
    let mut child = spawn(&args, true, None);
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || {
        write_big_members(&mut stdin, FED_MEMBERS, samples)?;
        stdin.write_all(&[0; 1024])
    });
    let rerun = finish(child, "ingest - (re-run)");
    writer.join().unwrap().unwrap();
    assert!(rerun.status.success(), "{}", rerun.stderr);
    let summary: Value = serde_json::from_slice(&rerun.stdout).unwrap();
    assert_eq!(summary["records"], FED_MEMBERS);
    assert_eq!(summary["bytes_in"], FED_MEMBERS * BIG_MEMBER);
    let dataset = Dataset::open(&ds).unwrap();
    assert_eq!(dataset.len(), original.len() + FED_MEMBERS);
    let block = Rng::new(99).bytes(2048);
    for i in [0, FED_MEMBERS / 2, FED_MEMBERS - 1] {
        let index = original.len() + i;
        let key = if samples {
            format!("big/{i:06}").into_bytes()
        } else {
            big_name(i)
        };
        assert_eq!(dataset.key_at(index).unwrap(), key);
        assert!(
            dataset.at(index).unwrap() == big_value(&block, i),
            "member {i}"
        );
    }
    for (i, (key, value)) in original.iter().enumerate() {
        assert_eq!(dataset.key_at(i).unwrap(), key);
        assert_eq!(&*dataset.at(i).unwrap(), value);
    }
    let fields = listed_fields(&ds);
    assert_eq!(fields[..original.len()], original_fields[..]);
    assert_eq!(fields.len(), original.len() + FED_MEMBERS);
    for (i, record) in fields[original.len()..].iter().enumerate() {
        if samples {
            assert_eq!(record["cls"], i % 7, "{record}");
        } else {
            assert_eq!(record.as_object().unwrap().len(), 1, "{record}");
        }
    }
    let verify = finish(spawn(&["verify", s(&ds)], false, None), "verify");
    assert!(verify.status.success(), "{}", verify.stderr);
    assert!(
        !verify.stderr.contains("uncommitted"),
        "leftovers remain: {}",
        verify.stderr
    );
}
