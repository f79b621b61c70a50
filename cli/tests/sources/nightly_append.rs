//! The nightly-append workflow: known ids are skipped, new ones added, and a
//! killed ingest leaves the dataset as before.

use std::process::{Command, Stdio};

use bcd::Dataset;
use bcd_test_support::{read_all, tree_snapshot};
use serde_json::json;

use crate::checks::{assert_all_hold, assert_summary, Holds};
use crate::common::*;
use crate::datasets::fixture;
use crate::per_source::{dump_records, nightly_args, write_big_parquet};
use crate::{bcd_in, ingest, ingest_args, strings};

/// Day 2 overlaps day 1 (ids 1006..1009, with other images): only its new ids are
/// appended, the first images kept; running it again changes nothing.
#[test]
fn nightly_append_skips_known_ids_and_adds_only_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("nightly");
    let (day1, day2) = (
        dump_records("dump-day1.parquet"),
        dump_records("dump-day2.parquet"),
    );
    let known: Vec<&Vec<u8>> = day1.iter().map(|(k, _)| k).collect();
    let new: Records = day2
        .iter()
        .filter(|(k, _)| !known.contains(&k))
        .cloned()
        .collect();
    assert_eq!((day1.len(), day2.len(), new.len()), (10, 10, 6));

    let summary = ingest(
        &[fixture("parquet", "dump-day1.parquet")],
        &dataset,
        &nightly_args(),
    );
    assert_summary(&summary, 10, json!({}), "day 1");
    assert_eq!(
        (&summary["skipped"], &summary["created"]),
        (&json!(0), &json!(true))
    );
    let after_day1 = read_all(&Dataset::open(&dataset).unwrap());
    assert_eq!(after_day1, day1);

    let summary = ingest(
        &[fixture("parquet", "dump-day2.parquet")],
        &dataset,
        &nightly_args(),
    );
    assert_summary(&summary, 6, json!({}), "day 2");
    assert_eq!(
        (&summary["skipped"], &summary["created"]),
        (&json!(4), &json!(false))
    );
    let mut both = day1.clone();
    both.extend(new);

    let before = tree_snapshot(&dataset);
    let summary = ingest(
        &[fixture("parquet", "dump-day2.parquet")],
        &dataset,
        &nightly_args(),
    );
    assert_summary(&summary, 0, json!({}), "day 2 again");
    assert_eq!(summary["skipped"], json!(10));
    assert_eq!(
        tree_snapshot(&dataset),
        before,
        "re-running day 2 changed the dataset"
    );
    assert_all_hold(&[Holds {
        dataset,
        keyed: true,
        records: both,
        what: "day 1 then day 2".into(),
    }]);
}

/// SIGKILL in the middle of a large nightly ingest: the committed dataset is
/// byte-identical (only leftover shard files beyond the committed ones, which
/// readers ignore), and running the same command again completes it.
///
/// The kill point is deterministic: strace delivers SIGKILL as the run enters its
/// first rename, the commit's, when every new shard is written and nothing is
/// committed yet.
#[test]
#[cfg(unix)]
fn sigkilled_ingest_leaves_the_dataset_as_before_and_a_rerun_completes_it() {
    use std::os::unix::process::ExitStatusExt;

    let Some(strace) = strace() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("nightly");
    // Small shards (fixed when day 1 creates the dataset) spread the big run over
    // many shard files.
    let mut args = nightly_args();
    args.extend(strings(&["--max-shard-size", "256K"]));
    ingest(&[fixture("parquet", "dump-day1.parquet")], &dataset, &args);
    let day1 = dump_records("dump-day1.parquet");
    assert_eq!(read_all(&Dataset::open(&dataset).unwrap()), day1);

    // 2500 rows of 4 KiB (10 MB, about 40 shards): four ids day 1 has, then new ones.
    let big = tmp.path().join("big.parquet");
    let ids: Vec<i64> = (1000..1004).chain(2_000_000..2_002_496).collect();
    let rows = write_big_parquet(&big, &ids);
    let new: Records = rows[4..].to_vec();

    let before = tree_snapshot(&dataset).unwrap();
    let command = ingest_args(&[s(&big).to_owned()], &dataset, &nightly_args());
    let child = Command::new(strace)
        .args(["-f", "-qq", "-o", "/dev/null"])
        .args(["-e", "trace=rename,renameat,renameat2"])
        .args(["-e", "inject=rename,renameat,renameat2:signal=SIGKILL"])
        .arg(env!("CARGO_BIN_EXE_bcd"))
        .args(&command)
        // cargo's LD_LIBRARY_PATH only slows the traced loader down.
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strace");
    let run = finish(child, "ingest under strace");
    // strace reports the tracee's death by that signal as its own.
    assert_eq!(
        run.status.signal(),
        Some(9),
        "{:?}: {}",
        run.status,
        run.stderr
    );

    let after = tree_snapshot(&dataset).unwrap();
    for (name, bytes) in &before {
        assert!(
            after.get(name) == Some(bytes),
            "{} changed or vanished",
            name.display()
        );
    }
    let committed = Dataset::open(&dataset).unwrap().shards();
    let leftovers: Vec<String> = after
        .keys()
        .filter(|name| !before.contains_key(*name))
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    assert!(
        leftovers.iter().any(|name| name == "000004.bin"),
        "{leftovers:?}"
    );
    for name in &leftovers {
        assert!(
            is_leftover(name, committed),
            "{name} is not a leftover of an interrupted extend"
        );
    }
    assert_eq!(read_all(&Dataset::open(&dataset).unwrap()), day1);
    let verify = bcd_in(None, &["verify", s(&dataset)]);
    assert!(
        verify.status.success(),
        "bcd verify after the kill: {}",
        verify.stderr
    );

    let summary = ingest(&[s(&big).to_owned()], &dataset, &nightly_args());
    assert_summary(&summary, new.len(), json!({}), "the re-run");
    assert_eq!(summary["skipped"], json!(4));
    let mut want = day1;
    want.extend(new);
    assert_eq!(
        read_all(&Dataset::open(&dataset).unwrap()),
        want,
        "after the re-run"
    );
    let verify = bcd_in(None, &["verify", s(&dataset)]);
    assert!(
        verify.status.success(),
        "bcd verify after the re-run: {}",
        verify.stderr
    );
}
