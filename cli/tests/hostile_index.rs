//! Issue 14's first recipe end to end: a persisted index (`.bcd-index`) whose
//! record starts were swapped, with its checksum recomputed, must not make `get`,
//! `ls` or `export` present one record as another, and `verify` must fail.

mod common;

use std::fs;
use std::path::Path;

use common::{assert_clean_failure, finish, s, spawn, Run};
use xxhash_rust::xxh3::xxh3_64;

const RECORDS: usize = 120_000;
const CHECKSUM_AT: usize = 40;

fn bcd(args: &[&str]) -> Run {
    finish(spawn(args, false, None), &args.join(" "))
}

/// `k000000`..`k119999` with values `000000`..`119999`, ingested uncompressed
/// (120,000 records is past the threshold at which the index file is written).
fn ingest(dir: &Path) -> std::path::PathBuf {
    let archive = dir.join("members.tar");
    let mut builder = tar::Builder::new(fs::File::create(&archive).unwrap());
    for i in 0..RECORDS {
        let value = format!("{i:06}");
        let mut header = tar::Header::new_gnu();
        header.set_size(value.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, format!("k{i:06}"), value.as_bytes())
            .unwrap();
    }
    builder.into_inner().unwrap();
    let dataset = dir.join("ds");
    let run = bcd(&[
        "ingest",
        s(&archive),
        "--into",
        s(&dataset),
        "--compression",
        "none",
        "--quiet",
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(dataset.join(".bcd-index").exists());
    dataset
}

/// Rewrites the index file with `edit` applied to its record starts (one u64
/// each, after the 64-byte header and 40 bytes per shard), the checksum
/// recomputed and the file's modification time kept.
fn tamper(dataset: &Path, edit: impl Fn(&mut [u64])) {
    let path = dataset.join(".bcd-index");
    let modified = fs::metadata(&path).unwrap().modified().unwrap();
    let mut bytes = fs::read(&path).unwrap();
    let shards = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    let starts_at = 64 + 40 * shards;
    let mut starts: Vec<u64> = bytes[starts_at..starts_at + RECORDS * 8]
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    edit(&mut starts);
    for (i, start) in starts.iter().enumerate() {
        let at = starts_at + i * 8;
        bytes[at..at + 8].copy_from_slice(&start.to_le_bytes());
    }
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].fill(0);
    let sum = xxh3_64(&bytes);
    bytes[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
    fs::write(&path, bytes).unwrap();
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
}

fn assert_names_the_index_file(run: &Run, what: &str) {
    assert_clean_failure(run, what);
    assert!(run.stderr.contains(".bcd-index"), "{what}: {}", run.stderr);
}

#[test]
fn a_tampered_index_file_never_shows_one_record_as_another() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = ingest(dir.path());
    let ds = s(&dataset);
    tamper(&dataset, |starts| starts.swap(0, 1));

    let get = bcd(&["get", ds, "--index", "0"]);
    assert_ne!(
        get.stdout, b"000001",
        "record 1's value shown as record 0's"
    );
    assert_names_the_index_file(&get, "get --index 0");
    assert_names_the_index_file(&bcd(&["ls", ds]), "ls");
    let out = dir.path().join("out.tar");
    assert_names_the_index_file(&bcd(&["export", ds, "--to", s(&out)]), "export");
    assert!(!out.exists());
    let verify = bcd(&["verify", ds]);
    assert_names_the_index_file(&verify, "verify");
    assert!(verify.stderr.contains("delete it"), "{}", verify.stderr);

    // Every start pointing at record 5: export must not write 120,000 copies of it.
    tamper(&dataset, |starts| {
        let fifth = starts[5];
        starts.fill(fifth);
    });
    assert_names_the_index_file(&bcd(&["export", ds, "--to", s(&out)]), "export");
    assert!(!out.exists());
    assert_names_the_index_file(&bcd(&["verify", ds]), "verify");

    // Deleting the file, as the message says, gives the right answers again.
    fs::remove_file(dataset.join(".bcd-index")).unwrap();
    let get = bcd(&["get", ds, "--index", "0"]);
    assert!(get.status.success(), "{}", get.stderr);
    assert_eq!(get.stdout, b"000000");
    let verify = bcd(&["verify", ds]);
    assert!(verify.status.success(), "{}", verify.stderr);
}
