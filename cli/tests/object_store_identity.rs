//! `bcd` against a local S3 server (moto): files are the same only by their
//! content checksums (push over another dataset, verify and pull of a damaged
//! shard), and prefixes with `#`, `%`, spaces and non-ASCII characters, as any
//! S3 key may have them, including a dataset uploaded there by boto3.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use bcd::{Compression, CreateOptions, Dataset};
use bcd_test_support::s3::{S3Server, BUCKET};
use bcd_test_support::{read_all, snapshot};
use common::{assert_clean_failure, finish, s, Run};

/// Runs bcd with the server's environment.
fn bcd<S: AsRef<std::ffi::OsStr>>(server: &S3Server, args: &[S]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bcd"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in server.env() {
        command.env(name, value);
    }
    finish(command.spawn().expect("run bcd"), &common::show(args))
}

#[track_caller]
fn ok<S: AsRef<std::ffi::OsStr>>(server: &S3Server, args: &[S]) -> Vec<u8> {
    let run = bcd(server, args);
    assert!(
        run.status.success(),
        "bcd {} failed: {}",
        common::show(args),
        run.stderr
    );
    run.stdout
}

fn uri(prefix: &str) -> String {
    format!("s3://{BUCKET}/{prefix}")
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(dir);
    files.remove(bcd::format::LOCK_NAME);
    files
}

/// A keyed, uncompressed dataset of `records` records `k{i}` in shards of 600
/// bytes, values spelled in `case`: two of the same count and other cases have
/// shards of the same sizes and other bytes.
fn spelled(dir: &Path, case: &str, records: usize) {
    let mut dataset = Dataset::create(
        dir,
        CreateOptions {
            keyed: true,
            compression: Compression::None,
            max_shard_size: 600,
        },
    )
    .unwrap();
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..records)
        .map(|i| {
            (
                format!("k{i:03}").into_bytes(),
                format!("{case} {i:03}").into_bytes(),
            )
        })
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
}

#[test]
fn a_push_over_another_dataset_of_the_same_sizes_is_refused_unless_replace_is_asked() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    spelled(&a, "value", 92);
    spelled(&b, "VALUE", 138);
    let target = uri("same-sizes");
    ok(&server, &["push", s(&a), &target]);

    let run = bcd(&server, &["push", s(&b), &target]);
    assert_clean_failure(&run, "a push over another dataset");
    assert!(
        run.stderr.contains("000000.bin")
            && run.stderr.contains("different datasets")
            && run.stderr.contains("replace"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("is as it was"), "{}", run.stderr);
    let copy = dir.path().join("copy-a");
    ok(&server, &["pull", &target, s(&copy)]);
    assert_eq!(files(&copy), files(&a));

    ok(&server, &["push", s(&b), &target, "--replace"]);
    let copy_b = dir.path().join("copy-b");
    ok(&server, &["pull", &target, s(&copy_b)]);
    assert_eq!(files(&copy_b), files(&b));

    // The copy of A, pulled from the prefix that holds B now: refused, left as
    // it was, then replaced when asked.
    let run = bcd(&server, &["pull", &target, s(&copy)]);
    assert_clean_failure(&run, "a pull into another dataset");
    assert!(run.stderr.contains("different datasets"), "{}", run.stderr);
    assert!(run.stderr.contains("is as it was"), "{}", run.stderr);
    assert_eq!(files(&copy), files(&a));
    ok(&server, &["pull", &target, s(&copy), "--replace"]);
    assert_eq!(files(&copy), files(&b));
}

#[test]
fn a_damaged_remote_shard_fails_verify_and_a_pull_that_leaves_nothing_behind() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    spelled(&source, "value", 92);
    let target = uri("damaged");
    ok(&server, &["push", s(&source), &target]);
    let key = "damaged/000001.bin";
    let mut bytes = server.get_object(key).unwrap();
    bytes[40] ^= 0x20;
    server.tamper_object(key, &bytes);

    let run = bcd(&server, &["verify", &target]);
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("{}: ", uri(key))) && run.stderr.contains("checksum"),
        "{}",
        run.stderr
    );

    // Into a new directory: refused, and nothing is left where it would be.
    let new = dir.path().join("new/copy");
    let run = bcd(&server, &["pull", &target, s(&new)]);
    assert_clean_failure(&run, "a pull of a damaged shard");
    assert!(run.stderr.contains("000001.bin"), "{}", run.stderr);
    assert!(run.stderr.contains("was not created"), "{}", run.stderr);
    assert!(!dir.path().join("new").exists());
}

/// Prefixes as S3 allows them: the keys are what the URI says, byte for byte.
const PREFIXES: [&str; 3] = ["données/数据 #1", "100%/a%20b", "x#y/z"];

#[test]
fn prefixes_with_non_ascii_characters_hash_and_percent_work() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    spelled(&source, "value", 100);
    let expected = read_all(&Dataset::open(&source).unwrap());
    for (n, prefix) in PREFIXES.iter().enumerate() {
        // Pushed by bcd: the keys are the prefix as written.
        let target = uri(prefix);
        ok(&server, &["push", s(&source), &target]);
        for (name, bytes) in files(&source) {
            assert_eq!(
                server.get_object(&format!("{prefix}/{name}")).as_ref(),
                Some(&bytes),
                "{prefix}/{name}"
            );
        }
        // Uploaded by boto3 (no checksums in the metadata) under the same
        // prefix with a suffix: a dataset bcd reads.
        let uploaded = format!("{prefix}-boto3");
        for (name, bytes) in files(&source) {
            server.put_object(&format!("{uploaded}/{name}"), &bytes);
        }
        for target in [uri(prefix), uri(&uploaded)] {
            let info: serde_json::Value =
                serde_json::from_slice(&ok(&server, &["info", &target, "--json"])).unwrap();
            assert_eq!(info["records"], 100, "{target}");
            let keys = String::from_utf8(ok(&server, &["ls", &target])).unwrap();
            assert_eq!(keys.lines().count(), 100, "{target}");
            assert_eq!(ok(&server, &["get", &target, "k042"]), expected[42].1);
            assert!(String::from_utf8(ok(&server, &["verify", &target]))
                .unwrap()
                .starts_with("ok: 100 records"));
            let copy = dir.path().join(format!("copy{n}-{}", target.len()));
            ok(&server, &["pull", &target, s(&copy)]);
            assert_eq!(files(&copy), files(&source), "{target}");
        }
        // A push onto the dataset boto3 uploaded: the same files (compared by
        // the checksums of their bytes, which no metadata records), nothing to do.
        let summary: serde_json::Value = serde_json::from_slice(&ok(
            &server,
            &["push", s(&source), &uri(&uploaded), "--json"],
        ))
        .unwrap();
        assert_eq!(
            (summary["files"].as_u64(), summary["committed"].as_bool()),
            (Some(0), Some(false)),
            "{summary}"
        );
    }
}
