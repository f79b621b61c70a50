//! `bcd` against a local S3 server (moto, behind a proxy that injects faults):
//! push, pull, gc, reads of a remote dataset, ingest from and into `s3://`, and
//! the refusal of unsupported URIs.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use bcd::{Compression, CreateOptions, Dataset};
use bcd_fields::{FieldValue, Fields};
use bcd_pipeline::fields::FieldsWriter;
use bcd_test_support::s3::{S3Server, BUCKET};
use bcd_test_support::{read_all, reference_batch, snapshot};
use common::{assert_clean_failure, finish, s, Run};
use serde_json::json;

/// Runs bcd with the server's environment.
fn bcd<S: AsRef<std::ffi::OsStr>>(server: &S3Server, args: &[S]) -> Run {
    common::run_with_env(args, &server.env())
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

/// The dataset's files a copy must reproduce (not the lock).
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = snapshot(dir);
    files.remove(bcd::format::LOCK_NAME);
    files
}

/// A dataset with `shards` shards of records `k{i}` and files beside the shards
/// as a later version writes them (sidecars, commit files).
fn make(dir: &Path, keyed: bool, compression: Compression, records: usize, shard: u64) {
    let mut dataset = Dataset::create(
        dir,
        CreateOptions {
            keyed,
            compression,
            max_shard_size: shard,
        },
    )
    .unwrap();
    let values: Vec<(Vec<u8>, Vec<u8>)> = (0..records)
        .map(|i| {
            (
                format!("k{i:04}").into_bytes(),
                format!("value {i} ").repeat(1 + i % 9).into_bytes(),
            )
        })
        .collect();
    // Fields beside every record (a label), so the sidecars and the commit file
    // travel too: written as bcd ingest writes them.
    let mut extend = dataset.begin_extend().unwrap();
    let mut writer = FieldsWriter::begin(extend.dataset()).unwrap();
    for (i, (key, value)) in values.iter().enumerate() {
        match keyed {
            true => extend.push(key, value).unwrap(),
            false => extend.push_value(value).unwrap(),
        }
        let mut fields = Fields::new();
        fields.push("label", FieldValue::Int64((i % 3) as i64));
        let key_len = if keyed { key.len() } else { 0 };
        writer.push(key_len, value.len(), &fields, &"row").unwrap();
        writer.shards_finished(&mut extend).unwrap();
    }
    writer.finish(&mut extend).unwrap();
    extend.commit().unwrap();
}

#[test]
fn push_then_pull_round_trips_and_the_reference_reads_the_copy() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let mut steps = Vec::new();
    let mut expected = Vec::new();
    for (n, (keyed, compression, records, shard)) in [
        (true, Compression::Lz4, 300, 2000),
        (false, Compression::None, 120, 900),
        (true, Compression::None, 0, 1 << 30),
    ]
    .into_iter()
    .enumerate()
    {
        let source = dir.path().join(format!("source{n}"));
        make(&source, keyed, compression, records, shard);
        let target = uri(&format!("round/{n}"));
        let summary: serde_json::Value =
            serde_json::from_slice(&ok(&server, &["push", s(&source), &target, "--json"])).unwrap();
        assert_eq!(summary["committed"], true);
        // A plain copy of the prefix: manifest, shards, sidecars, commit files.
        for name in files(&source).keys() {
            assert_eq!(
                server.get_object(&format!("round/{n}/{name}")).as_deref(),
                Some(&files(&source)[name][..]),
                "{name}"
            );
        }
        let copy = dir.path().join(format!("copy{n}"));
        ok(&server, &["pull", &target, s(&copy)]);
        assert_eq!(files(&copy), files(&source), "case {n}");
        steps.push(json!({"command": "dump", "path": s(&copy)}));
        expected.push(read_all(&Dataset::open(&source).unwrap()));

        // The remote reads as the local dataset does.
        for args in [vec!["info", "--json"], vec!["ls"], vec!["verify"]] {
            let local: Vec<&str> = [&args[..1], &[s(&source)], &args[1..]].concat();
            let remote: Vec<&str> = [&args[..1], &[target.as_str()], &args[1..]].concat();
            let local_out = String::from_utf8(ok(&server, &local)).unwrap();
            let remote_out = String::from_utf8(ok(&server, &remote)).unwrap();
            assert_eq!(
                remote_out.replace(&target, "PATH"),
                local_out.replace(s(&source), "PATH"),
                "{args:?}"
            );
        }
        if records > 0 {
            let by_index = ok(&server, &["get", &target, "--index", "-1"]);
            assert_eq!(by_index, ok(&server, &["get", s(&source), "--index", "-1"]));
            if keyed {
                assert_eq!(ok(&server, &["get", &target, "k0007"]), expected[n][7].1);
                let missing = bcd(&server, &["get", &target, "nope"]);
                assert_clean_failure(&missing, "get a missing key");
            }
        }
        let tar_local = dir.path().join(format!("local{n}.tar"));
        let tar_remote = dir.path().join(format!("remote{n}.tar"));
        ok(&server, &["export", s(&source), "--to", s(&tar_local)]);
        ok(&server, &["export", &target, "--to", s(&tar_remote)]);
        assert_eq!(
            std::fs::read(&tar_remote).unwrap(),
            std::fs::read(&tar_local).unwrap()
        );
    }
    // The Python reference reads every pulled copy.
    let dumps = reference_batch("0.3.0", &steps);
    for (dump, records) in dumps.iter().zip(&expected) {
        assert_eq!(dump["records"].as_array().unwrap().len(), records.len());
    }
}

#[test]
fn a_concurrent_writer_wins_and_the_push_fails_cleanly() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    make(&source, true, Compression::Lz4, 100, 1500);
    let target = uri("race");
    ok(&server, &["push", s(&source), &target]);
    // Append locally, and have another writer commit between this push's read of
    // the manifest and its conditional write of it.
    let mut dataset = Dataset::open(&source).unwrap();
    dataset
        .extend([(b"new".as_slice(), b"value".as_slice())])
        .unwrap();
    let theirs = br#"{"keyed": true, "compression": "lz4", "max_shard_size": 1500, "shards": 0}"#;
    server.control_with_body("race?path=/race/manifest.json", theirs);
    let run = bcd(&server, &["push", s(&source), &target]);
    assert_clean_failure(&run, "push against a concurrent writer");
    assert!(run.stderr.contains("another writer"), "{}", run.stderr);
    // The other writer's state stands.
    assert_eq!(server.get_object("race/manifest.json").unwrap(), theirs);
}

#[test]
fn transient_server_errors_are_retried() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    make(&source, false, Compression::Lz4, 200, 1500);
    server.control("reset");
    server.control("fail?status=503&count=3&method=PUT");
    server.control("fail?status=500&count=2&method=GET");
    ok(&server, &["push", s(&source), &uri("retry")]);
    let copy = dir.path().join("copy");
    ok(&server, &["pull", &uri("retry"), s(&copy)]);
    assert_eq!(files(&copy), files(&source));
    let log = server.log();
    assert_eq!(
        log.iter().filter(|(_, _, status)| *status == 503).count(),
        3
    );
    assert_eq!(
        log.iter().filter(|(_, _, status)| *status == 500).count(),
        2
    );
}

#[test]
fn a_push_cut_off_by_the_server_going_away_leaves_the_old_state_and_a_rerun_completes() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    make(&source, true, Compression::Lz4, 80, 1500);
    let target = uri("cut");
    ok(&server, &["push", s(&source), &target]);
    let old = server.get_object("cut/manifest.json").unwrap();
    let mut dataset = Dataset::open(&source).unwrap();
    let more: Vec<(Vec<u8>, Vec<u8>)> = (0..200)
        .map(|i| (format!("more{i}").into_bytes(), vec![i as u8; 300]))
        .collect();
    dataset
        .extend(more.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    for after in [0, 2, 5] {
        server.control(&format!("down?after={after}&method=PUT"));
        let run = bcd(&server, &["push", s(&source), &target, "-j", "1"]);
        assert_clean_failure(&run, "push to a server that went away");
        server.control("up");
        // The remote reads as before.
        assert_eq!(server.get_object("cut/manifest.json").unwrap(), old);
        let copy = dir.path().join(format!("old{after}"));
        ok(&server, &["pull", &target, s(&copy)]);
        assert_eq!(Dataset::open(&copy).unwrap().len(), 80);
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&ok(&server, &["push", s(&source), &target, "--json"])).unwrap();
    assert!(summary["skipped"].as_u64().unwrap() > 0, "{summary}");
    let copy = dir.path().join("copy");
    ok(&server, &["pull", &target, s(&copy)]);
    assert_eq!(files(&copy), files(&source));
}

#[test]
fn a_killed_multipart_upload_is_cleaned_up_by_gc_and_by_the_next_push() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    // One 12 MB shard: three parts of 5 MiB (S3's smallest).
    let mut dataset = Dataset::create(
        &source,
        CreateOptions {
            keyed: false,
            compression: Compression::None,
            max_shard_size: 1 << 30,
        },
    )
    .unwrap();
    let mut rng = bcd_test_support::Rng::new(3);
    let values: Vec<Vec<u8>> = (0..12).map(|_| rng.bytes(1 << 20)).collect();
    dataset
        .extend_values(values.iter().map(|v| &v[..]))
        .unwrap();
    let parts = [
        "--multipart-threshold",
        "5MiB",
        "--part-size",
        "5MiB",
        "-j",
        "1",
    ];
    for cleanup in ["gc", "push"] {
        let target = uri(&format!("multipart-{cleanup}"));
        // The server goes away after the upload started (the journal entry and one
        // part went through): nothing can abort it, as after a kill.
        server.control("down?after=2&method=PUT");
        let run = bcd(
            &server,
            &[&["push", s(&source), &target][..], &parts].concat(),
        );
        assert_clean_failure(&run, "push cut off mid-upload");
        server.control("up");
        let prefix = format!("multipart-{cleanup}/");
        let pending = |server: &S3Server| {
            server
                .multipart_uploads()
                .into_iter()
                .filter(|key| key.starts_with(&prefix))
                .count()
        };
        assert_eq!(pending(&server), 1);
        if cleanup == "gc" {
            // Young uploads are kept (they may be a push in progress) ...
            ok(&server, &["gc", &target]);
            assert_eq!(pending(&server), 1);
            // ... and without the grace period aborted.
            ok(&server, &["gc", &target, "--older-than", "0s"]);
        } else {
            ok(
                &server,
                &[&["push", s(&source), &target][..], &parts].concat(),
            );
        }
        assert_eq!(pending(&server), 0, "{cleanup}");
    }
    // The completed multipart object is the shard, byte for byte.
    let copy = dir.path().join("copy");
    ok(&server, &["pull", &uri("multipart-push"), s(&copy)]);
    assert_eq!(files(&copy), files(&source));
}

#[test]
fn ingest_from_s3_equals_ingest_of_the_local_files_and_can_target_s3() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let root = bcd_test_support::repo_root().join("fixtures");
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (
            "tar",
            &[
                "tar/shards-000000.tar",
                "tar/shards-000001.tar",
                "tar/shards-000002.tar",
            ],
            &[],
        ),
        ("tgz", &["tar/pax.tgz"], &[]),
        (
            "parquet",
            &["parquet/many-row-groups.parquet"],
            &["--value-column", "value", "--key-column", "id"],
        ),
        (
            "tfrecord",
            &[
                "tfrecord/examples.tfrecord",
                "tfrecord/examples.tfrecord.gz",
            ],
            &[
                "--feature",
                "image/encoded",
                "--key-feature",
                "image/filename",
            ],
        ),
    ];
    for (name, fixtures, flags) in cases {
        let mut local_sources = Vec::new();
        let mut remote_sources = Vec::new();
        for fixture in fixtures {
            let file_name = Path::new(fixture).file_name().unwrap().to_str().unwrap();
            let key = format!("sources/{name}/{file_name}");
            server.put_object(&key, &std::fs::read(root.join(fixture)).unwrap());
            local_sources.push(root.join(fixture).to_str().unwrap().to_owned());
            remote_sources.push(uri(&key));
        }
        if name == "tar" {
            // One brace range instead of the three names.
            remote_sources = vec![uri("sources/tar/shards-{000000..000002}.tar")];
        }
        if name == "parquet" {
            // A prefix stands for its Parquet objects.
            remote_sources = vec![uri("sources/parquet/")];
        }
        let local = dir.path().join(format!("{name}-local"));
        let remote = dir.path().join(format!("{name}-remote"));
        let run = |sources: &[String], into: &str| {
            let mut args: Vec<String> = vec!["ingest".into()];
            args.extend(sources.iter().cloned());
            args.extend(["--into".into(), into.to_owned(), "--quiet".into()]);
            args.extend(flags.iter().map(|f| f.to_string()));
            ok(&server, &args);
        };
        run(&local_sources, s(&local));
        run(&remote_sources, s(&remote));
        assert_eq!(files(&remote), files(&local), "{name}");
        // Into a URI: staged, then pushed; twice (the second run appends after a
        // pull of the first's state, keys checked against it).
        let target = uri(&format!("ingested/{name}"));
        run(&remote_sources, &target);
        let copy = dir.path().join(format!("{name}-copy"));
        ok(&server, &["pull", &target, s(&copy)]);
        assert_eq!(
            read_all(&Dataset::open(&copy).unwrap()),
            read_all(&Dataset::open(&local).unwrap()),
            "{name}"
        );
        let mut again: Vec<String> = vec!["ingest".into()];
        again.extend(remote_sources.iter().cloned());
        again.extend(["--into".into(), target.clone(), "--quiet".into()]);
        again.extend(flags.iter().map(|f| f.to_string()));
        let duplicate = bcd(&server, &again);
        assert_clean_failure(&duplicate, "a second ingest of the same keys");
        assert!(
            duplicate.stderr.contains("duplicate key"),
            "{}",
            duplicate.stderr
        );
    }
    // A missing object fails before anything is read, naming it.
    let run = bcd(
        &server,
        &[
            "ingest",
            &uri("sources/tar/missing.tar"),
            "--into",
            s(&dir.path().join("m")),
        ],
    );
    assert_clean_failure(&run, "a missing source object");
    assert!(run.stderr.contains("missing.tar"), "{}", run.stderr);
}

#[test]
fn unsupported_uris_are_refused_never_made_local_folders() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = bcd_test_support::repo_root().join("fixtures/reference/v0.3.0-keyed-lz4");
    let fixture = s(&fixture);
    for args in [
        vec![
            "ingest",
            "fixtures/imagefolder",
            "--into",
            "hdfs://bucket/x",
        ],
        vec!["ingest", "ftp://host/a.tar", "--into", "d"],
        vec!["create", "s3://bucket/x"],
        vec!["create", "weird://bucket/x"],
        vec!["info", "hdfs://bucket/x"],
        vec!["ls", "http://host/x"],
        vec!["verify", "abc://x"],
        vec!["get", "hdfs://x", "--index", "0"],
        vec!["get", fixture, "--index", "0", "-o", "s3://b/out"],
        vec!["export", fixture, "--to", "s3://b/x.tar"],
        vec!["push", fixture, "hdfs://b/x"],
        vec!["push", fixture, "local-dir"],
        vec!["pull", "s3://b/x", "gs://b/y"],
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bcd"));
        command
            .args(&args)
            .current_dir(dir.path())
            .env("AWS_ACCESS_KEY_ID", "unused")
            .env("AWS_SECRET_ACCESS_KEY", "unused")
            .env("AWS_REGION", "us-east-1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let run = finish(command.spawn().unwrap(), &common::show(&args));
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.starts_with("bcd: "), "{args:?}: {}", run.stderr);
    }
    // Nothing was created: no `hdfs:` or `s3:` folder.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
