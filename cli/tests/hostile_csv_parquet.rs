//! Issue 14's recipes for the CSV and Parquet sources, end to end through the
//! binary: each fails cleanly (exit 1, a message naming the file and where), in
//! bounded memory, and leaves no dataset behind.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use arrow_array::{ArrayRef, BinaryArray, RecordBatch};
use common::{assert_clean_failure, finish, s, Run};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::reader::{FileReader, SerializedFileReader};

/// Runs `bcd args` under an address-space limit of `limit_mib`.
fn bcd_limited(limit_mib: u64, args: &[&str]) -> Run {
    let child = Command::new("prlimit")
        .arg(format!("--as={}", limit_mib << 20))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_bcd"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run prlimit");
    finish(child, &format!("{args:?}"))
}

/// Runs a failing ingest of `source` into `dir/d` and checks it left nothing.
fn failed_ingest(dir: &Path, source: &Path, extra: &[&str]) -> String {
    let target = dir.join("d");
    let mut args = vec!["ingest", s(source), "--into", s(&target), "--quiet"];
    args.extend_from_slice(extra);
    let run = bcd_limited(2048, &args);
    assert_clean_failure(&run, &format!("{args:?}"));
    assert!(!target.exists(), "{} was left behind", target.display());
    run.stderr
}

#[test]
fn a_csv_row_naming_dev_zero_fails_at_once_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("z.csv");
    std::fs::write(&csv, "path\n/dev/zero\n").unwrap();
    let stderr = failed_ingest(dir.path(), &csv, &[]);
    assert!(
        stderr.contains("z.csv: line 2: /dev/zero is a character device, not a regular file"),
        "{stderr}"
    );
}

#[test]
fn a_csv_row_naming_a_fifo_fails_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let csv = dir.path().join("list.csv");
    std::fs::write(&csv, "path\npipe\n").unwrap();
    // `finish` kills a bcd that runs for minutes and fails the test: a blocked open.
    let stderr = failed_ingest(dir.path(), &csv, &[]);
    assert!(
        stderr.contains(&format!(
            "list.csv: line 2: {} is a FIFO, not a regular file",
            fifo.display()
        )),
        "{stderr}"
    );
}

/// Issue 14's file: one 128 MiB value, zstd, no dictionary (4.6 KB), its data page
/// header then made to claim 2^31-1 bytes uncompressed, the varint's length kept.
fn lying_parquet(path: &Path) {
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .build();
    let value = vec![b'x'; 128 << 20];
    let values: ArrayRef = Arc::new(BinaryArray::from(vec![&value[..]]));
    let batch = RecordBatch::try_from_iter([("v", values)]).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let metadata = SerializedFileReader::new(std::fs::File::open(path).unwrap())
        .unwrap()
        .metadata()
        .row_group(0)
        .column(0)
        .data_page_offset() as usize;
    let mut bytes = std::fs::read(path).unwrap();
    // Header fields: 1 (page type) = 0, then 2 (uncompressed_page_size), zigzag.
    let at = metadata + 3;
    assert_eq!(&bytes[metadata..at], [0x15, 0x00, 0x15]);
    let claim = [0xfe, 0xff, 0xff, 0xff, 0x0f]; // zigzag(2^31 - 1)
    assert_eq!(bytes[at + 4] & 0x80, 0, "a 5-byte varint");
    bytes[at..at + 5].copy_from_slice(&claim);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_parquet_page_claiming_2_gib_fails_cleanly_under_a_2_gib_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bomb.parquet");
    lying_parquet(&file);
    assert!(std::fs::metadata(&file).unwrap().len() < 16 << 10);
    let stderr = failed_ingest(dir.path(), &file, &["--value-column", "v"]);
    assert!(
        stderr.contains("bomb.parquet: row group 0, column \"v\", page at byte 4: the page claims 2147483647 bytes uncompressed"),
        "{stderr}"
    );
}
