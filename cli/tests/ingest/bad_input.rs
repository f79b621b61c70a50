//! Bad input fails cleanly, naming the archive and member, and changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use bcd_test_support::tree_snapshot;

use crate::common::*;
use crate::harness::{
    assert_ingest_fails_cleanly, existing_dataset, fixture, fixture_str, mixed_records,
};
use crate::{ingest, ingest_args, run};

/// The path of a copy of fixture gnu.tar altered by `change`, in `dir`.
fn altered_gnu_tar(dir: &Path, name: &str, change: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut bytes = std::fs::read(fixture("gnu.tar")).unwrap();
    change(&mut bytes);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    s(&path).to_owned()
}

#[test]
fn truncated_tar_fails_naming_archive_and_member_and_changes_nothing() {
    // gnu.tar: "dir/sub/random.bin" (3000 bytes) has its header at 6144 and data
    // at 6656..9656; the next header, "dir/sub/exactly-one-block.bin", is at 9728.
    let dir = tempfile::tempdir().unwrap();
    let mid_member = altered_gnu_tar(dir.path(), "mid-member.tar", |b| b.truncate(8000));
    assert_ingest_fails_cleanly(
        &[&mid_member],
        &[],
        &[
            &mid_member,
            "\"dir/sub/random.bin\"",
            "truncated or corrupt",
        ],
    );
    let mid_header = altered_gnu_tar(dir.path(), "mid-header.tar", |b| b.truncate(9728 + 200));
    assert_ingest_fails_cleanly(
        &[&mid_header],
        &[],
        &[
            &mid_header,
            "\"dir/sub/random.bin\"",
            "truncated or corrupt",
        ],
    );
}

#[test]
fn truncated_tar_after_several_written_batches_fails_and_removes_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let members = mixed_records(1200, 9);
    let mut bytes = Vec::new();
    for (name, data) in &members[..1199] {
        write_member(&mut bytes, name, data).unwrap();
    }
    let (name, data) = &members[1199];
    assert!(data.len() > 2000);
    write_member(&mut bytes, name, data).unwrap();
    bytes.truncate(bytes.len() - data.len().next_multiple_of(512) + 1000);
    let archive = dir.path().join("cut-late.tar");
    std::fs::write(&archive, bytes).unwrap();
    let archive = s(&archive).to_owned();
    assert_ingest_fails_cleanly(
        &[&archive],
        &["--jobs", "1"],
        &[&archive, "\"rec/01199.bin\"", "truncated or corrupt"],
    );
}

#[test]
fn corrupted_header_checksum_fails_naming_the_archive_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // The header of "dir/a.txt" is at 512: change its name without its checksum.
    let corrupt = altered_gnu_tar(dir.path(), "bad-checksum.tar", |bytes| {
        assert_eq!(&bytes[512..521], b"dir/a.txt");
        bytes[516] = b'b';
    });
    assert_ingest_fails_cleanly(&[&corrupt], &[], &[&corrupt, "checksum", "\"dir/\""]);
}

#[test]
fn truncated_or_corrupt_gzip_fails_naming_the_archive_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let gz = std::fs::read(fixture("gnu.tar.gz")).unwrap();
    let truncated = dir.path().join("truncated.tar.gz");
    std::fs::write(&truncated, &gz[..gz.len() / 2]).unwrap();
    let truncated = s(&truncated).to_owned();
    assert_ingest_fails_cleanly(
        &[&truncated],
        &[],
        &[&truncated, "member \"", "truncated or corrupt"],
    );

    // Intact deflate data with a wrong CRC-32 in the gzip trailer, which lies past
    // the tar's end-of-archive blocks: `gzip -t` rejects it, and so must ingest.
    let mut bad_crc = gz.clone();
    let crc_at = gz.len() - 8;
    bad_crc[crc_at..crc_at + 4]
        .iter_mut()
        .for_each(|b| *b = !*b);
    let bad_crc_path = dir.path().join("bad-crc.tar.gz");
    std::fs::write(&bad_crc_path, bad_crc).unwrap();
    let bad_crc_path = s(&bad_crc_path).to_owned();
    assert_ingest_fails_cleanly(
        &[&bad_crc_path],
        &[],
        &[&bad_crc_path, "checksum", "truncated or corrupt"],
    );

    // A gzip header whose compression method is not deflate.
    let mut bad = gz.clone();
    bad[2] = 7;
    let corrupt = dir.path().join("corrupt.tgz");
    std::fs::write(&corrupt, bad).unwrap();
    let corrupt = s(&corrupt).to_owned();
    assert_ingest_fails_cleanly(&[&corrupt], &[], &[&corrupt, "gzip"]);
}

#[test]
fn missing_source_file_fails_naming_it_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = s(&dir.path().join("missing.tar")).to_owned();
    let stderr = assert_ingest_fails_cleanly(
        &[&fixture_str("gnu.tar"), &missing],
        &[],
        &[&missing, "No such file"],
    );
    // The cause is said once.
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    let missing_dir = s(&dir.path().join("missing-dir")).to_owned();
    assert_ingest_fails_cleanly(&[&missing_dir], &[], &[&missing_dir]);
}

#[test]
fn a_missing_source_names_the_path_and_the_os_error_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let not_found = std::io::Error::from_raw_os_error(2).to_string();
    // A tar name (opening fails) and a name without an extension (detecting its
    // format fails): each library error names the path, chains the OS error, and
    // the CLI joins the two.
    for name in ["missing.tar", "missing-no-extension"] {
        let missing = s(&dir.path().join(name)).to_owned();
        let stderr = assert_ingest_fails_cleanly(&[&missing], &[], &[&missing, &not_found]);
        assert_eq!(stderr.matches(&missing).count(), 1, "{stderr}");
        assert_eq!(stderr.matches(&not_found).count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("{missing}: {not_found}")),
            "{stderr}"
        );
    }
}

#[test]
fn brace_range_naming_a_missing_shard_fails_naming_it_and_changes_nothing() {
    let pattern = fixture_str("shards-{000000..000003}.tar");
    assert_ingest_fails_cleanly(&[&pattern], &[], &[&fixture_str("shards-000003.tar")]);
}

/// A usage error (exit status 2), found before anything is opened for writing.
#[test]
fn mixing_a_directory_and_an_archive_fails_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("x"), b"x").unwrap();
    let existing = existing_dataset(dir.path(), "existing");
    let before = tree_snapshot(&existing);
    let new = dir.path().join("new");
    let archive = fixture_str("webdataset.tar");
    for into in [&existing, &new] {
        let args = ingest_args(&[s(&tree), &archive], into, &[]);
        let run = run(&args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.starts_with("bcd: ")
                && run.stderr.contains("(dir, tar)")
                && run
                    .stderr
                    .contains("ingest them in separate runs or pass --format"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(tree_snapshot(&existing), before);
    assert_eq!(tree_snapshot(&new), None);
}

#[test]
fn settings_that_conflict_with_the_existing_dataset_fail_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ds = existing_dataset(dir.path(), "keyed");
    let before = tree_snapshot(&ds);
    let wds = fixture_str("webdataset.tar");
    for (extra, needle) in [
        (&["--keyless"][..], "--keyless"),
        (&["--compression", "none"], "compression lz4"),
        (&["--max-shard-size", "64K"], "max_shard_size 1073741824"),
    ] {
        let stderr = fails(&ingest_args(&[&wds], &ds, extra));
        assert!(
            stderr.contains(needle) && stderr.contains(s(&ds)),
            "{extra:?}: {stderr}"
        );
        assert_eq!(tree_snapshot(&ds), before, "{extra:?} changed the dataset");
    }
    // Keys into a keyless dataset need --keyless.
    let keyless = dir.path().join("keyless");
    ingest(&[&wds], &keyless, &["--keyless"]);
    let before = tree_snapshot(&keyless);
    let stderr = fails(&ingest_args(&[&fixture_str("gnu.tar")], &keyless, &[]));
    assert!(stderr.contains("keyless dataset"), "{stderr}");
    assert_eq!(tree_snapshot(&keyless), before);
    // Settings equal to the dataset's are accepted.
    let summary = ingest(
        &[&wds],
        &ds,
        &["--compression", "lz4", "--max-shard-size", "1GiB"],
    );
    assert_eq!(summary["records"], 12);
}

/// The library names these options by field; the CLI spells them as its flags.
#[test]
fn conflicting_settings_are_named_by_their_flags() {
    let dir = tempfile::tempdir().unwrap();
    let ds = existing_dataset(dir.path(), "keyed");
    let wds = fixture_str("webdataset.tar");
    for (extra, says) in [
        (
            &["--keyless"][..],
            "--keyless applies only when creating one",
        ),
        (
            &["--compression", "none"],
            "--compression applies only when creating a dataset",
        ),
        (
            &["--max-shard-size", "64K"],
            "--max-shard-size applies only when creating a dataset",
        ),
    ] {
        let stderr = fails(&ingest_args(&[&wds], &ds, extra));
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!stderr.contains('`'), "{extra:?}: {stderr}");
    }
    let keyless = dir.path().join("keyless");
    ingest(&[&wds], &keyless, &["--keyless"]);
    let stderr = fails(&ingest_args(&[&fixture_str("gnu.tar")], &keyless, &[]));
    assert!(
        stderr.contains("pass --keyless to store the values without their keys"),
        "{stderr}"
    );
}

#[test]
fn a_failed_run_into_an_empty_directory_leaves_it_empty() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cut = altered_gnu_tar(dir.path(), "cut.tar", |b| b.truncate(8000));
    fails(&ingest_args(&[&cut], &empty, &[]));
    assert_eq!(tree_snapshot(&empty), Some(BTreeMap::new()));
}
