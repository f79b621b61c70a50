//! WebDataset samples: archives written by the `webdataset` package's `TarWriter`
//! and by Python's `tarfile`, read back by webdataset's own `tar_file_iterator`
//! and `group_by_keys` (the reference: keys, extensions, which member is which)
//! and typed with its decoders; the records and fields of the tar source must be
//! exactly those. Then what the reference does not do: refusing (or skipping)
//! bad samples, and hostile archives that claim more than a sample may hold.

use std::path::Path;
use std::process::Command;

use bcd_converters::samples::{SampleOptions, MAX_SAMPLE_MEMBERS, VALUE_EXT_FIELD};
use bcd_converters::tar_source::{TarOptions, TarSource};
use bcd_converters::{FieldValue, Origin, Record, Source, SourceError};
use bcd_test_support::{hex, venv_python};
use serde_json::{json, Value};

/// Writes the archives into argv[1] and prints, for each, the samples as
/// webdataset reads them, typed as the source must type them.
const WRITE_AND_READ: &str = r#"
import gzip, io, json, random, re, sys, tarfile
import webdataset
from webdataset import autodecode
from webdataset.tariterators import group_by_keys, tar_file_iterator

out = sys.argv[1]
rng = random.Random(7)
MTIME = 1_700_000_000
VALUE_EXTS = ["jpg", "jpeg", "png", "webp", "flac", "wav", "mp3", "mp4", "bin"]
INTEGERS = ["cls", "cls2", "class", "count", "index", "inx", "id"]

def tar_writer_shard(samples):
    buffer = io.BytesIO()
    writer = webdataset.TarWriter(buffer, encoder=False, mtime=MTIME)
    for sample in samples:
        writer.write(sample)
    writer.close()
    return buffer.getvalue()

shards = [
    [
        {"__key__": "s000", "jpg": rng.randbytes(300), "cls": b"3", "txt": "a cat, \u00e9t\u00e9".encode(),
         "json": json.dumps({"label": 3, "score": 0.5, "name": "tabby", "ok": True, "none": None,
                             "tags": ["a"], "nested": {"k": 1}}).encode()},
        {"__key__": "dir/sub/s001", "png": rng.randbytes(40), "seg.png": rng.randbytes(20),
         "json": json.dumps({"label": -2, "big": 2**70, "score": 1}).encode()},
        # Upper case extensions are lower-cased: JPG is preferred to webp.
        {"__key__": "a.b/s002", "webp": rng.randbytes(10), "JPG": rng.randbytes(12)},
    ],
    [
        {"__key__": "s003", "flac": rng.randbytes(50), "transcript": b"hello", "index": b"12",
         "id": b"-5", "caption.txt": "two words".encode(), "meta.json": b'{"a": "b", "n": 1.25}',
         "bin": bytes(range(256)), "class": b" 7\n", "count": b"+12"},
    ],
    [
        {"__key__": "s004", "mp4": rng.randbytes(64), "npy": rng.randbytes(8), "jsn": b"[1, 2]"},
        {"__key__": "s005", "mp3": b"", "wav": rng.randbytes(9), "cls2": b"0"},
    ],
]
archives = {}
for i, samples in enumerate(shards):
    archives[f"shard-{i:06d}.tar"] = tar_writer_shard(samples)

# Odd names, written by tarfile: a name without an extension and webdataset's
# metadata members (both passed over), a directory, a symbolic link in the middle of
# a sample (non-regular members do not break it), a hidden file name.
buffer = io.BytesIO()
with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
    def add(name, data=b"", kind=tarfile.REGTYPE):
        info = tarfile.TarInfo(name)
        info.mtime = MTIME
        info.type = kind
        if kind == tarfile.SYMTYPE:
            info.linkname = "elsewhere"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    add("__meta__", b"{}")
    add("__index__/s.jpg", b"x")
    add("README", b"read me")
    add("d", kind=tarfile.DIRTYPE)
    add("d/t000.cls", b"1")
    add("d/t000.lnk", kind=tarfile.SYMTYPE)
    add("d/t000.jpg", b"jpeg bytes")
    add("d/.t001.jpg", b"hidden")
    add("long/" + "n" * 120 + ".jpg", b"long name")
archives["odd.tar"] = buffer.getvalue()
value_exts = {"odd.tar": ["jpg", "t001.jpg"]}

expected = {}
for name, data in archives.items():
    with open(f"{out}/{name}", "wb") as f:
        f.write(data)
    stream = ({**s, "__url__": name} for s in tar_file_iterator(io.BytesIO(data)))
    samples = []
    for sample in group_by_keys(stream):
        exts = [k for k in sample if not k.startswith("__")]
        value_ext = next(e for e in value_exts.get(name, VALUE_EXTS) if e in exts)
        fields, derived = [], []
        for ext in exts:
            if ext == value_ext:
                continue
            data = sample[ext]
            kind = re.sub(r".*[.]", "", ext)
            decode = autodecode.decoders.get(kind)
            if kind in INTEGERS:
                fields.append([ext, "int", (decode or int)(data)])
            elif kind in ("txt", "text", "transcript"):
                fields.append([ext, "str", decode(data)])
            elif kind in ("json", "jsn"):
                fields.append([ext, "str", data.decode()])
                parsed = decode(data)
                if isinstance(parsed, dict):
                    for key, value in parsed.items():
                        if isinstance(value, bool):
                            typed = ["bool", value]
                        elif isinstance(value, int) and -2**63 <= value < 2**63:
                            typed = ["int", value]
                        elif isinstance(value, (int, float)):
                            typed = ["float", float(value)]
                        elif isinstance(value, str):
                            typed = ["str", value]
                        elif value is None:
                            typed = ["null", None]
                        else:
                            continue
                        fields.append([f"{ext}.{key}", *typed])
                        derived.append(f"{ext}.{key}")
            else:
                fields.append([ext, "bytes", data.hex()])
        samples.append({"key": sample["__key__"], "value": sample[value_ext].hex(),
                        "value_ext": value_ext, "fields": fields, "derived": derived})
    expected[name] = samples
print(json.dumps(expected))
"#;

/// Runs `code` in the test virtualenv with `args`; returns what it printed.
fn python(code: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(venv_python())
        .arg("-c")
        .arg(code)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A field as the Python side writes it: `[name, kind, value]`.
fn field_json(name: &str, value: &FieldValue) -> Value {
    let (kind, value) = match value {
        FieldValue::Int64(n) => ("int", json!(n)),
        FieldValue::String(s) => ("str", json!(s)),
        FieldValue::Binary(b) => ("bytes", json!(hex(b))),
        FieldValue::Float64(f) => ("float", json!(f)),
        FieldValue::Bool(b) => ("bool", json!(b)),
        FieldValue::Null => ("null", Value::Null),
        other => panic!("{name}: unexpected field value {other:?}"),
    };
    json!([name, kind, value])
}

/// A record as the Python side writes a sample (without `derived`).
fn record_json(record: &Record) -> Value {
    let mut fields: Vec<Value> = Vec::new();
    let mut value_ext = Value::Null;
    for (name, value) in record.fields.iter() {
        if &**name == VALUE_EXT_FIELD {
            match value {
                FieldValue::String(ext) => value_ext = json!(ext),
                other => panic!("{VALUE_EXT_FIELD} is {other:?}"),
            }
        } else {
            fields.push(field_json(name, value));
        }
    }
    json!({
        "key": String::from_utf8(record.key.clone()).unwrap(),
        "value": hex(&record.value),
        "value_ext": value_ext,
        "fields": fields,
    })
}

fn samples_options() -> TarOptions {
    TarOptions {
        samples: Some(SampleOptions {
            json_fields: true,
            ..SampleOptions::default()
        }),
    }
}

/// Every record of `names` read with `options`, or the error that ended them.
fn read(
    names: &[String],
    options: &TarOptions,
) -> (Vec<Record>, Option<SourceError>, TarSourceInfo) {
    let mut source = TarSource::with_options(names, options).unwrap();
    let mut records = Vec::new();
    let mut error = None;
    for item in source.by_ref() {
        match item {
            Ok(record) => records.push(record),
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    let info = TarSourceInfo {
        skipped: source
            .skipped()
            .0
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        metadata: Value::Object(source.metadata()),
    };
    (records, error, info)
}

/// [`read`] of one archive.
fn read_one(
    archive: &str,
    options: &TarOptions,
) -> (Vec<Record>, Option<SourceError>, TarSourceInfo) {
    read(&[archive.to_owned()], options)
}

struct TarSourceInfo {
    skipped: Vec<(String, u64)>,
    metadata: Value,
}

fn path_text(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_owned()
}

#[test]
fn samples_are_those_webdataset_groups_typed_as_its_decoders_type_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let expected: Value = serde_json::from_slice(&python(WRITE_AND_READ, &[out])).unwrap();

    // The three shards through a brace range, the second gzip-compressed and the
    // third zstd-compressed here (the Python side read them plain).
    let second = dir.path().join("shard-000001.tar");
    let plain = std::fs::read(&second).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &plain).unwrap();
    std::fs::write(&second, gz.finish().unwrap()).unwrap();
    let third = dir.path().join("shard-000002.tar");
    let zst = zstd::encode_all(&std::fs::read(&third).unwrap()[..], 3).unwrap();
    std::fs::write(&third, zst).unwrap();

    let pattern = path_text(dir.path(), "shard-{000000..000002}.tar");
    let (records, error, info) = read(&[pattern], &samples_options());
    assert!(error.is_none(), "{error:?}");
    let mut want = Vec::new();
    let mut derived: Vec<String> = Vec::new();
    for shard in ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"] {
        for sample in expected[shard].as_array().unwrap() {
            let mut sample = sample.clone();
            for name in sample["derived"].as_array().unwrap() {
                let name = name.as_str().unwrap().to_owned();
                if !derived.contains(&name) {
                    derived.push(name);
                }
            }
            sample.as_object_mut().unwrap().remove("derived");
            want.push(sample);
        }
    }
    let got: Vec<Value> = records.iter().map(record_json).collect();
    assert_eq!(got, want);
    assert_eq!(info.metadata, json!({ "derived_fields": derived }));
    assert!(info.skipped.is_empty(), "{:?}", info.skipped);
    // Each record comes from its value member.
    let Origin::Member {
        archive, member, ..
    } = &records[0].origin
    else {
        panic!("{:?}", records[0].origin)
    };
    assert_eq!(
        (archive.as_str(), member.as_str()),
        (
            path_text(dir.path(), "shard-000000.tar").as_str(),
            "s000.jpg"
        )
    );

    // Odd names, with a value extension that only a hidden file name has.
    let options = TarOptions {
        samples: Some(SampleOptions {
            value_exts: vec!["jpg".into(), "t001.jpg".into()],
            ..SampleOptions::default()
        }),
    };
    let (records, error, info) = read(&[path_text(dir.path(), "odd.tar")], &options);
    assert!(error.is_none(), "{error:?}");
    let got: Vec<Value> = records.iter().map(record_json).collect();
    let want: Vec<Value> = expected["odd.tar"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sample| {
            let mut sample = sample.clone();
            sample.as_object_mut().unwrap().remove("derived");
            sample
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        info.skipped,
        [
            ("member without an extension".to_owned(), 1),
            ("symlink".to_owned(), 1),
            ("webdataset metadata member".to_owned(), 2),
        ]
    );
    // Without json_fields, no metadata.
    assert_eq!(info.metadata, json!({}));
}

/// A ustar header declaring `size` bytes (the data is not part of it).
fn header(name: &str, size: u64) -> [u8; 512] {
    let mut block = [0u8; 512];
    block[..name.len()].copy_from_slice(name.as_bytes());
    block[100..108].copy_from_slice(b"0000644\0");
    block[108..116].copy_from_slice(b"0000000\0");
    block[116..124].copy_from_slice(b"0000000\0");
    let size = match size < 1 << 33 {
        true => format!("{size:011o}\0"),
        false => format!("{size:012o}"),
    };
    block[124..136].copy_from_slice(size.as_bytes());
    block[136..148].copy_from_slice(b"00000000000\0");
    block[156] = b'0';
    block[257..265].copy_from_slice(b"ustar\x0000");
    block[148..156].copy_from_slice(b"        ");
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    block
}

/// A tar of `members` (name, data), ended properly.
fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        out.extend_from_slice(&header(name, data.len() as u64));
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    std::fs::write(dir.join(name), bytes).unwrap();
    path_text(dir, name)
}

fn options(skip_bad_samples: bool) -> TarOptions {
    TarOptions {
        samples: Some(SampleOptions {
            skip_bad_samples,
            ..SampleOptions::default()
        }),
    }
}

fn keys(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        .collect()
}

/// Reads `archive` both ways: the error without `skip_bad_samples` (with the keys
/// before it), and the keys and "bad sample" count with it.
fn both_ways(archive: &str) -> (Vec<String>, String, Vec<String>, u64) {
    let (records, error, _) = read_one(archive, &options(false));
    let error = error.expect("an error").to_string();
    let (skipping, none, info) = read_one(archive, &options(true));
    assert!(none.is_none(), "{none:?}");
    let bad = info
        .skipped
        .iter()
        .find(|(kind, _)| kind == "bad sample")
        .map_or(0, |(_, n)| *n);
    (keys(&records), error, keys(&skipping), bad)
}

#[test]
fn a_bad_sample_is_an_error_naming_archive_sample_and_member_or_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    // Archive name, members, what the message says after the archive's name.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a [u8])>, &'a str);
    let cases: [Case; 7] = [
        (
            "duplicate.tar",
            vec![
                ("a.jpg", b"1"),
                ("a.cls", b"1"),
                ("a.JPG", b"2"),
                ("b.jpg", b"3"),
            ],
            r#"sample "a" (member "a.JPG", header at byte 2048): a second member with the extension "jpg" (the first is "a.jpg")"#,
        ),
        (
            "scattered.tar",
            vec![
                ("a.jpg", b"1"),
                ("b.jpg", b"2"),
                ("a.cls", b"1"),
                ("c.jpg", b"3"),
            ],
            r#"sample "a" (member "a.cls", header at byte 2048): its members are not contiguous"#,
        ),
        (
            "no-value.tar",
            vec![("a.txt", b"t"), ("a.cls", b"1"), ("b.jpg", b"3")],
            r#"sample "a" (member "a.txt", header at byte 0): no value member: its extensions are txt, cls and none is one of the value extensions (jpg, jpeg, png, webp, flac, wav, mp3, mp4, bin)"#,
        ),
        (
            "not-an-integer.tar",
            vec![("a.jpg", b"1"), ("a.cls", b"3.5"), ("b.jpg", b"3")],
            r#"sample "a" (member "a.cls", header at byte 1024): "3.5" is not a decimal integer"#,
        ),
        (
            "not-utf8.tar",
            vec![("a.jpg", b"1"), ("a.txt", b"\xff\xfe"), ("b.jpg", b"3")],
            r#"sample "a" (member "a.txt", header at byte 1024): not valid UTF-8 text"#,
        ),
        (
            "not-json.tar",
            vec![("a.jpg", b"1"), ("a.json", b"{\"a\": 1,}"), ("b.jpg", b"3")],
            r#"sample "a" (member "a.json", header at byte 1024): not valid JSON"#,
        ),
        (
            "too-deep.json.tar",
            vec![
                ("a.jpg", b"1"),
                ("a.json", DEEP.as_bytes()),
                ("b.jpg", b"3"),
            ],
            "recursion limit exceeded",
        ),
    ];
    for (name, members, message) in cases {
        let archive = write(dir.path(), name, &tar(&members));
        let (before, error, skipping, bad) = both_ways(&archive);
        assert!(
            error.starts_with(&format!("{archive}: ")) && error.contains(message),
            "{name}: {error}"
        );
        let (want_before, want_skipping): (&[&str], &[&str]) = match name {
            "scattered.tar" => (&["a", "b"], &["a", "b", "c"]),
            _ => (&[], &["b"]),
        };
        assert_eq!(before, want_before, "{name}");
        assert_eq!(skipping, want_skipping, "{name}");
        assert_eq!(bad, 1, "{name}");
    }
}

/// An object holding 100,000 nested arrays: deeper than any parser should recurse.
static DEEP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(r#"{{"a": {}{}}}"#, "[".repeat(100_000), "]".repeat(100_000))
});

#[test]
fn webdataset_refuses_a_duplicate_extension_too() {
    let dir = tempfile::tempdir().unwrap();
    let archive = write(
        dir.path(),
        "duplicate.tar",
        &tar(&[("a.jpg", b"1"), ("a.JPG", b"2")]),
    );
    let code = r#"
import sys
from webdataset.tariterators import group_by_keys, tar_file_iterator
stream = ({**s, "__url__": "x"} for s in tar_file_iterator(open(sys.argv[1], "rb")))
try:
    list(group_by_keys(stream))
except ValueError as e:
    print("refused:", e.args[0])
"#;
    let printed = String::from_utf8(python(code, &[&archive])).unwrap();
    assert!(
        printed.starts_with("refused: a.JPG: duplicate file name"),
        "{printed}"
    );
    let (_, error, _, _) = both_ways(&archive);
    assert!(
        error.contains("a second member with the extension"),
        "{error}"
    );
}

#[test]
fn a_sample_may_not_span_archives() {
    let dir = tempfile::tempdir().unwrap();
    let first = write(
        dir.path(),
        "1.tar",
        &tar(&[("a.jpg", b"1"), ("s.jpg", b"2")]),
    );
    let second = write(
        dir.path(),
        "2.tar",
        &tar(&[("s.cls", b"1"), ("t.jpg", b"3")]),
    );
    let names = [first.clone(), second.clone()];
    let (records, error, _) = read(&names, &options(false));
    assert_eq!(keys(&records), ["a", "s"]);
    let error = error.unwrap().to_string();
    assert_eq!(
        error,
        format!(
            r#"{second}: sample "s" (member "s.cls", header at byte 0): the sample continues the last sample of {first}; a sample may not span archives"#
        )
    );
    let (records, error, info) = read(&names, &options(true));
    assert!(error.is_none());
    assert_eq!(keys(&records), ["a", "s", "t"]);
    assert_eq!(info.skipped, [("bad sample".to_owned(), 1)]);
}

#[test]
fn a_member_declaring_more_than_a_sample_may_hold_is_refused_before_its_data_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // The first member's data is there; the second declares 4 GiB - 1 bytes and
    // has none: reading it would be "the archive ends early", not this.
    let mut bytes = tar(&[("a.jpg", b"0123456789")]);
    bytes.truncate(bytes.len() - 1024);
    bytes.extend_from_slice(&header("a.cls", u64::from(u32::MAX)));
    let archive = write(dir.path(), "huge.tar", &bytes);
    let (records, error, _) = read_one(&archive, &options(false));
    assert!(records.is_empty());
    assert_eq!(
        error.unwrap().to_string(),
        format!(
            r#"{archive}: sample "a" (member "a.cls", header at byte 1024): the member's 4294967295 bytes bring the sample over the limit of 4294967295 bytes"#
        )
    );
    // Alone, a member declaring 8 GiB.
    let mut bytes = header("b.jpg", 8 << 30).to_vec();
    bytes.extend_from_slice(&[0; 1024]);
    let archive = write(dir.path(), "huger.tar", &bytes);
    let (_, error, _) = read_one(&archive, &options(false));
    let error = error.unwrap().to_string();
    assert!(
        error.contains("the member's 8589934592 bytes bring the sample over the limit"),
        "{error}"
    );
    // Skipped, the data is passed over unread, and the archive's end is then
    // missing: that is the error.
    let (_, error, _) = read(&[write(dir.path(), "h.tar", &bytes)], &options(true));
    let error = error.unwrap().to_string();
    assert!(error.contains("truncated or corrupt"), "{error}");
}

#[test]
fn a_hundred_thousand_members_with_one_key_end_at_the_member_limit() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..100_000).map(|i| format!("k.e{i:06}")).collect();
    let mut members: Vec<(&str, &[u8])> = vec![("k.jpg", b"v")];
    members.extend(names.iter().map(|n| (n.as_str(), &b""[..])));
    members.push(("z.jpg", b"z"));
    let archive = write(dir.path(), "many.tar", &tar(&members));
    let (records, error, _) = read_one(&archive, &options(false));
    assert!(records.is_empty());
    let error = error.unwrap().to_string();
    assert_eq!(
        error,
        format!(
            r#"{archive}: sample "k" (member "k.e001023", header at byte {}): more than {MAX_SAMPLE_MEMBERS} members in one sample"#,
            1024 + 1023 * 512
        )
    );
    // Skipping: the rest of the sample is passed over, the next one is read.
    let (records, error, info) = read_one(&archive, &options(true));
    assert!(error.is_none(), "{error:?}");
    assert_eq!(keys(&records), ["z"]);
    assert_eq!(info.skipped, [("bad sample".to_owned(), 1)]);

    // The same extension many times: the second is a duplicate.
    let mut members: Vec<(&str, &[u8])> = vec![("k.jpg", b"v"); 10_000];
    members.push(("z.jpg", b"z"));
    let archive = write(dir.path(), "same.tar", &tar(&members));
    let (_, error, _) = read_one(&archive, &options(false));
    assert!(error
        .unwrap()
        .to_string()
        .contains(r#"(member "k.jpg", header at byte 1024): a second member"#));
    let (records, _, info) = read_one(&archive, &options(true));
    assert_eq!(keys(&records), ["z"]);
    assert_eq!(info.skipped, [("bad sample".to_owned(), 1)]);
}

#[test]
fn members_are_grouped_in_stdin_and_value_extensions_are_preferred_in_order() {
    let bytes = tar(&[("a.png", b"png"), ("a.jpg", b"jpg"), ("a.mp3", b"mp3")]);
    for (value_exts, value) in [
        (vec!["png", "jpg"], "png"),
        (vec!["jpg", "png"], "jpg"),
        (vec!["mp3"], "mp3"),
    ] {
        let options = TarOptions {
            samples: Some(SampleOptions {
                value_exts: value_exts.iter().map(|s| s.to_string()).collect(),
                ..SampleOptions::default()
            }),
        };
        let source = TarSource::from_reader_with_options(
            "-",
            Box::new(std::io::Cursor::new(bytes.clone())),
            &options,
        )
        .unwrap();
        let records: Vec<Record> = source.map(Result::unwrap).collect();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].value, value.as_bytes());
        let fields: Vec<&str> = records[0].fields.iter().map(|(n, _)| &**n).collect();
        let mut want: Vec<&str> = ["png", "jpg", "mp3"]
            .into_iter()
            .filter(|e| *e != value)
            .collect();
        want.push(VALUE_EXT_FIELD);
        assert_eq!(fields, want);
        assert_eq!(
            records[0].fields.get(VALUE_EXT_FIELD),
            Some(&FieldValue::String(value.into()))
        );
    }
}
