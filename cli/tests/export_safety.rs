//! `bcd export` against hostile or mistaken arguments (issue 14, items 5, 6 and 8):
//! split patterns checked before anything is written, renamed member names unique
//! across the whole archive, no temporary file left behind on any failure, and a
//! reader that stops early (`| head -c 1`) ending the export quietly.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use bcd::Dataset;

mod common;
use bcd_test_support::{snapshot_names, tree_snapshot};
use common::*;

/// Runs bcd in `dir` (the test's temporary directory unless given).
fn run_in(args: &[&str], dir: Option<&Path>) -> Run {
    finish(spawn(args, false, dir), &show(args))
}

fn keyed_dataset(path: &Path, records: &[(&[u8], &[u8])]) {
    let mut dataset = Dataset::create(
        path,
        bcd::CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    dataset.extend(records.iter().copied()).unwrap();
}

/// The members of a tar file as (name, bytes), read by the `tar` crate.
fn members(archive: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    tar.entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let name = entry.path_bytes().into_owned();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

/// Asserts a usage error: exit status 2, one "bcd: " message naming `what`, no panic.
fn assert_usage_error(run: &Run, what: &str) {
    assert_eq!(run.status.code(), Some(2), "stderr: {}", run.stderr);
    assert!(
        run.stderr.starts_with("bcd: ") && !run.stderr.contains("panicked"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(what), "{:?} lacks {what:?}", run.stderr);
}

fn small_dataset(dir: &Path) -> PathBuf {
    let ds = dir.join("ds");
    keyed_dataset(&ds, &[(b"a.txt", b"one"), (b"b.txt", b"two")]);
    ds
}

#[test]
fn a_split_pattern_with_a_huge_or_wrong_width_is_a_usage_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ds = small_dataset(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for pattern in [
        "x-%70000d.tar",
        "x-%070000d.tar",
        "x-%021d.tar",
        "x-%6d.tar",
        "x-%d-%d.tar",
        "x.tar",
        "x-%s.tar",
    ] {
        let target = out.join(pattern);
        let run = run_in(
            &["export", s(&ds), "--to", s(&target), "--split-count", "1"],
            None,
        );
        assert_usage_error(&run, pattern);
        assert_eq!(tree_snapshot(&out), Some(BTreeMap::new()), "{pattern}");
    }
    // The widest accepted width still works.
    let target = out.join("x-%020d.tar");
    let run = run_in(
        &["export", s(&ds), "--to", s(&target), "--split-count", "1"],
        None,
    );
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(
        snapshot_names(&tree_snapshot(&out).unwrap()),
        ["x-00000000000000000000.tar", "x-00000000000000000001.tar"]
    );
}

#[test]
fn renamed_unsafe_names_are_unique_against_every_name_earlier_and_later() {
    // The recipe of issue 14.6: these exported as a, a, b, b.3, b.3.
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let records: [(&[u8], &[u8]); 5] = [
        (b"/a", b"absolute a"),
        (b"a", b"plain a"),
        (b"b", b"plain b"),
        (b"../b", b"escaping b"),
        (b"b.3", b"b dot 3"),
    ];
    keyed_dataset(&ds, &records);
    let out = dir.path().join("out.tar");
    let run = run_in(
        &["export", s(&ds), "--to", s(&out), "--rename-unsafe"],
        None,
    );
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stderr.contains("2 unsafe names cleaned"),
        "{}",
        run.stderr
    );
    let written = members(&out);
    let wanted: Vec<(Vec<u8>, Vec<u8>)> = [
        (&b"a~1"[..], &b"absolute a"[..]),
        (b"a", b"plain a"),
        (b"b", b"plain b"),
        (b"b~1", b"escaping b"),
        (b"b.3", b"b dot 3"),
    ]
    .iter()
    .map(|(n, v)| (n.to_vec(), v.to_vec()))
    .collect();
    assert_eq!(written, wanted);
    let unique: BTreeSet<&Vec<u8>> = written.iter().map(|(n, _)| n).collect();
    assert_eq!(unique.len(), written.len(), "duplicate member names");

    // Extraction keeps every value: none is overwritten by a later member.
    let extracted = dir.path().join("extracted");
    tar::Archive::new(std::fs::File::open(&out).unwrap())
        .unpack(&extracted)
        .unwrap();
    let files = tree_snapshot(&extracted).unwrap();
    assert_eq!(files.len(), 5);
    for (name, value) in &wanted {
        let name = PathBuf::from(String::from_utf8(name.clone()).unwrap());
        assert_eq!(&files[&name], value);
    }
}

#[test]
fn targets_that_cannot_be_an_archive_file_are_refused_and_leave_nothing_anywhere() {
    // The recipes of issue 14.8: each left `.NAME.partial` behind, the last one in
    // the parent of the working directory.
    let dir = tempfile::tempdir().unwrap();
    let ds = small_dataset(dir.path());
    let parent = dir.path().join("parent");
    let work = parent.join("work");
    std::fs::create_dir_all(work.join("existing-dir")).unwrap();
    std::fs::write(work.join("file"), b"a file").unwrap();
    let before = tree_snapshot(&parent).unwrap();
    for (target, what) in [
        ("existing-dir", "directory"),
        ("existing-dir/", "directory"),
        ("file/", "directory"),
        ("..", "directory"),
        (".", "directory"),
        ("missing/out.tar", "does not exist"),
    ] {
        let run = run_in(&["export", s(&ds), "--to", target], Some(&work));
        assert_usage_error(&run, what);
        assert_eq!(
            tree_snapshot(&parent).unwrap(),
            before,
            "--to {target} left files"
        );
        let siblings: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(siblings.len(), 2, "--to {target}: {siblings:?}");
    }
    #[cfg(unix)]
    {
        // A device is not replaced by a rename: refused before anything is written.
        let run = run_in(&["export", s(&ds), "--to", "/dev/null"], None);
        assert_usage_error(&run, "not a regular file");
        assert!(!Path::new("/dev/.null.partial").exists());
    }
}

#[test]
fn an_export_whose_reader_stops_early_ends_quietly_with_success() {
    // `bcd export DS --to - | head -c 1`: the closed pipe is the reader's choice,
    // not a failure. 4 MiB cannot fit a pipe's buffer, so bcd is still writing
    // when the pipe closes.
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let value = vec![7u8; 64 << 10];
    let records: Vec<(Vec<u8>, &[u8])> = (0..64)
        .map(|i| (format!("{i:03}.bin").into_bytes(), &value[..]))
        .collect();
    let records: Vec<(&[u8], &[u8])> = records.iter().map(|(k, v)| (&k[..], *v)).collect();
    keyed_dataset(&ds, &records);
    let mut child = spawn(&["export", s(&ds), "--to", "-"], false, None);
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = wait_timeout(&mut child, TIMEOUT).expect("bcd export hangs");
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(stderr, "");
}
