//! `bcd export`: safety rules for member names, splitting, stdout, and no
//! partial output on failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bcd::Dataset;
use bcd_test_support::{snapshot_names, tree_snapshot};

use crate::common::*;
use crate::harness::{fixture_files, fixture_str, mixed_records, tar_files};
use crate::{ingest, run};

/// A keyed dataset at `dir/name` with the given records, written by the library.
fn keyed_dataset(dir: &Path, name: &str, records: &Records) -> PathBuf {
    let path = dir.join(name);
    let mut dataset = Dataset::create(
        &path,
        bcd::CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    dataset
        .extend(records.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
        .unwrap();
    path
}

#[test]
fn export_refuses_unsafe_keys_naming_the_record_unless_rename_unsafe() {
    let dir = tempfile::tempdir().unwrap();
    for (n, (key, cleaned)) in [
        (&b"/etc/passwd"[..], &b"etc/passwd"[..]),
        (b"a/../../b", b"a/b"),
        (b"", b"unnamed"),
    ]
    .into_iter()
    .enumerate()
    {
        let source: Records = vec![
            (b"fine.txt".to_vec(), b"one".to_vec()),
            (key.to_vec(), b"two".to_vec()),
            (b"last.txt".to_vec(), b"three".to_vec()),
        ];
        let ds = keyed_dataset(dir.path(), &format!("ds{n}"), &source);
        let out_dir = dir.path().join(format!("out{n}"));
        std::fs::create_dir(&out_dir).unwrap();
        let out = out_dir.join("out.tar");
        let stderr = fails(&["export", s(&ds), "--to", s(&out)]);
        let quoted = format!("{:?}", String::from_utf8_lossy(key));
        assert!(
            stderr.contains("record 1")
                && stderr.contains(&quoted)
                && stderr.contains("--rename-unsafe"),
            "{stderr}"
        );
        assert_eq!(
            tree_snapshot(&out_dir),
            Some(BTreeMap::new()),
            "output left behind"
        );

        ok(&["export", s(&ds), "--to", s(&out), "--rename-unsafe"]);
        let wanted: Records = vec![
            (b"fine.txt".to_vec(), b"one".to_vec()),
            (cleaned.to_vec(), b"two".to_vec()),
            (b"last.txt".to_vec(), b"three".to_vec()),
        ];
        assert_eq!(tar_files(&std::fs::read(&out).unwrap()), wanted);
        assert_eq!(
            snapshot_names(&tree_snapshot(&out_dir).unwrap()),
            ["out.tar"]
        );
    }
}

#[test]
fn split_count_and_split_size_archives_concatenate_to_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest(&[&fixture_str("webdataset.tar")], &ds, &[]);
    let whole = fixture_files("webdataset.tar");

    let by_count = dir.path().join("by-count");
    std::fs::create_dir(&by_count).unwrap();
    let pattern = by_count.join("part-%03d.tar");
    ok(&["export", s(&ds), "--to", s(&pattern), "--split-count", "5"]);
    let files = tree_snapshot(&by_count).unwrap();
    assert_eq!(
        snapshot_names(&files),
        ["part-000.tar", "part-001.tar", "part-002.tar"]
    );
    let parts: Vec<Records> = files.values().map(|bytes| tar_files(bytes)).collect();
    assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 2]);
    assert_eq!(parts.concat(), whole);

    let by_size = dir.path().join("by-size");
    std::fs::create_dir(&by_size).unwrap();
    let pattern = by_size.join("shard-%06d.tar");
    ok(&[
        "export",
        s(&ds),
        "--to",
        s(&pattern),
        "--split-size",
        "1000",
    ]);
    let files = tree_snapshot(&by_size).unwrap();
    assert!(files.len() > 2, "{:?}", snapshot_names(&files));
    let mut all = Vec::new();
    for (i, (name, bytes)) in files.iter().enumerate() {
        assert_eq!(name, Path::new(&format!("shard-{i:06}.tar")));
        let part = tar_files(bytes);
        let payload: usize = part.iter().map(|(_, v)| v.len()).sum();
        assert!(
            payload <= 1000 || part.len() == 1,
            "{}: {payload} bytes in {} members",
            name.display(),
            part.len()
        );
        all.extend(part);
    }
    assert_eq!(all, whole);
}

#[test]
fn export_to_dash_writes_the_tar_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    ingest(&[&fixture_str("pax.tar")], &ds, &[]);
    let stdout = ok(&["export", s(&ds), "--to", "-"]);
    assert_eq!(tar_files(&stdout), fixture_files("pax.tar"));
    // The same bytes as an export to a file.
    let out = dir.path().join("out.tar");
    ok(&["export", s(&ds), "--to", s(&out)]);
    assert!(std::fs::read(&out).unwrap() == stdout);
    // Splitting needs files: a usage error.
    let refused = run(&["export", s(&ds), "--to", "-", "--split-count", "2"]);
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("stdout"), "{}", refused.stderr);
    assert!(refused.stdout.is_empty());
}

#[test]
fn failed_export_leaves_no_partial_output_file() {
    let dir = tempfile::tempdir().unwrap();
    // Enough data before the unsafe key that the archive was being written.
    let mut source = mixed_records(200, 3);
    source.push((b"../escape".to_vec(), b"x".to_vec()));
    let ds = keyed_dataset(dir.path(), "ds", &source);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();

    // A new file is never created...
    let out = out_dir.join("new.tar");
    let stderr = fails(&["export", s(&ds), "--to", s(&out)]);
    assert!(stderr.contains("record 200"), "{stderr}");
    assert_eq!(tree_snapshot(&out_dir), Some(BTreeMap::new()));

    // ... and an existing one keeps its bytes.
    let old = out_dir.join("old.tar");
    std::fs::write(&old, b"previous contents").unwrap();
    fails(&["export", s(&ds), "--to", s(&old)]);
    assert_eq!(
        snapshot_names(&tree_snapshot(&out_dir).unwrap()),
        ["old.tar"]
    );
    assert_eq!(std::fs::read(&old).unwrap(), b"previous contents");

    // Split exports keep the archives finished before the failure, never a
    // partial one.
    let pattern = out_dir.join("part-%02d.tar");
    fails(&[
        "export",
        s(&ds),
        "--to",
        s(&pattern),
        "--split-count",
        "150",
    ]);
    let left = tree_snapshot(&out_dir).unwrap();
    assert_eq!(snapshot_names(&left), ["old.tar", "part-00.tar"]);
    assert_eq!(tar_files(&left[Path::new("part-00.tar")]), source[..150]);
}
