//! The command line itself: exit status 2 for every usage error (also those found
//! after parsing), help grouped by source format, messages without Rust type
//! names, and paths that are not UTF-8.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use bcd::Dataset;

use bcd_test_support::read_all;

mod common;
use common::*;

fn bcd<S: AsRef<OsStr>>(args: &[S]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_bcd"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run bcd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{}: {stderr}", show(args));
    out
}

fn fixture(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(path);
    path.to_str().unwrap().to_owned()
}

/// Asserts exit status 2 with one "bcd: " line containing `needle` (clap's own
/// errors start with "error:").
fn assert_usage_error(args: &[&str], needle: &str) {
    let out = bcd(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "bcd {args:?}: {stderr}");
    assert!(stderr.contains(needle), "bcd {args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "bcd {args:?}");
}

#[test]
fn every_usage_error_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    let d = s(&d);
    let tar = fixture("tar/gnu.tar");
    let tree = fixture("imagefolder");
    let csv = fixture("csv/listing.csv");
    let list = fixture("csv/list.csv");
    let parquet = fixture("parquet/codec-none.parquet");
    let tfrecord = fixture("tfrecord/examples.tfrecord");
    let jsonl = dir.path().join("lines.jsonl");
    std::fs::write(&jsonl, "{\"text\": \"a\"}\n").unwrap();
    let jsonl = s(&jsonl).to_owned();
    let schema = dir.path().join("schema.json");
    std::fs::write(&schema, r#"[{"name": "n", "type": "int64"}]"#).unwrap();
    let schema = s(&schema).to_owned();
    let bad_schema = dir.path().join("bad-schema.json");
    std::fs::write(&bad_schema, r#"[{"name": "n", "type": "integer"}]"#).unwrap();
    let bad_schema = s(&bad_schema).to_owned();
    let bad_schema_message =
        format!("--schema {bad_schema}: field 1: \"n\": unknown type \"integer\"");
    let missing_schema = s(&dir.path().join("missing.json")).to_owned();
    let missing_schema_message = format!("--schema {missing_schema}: ");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // Found by clap.
        (vec!["ingest", &tar], "--into"),
        (vec!["ingest", &tar, "--into", d, "--level", "13"], "1..12"),
        (vec!["bogus"], "unrecognized subcommand"),
        // A flag for another source format.
        (
            vec!["ingest", &tar, "--into", d, "--delimiter", ";"],
            "--delimiter applies to csv sources only, not tar",
        ),
        (
            vec!["ingest", &tree, "--into", d, "--feature", "x"],
            "--feature applies to tfrecord sources only, not dir",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--key-column", "k"],
            "--key-column applies to parquet, hf-disk, csv, mds and litdata sources only, not tar",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--format", "parquet"],
            "parquet sources need --value-column",
        ),
        (
            vec!["ingest", &tar, &tree, "--into", d],
            "different formats (tar, dir)",
        ),
        (
            vec!["ingest", &tree, "--into", d, "--include", "["],
            "bad glob",
        ),
        (
            vec!["ingest", "x-{3..1}.tar", "--into", d],
            "bad range {3..1}",
        ),
        (vec!["ingest", "-", "-", "--into", d], "stdin (-)"),
        (
            vec!["ingest", &csv, "--into", d, "--follow-links"],
            "--follow-links applies to dir sources only, not csv",
        ),
        // The field options of other formats, and sample options without --samples.
        (
            vec!["ingest", &tar, "--into", d, "--labels", "folder"],
            "--labels applies to dir sources only, not tar",
        ),
        (
            vec!["ingest", &tree, "--into", d, "--labels", "files"],
            "invalid value 'files'",
        ),
        (
            vec!["ingest", &tree, "--into", d, "--samples"],
            "--samples applies to tar sources only, not dir",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--value-ext", "jpg,png"],
            "--value-ext applies to tar sources read with --samples only",
        ),
        (
            vec![
                "ingest",
                &tar,
                "--into",
                d,
                "--samples",
                "--value-ext",
                "jpg,,png",
            ],
            "expected an extension",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--json-fields"],
            "--json-fields applies to tar sources read with --samples only",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--skip-bad-samples"],
            "--skip-bad-samples applies to tar sources read with --samples only",
        ),
        (
            vec!["ingest", &csv, "--into", d, "--value-field", "text"],
            "--value-field applies to jsonl sources only, not csv",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--value-base64"],
            "--value-base64 applies to jsonl sources only, not tar",
        ),
        (
            vec!["ingest", &tree, "--into", d, "--key-field", "id"],
            "--key-field applies to jsonl sources only, not dir",
        ),
        (
            vec!["ingest", &tree, "--into", d, "--schema", &schema],
            "--schema applies to jsonl sources only, not dir",
        ),
        (
            vec!["ingest", &jsonl, "--into", d, "--schema", &bad_schema],
            &bad_schema_message,
        ),
        (
            vec!["ingest", &jsonl, "--into", d, "--schema", &missing_schema],
            &missing_schema_message,
        ),
        (
            vec!["ingest", &jsonl, "--into", d, "--value-column", "text"],
            "--value-column applies to parquet, hf-disk, lmdb, mds and litdata sources only, not jsonl",
        ),
        (
            vec!["ingest", &jsonl, "--into", d, "--key-field", "text"],
            "--key-field and --value-field name the same field \"text\"",
        ),
        // Field options: malformed, for another format, or naming the value or key.
        (
            vec!["ingest", &list, "--into", d, "--fields", "a,,b"],
            "invalid value 'a,,b' for '--fields",
        ),
        (
            vec!["ingest", &list, "--into", d, "--fields", "a,b,a"],
            "\"a\" is named twice",
        ),
        (
            vec!["ingest", &list, "--into", d, "--field-type", "label"],
            "invalid value 'label' for '--field-type",
        ),
        (
            vec!["ingest", &list, "--into", d, "--field-type", "label=int32"],
            "expected one of int64, float64, bool, string",
        ),
        (
            vec!["ingest", &tar, "--into", d, "--fields", "none"],
            "--fields applies to parquet, hf-disk, csv, tfrecord, mds and litdata sources only, not tar",
        ),
        (
            vec![
                "ingest",
                &parquet,
                "--into",
                d,
                "--value-column",
                "value",
                "--field-type",
                "key=string",
            ],
            "--field-type applies to csv sources only, not parquet",
        ),
        (
            vec![
                "ingest",
                &parquet,
                "--into",
                d,
                "--value-column",
                "value",
                "--fields",
                "value",
            ],
            "--fields names \"value\", which is the value column",
        ),
        (
            vec![
                "ingest",
                &list,
                "--into",
                d,
                "--key-column",
                "id",
                "--fields",
                "id,label",
            ],
            "--fields names \"id\", which is the key column",
        ),
        (
            vec![
                "ingest",
                &list,
                "--into",
                d,
                "--fields",
                "label",
                "--field-type",
                "id=string",
            ],
            "--field-type declares column \"id\", which is not a field (see --fields)",
        ),
        (
            vec![
                "ingest",
                &list,
                "--into",
                d,
                "--field-type",
                "label=int64",
                "--field-type",
                "label=bool",
            ],
            "--field-type declares column \"label\" twice",
        ),
        (
            vec![
                "ingest",
                &tfrecord,
                "--into",
                d,
                "--key-feature",
                "image/filename",
                "--fields",
                "image/filename",
            ],
            "--fields names \"image/filename\", which is the key feature",
        ),
        // Splitting to stdout; a malformed --hex key.
        (
            vec!["export", d, "--to", "-", "--split-size", "1M"],
            "not stdout",
        ),
        (vec!["get", d, "--hex", "abc"], "hexadecimal"),
    ];
    for (args, needle) in &cases {
        assert_usage_error(args, needle);
        assert!(!Path::new(d).exists(), "bcd {args:?} created the dataset");
    }
}

/// Failures that are not usage errors exit 1: a missing source, a conflict with
/// the existing dataset, a missing dataset.
#[test]
fn failures_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    for args in [
        vec!["ingest", "missing.tar", "--into", s(&d)],
        vec!["ingest", "missing-dir", "--into", s(&d)],
        vec!["info", s(&d)],
        vec!["export", s(&d), "--to", "-", "--split-count", "0x"],
    ] {
        let out = bcd(&args);
        let code = out.status.code();
        // The last is clap's (a malformed number): 2.
        let want = if args.contains(&"0x") { 2 } else { 1 };
        assert_eq!(
            code,
            Some(want),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn ingest_help_groups_flags_by_source_and_covers_every_format() {
    let out = bcd(&["ingest", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for heading in [
        "Dataset:",
        "Output:",
        "Directory sources (dir):",
        "Parquet sources (parquet, hf-disk):",
        "Parquet and CSV sources:",
        "Hugging Face save_to_disk directories (hf-disk):",
        "CSV sources (csv):",
        "TFRecord sources (tfrecord):",
        "Fields (parquet, hf-disk, csv, tfrecord, mds, litdata):",
        "Tar sources (tar):",
        "JSON Lines sources (jsonl):",
        "LMDB environments (lmdb):",
        "Exit status:",
    ] {
        assert!(help.contains(heading), "no {heading:?} in:\n{help}");
    }
    for format in [
        "dir ",
        "tar ",
        "parquet ",
        "csv ",
        "tfrecord ",
        "jsonl ",
        "megatron ",
        "lmdb ",
        "mds ",
        "litdata ",
    ] {
        assert!(
            help.lines().any(|l| l.starts_with(&format!("  {format}"))),
            "{format:?} is not described:\n{help}"
        );
    }
    // Each format's flags sit under its own heading: the text from a heading to
    // the next unindented line.
    let section = |heading: &str| {
        let mut lines = help.lines().skip_while(|l| *l != heading);
        assert!(lines.next().is_some(), "no {heading}");
        lines
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (heading, flags) in [
        (
            "Directory sources (dir):",
            &["--include", "--exclude", "--follow-links", "--labels"][..],
        ),
        (
            "Tar sources (tar):",
            &[
                "--samples",
                "--value-ext",
                "--json-fields",
                "--skip-bad-samples",
            ],
        ),
        (
            "JSON Lines sources (jsonl):",
            &["--value-field", "--value-base64", "--key-field", "--schema"],
        ),
        (
            "Parquet sources (parquet, hf-disk):",
            &["--value-column", "--skip-nulls"],
        ),
        (
            "Hugging Face save_to_disk directories (hf-disk):",
            &["--split"],
        ),
        ("LMDB environments (lmdb):", &["--lmdb-value", "--lmdb-db"]),
        (
            "CSV sources (csv):",
            &["--path-column", "--root", "--delimiter"],
        ),
        (
            "TFRecord sources (tfrecord):",
            &["--feature", "--key-feature"],
        ),
        (
            "Fields (parquet, hf-disk, csv, tfrecord, mds, litdata):",
            &["--fields", "--field-type"],
        ),
    ] {
        let text = section(heading);
        for flag in flags {
            assert!(text.contains(flag), "{flag} is not under {heading}: {text}");
        }
    }
    let top = String::from_utf8(bcd(&["--help"]).stdout).unwrap();
    assert!(top.contains("130 interrupted"), "{top}");
}

/// Messages name formats as the user spells them, never as Rust types.
#[test]
fn messages_use_format_names_not_type_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    let tar = fixture("tar/gnu.tar");
    for flag in [
        &["--include", "*"][..],
        &["--value-column", "v", "--format", "tar"],
        &["--root", "."],
        &["--key-feature", "k"],
        &["--key-field", "k"],
    ] {
        let mut args = vec!["ingest", &tar, "--into", s(&d)];
        args.extend_from_slice(flag);
        let out = bcd(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        for type_name in ["Dir", "Tar", "Csv", "Parquet", "Tfrecord", "Jsonl"] {
            assert!(
                !stderr.contains(&format!(" {type_name} ")),
                "{args:?}: {stderr}"
            );
        }
    }
}

/// A source directory and a dataset whose names are not UTF-8, holding a file
/// whose name is not either: the key is the name's bytes.
#[cfg(unix)]
#[test]
fn paths_that_are_not_utf8_work_as_source_and_dataset() {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join(OsStr::from_bytes(b"tr\xffee"));
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join(OsStr::from_bytes(b"sub/caf\xe9.txt")), b"latin-1").unwrap();
    std::fs::write(tree.join("plain.txt"), b"plain").unwrap();
    let ds = dir.path().join(OsStr::from_bytes(b"d\xfes"));

    let args: Vec<OsString> = vec![
        "ingest".into(),
        tree.clone().into_os_string(),
        "--into".into(),
        ds.clone().into_os_string(),
        "--json".into(),
    ];
    let out = bcd(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["records"], 2);
    assert_eq!(
        read_all(&Dataset::open(&ds).unwrap()),
        vec![
            (b"plain.txt".to_vec(), b"plain".to_vec()),
            (b"sub/caf\xe9.txt".to_vec(), b"latin-1".to_vec()),
        ]
    );

    // Read back through the other commands, by the same non-UTF-8 paths.
    let get = bcd(&[
        OsString::from("get"),
        ds.clone().into_os_string(),
        OsString::from_vec(b"sub/caf\xe9.txt".to_vec()),
    ]);
    assert_eq!(get.stdout, b"latin-1");
    let ls = bcd(&[OsString::from("ls"), ds.clone().into_os_string()]);
    assert_eq!(ls.stdout, b"plain.txt\nsub/caf\xe9.txt\n");
    let verify = bcd(&[OsString::from("verify"), ds.clone().into_os_string()]);
    assert!(verify.status.success());
    let out = dir.path().join(OsStr::from_bytes(b"out\xff.tar"));
    let export = bcd(&[
        OsString::from("export"),
        ds.clone().into_os_string(),
        OsString::from("--to"),
        out.clone().into_os_string(),
    ]);
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    assert!(out.exists());
    assert_eq!(Dataset::open(&ds).unwrap().len(), 2);
}
