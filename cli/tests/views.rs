//! `bcd view` and `--view` / `--where` end to end: the records a view holds
//! are the ones its expression selects, every reading command reads only
//! them, mistakes are usage errors naming the field, and views travel through
//! `bcd push` and `bcd pull` (moto's S3 server) and `export --into`.

mod common;

use std::path::Path;

use bcd::Dataset;
use bcd_test_support::s3::{S3Server, BUCKET};
use common::{fails, ok, s, usage_error};

/// A keyed dataset of 40 JSON Lines records with fields `label` (cat, dog,
/// ant), `n` (i) and `tags`, ingested in several shards.
fn make(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("docs.jsonl");
    let mut text = String::new();
    for i in 0..40 {
        let label = ["cat", "dog", "ant"][i % 3];
        text.push_str(&format!(
            "{{\"id\": \"k{i:02}\", \"text\": \"{}\", \"label\": \"{label}\", \"n\": {i}, \"tags\": [{}]}}\n",
            "x".repeat(i),
            (0..i % 3).map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    std::fs::write(&source, text).unwrap();
    let ds = dir.join("ds");
    ok(&[
        "ingest",
        s(&source),
        "--into",
        s(&ds),
        "--key-field",
        "id",
        "--max-shard-size",
        "300",
        "-q",
    ]);
    ds
}

fn lines(out: Vec<u8>) -> Vec<String> {
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn keys(indices: impl IntoIterator<Item = usize>) -> Vec<String> {
    indices.into_iter().map(|i| format!("k{i:02}")).collect()
}

#[test]
fn a_view_holds_what_its_expression_selects_and_commands_read_only_it() {
    let dir = tempfile::tempdir().unwrap();
    let ds = make(dir.path());
    assert!(Dataset::open(&ds).unwrap().shards() > 2);
    ok(&[
        "view",
        "create",
        s(&ds),
        "cats",
        "--where",
        "label = 'cat' AND n >= 6",
    ]);
    let cats: Vec<usize> = (6..40).filter(|i| i % 3 == 0).collect();
    assert_eq!(
        lines(ok(&["ls", s(&ds), "--view", "cats"])),
        keys(cats.clone())
    );
    let listed: serde_json::Value =
        serde_json::from_slice(&ok(&["view", "list", s(&ds), "--json"])).unwrap();
    assert_eq!(listed[0]["name"], "cats");
    assert_eq!(listed[0]["records"], cats.len());
    assert_eq!(listed[0]["evaluated_over"], 40);
    assert_eq!(listed[0]["expression"], "label = 'cat' AND n >= 6");

    // --where, without a view; the pseudo-columns.
    assert_eq!(
        lines(ok(&[
            "ls",
            s(&ds),
            "--where",
            "array_has(tags, 1) AND key > 'k30'"
        ])),
        keys((31..40).filter(|i| i % 3 == 2))
    );
    assert_eq!(
        lines(ok(&["ls", s(&ds), "--where", "size >= 38 OR index = 0"])),
        keys([0, 38, 39])
    );
    // ls --fields, get by index and key, stats.
    let fields = lines(ok(&["ls", s(&ds), "--fields", "--view", "cats"]));
    assert_eq!(fields.len(), cats.len());
    let first: serde_json::Value = serde_json::from_str(&fields[0]).unwrap();
    assert_eq!(
        (first["key"].as_str(), first["n"].as_i64()),
        (Some("k06"), Some(6))
    );
    assert_eq!(
        ok(&["get", s(&ds), "--view", "cats", "--index", "-1"]),
        "x".repeat(39).as_bytes()
    );
    assert_eq!(
        ok(&["get", s(&ds), "--view", "cats", "k09"]),
        "x".repeat(9).as_bytes()
    );
    let outside = fails(&["get", s(&ds), "--view", "cats", "k01"]);
    assert!(outside.contains("does not hold"), "{outside}");
    fails(&[
        "get",
        s(&ds),
        "--view",
        "cats",
        "--index",
        &cats.len().to_string(),
    ]);
    let stats: serde_json::Value =
        serde_json::from_slice(&ok(&["stats", s(&ds), "--view", "cats", "--json"])).unwrap();
    assert_eq!(stats["records"], cats.len());
    assert_eq!(
        stats["fields"]["label"]["counts"],
        serde_json::json!([["cat", cats.len()]])
    );
    assert_eq!(stats["fields"]["n"]["min"], 6);
    assert_eq!(stats["value_size"]["max"], 39);

    // Exports of the view: tar members, Parquet rows, a copy with its views.
    let tar = dir.path().join("cats.tar");
    ok(&["export", s(&ds), "--view", "cats", "--to", s(&tar)]);
    let mut archive = tar::Archive::new(std::fs::File::open(&tar).unwrap());
    let members: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(members, keys(cats.clone()));
    let sampled = dir.path().join("sampled.tar");
    ok(&[
        "export",
        s(&ds),
        "--view",
        "cats",
        "--sample",
        "3",
        "--to",
        s(&sampled),
    ]);
    let mut archive = tar::Archive::new(std::fs::File::open(&sampled).unwrap());
    let picked: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(picked.len(), 3);
    assert!(
        picked.iter().all(|k| keys(cats.clone()).contains(k)),
        "{picked:?}"
    );
    let copy = dir.path().join("copy");
    ok(&["view", "create", s(&ds), "small", "--where", "n < 12"]);
    ok(&[
        "export",
        s(&ds),
        "--where",
        "label <> 'ant'",
        "--into",
        s(&copy),
    ]);
    let copied = Dataset::open(&copy).unwrap();
    let kept: Vec<usize> = (0..40).filter(|i| i % 3 != 2).collect();
    assert_eq!(copied.len(), kept.len());
    let carried = |name: &str| -> Vec<String> {
        let view = copied.view(name).unwrap();
        view.indices
            .iter()
            .map(|i| String::from_utf8(copied.key_at(i as usize).unwrap().to_vec()).unwrap())
            .collect()
    };
    assert_eq!(carried("cats"), keys(cats.clone()));
    assert_eq!(
        carried("small"),
        keys(kept.iter().copied().filter(|&i| i < 12))
    );

    // Replace, refresh after an append, drop.
    usage_error(&["view", "create", s(&ds), "cats", "--where", "n = 1"]);
    ok(&[
        "view",
        "create",
        s(&ds),
        "cats",
        "--where",
        "label = 'cat'",
        "--replace",
    ]);
    let more = dir.path().join("more.jsonl");
    std::fs::write(
        &more,
        "{\"id\": \"k40\", \"text\": \"y\", \"label\": \"cat\", \"n\": 40, \"tags\": []}\n",
    )
    .unwrap();
    ok(&[
        "ingest",
        s(&more),
        "--into",
        s(&ds),
        "--key-field",
        "id",
        "-q",
    ]);
    assert_eq!(lines(ok(&["ls", s(&ds), "--view", "cats"])).len(), 14);
    ok(&["view", "refresh", s(&ds), "cats"]);
    assert_eq!(
        lines(ok(&["ls", s(&ds), "--view", "cats"])).last().unwrap(),
        "k40"
    );
    ok(&["view", "drop", s(&ds), "cats"]);
    usage_error(&["ls", s(&ds), "--view", "cats"]);
}

#[test]
fn mistakes_are_usage_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let ds = make(dir.path());
    let missing = usage_error(&["view", "create", s(&ds), "v", "--where", "lable = 'cat'"]);
    assert!(
        missing.contains("no field \"lable\"") && missing.contains("label"),
        "{missing}"
    );
    let typed = usage_error(&["ls", s(&ds), "--where", "label > 3"]);
    assert!(typed.contains("field \"label\""), "{typed}");
    let syntax = usage_error(&["export", s(&ds), "--where", "n = = 2", "--to", "-"]);
    assert!(syntax.contains("invalid expression"), "{syntax}");
    usage_error(&["view", "create", s(&ds), "../up", "--where", "n = 1"]);
    usage_error(&["ls", s(&ds), "--view", "a", "--where", "n = 1"]);
    // Nothing was written.
    assert_eq!(
        Dataset::open(&ds).unwrap().view_names().unwrap(),
        Vec::<String>::new()
    );
}

/// Runs bcd with the server's environment.
fn remote_ok(server: &S3Server, args: &[&str]) -> Vec<u8> {
    let run = common::run_with_env(args, &server.env());
    assert!(
        run.status.success(),
        "bcd {}: {}",
        args.join(" "),
        run.stderr
    );
    run.stdout
}

#[test]
fn views_travel_with_push_and_pull_and_read_in_place() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let ds = make(dir.path());
    ok(&["view", "create", s(&ds), "dogs", "--where", "label = 'dog'"]);
    let uri = format!("s3://{BUCKET}/views");
    remote_ok(&server, &["push", s(&ds), &uri]);
    assert_eq!(
        server.get_object("views/view.dogs").unwrap(),
        std::fs::read(ds.join("view.dogs")).unwrap()
    );
    let dogs = keys((0..40).filter(|i| i % 3 == 1));
    assert_eq!(
        lines(remote_ok(&server, &["ls", &uri, "--view", "dogs"])),
        dogs
    );
    assert_eq!(
        remote_ok(&server, &["get", &uri, "--view", "dogs", "--index", "2"]),
        "x".repeat(7).as_bytes()
    );
    let listed: serde_json::Value =
        serde_json::from_slice(&remote_ok(&server, &["view", "list", &uri, "--json"])).unwrap();
    assert_eq!(listed[0]["records"], dogs.len());
    let local_tar = dir.path().join("local.tar");
    let remote_tar = dir.path().join("remote.tar");
    ok(&["export", s(&ds), "--view", "dogs", "--to", s(&local_tar)]);
    remote_ok(
        &server,
        &["export", &uri, "--view", "dogs", "--to", s(&remote_tar)],
    );
    assert_eq!(
        std::fs::read(&local_tar).unwrap(),
        std::fs::read(&remote_tar).unwrap()
    );

    // A pull brings the view; an append, a refresh and a second push replace it.
    let copy = dir.path().join("copy");
    remote_ok(&server, &["pull", &uri, s(&copy)]);
    assert_eq!(lines(ok(&["ls", s(&copy), "--view", "dogs"])), dogs);
    let more = dir.path().join("more.jsonl");
    std::fs::write(
        &more,
        "{\"id\": \"k40\", \"text\": \"y\", \"label\": \"dog\", \"n\": 40, \"tags\": []}\n",
    )
    .unwrap();
    ok(&[
        "ingest",
        s(&more),
        "--into",
        s(&ds),
        "--key-field",
        "id",
        "-q",
    ]);
    ok(&["view", "refresh", s(&ds), "dogs"]);
    remote_ok(&server, &["push", s(&ds), &uri]);
    remote_ok(&server, &["pull", &uri, s(&copy)]);
    let mut grown = dogs.clone();
    grown.push("k40".into());
    assert_eq!(lines(ok(&["ls", s(&copy), "--view", "dogs"])), grown);
    assert_eq!(
        lines(remote_ok(&server, &["ls", &uri, "--view", "dogs"])),
        grown
    );
}
