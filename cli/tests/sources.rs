//! `bcd ingest` from Parquet, TFRecord and CSV sources, end to end through the
//! binary, against files made by the real tools: `fixtures/parquet/` (pyarrow
//! 22.0.0 and Hugging Face `datasets`), `fixtures/tfrecord/` (the `tfrecord`
//! package) and `fixtures/csv/` (Python's `csv` module). Each directory's
//! `expected.json`, written by its `make_*.py` from what those tools read back,
//! lists the exact records per fixture file and option set; every dataset ingested
//! here is read back through the library, `bcd ls`/`bcd get` and the Python
//! reference (`tests/python/reference.py 0.3.0 dump`) and compared with it in full.
//!
//! Bad input must fail with exit status 1 and one message naming the file and the
//! row, line or record (and the byte offset where there is one), never a panic,
//! leaving an existing dataset byte-identical and creating none.
//!
//! The interrupted-ingest test writes its large Parquet file at test time with the
//! Rust `parquet`/`arrow-array` crates (dev-dependencies). The reference and the
//! CSV writer for absolute paths run in the virtualenv made by
//! `bash tests/python/setup-env.sh` (`<repo>/.venv`, or `$BCD_TEST_VENV`).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bcd::{CreateOptions, Dataset};
use serde_json::{json, Value};

use bcd_test_support::{hex, read_all, reference_batch, tree_snapshot, unhex};

mod common;
use common::*;

// ---------------------------------------------------------------------------
// Helpers: running bcd
// ---------------------------------------------------------------------------

/// Runs bcd in `dir` (default: the test's working directory).
fn bcd_in<S: AsRef<OsStr>>(dir: Option<&Path>, args: &[S]) -> Run {
    finish(spawn(args, false, dir), &show(args))
}

/// Asserts a clean failure: exit status 1 and one "bcd: " line, never a panic.
fn assert_one_clean_error(run: &Run, what: &str) {
    assert_clean_failure(run, what);
    assert_eq!(
        run.stderr.trim_end().lines().count(),
        1,
        "bcd {what}: more than one line: {}",
        run.stderr
    );
}

/// `bcd ingest SOURCES --into DATASET --quiet EXTRA...`.
fn ingest_args(sources: &[String], into: &Path, extra: &[String]) -> Vec<String> {
    let mut args = vec!["ingest".to_owned()];
    args.extend_from_slice(sources);
    args.extend([
        "--into".to_owned(),
        s(into).to_owned(),
        "--quiet".to_owned(),
    ]);
    args.extend_from_slice(extra);
    args
}

/// Runs an ingest with `--json` in `dir`; asserts success; returns the summary.
fn ingest_in(dir: Option<&Path>, sources: &[String], into: &Path, extra: &[String]) -> Value {
    let mut args = ingest_args(sources, into, extra);
    args.push("--json".into());
    let run = bcd_in(dir, &args);
    assert!(
        run.status.success(),
        "bcd {} failed ({:?}): {}",
        show(&args),
        run.status,
        run.stderr
    );
    serde_json::from_slice(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "bcd {}: summary is not JSON ({e}): {}",
            show(&args),
            String::from_utf8_lossy(&run.stdout)
        )
    })
}

fn ingest(sources: &[String], into: &Path, extra: &[String]) -> Value {
    ingest_in(None, sources, into, extra)
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

// ---------------------------------------------------------------------------
// Helpers: datasets, snapshots
// ---------------------------------------------------------------------------

/// A dataset holding one record that no fixture has, keyed or not, as a failed
/// ingest must leave it.
fn existing_dataset(dir: &Path, keyed: bool) -> PathBuf {
    let path = dir.join(format!(
        "existing-{}",
        if keyed { "keyed" } else { "keyless" }
    ));
    if !path.exists() {
        let options = CreateOptions {
            keyed,
            ..Default::default()
        };
        let mut dataset = Dataset::create(&path, options).unwrap();
        match keyed {
            true => dataset.extend([(b"already here", b"before")]).unwrap(),
            false => dataset.extend_values([b"before"]).unwrap(),
        };
    }
    path
}

/// Asserts that `bcd ingest SOURCES EXTRA` fails cleanly, with every one of
/// `fragments` in its message, both into a new path (which must not be created)
/// and into an existing dataset of the right kind (which must stay byte-identical).
/// Returns the first message.
fn assert_fails_cleanly(
    tmp: &Path,
    sources: &[String],
    extra: &[String],
    keyed: bool,
    fragments: &[String],
) -> String {
    let fresh = tmp.join("never-created");
    let existing = existing_dataset(tmp, keyed);
    let before = tree_snapshot(&existing);
    let mut first = None;
    for into in [&fresh, &existing] {
        let args = ingest_args(sources, into, extra);
        let run = bcd_in(None, &args);
        let what = show(&args);
        assert_one_clean_error(&run, &what);
        for fragment in fragments {
            assert!(
                run.stderr.contains(fragment.as_str()),
                "bcd {what}: the message lacks {fragment:?}: {}",
                run.stderr
            );
        }
        first.get_or_insert(run.stderr);
    }
    assert!(
        !fresh.exists(),
        "a failed ingest created {}",
        fresh.display()
    );
    assert_eq!(
        tree_snapshot(&existing),
        before,
        "a failed ingest ({sources:?} {extra:?}) changed the existing dataset"
    );
    first.unwrap()
}

// ---------------------------------------------------------------------------
// Helpers: fixtures and expectations
// ---------------------------------------------------------------------------

fn fixtures(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(kind)
}

fn fixture(kind: &str, name: &str) -> String {
    s(&fixtures(kind).join(name)).to_owned()
}

/// `fixtures/KIND/expected.json`.
fn expected(kind: &str) -> Value {
    let path = fixtures(kind).join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn json_strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// An expected.json record list (as the reference's dump prints records) as Records.
fn parse_records(records: &Value, keyed: bool) -> Records {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|record| match keyed {
            true => (
                unhex(record[0].as_str().unwrap()),
                unhex(record[1].as_str().unwrap()),
            ),
            false => (Vec::new(), unhex(record.as_str().unwrap())),
        })
        .collect()
}

/// Records as the reference's `dump` prints them.
fn as_dump(records: &Records, keyed: bool) -> Value {
    Value::Array(
        records
            .iter()
            .map(|(k, v)| match keyed {
                true => json!([hex(k), hex(v)]),
                false => json!(hex(v)),
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------------
// Helpers: checking what a dataset holds, three ways
// ---------------------------------------------------------------------------

/// A dataset and what it must hold.
struct Holds {
    dataset: PathBuf,
    keyed: bool,
    records: Records,
    what: String,
}

/// Asserts the dataset holds exactly the records, through the library (every
/// record by index, and by key), `bcd ls -0` (every key, in order) and `bcd get`
/// (first, middle and last record, by index and by key).
fn assert_holds(holds: &Holds) {
    let Holds {
        dataset,
        keyed,
        records: want,
        what,
    } = holds;
    let opened = Dataset::open(dataset).unwrap();
    assert_eq!(opened.keyed(), *keyed, "{what}: keyed");
    assert_eq!(
        read_all(&Dataset::open(dataset).unwrap()),
        *want,
        "{what}: records read by the library"
    );
    if *keyed {
        for (key, value) in want {
            assert_eq!(
                opened.get(key).unwrap().as_deref(),
                Some(&value[..]),
                "{what}: get({key:?}) through the library"
            );
        }
    }
    let listed = ok(&["ls", s(dataset), "-0"]);
    let mut expected_list = Vec::new();
    for (i, (key, _)) in want.iter().enumerate() {
        match keyed {
            true => expected_list.extend_from_slice(key),
            false => expected_list.extend_from_slice(i.to_string().as_bytes()),
        }
        expected_list.push(0);
    }
    assert_eq!(listed, expected_list, "{what}: bcd ls -0");
    let mut sample = vec![0, want.len() / 2, want.len().saturating_sub(1)];
    sample.dedup();
    for i in sample.into_iter().filter(|&i| i < want.len()) {
        let (key, value) = &want[i];
        let by_index = ok(&["get", s(dataset), "--index", &i.to_string()]);
        assert_eq!(&by_index, value, "{what}: bcd get --index {i}");
        if *keyed && !key.is_empty() {
            let by_key = ok(&["get", s(dataset), "--hex", &hex(key)]);
            assert_eq!(&by_key, value, "{what}: bcd get --hex {}", hex(key));
        }
    }
}

/// `reference.py 0.3.0 dump` of every dataset, in one process (each start costs
/// about 0.3 s).
fn reference_dumps(datasets: &[&Path]) -> Vec<Value> {
    let steps: Vec<Value> = datasets
        .iter()
        .map(|d| json!({"command": "dump", "path": s(d)}))
        .collect();
    reference_batch("0.3.0", &steps)
}

/// Checks every dataset with [`assert_holds`], then all of them through the
/// Python reference in one process.
fn assert_all_hold(all: &[Holds]) {
    for holds in all {
        assert_holds(holds);
    }
    let paths: Vec<&Path> = all.iter().map(|h| h.dataset.as_path()).collect();
    for (holds, dump) in all.iter().zip(reference_dumps(&paths)) {
        assert_eq!(dump["keyed"], json!(holds.keyed), "{}: keyed", holds.what);
        assert_eq!(
            dump["records"],
            as_dump(&holds.records, holds.keyed),
            "{}: the Python reference reads other records",
            holds.what
        );
    }
}

/// Expected summary counts of an ingest: records written, `skipped_members`.
fn assert_summary(summary: &Value, records: usize, skipped_members: Value, what: &str) {
    assert_eq!(
        summary["records"],
        json!(records),
        "{what}: records in {summary}"
    );
    assert_eq!(
        summary["skipped_members"], skipped_members,
        "{what}: skipped_members in {summary}"
    );
}

/// Ingests every case of `cases` that has "records" into a dataset of its own
/// under `tmp`, checks the summary, and returns what each dataset must hold.
fn ingest_cases(
    tmp: &Path,
    kind: &str,
    cases: &[&Value],
    sources: impl Fn(&Value) -> Vec<String>,
    extra: impl Fn(&Value) -> Vec<String>,
) -> Vec<Holds> {
    let mut all = Vec::new();
    for (n, case) in cases.iter().enumerate() {
        let keyed = case["keyed"].as_bool().unwrap_or(true);
        let want = parse_records(&case["records"], keyed);
        let dataset = tmp.join(format!("{kind}-{n}"));
        let (sources, extra) = (sources(case), extra(case));
        let what = format!("{kind} {sources:?} {extra:?}");
        let summary = ingest(&sources, &dataset, &extra);
        let skipped = case["skipped_nulls"].as_u64().unwrap_or(0);
        let members = match skipped {
            0 => json!({}),
            n => json!({"row with a null": n}),
        };
        assert_summary(&summary, want.len(), members, &what);
        assert_eq!(summary["skipped"], json!(0), "{what}: duplicates skipped");
        assert_eq!(summary["created"], json!(true), "{what}: created");
        all.push(Holds {
            dataset,
            keyed,
            records: want,
            what,
        });
    }
    all
}

/// The cases that must succeed.
fn with_records(cases: &[Value]) -> Vec<&Value> {
    cases
        .iter()
        .filter(|c| c.get("records").is_some())
        .collect()
}

/// The cases that must fail.
fn with_errors(cases: &[Value]) -> Vec<&Value> {
    cases.iter().filter(|c| c.get("error").is_some()).collect()
}

/// The fixture Parquet files of a case, as paths.
fn parquet_sources(case: &Value) -> Vec<String> {
    json_strings(&case["files"])
        .iter()
        .map(|f| fixture("parquet", f))
        .collect()
}

/// A case's source options, as given to `bcd ingest`.
fn case_args(case: &Value) -> Vec<String> {
    json_strings(&case["args"])
}

/// A copy of fixture `name` with `edit` applied, written under `tmp` as `as_name`.
fn edited(
    tmp: &Path,
    kind: &str,
    name: &str,
    as_name: &str,
    edit: impl Fn(&mut Vec<u8>),
) -> String {
    let mut bytes = std::fs::read(fixtures(kind).join(name)).unwrap();
    edit(&mut bytes);
    let path = tmp.join(as_name);
    std::fs::write(&path, bytes).unwrap();
    s(&path).to_owned()
}

// ---------------------------------------------------------------------------
// Helpers: per source
// ---------------------------------------------------------------------------

/// The number N in "rows from N" of a message.
fn rows_from(message: &str) -> u64 {
    let rest = message
        .split("rows from ")
        .nth(1)
        .unwrap_or_else(|| panic!("no 'rows from' in {message}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// The fixture TFRecord files of a case, as paths.
fn tfrecord_sources(case: &Value) -> Vec<String> {
    json_strings(&case["files"])
        .iter()
        .map(|f| fixture("tfrecord", f))
        .collect()
}

/// Decompresses a GZIP file (for editing the TFRecord stream inside).
fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Compresses a stream as one GZIP member, as TensorFlow's GZIP option does.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A CSV case's options, with "root" (relative to fixtures/csv) as --root DIR.
fn csv_extra(case: &Value) -> Vec<String> {
    let mut args = case_args(case);
    if let Some(root) = case["root"].as_str() {
        args.extend([
            "--root".to_owned(),
            s(&fixtures("csv").join(root)).to_owned(),
        ]);
    }
    args
}

/// The nightly-append command's options: keyed by id, the image bytes as values,
/// ids seen before skipped.
fn nightly_args() -> Vec<String> {
    strings(&[
        "--key-column",
        "id",
        "--value-column",
        "image",
        "--on-duplicate",
        "skip",
    ])
}

/// The records a fixture dump holds, from expected.json.
fn dump_records(name: &str) -> Records {
    let cases = expected("parquet")["cases"].as_array().unwrap().clone();
    let case = cases
        .iter()
        .find(|c| {
            c["files"] == json!([name])
                && c["args"] == json!(["--value-column", "image", "--key-column", "id"])
        })
        .unwrap_or_else(|| panic!("{name} is not in expected.json"));
    parse_records(&case["records"], true)
}

/// Deterministic bytes (xorshift), incompressible, so ingest stores them quickly
/// and the run spreads over many shards.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes a Parquet file of `ids` and 4 KiB images with the Rust parquet crate.
fn write_big_parquet(path: &Path, ids: &[i64]) -> Records {
    use arrow_array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
    let images: Vec<Vec<u8>> = ids.iter().map(|&id| noise(id as u64, 4096)).collect();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "image",
            Arc::new(BinaryArray::from_iter_values(images.iter())) as ArrayRef,
        ),
    ])
    .unwrap();
    let file = std::fs::File::create(path).unwrap();
    let properties = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(250))
        .build();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    ids.iter()
        .map(|id| id.to_string().into_bytes())
        .zip(images)
        .collect()
}

/// A shard file name ({n:06}.bin / .idx) and its number.
fn shard_number(name: &str) -> Option<u64> {
    let (stem, extension) = name.rsplit_once('.')?;
    (matches!(extension, "bin" | "idx")
        && stem.len() >= 6
        && stem.bytes().all(|b| b.is_ascii_digit()))
    .then(|| stem.parse().ok())
    .flatten()
}

// ---------------------------------------------------------------------------
// Parquet
// ---------------------------------------------------------------------------

/// The value-types.parquet cases: every value column type (binary, large_binary,
/// string, large_string, fixed_size_binary, binary_view, string_view,
/// struct<bytes, path>, dictionary<binary>) and every key type (binary, strings,
/// string_view, fixed_size_binary, signed and unsigned integers as decimal text,
/// dictionary<string>), keyed and keyless.
#[test]
fn parquet_every_value_and_key_type_is_ingested_as_pyarrow_wrote_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("parquet")["cases"].as_array().unwrap().clone();
    let cases: Vec<&Value> = with_records(&cases)
        .into_iter()
        .filter(|c| c["files"] == json!(["value-types.parquet"]))
        .collect();
    assert_eq!(
        cases.len(),
        20,
        "value-types.parquet cases in expected.json"
    );
    let all = ingest_cases(tmp.path(), "parquet", &cases, parquet_sources, case_args);
    assert_all_hold(&all);
}

/// Uncompressed, snappy, gzip, zstd, lz4 and brotli pages; several row groups;
/// v2 data pages with batches crossing row groups; page checksums; two files in
/// one run; dictionary-encoded string keys and integer keys.
#[test]
fn parquet_every_page_codec_and_row_group_layout_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("parquet");
    let files = &expected["files"];
    for codec in ["none", "snappy", "gzip", "zstd", "lz4", "brotli"] {
        let file = &files[format!("codec-{codec}.parquet")];
        let want = match codec {
            "none" => "UNCOMPRESSED".to_owned(),
            other => other.to_uppercase(),
        };
        assert_eq!(file["codecs"], json!([want]), "codec-{codec}.parquet");
        assert_eq!(file["row_groups"], json!(3), "codec-{codec}.parquet");
    }
    assert_eq!(files["many-row-groups.parquet"]["row_groups"], json!(11));
    let cases = expected["cases"].as_array().unwrap().clone();
    let cases: Vec<&Value> = with_records(&cases)
        .into_iter()
        .filter(|c| {
            let files = json_strings(&c["files"]);
            files.iter().any(|f| {
                f.starts_with("codec-")
                    || f == "many-row-groups.parquet"
                    || f == "checksummed.parquet"
            })
        })
        .collect();
    assert_eq!(
        cases.len(),
        10,
        "codec and row group cases in expected.json"
    );
    let all = ingest_cases(tmp.path(), "parquet", &cases, parquet_sources, case_args);
    assert_all_hold(&all);
}

/// A `datasets` export (struct<bytes: binary, path: string> image, ClassLabel
/// label, the `huggingface` schema metadata): the image bytes are the values.
#[test]
fn parquet_hugging_face_image_export_stores_the_image_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("parquet");
    let file = &expected["files"]["hf-images.parquet"];
    assert_eq!(file["schema_metadata_keys"], json!(["huggingface"]));
    assert!(
        file["arrow_schema"]
            .as_str()
            .unwrap()
            .starts_with("image: struct<bytes: binary, path: string>"),
        "{file}"
    );
    let cases = expected["cases"].as_array().unwrap().clone();
    let cases: Vec<&Value> = with_records(&cases)
        .into_iter()
        .filter(|c| c["files"] == json!(["hf-images.parquet"]))
        .collect();
    assert_eq!(cases.len(), 1);
    let all = ingest_cases(tmp.path(), "parquet", &cases, parquet_sources, case_args);
    assert_all_hold(&all);

    // The label is an integer column: a value column must hold bytes.
    let message = assert_fails_cleanly(
        tmp.path(),
        &[fixture("parquet", "hf-images.parquet")],
        &strings(&["--value-column", "label"]),
        false,
        &strings(&[
            "hf-images.parquet",
            "column \"label\" has type Int64",
            "expected binary",
        ]),
    );
    assert!(message.contains("struct<bytes: binary>"), "{message}");
}

/// A null value or key stops the run naming the file, the row and the column,
/// unless --skip-nulls, which skips such rows and counts them in the summary.
#[test]
fn parquet_null_fails_naming_file_row_and_column_unless_skip_nulls_counts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("parquet")["cases"].as_array().unwrap().clone();
    let nulls: Vec<Value> = cases
        .iter()
        .filter(|c| c["files"] == json!(["nulls.parquet"]))
        .cloned()
        .collect();
    let errors = with_errors(&nulls);
    assert_eq!(errors.len(), 4, "null error cases in expected.json");
    for case in errors {
        let error = &case["error"];
        let message = assert_fails_cleanly(
            tmp.path(),
            &parquet_sources(case),
            &case_args(case),
            case["keyed"].as_bool().unwrap(),
            &[
                fixture("parquet", "nulls.parquet"),
                format!("row {}", error["row"]),
                format!("column {} is null", error["column"]),
                "--skip-nulls".to_owned(),
            ],
        );
        assert!(message.contains(": row "), "{message}");
    }
    let skipping = with_records(&nulls);
    assert_eq!(skipping.len(), 4, "--skip-nulls cases in expected.json");
    assert!(skipping
        .iter()
        .all(|c| c["skipped_nulls"].as_u64().unwrap() > 0));
    let all = ingest_cases(tmp.path(), "parquet", &skipping, parquet_sources, case_args);
    assert_all_hold(&all);
}

#[test]
fn parquet_missing_or_mistyped_column_fails_leaving_the_dataset_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let nulls = vec![fixture("parquet", "nulls.parquet")];
    let columns = "[\"id\", \"data\", \"image\", \"clean\"]";
    for (args, keyed, fragments) in [
        (
            vec!["--value-column", "nope"],
            false,
            vec!["no column \"nope\"", columns],
        ),
        (
            vec!["--value-column", "data", "--key-column", "nope"],
            true,
            vec!["no column \"nope\"", columns],
        ),
        (
            // A struct is a value type (Hugging Face Image) but not a key type.
            vec!["--value-column", "clean", "--key-column", "image"],
            true,
            vec![
                "column \"image\" has type Struct",
                "expected a string, binary or integer column",
            ],
        ),
    ] {
        let mut fragments = strings(&fragments);
        fragments.push(nulls[0].clone());
        assert_fails_cleanly(tmp.path(), &nulls, &strings(&args), keyed, &fragments);
    }
    // An integer column is a key type but not a value type.
    assert_fails_cleanly(
        tmp.path(),
        &[fixture("parquet", "value-types.parquet")],
        &strings(&["--value-column", "key_int64", "--key-column", "name"]),
        true,
        &strings(&["value-types.parquet", "column \"key_int64\" has type Int64"]),
    );
}

#[test]
fn parquet_corrupt_file_fails_cleanly_leaving_the_dataset_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("parquet");
    let key = strings(&["--value-column", "value", "--key-column", "key"]);
    let original = std::fs::read(fixtures("parquet").join("codec-gzip.parquet")).unwrap();

    // Truncated anywhere, the footer is gone or cut.
    for keep in [
        0,
        5,
        original.len() / 2,
        original.len() - 8,
        original.len() - 1,
    ] {
        let name = format!("truncated-{keep}.parquet");
        let path = edited(tmp.path(), "parquet", "codec-gzip.parquet", &name, |b| {
            b.truncate(keep)
        });
        assert_fails_cleanly(
            tmp.path(),
            &[path],
            &key,
            true,
            &[name, "file metadata".into(), "truncated or corrupt".into()],
        );
    }

    // A flipped byte inside a gzip page (row group 1, rows 16..31): the deflate
    // stream or its CRC32 no longer checks.
    let chunk = &expected["files"]["codec-gzip.parquet"]["value_chunks"][1];
    assert_eq!(chunk[0], json!(1));
    let (start, length) = (chunk[1].as_u64().unwrap(), chunk[2].as_u64().unwrap());
    for at in [start + length / 2, start + length * 9 / 10] {
        let name = format!("flipped-gzip-page-{at}.parquet");
        let path = edited(tmp.path(), "parquet", "codec-gzip.parquet", &name, |b| {
            b[at as usize] ^= 0x55
        });
        let message = assert_fails_cleanly(
            tmp.path(),
            &[path],
            &key,
            true,
            &[name, "rows from ".into(), "truncated or corrupt".into()],
        );
        assert!(rows_from(&message) <= 16, "{message}");
    }

    // A flipped byte in an uncompressed page that carries a CRC (pyarrow's
    // write_page_checksum): the checksum is verified.
    let marker = expected["flip_marker"]
        .as_str()
        .unwrap()
        .as_bytes()
        .to_vec();
    let path = edited(
        tmp.path(),
        "parquet",
        "checksummed.parquet",
        "flipped-crc.parquet",
        |b| {
            let at = b.windows(marker.len()).position(|w| w == marker).unwrap();
            b[at + 3] ^= 0x01;
        },
    );
    assert_fails_cleanly(
        tmp.path(),
        &[path],
        &key,
        true,
        &strings(&[
            "flipped-crc.parquet",
            "rows from 0",
            "CRC checksum mismatch",
        ]),
    );

    // Found by flipping every byte of the fixtures: a column chunk offset made
    // negative in the footer, and definition levels that disagree with their
    // page, made the parquet crate panic.
    let path = edited(
        tmp.path(),
        "parquet",
        "checksummed.parquet",
        "negative-offset.parquet",
        |b| b[348] ^= 0xff,
    );
    assert_fails_cleanly(
        tmp.path(),
        &[path],
        &key,
        true,
        &strings(&[
            "negative-offset.parquet",
            "file metadata",
            "is not inside the",
        ]),
    );
    let path = edited(
        tmp.path(),
        "parquet",
        "codec-snappy.parquet",
        "bad-levels.parquet",
        |b| b[476] ^= 0xff,
    );
    assert_fails_cleanly(
        tmp.path(),
        &[path],
        &strings(&["--value-column", "value", "--key-column", "id"]),
        true,
        &strings(&["bad-levels.parquet", "rows from 0", "truncated or corrupt"]),
    );
}

/// Without --key-column a Parquet source is keyless: into a new dataset that
/// makes a keyless one, but a keyed dataset refuses it and says what to pass.
#[test]
fn keyless_parquet_source_into_a_keyed_dataset_fails_telling_to_pass_key_column() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("nightly");
    let day2 = vec![fixture("parquet", "dump-day2.parquet")];
    ingest(
        &[fixture("parquet", "dump-day1.parquet")],
        &dataset,
        &nightly_args(),
    );
    let before = tree_snapshot(&dataset);
    let args = ingest_args(&day2, &dataset, &strings(&["--value-column", "image"]));
    let run = bcd_in(None, &args);
    assert_one_clean_error(&run, &show(&args));
    for fragment in [
        s(&dataset),
        "is a keyed dataset but the source has no keys",
        "pass a key (e.g. --key-column)",
    ] {
        assert!(
            run.stderr.contains(fragment),
            "lacks {fragment:?}: {}",
            run.stderr
        );
    }
    assert_eq!(
        tree_snapshot(&dataset),
        before,
        "the refused ingest changed the dataset"
    );

    let keyless = tmp.path().join("keyless");
    let summary = ingest(&day2, &keyless, &strings(&["--value-column", "image"]));
    assert_summary(&summary, 10, json!({}), "keyless day 2");
    let values: Records = dump_records("dump-day2.parquet")
        .into_iter()
        .map(|(_, v)| (Vec::new(), v))
        .collect();
    assert_all_hold(&[Holds {
        dataset: keyless,
        keyed: false,
        records: values,
        what: "day 2 without --key-column".into(),
    }]);
}

// ---------------------------------------------------------------------------
// TFRecord
// ---------------------------------------------------------------------------

/// Whole records, one bytes_list feature, and keyed by another, from plain and
/// GZIP files and both in one run; records that are not Examples as they are.
#[test]
fn tfrecord_plain_and_gzip_records_are_ingested_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("tfrecord")["cases"].as_array().unwrap().clone();
    let cases = with_records(&cases);
    assert_eq!(
        cases.len(),
        9,
        "tfrecord cases with records in expected.json"
    );
    let all = ingest_cases(tmp.path(), "tfrecord", &cases, tfrecord_sources, case_args);
    assert_all_hold(&all);
}

#[test]
fn tfrecord_missing_or_non_bytes_feature_fails_naming_record_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("tfrecord")["cases"].as_array().unwrap().clone();
    let errors = with_errors(&cases);
    assert_eq!(errors.len(), 4, "tfrecord error cases in expected.json");
    for case in errors {
        let error = &case["error"];
        let feature = error["feature"].as_str().unwrap();
        let mut fragments = vec![
            fixture("tfrecord", error["file"].as_str().unwrap()),
            format!("record {} at byte {}", error["record"], error["offset"]),
        ];
        match error["reason"].as_str().unwrap() {
            "missing" => fragments.push(format!("the Example has no feature {feature:?}")),
            "int64_list" => fragments.push(format!(
                "feature {feature:?} is an int64_list, not a bytes_list"
            )),
            "float_list" => fragments.push(format!(
                "feature {feature:?} is a float_list, not a bytes_list"
            )),
            other => panic!("unexpected reason {other:?} in expected.json"),
        }
        assert_fails_cleanly(
            tmp.path(),
            &tfrecord_sources(case),
            &case_args(case),
            case["keyed"].as_bool().unwrap(),
            &fragments,
        );
    }
    // Records that are not Examples have no features.
    assert_fails_cleanly(
        tmp.path(),
        &[fixture("tfrecord", "not-examples.tfrecord")],
        &strings(&["--feature", "image/encoded"]),
        false,
        &strings(&[
            "not-examples.tfrecord",
            "record 0 at byte 0",
            "not a valid tf.train.Example",
        ]),
    );
}

/// Truncations and flipped bytes, in plain files and inside GZIP streams: the
/// message names the file, the record and its byte offset (in the decompressed
/// stream for GZIP), and what is wrong.
#[test]
fn tfrecord_truncated_or_flipped_fails_naming_record_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let expected = expected("tfrecord");
    let frame = |file: &str, n: usize| -> (usize, usize) {
        let frame = &expected["files"][file]["frames"][n];
        (
            frame[0].as_u64().unwrap() as usize,
            frame[1].as_u64().unwrap() as usize,
        )
    };
    let keyed = strings(&[
        "--feature",
        "image/encoded",
        "--key-feature",
        "image/filename",
    ]);
    let whole: Vec<String> = Vec::new();

    let plain = "examples.tfrecord";
    let (off1, _) = frame(plain, 1);
    let (off2, _) = frame(plain, 2);
    let (off3, len3) = frame(plain, 3);
    let (off4, len4) = frame(plain, 4);
    let (off5, len5) = frame(plain, 5);
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;
    let plain_cases: Vec<(&str, Edit, String, String)> = vec![
        (
            "cut-data",
            Box::new(move |b| b.truncate(off3 + 12 + 10)),
            format!("record 3 at byte {off3}"),
            format!("truncated: 10 of {len3} data bytes"),
        ),
        (
            "cut-header",
            Box::new(move |b| b.truncate(off2 + 5)),
            format!("record 2 at byte {off2}"),
            "truncated: 5 of the 12 header bytes".into(),
        ),
        (
            "cut-crc",
            Box::new(move |b| b.truncate(b.len() - 2)),
            format!("record 5 at byte {off5}"),
            "truncated: 2 of the 4 checksum bytes".into(),
        ),
        (
            "flipped-data",
            Box::new(move |b| b[off4 + 12 + len4 / 2] ^= 0x01),
            format!("record 4 at byte {off4}"),
            "data checksum mismatch".into(),
        ),
        (
            "flipped-length",
            Box::new(move |b| b[off1] ^= 0x01),
            format!("record 1 at byte {off1}"),
            "length checksum mismatch".into(),
        ),
    ];
    assert_eq!(
        off5 + 16 + len5,
        std::fs::metadata(fixtures("tfrecord").join(plain))
            .unwrap()
            .len() as usize
    );
    for (label, edit, location, reason) in plain_cases {
        let name = format!("{label}.tfrecord");
        let path = edited(tmp.path(), "tfrecord", plain, &name, edit);
        for args in [&keyed, &whole] {
            let keyed = !args.is_empty();
            let fragments = [name.clone(), location.clone(), reason.clone()];
            assert_fails_cleanly(
                tmp.path(),
                std::slice::from_ref(&path),
                args,
                keyed,
                &fragments,
            );
        }
    }

    // GZIP: edits of the decompressed stream, compressed again, and edits of the
    // compressed file itself.
    let zipped = "examples.tfrecord.gz";
    let (off3, len3) = frame(zipped, 3);
    let (off6, len6) = frame(zipped, 6);
    let (off7, _) = frame(zipped, 7);
    let decompressed = |edit: Edit| -> Edit {
        Box::new(move |b: &mut Vec<u8>| {
            let mut stream = gunzip(b);
            edit(&mut stream);
            *b = gzip(&stream);
        })
    };
    let gzip_cases: Vec<(&str, Edit, String, String)> = vec![
        (
            "cut-data",
            decompressed(Box::new(move |b| b.truncate(off3 + 12 + 10))),
            format!("record 3 at byte {off3} of the decompressed stream"),
            format!("truncated: 10 of {len3} data bytes"),
        ),
        (
            "flipped-data",
            decompressed(Box::new(move |b| b[off6 + 12 + len6 / 3] ^= 0x80)),
            format!("record 6 at byte {off6} of the decompressed stream"),
            "data checksum mismatch".into(),
        ),
        (
            "cut-compressed",
            Box::new(|b| b.truncate(b.len() / 2)),
            "of the decompressed stream".into(),
            "truncated or corrupt".into(),
        ),
        (
            // The gzip trailer's CRC32 of the stream: read after the last record.
            "flipped-gzip-crc",
            Box::new(|b| {
                let at = b.len() - 6;
                b[at] ^= 0x01
            }),
            format!(
                "record 8 at byte {} of the decompressed stream",
                off7 + 16 + frame(zipped, 7).1
            ),
            "truncated or corrupt".into(),
        ),
    ];
    for (label, edit, location, reason) in gzip_cases {
        let name = format!("{label}.tfrecord.gz");
        let path = edited(tmp.path(), "tfrecord", zipped, &name, edit);
        for args in [&keyed, &whole] {
            let keyed = !args.is_empty();
            let fragments = [name.clone(), location.clone(), reason.clone()];
            assert_fails_cleanly(
                tmp.path(),
                std::slice::from_ref(&path),
                args,
                keyed,
                &fragments,
            );
        }
    }
}

// ---------------------------------------------------------------------------
// CSV
// ---------------------------------------------------------------------------

/// Quoted paths with commas, spaces and quotes; minimal and all-quoted CSVs, CRLF
/// and LF; a TSV; a key column; --root. Paths resolve against the CSV's
/// directory, not the working directory, and keys are the paths as written.
#[test]
fn csv_lists_of_quoted_paths_are_ingested_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("csv")["cases"].as_array().unwrap().clone();
    let cases = with_records(&cases);
    assert_eq!(cases.len(), 5, "csv cases with records in expected.json");
    let mut all = ingest_cases(
        tmp.path(),
        "csv",
        &cases,
        |case| vec![fixture("csv", case["csv"].as_str().unwrap())],
        csv_extra,
    );

    // The same list named relative to the working directory, run from there.
    let dataset = tmp.path().join("relative");
    let summary = ingest_in(
        Some(&fixtures("csv")),
        &strings(&["list.csv"]),
        &dataset,
        &[],
    );
    assert_summary(&summary, 8, json!({}), "list.csv from its directory");
    all.push(Holds {
        dataset,
        keyed: true,
        records: all[0].records.clone(),
        what: "list.csv from its directory".into(),
    });
    assert_all_hold(&all);
}

/// Absolute paths cannot be committed: Python's csv module writes a list of files
/// made here, under a directory whose name needs quoting.
#[test]
fn csv_absolute_paths_are_read_and_kept_as_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data, \"quoted\" dir");
    std::fs::create_dir(&dir).unwrap();
    let mut want = Records::new();
    for (name, value) in [
        ("a b.bin", &b"first"[..]),
        ("c,d.bin", b""),
        ("e\"f.bin", b"\x00\xff third"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, value).unwrap();
        want.push((s(&path).as_bytes().to_vec(), value.to_vec()));
    }
    let list = tmp.path().join("elsewhere").join("absolute.csv");
    std::fs::create_dir(list.parent().unwrap()).unwrap();
    let paths: Vec<String> = want
        .iter()
        .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    run_python(
        "import csv, sys\n\
         with open(sys.argv[1], 'w', newline='') as f:\n\
         \x20   w = csv.writer(f)\n\
         \x20   w.writerow(['label', 'path'])\n\
         \x20   w.writerows([[str(i), p] for i, p in enumerate(sys.argv[2:])])\n",
        &[
            &[s(&list)],
            &paths.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ]
        .concat(),
    );
    let written = std::fs::read_to_string(&list).unwrap();
    assert!(
        written.contains("\"\""),
        "the list quotes the quotes: {written}"
    );
    let dataset = tmp.path().join("absolute");
    let summary = ingest(&[s(&list).to_owned()], &dataset, &[]);
    assert_summary(&summary, 3, json!({}), "absolute.csv");
    assert_all_hold(&[Holds {
        dataset,
        keyed: true,
        records: want,
        what: "absolute.csv".into(),
    }]);
}

#[test]
fn csv_row_naming_a_missing_file_fails_naming_the_line_and_path() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = expected("csv")["cases"].as_array().unwrap().clone();
    let errors = with_errors(&cases);
    assert_eq!(errors.len(), 1);
    let error = &errors[0]["error"];
    let csv = fixture("csv", error["csv"].as_str().unwrap());
    assert_fails_cleanly(
        tmp.path(),
        std::slice::from_ref(&csv),
        &[],
        true,
        &[
            format!("{csv}: line {}", error["line"]),
            format!("cannot read {}", error["path"]),
            "No such file or directory".into(),
        ],
    );
    // A column that is not there names the columns found.
    assert_fails_cleanly(
        tmp.path(),
        &[fixture("csv", "list.tsv")],
        &[],
        true,
        &strings(&[
            "list.tsv: line 1 (header)",
            "no column \"path\"",
            "--delimiter",
        ]),
    );
}

// ---------------------------------------------------------------------------
// The nightly-append workflow
// ---------------------------------------------------------------------------

/// Day 2 overlaps day 1 (ids 1006..1009, with other images): only its new ids are
/// appended, the first images kept; running it again changes nothing.
#[test]
fn nightly_append_skips_known_ids_and_adds_only_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("nightly");
    let (day1, day2) = (
        dump_records("dump-day1.parquet"),
        dump_records("dump-day2.parquet"),
    );
    let known: Vec<&Vec<u8>> = day1.iter().map(|(k, _)| k).collect();
    let new: Records = day2
        .iter()
        .filter(|(k, _)| !known.contains(&k))
        .cloned()
        .collect();
    assert_eq!((day1.len(), day2.len(), new.len()), (10, 10, 6));

    let summary = ingest(
        &[fixture("parquet", "dump-day1.parquet")],
        &dataset,
        &nightly_args(),
    );
    assert_summary(&summary, 10, json!({}), "day 1");
    assert_eq!(
        (&summary["skipped"], &summary["created"]),
        (&json!(0), &json!(true))
    );
    let after_day1 = read_all(&Dataset::open(&dataset).unwrap());
    assert_eq!(after_day1, day1);

    let summary = ingest(
        &[fixture("parquet", "dump-day2.parquet")],
        &dataset,
        &nightly_args(),
    );
    assert_summary(&summary, 6, json!({}), "day 2");
    assert_eq!(
        (&summary["skipped"], &summary["created"]),
        (&json!(4), &json!(false))
    );
    let mut both = day1.clone();
    both.extend(new);

    let before = tree_snapshot(&dataset);
    let summary = ingest(
        &[fixture("parquet", "dump-day2.parquet")],
        &dataset,
        &nightly_args(),
    );
    assert_summary(&summary, 0, json!({}), "day 2 again");
    assert_eq!(summary["skipped"], json!(10));
    assert_eq!(
        tree_snapshot(&dataset),
        before,
        "re-running day 2 changed the dataset"
    );
    assert_all_hold(&[Holds {
        dataset,
        keyed: true,
        records: both,
        what: "day 1 then day 2".into(),
    }]);
}

/// SIGKILL in the middle of a large nightly ingest: the committed dataset is
/// byte-identical (only leftover shard files beyond the committed ones, which
/// readers ignore), and running the same command again completes it.
#[test]
#[cfg(unix)]
fn sigkilled_ingest_leaves_the_dataset_as_before_and_a_rerun_completes_it() {
    use std::os::unix::process::ExitStatusExt;

    let tmp = tempfile::tempdir().unwrap();
    let dataset = tmp.path().join("nightly");
    // Small shards (fixed when day 1 creates the dataset) spread the big run over
    // many shard files, so the test can see it is under way and far from its commit.
    let mut args = nightly_args();
    args.extend(strings(&["--max-shard-size", "256K"]));
    ingest(&[fixture("parquet", "dump-day1.parquet")], &dataset, &args);
    let day1 = dump_records("dump-day1.parquet");
    assert_eq!(read_all(&Dataset::open(&dataset).unwrap()), day1);

    // 2500 rows of 4 KiB (10 MB, about 40 shards): four ids day 1 has, then new ones.
    let big = tmp.path().join("big.parquet");
    let ids: Vec<i64> = (1000..1004).chain(2_000_000..2_002_496).collect();
    let rows = write_big_parquet(&big, &ids);
    let new: Records = rows[4..].to_vec();

    let before = tree_snapshot(&dataset).unwrap();
    let command = ingest_args(&[s(&big).to_owned()], &dataset, &nightly_args());
    let mut child = spawn(&command, false, None);
    // Kill once the run has written its fourth shard: well under way, far from
    // its commit.
    let started = Instant::now();
    let fourth = dataset.join("000004.bin");
    while !fourth.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the ingest finished ({status:?}) before it could be killed; make the file larger"
            );
        }
        assert!(started.elapsed() < TIMEOUT, "the ingest writes no shards");
        thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");

    let after = tree_snapshot(&dataset).unwrap();
    for (name, bytes) in &before {
        assert!(
            after.get(name) == Some(bytes),
            "{} changed or vanished",
            name.display()
        );
    }
    let committed = Dataset::open(&dataset).unwrap().shards();
    let leftovers: Vec<String> = after
        .keys()
        .filter(|name| !before.contains_key(*name))
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    assert!(
        leftovers.iter().any(|name| name == "000004.bin"),
        "{leftovers:?}"
    );
    for name in &leftovers {
        let leftover =
            name == ".manifest.json.tmp" || shard_number(name).is_some_and(|n| n >= committed);
        assert!(
            leftover,
            "{name} is not a leftover of an interrupted extend"
        );
    }
    assert_eq!(read_all(&Dataset::open(&dataset).unwrap()), day1);
    let verify = bcd_in(None, &["verify", s(&dataset)]);
    assert!(
        verify.status.success(),
        "bcd verify after the kill: {}",
        verify.stderr
    );

    let summary = ingest(&[s(&big).to_owned()], &dataset, &nightly_args());
    assert_summary(&summary, new.len(), json!({}), "the re-run");
    assert_eq!(summary["skipped"], json!(4));
    let mut want = day1;
    want.extend(new);
    assert_eq!(
        read_all(&Dataset::open(&dataset).unwrap()),
        want,
        "after the re-run"
    );
    let verify = bcd_in(None, &["verify", s(&dataset)]);
    assert!(
        verify.status.success(),
        "bcd verify after the re-run: {}",
        verify.stderr
    );
}
