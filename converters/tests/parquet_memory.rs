//! Parquet files that claim or hold more than memory should be asked for: a page
//! header whose `uncompressed_page_size` its bytes cannot produce, a large
//! dictionary value repeated by many rows, and large plain values. Each file is
//! written here with the `parquet` crate (and patched where it lies), and read in
//! a child process of this test binary under `prlimit --as`, so a reader that
//! allocates what a file claims fails the test instead of the machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, BinaryArray, DictionaryArray, Int32Array, RecordBatch};
use bcd_converters::parquet_source::ParquetSource;
use bcd_converters::SourceError;
use bcd_converters::TableOptions;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{FileReader, SerializedFileReader};

const MIB: usize = 1 << 20;
/// Set in a child: the file it reads.
const CHILD_FILE: &str = "BCD_TEST_PARQUET_CHILD_FILE";
/// A child that runs longer than this hangs: it is killed and the test fails.
const HANG: Duration = Duration::from_secs(120);

fn properties(dictionary: bool) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(dictionary)
        .set_dictionary_page_size_limit(64 * MIB)
        // No min/max of multi-megabyte values in the metadata.
        .set_statistics_enabled(EnabledStatistics::None)
        .build()
}

/// Writes `batches` (columns `v`, and `k` if present) to `path`.
fn write(path: &Path, dictionary: bool, batches: impl IntoIterator<Item = RecordBatch>) {
    let mut batches = batches.into_iter().peekable();
    let schema = batches.peek().expect("a batch").schema();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema, Some(properties(dictionary))).unwrap();
    for batch in batches {
        writer.write(&batch).unwrap();
    }
    writer.close().unwrap();
}

/// A value of `len` bytes that compresses well and differs by `seed`.
fn value(len: usize, seed: u8) -> Vec<u8> {
    let mut value = vec![seed; len];
    value[..8].copy_from_slice(b"VALUE-OK");
    value
}

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

/// Reads every record of `path` (value column `v`, key column `k` if `keyed`),
/// returning how many there were, checking each value as it comes.
fn read_all(path: &Path, keyed: bool) -> Result<u64, SourceError> {
    let options = TableOptions {
        value_column: "v".into(),
        key_column: keyed.then(|| "k".into()),
        skip_nulls: false,
        ..Default::default()
    };
    let mut n = 0;
    for record in ParquetSource::new(&[path.to_owned()], options)? {
        let record = record?;
        assert!(record.value.starts_with(b"VALUE-OK"), "record {n}");
        n += 1;
    }
    Ok(n)
}

/// In a child (when [`CHILD_FILE`] is set), reads the file and prints the outcome
/// as `records=N` or `error=MESSAGE`; returns true. In the parent, returns false.
fn child_reads() -> bool {
    let Some(path) = std::env::var_os(CHILD_FILE) else {
        return false;
    };
    let keyed = std::env::var_os("BCD_TEST_PARQUET_CHILD_KEYED").is_some();
    match read_all(Path::new(&path), keyed) {
        Ok(n) => println!("\n@@records={n}"),
        Err(e) => println!("\n@@error={e}"),
    }
    true
}

/// Runs this binary's test `test` in a child under an address-space limit of
/// `limit_mib`, reading `file`; returns its `records=`/`error=` line.
fn read_in_limited_child(test: &str, file: &Path, keyed: bool, limit_mib: usize) -> String {
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--as={}", limit_mib * MIB))
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_FILE, file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if keyed {
        command.env("BCD_TEST_PARQUET_CHILD_KEYED", "1");
    }
    let mut child = command.spawn().expect("run prlimit");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG {
            let _ = child.kill();
            panic!("the child reading {} hangs", file.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("@@"))
        .map(str::to_owned);
    assert!(
        output.status.success() && line.is_some(),
        "the child reading {} under a {limit_mib} MiB address-space limit failed ({}): {}{}",
        file.display(),
        output.status,
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    line.unwrap()
}

/// The offset of the first data page header of the file's first column.
fn data_page_offset(path: &Path) -> usize {
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    reader.metadata().row_group(0).column(0).data_page_offset() as usize
}

fn zigzag_varint(value: i32) -> Vec<u8> {
    let mut n = ((value << 1) ^ (value >> 31)) as u32 as u64;
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// The recipe's file: one 128 MiB value, zstd, no dictionary; returns its path and
/// a copy whose data page header claims 2^31-1 bytes uncompressed.
fn one_big_value(dir: &Path) -> (PathBuf, PathBuf) {
    let honest = dir.join("big-value.parquet");
    let values: ArrayRef = Arc::new(BinaryArray::from(vec![&value(128 * MIB, 0)[..]]));
    write(&honest, false, [batch(vec![("v", values)])]);
    let mut bytes = std::fs::read(&honest).unwrap();
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    // PageHeader: field 1 (type, i32) = 0, then field 2 (uncompressed_page_size).
    let at = data_page_offset(&honest);
    assert_eq!(&bytes[at..at + 3], [0x15, 0x00, 0x15]);
    let varint_len = 1 + bytes[at + 3..]
        .iter()
        .take_while(|b| *b & 0x80 != 0)
        .count();
    let claim = zigzag_varint(i32::MAX);
    assert_eq!(
        varint_len,
        claim.len(),
        "the claim keeps the varint's length"
    );
    bytes[at + 3..at + 3 + claim.len()].copy_from_slice(&claim);
    let lying = dir.join("lying-page-size.parquet");
    std::fs::write(&lying, bytes).unwrap();
    (honest, lying)
}

#[test]
fn a_page_claiming_2_gib_from_4_kb_is_refused_before_allocating() {
    if child_reads() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (honest, lying) = one_big_value(dir.path());
    let test = "a_page_claiming_2_gib_from_4_kb_is_refused_before_allocating";
    let outcome = read_in_limited_child(test, &lying, false, 1024);
    assert!(
        outcome.starts_with("error=")
            && outcome
                .contains("lying-page-size.parquet: row group 0, column \"v\", page at byte 4")
            && outcome.contains("claims 2147483647 bytes uncompressed"),
        "{outcome}"
    );
    // The same value, honestly declared, is read within the same limit.
    assert_eq!(
        read_in_limited_child(test, &honest, false, 1024),
        "records=1"
    );
    // In process: the error is typed, and names the file.
    let error = read_all(&lying, false).unwrap_err();
    assert!(matches!(error, SourceError::Corrupt { .. }), "{error:?}");
    // A Parquet file is a file, not an archive.
    let message = error.to_string();
    assert!(
        message.ends_with("; the file is truncated or corrupt") && !message.contains("archive"),
        "{message}"
    );
}

#[test]
fn a_page_over_the_page_limit_is_refused_whatever_its_compression() {
    // Stored uncompressed, the page holds every byte it declares.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("over-limit.parquet");
    let big = bcd_converters::parquet_source::MAX_PAGE_SIZE as usize + 1;
    let properties = WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    let values: ArrayRef = Arc::new(BinaryArray::from(vec![&value(big, 1)[..]]));
    let file = std::fs::File::create(&path).unwrap();
    let batch = batch(vec![("v", values)]);
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    drop(batch);
    match read_all(&path, false).unwrap_err() {
        SourceError::TooLarge { location, size, .. } => {
            assert!(
                location.starts_with("row group 0, column \"v\", page at byte"),
                "{location}"
            );
            assert!(size > big as u64, "{size}");
        }
        other => panic!("{other:?}"),
    }
}

/// `rows` rows referencing one dictionary value of `len` bytes, keyed 0..rows.
fn one_dictionary_value(path: &Path, len: usize, rows: i32) {
    let dictionary: ArrayRef = Arc::new(BinaryArray::from(vec![&value(len, 2)[..]]));
    let keys = Int32Array::from(vec![0; rows as usize]);
    let values: ArrayRef =
        Arc::new(DictionaryArray::<Int32Type>::try_new(keys, dictionary).unwrap());
    let ids: ArrayRef = Arc::new(Int32Array::from((0..rows).collect::<Vec<_>>()));
    write(path, true, [batch(vec![("k", ids), ("v", values)])]);
}

#[test]
fn a_dictionary_value_repeated_by_every_row_is_read_within_a_memory_budget() {
    if child_reads() {
        return;
    }
    let test = "a_dictionary_value_repeated_by_every_row_is_read_within_a_memory_budget";
    let dir = tempfile::tempdir().unwrap();
    // 256-row batches expanded in full took 2 GiB each, past the i32 offsets.
    let path = dir.path().join("dictionary-8mib.parquet");
    one_dictionary_value(&path, 8 * MIB, 512);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 64 << 10, "{size} bytes");
    assert_eq!(read_in_limited_child(test, &path, true, 512), "records=512");
}

/// `rows` rows of a small value `v` and a field `f` from a dictionary of short
/// entries and one of `len` bytes, which every third row repeats.
fn field_with_a_long_dictionary_entry(path: &Path, len: usize, rows: i32) {
    let long = value(len, 3);
    let dictionary: ArrayRef = Arc::new(BinaryArray::from(vec![&b"a"[..], &long, b"bc"]));
    let keys = Int32Array::from((0..rows).map(|i| i % 3).collect::<Vec<_>>());
    let fields: ArrayRef =
        Arc::new(DictionaryArray::<Int32Type>::try_new(keys, dictionary).unwrap());
    let values: ArrayRef = Arc::new(BinaryArray::from_iter_values(
        (0..rows).map(|i| format!("VALUE-OK {i}")),
    ));
    let batch = batch(vec![("v", values), ("f", fields)]);
    // Without the Arrow schema in the file, `f` is read as plain binary (each
    // row a copy of its entry), as a file written by another tool is.
    let options = ArrowWriterOptions::new()
        .with_properties(properties(true))
        .with_skip_arrow_metadata(true);
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new_with_options(file, batch.schema(), options).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn a_long_dictionary_entry_of_a_field_column_is_read_within_a_memory_budget() {
    if child_reads() {
        return;
    }
    let test = "a_long_dictionary_entry_of_a_field_column_is_read_within_a_memory_budget";
    let dir = tempfile::tempdir().unwrap();
    // A field column keeps its type, so each row is a copy of its entry: a
    // batch sized by the short entries (or by the rows' average) would hold
    // hundreds of copies of the 8 MiB one.
    let path = dir.path().join("field-dictionary-8mib.parquet");
    field_with_a_long_dictionary_entry(&path, 8 * MIB, 1536);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 64 << 10, "{size} bytes");
    assert_eq!(
        read_in_limited_child(test, &path, false, 512),
        "records=1536"
    );
}

#[test]
fn large_plain_values_are_read_in_batches_sized_by_bytes() {
    if child_reads() {
        return;
    }
    let test = "large_plain_values_are_read_in_batches_sized_by_bytes";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain-8mib.parquet");
    // 300 values of 8 MiB, written 4 at a time: 256 of them are 2 GiB.
    let batches = (0..75).map(|i| {
        let values: Vec<Vec<u8>> = (0..4).map(|j| value(8 * MIB, (4 * i + j) as u8)).collect();
        let values: ArrayRef = Arc::new(BinaryArray::from_iter_values(values.iter()));
        batch(vec![("v", values)])
    });
    write(&path, false, batches);
    assert_eq!(
        read_in_limited_child(test, &path, false, 512),
        "records=300"
    );
}

/// A small dictionary-encoded file: 3 rows of values `a`, `b`, `a`.
fn small_dictionary_file(path: &Path) {
    let values: ArrayRef = Arc::new(BinaryArray::from(vec![
        &b"VALUE-OK a"[..],
        b"VALUE-OK b",
        b"VALUE-OK a",
    ]));
    write(path, true, [batch(vec![("v", values)])]);
}

/// The index just past the varint at `i`.
fn past_varint(bytes: &[u8], i: usize) -> usize {
    i + 1 + bytes[i..].iter().take_while(|b| *b & 0x80 != 0).count()
}

/// In the page header at `at` (fields 1-3, then the struct `field`), the index of
/// the struct's field 1 (`num_values`) varint.
fn num_values_at(bytes: &[u8], at: usize, field: u8) -> usize {
    let mut i = at;
    for _ in 0..3 {
        assert_eq!(bytes[i], 0x15, "an i32 field at {i}");
        i = past_varint(bytes, i + 1);
    }
    assert_eq!(
        bytes[i],
        ((field - 3) << 4) | 12,
        "struct field {field} at {i}"
    );
    assert_eq!(bytes[i + 1], 0x15, "its field 1");
    i + 2
}

#[test]
fn page_headers_that_claim_more_values_than_they_hold_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("small.parquet");
    small_dictionary_file(&path);
    assert_eq!(read_all(&path, false).unwrap(), 3);
    let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let column = reader.metadata().row_group(0).column(0).clone();
    let dictionary = column.dictionary_page_offset().unwrap() as usize;
    let data = column.data_page_offset() as usize;
    let bytes = std::fs::read(&path).unwrap();

    // The dictionary page: 2 entries in 28 bytes, made to claim 63 (a one-byte varint).
    let mut bad = bytes.clone();
    let i = num_values_at(&bad, dictionary, 7);
    assert_eq!(bad[i], 4, "zigzag(2)");
    bad[i] = 126;
    std::fs::write(&path, &bad).unwrap();
    let error = read_all(&path, false).unwrap_err().to_string();
    assert!(
        error.contains(&format!(
            "column \"v\", page at byte {dictionary}: the dictionary page claims 63 values in"
        )),
        "{error}"
    );

    // The data page: 3 rows, made to claim 60 in a row group of 3.
    let mut bad = bytes.clone();
    let i = num_values_at(&bad, data, 5);
    assert_eq!(bad[i], 6, "zigzag(3)");
    bad[i] = 120;
    std::fs::write(&path, &bad).unwrap();
    let error = read_all(&path, false).unwrap_err().to_string();
    assert!(
        error.contains(&format!(
            "page at byte {data}: the data pages hold 60 values, more than the row group's 3 rows"
        )),
        "{error}"
    );

    // The footer: a length past the start of the file.
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&path, &bad).unwrap();
    let error = read_all(&path, false).unwrap_err();
    assert!(
        matches!(&error, SourceError::Corrupt { location, .. } if location == "file metadata"),
        "{error:?}"
    );

    // A page claiming more compressed bytes than its column chunk holds.
    let mut bad = bytes;
    let i = past_varint(&bad, past_varint(&bad, data + 1) + 1);
    assert_eq!(bad[i], 0x15, "field 3");
    bad[i + 1] = 0x7e; // zigzag(63), a one-byte varint like the original
    std::fs::write(&path, &bad).unwrap();
    let error = read_all(&path, false).unwrap_err().to_string();
    assert!(
        error.contains(&format!("page at byte {data}: the page claims 63 bytes")),
        "{error}"
    );
}

#[test]
fn delta_byte_array_values_rebuilt_from_prefixes_are_read_within_a_memory_budget() {
    if child_reads() {
        return;
    }
    let test = "delta_byte_array_values_rebuilt_from_prefixes_are_read_within_a_memory_budget";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("delta.parquet");
    // 300 equal 4 MiB values in one page: the first whole, each other one "all of
    // the previous value", so 4 MiB of page decodes to 1.2 GB.
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(false)
        .set_encoding(parquet::basic::Encoding::DELTA_BYTE_ARRAY)
        .set_data_page_size_limit(1 << 30)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    let one = value(4 * MIB, 3);
    let file = std::fs::File::create(&path).unwrap();
    let mut writer = None;
    for _ in 0..75 {
        let values: ArrayRef = Arc::new(BinaryArray::from(vec![&one[..]; 4]));
        let batch = batch(vec![("v", values)]);
        let writer = writer.get_or_insert_with(|| {
            ArrowWriter::try_new(
                file.try_clone().unwrap(),
                batch.schema(),
                Some(properties.clone()),
            )
            .unwrap()
        });
        writer.write(&batch).unwrap();
    }
    writer.unwrap().close().unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let column = reader.metadata().row_group(0).column(0).clone();
    assert!(
        column.uncompressed_size() < 8 << 20,
        "{}",
        column.uncompressed_size()
    );
    assert_eq!(
        read_in_limited_child(test, &path, false, 512),
        "records=300"
    );
}
