//! The `bcd` command end to end: outputs, exit codes and error messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bcd::{Compression, CreateOptions, Dataset};

mod common;
use common::{fails, ok, s, usage_error};

fn bcd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bcd"))
        .args(args)
        .output()
        .expect("run bcd")
}

/// A keyed lz4 dataset with three records, one with a binary key.
fn sample(dir: &Path) -> PathBuf {
    let path = dir.join("ds");
    let mut ds = Dataset::create(
        &path,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    ds.extend([
        (&b"a/1.txt"[..], &b"one"[..]),
        (b"\xff\x00bin", b"binary key"),
        (b"empty", b""),
    ])
    .unwrap();
    path
}

#[test]
fn create_then_info_json_reports_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new");
    ok(&[
        "create",
        s(&path),
        "--keyed",
        "--compression",
        "none",
        "--max-shard-size",
        "64K",
    ]);
    let info: serde_json::Value =
        serde_json::from_slice(&ok(&["info", s(&path), "--json"])).unwrap();
    assert_eq!(info["keyed"], true);
    assert_eq!(info["compression"], serde_json::Value::Null);
    assert_eq!(info["max_shard_size"], 65536);
    assert_eq!(info["shards"], 0);
    assert_eq!(info["records"], 0);

    let ds = Dataset::open(&path).unwrap();
    assert_eq!((ds.keyed(), ds.compression()), (true, Compression::None));
    let text = String::from_utf8(ok(&["info", s(&path)])).unwrap();
    assert!(text.contains("records:        0"), "{text}");
}

#[test]
fn create_defaults_match_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    ok(&["create", s(&path)]);
    assert_eq!(
        std::fs::read_to_string(path.join("manifest.json")).unwrap(),
        r#"{"keyed": false, "compression": "lz4", "max_shard_size": 1073741824, "shards": 0}"#
    );
}

#[test]
fn create_refuses_a_non_empty_directory_and_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x"), b"").unwrap();
    assert!(fails(&["create", s(dir.path())]).contains("not empty"));
    let err = usage_error(&[
        "create",
        s(&dir.path().join("y")),
        "--max-shard-size",
        "12parsecs",
    ]);
    assert!(err.contains("KiB"), "{err}");
    let err = fails(&["create", s(&dir.path().join("z")), "--max-shard-size", "0"]);
    assert!(err.contains("max_shard_size must be positive"), "{err}");
    assert!(!dir.path().join("z").join("manifest.json").exists());
}

#[test]
fn get_by_key_hex_key_and_signed_index() {
    let dir = tempfile::tempdir().unwrap();
    let ds = sample(dir.path());
    assert_eq!(ok(&["get", s(&ds), "a/1.txt"]), b"one");
    assert_eq!(ok(&["get", s(&ds), "--hex", "ff0062696e"]), b"binary key");
    assert_eq!(ok(&["get", s(&ds), "--index", "0"]), b"one");
    assert_eq!(ok(&["get", s(&ds), "--index", "-2"]), b"binary key");
    assert_eq!(ok(&["get", s(&ds), "-i", "-1"]), b"");

    let out = dir.path().join("value.bin");
    ok(&["get", s(&ds), "a/1.txt", "-o", s(&out)]);
    assert_eq!(std::fs::read(&out).unwrap(), b"one");
}

#[test]
fn get_errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let ds = sample(dir.path());
    assert!(fails(&["get", s(&ds), "nope"]).contains("key \"nope\" not found"));
    assert!(fails(&["get", s(&ds), "--index", "3"]).contains("index 3 out of range"));
    assert!(fails(&["get", s(&ds), "--index", "-4"]).contains("index -4 out of range"));
    assert!(usage_error(&["get", s(&ds), "--hex", "abc"]).contains("hexadecimal"));
    usage_error(&["get", s(&ds)]);

    let keyless = dir.path().join("keyless");
    Dataset::create(&keyless, CreateOptions::default())
        .unwrap()
        .extend_values([b"v"])
        .unwrap();
    assert!(fails(&["get", s(&keyless), "k"]).contains("keyless"));
    assert_eq!(ok(&["get", s(&keyless), "-i", "0"]), b"v");
}

#[test]
fn ls_prints_keys_or_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let ds = sample(dir.path());
    assert_eq!(ok(&["ls", s(&ds)]), b"a/1.txt\n\xff\x00bin\nempty\n");
    assert_eq!(ok(&["ls", s(&ds), "-0"]), b"a/1.txt\0\xff\x00bin\0empty\0");

    let keyless = dir.path().join("keyless");
    Dataset::create(&keyless, CreateOptions::default())
        .unwrap()
        .extend_values([b"x", b"y"])
        .unwrap();
    assert_eq!(ok(&["ls", s(&keyless)]), b"0\n1\n");
}

#[test]
fn verify_passes_a_sound_dataset_and_reports_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let ds = sample(dir.path());
    let out = String::from_utf8(ok(&["verify", s(&ds)])).unwrap();
    assert!(out.starts_with("ok: 3 records in 1 shards"), "{out}");

    std::fs::write(ds.join("000001.bin"), b"half-written").unwrap();
    let verify = bcd(&["verify", s(&ds)]);
    assert!(verify.status.success());
    assert!(String::from_utf8_lossy(&verify.stderr).contains("000001.bin"));
}

#[test]
fn verify_names_the_shard_and_record_of_a_corrupt_value() {
    let dir = tempfile::tempdir().unwrap();
    let ds = sample(dir.path());
    // Record 0 is key "a/1.txt" (7 bytes) then its LZ4 value: break the block.
    let bin = ds.join("000000.bin");
    let mut bytes = std::fs::read(&bin).unwrap();
    bytes[7 + 4] = 0xF0; // token claiming 15+ literals the block does not have
    std::fs::write(&bin, bytes).unwrap();
    let err = fails(&["verify", s(&ds)]);
    assert!(err.contains("000000.bin: record 0"), "{err}");
    assert!(err.contains("1 of 3 records cannot be decoded"), "{err}");
}

#[test]
fn broken_datasets_fail_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    assert!(fails(&["info", s(&dir.path().join("missing"))]).contains("not a dataset"));

    let ds = sample(dir.path());
    std::fs::write(ds.join("000000.idx"), b"\x01\x00\x00").unwrap();
    let err = fails(&["verify", s(&ds)]);
    assert!(err.contains("000000.idx"), "{err}");
    assert!(fails(&["info", s(&ds)]).contains("000000.idx"));

    std::fs::write(ds.join("manifest.json"), br#"{"keyed": "yes"}"#).unwrap();
    assert!(fails(&["ls", s(&ds)]).contains("manifest.json: invalid manifest"));
}

#[test]
fn ls_into_a_closed_pipe_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many");
    let mut ds = Dataset::create(
        &path,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    ds.extend((0..100_000).map(|i| (format!("key-{i:06}"), b"")))
        .unwrap();
    let stderr = dir.path().join("stderr");
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; '{}' ls '{}' 2>'{}' | head -n 1 >/dev/null",
            env!("CARGO_BIN_EXE_bcd"),
            s(&path),
            s(&stderr)
        ))
        .status()
        .unwrap();
    assert!(status.success(), "bcd ls exited with {status:?}");
    assert_eq!(std::fs::read_to_string(&stderr).unwrap(), "");
}

#[test]
fn help_lists_every_command_the_readme_documents() {
    let help = String::from_utf8(ok(&["--help"])).unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    for command in ["create", "info", "get", "ls", "verify"] {
        assert!(help.contains(command), "--help lacks {command}");
        assert!(
            readme.contains(&format!("bcd {command} DATASET")),
            "README lacks {command}"
        );
    }
}
