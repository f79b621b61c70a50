//! What a CSV list of paths may make the source read: regular files (and links to
//! them) only, none over the store's value limit, and no row longer than the row
//! limit. A FIFO, device, socket or directory is refused before it is opened, with
//! an error naming the CSV file, the line and the path.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use bcd_converters::csv_source::{CsvOptions, CsvSource, MAX_ROW_BYTES};
use bcd_converters::{SourceError, MAX_VALUE_SIZE};

/// A read that has not finished after this long is blocked for good.
const HANG: Duration = Duration::from_secs(60);

/// Writes a CSV listing `rows` (a `path` column) and returns its path.
fn csv(dir: &Path, rows: &[&str]) -> PathBuf {
    let path = dir.join("list.csv");
    let mut text = String::from("path\n");
    for row in rows {
        text.push_str(row);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// Reads the whole source, returning the values or the error that ended it.
fn read(csv: &Path) -> Result<Vec<Vec<u8>>, SourceError> {
    CsvSource::new(&[csv.to_owned()], CsvOptions::default())?
        .map(|record| record.map(|r| r.value))
        .collect()
}

/// Asserts `error` refuses `path` as `kind`, naming the CSV file and `line`.
fn assert_refused(error: SourceError, csv: &Path, line: u64, path: &Path, kind: &str) {
    let message = error.to_string();
    match error {
        SourceError::NotRegularFile {
            file,
            location,
            path: refused,
            kind: found,
        } => {
            assert_eq!(file, csv.display().to_string());
            assert_eq!(location, format!("line {line}"));
            assert_eq!(refused, path);
            assert_eq!(found, kind);
            assert!(
                message.contains(&format!("list.csv: line {line}: "))
                    && message.contains(&format!("{} is {kind}", path.display())),
                "{message}"
            );
        }
        other => panic!("expected NotRegularFile, got {other:?}"),
    }
}

#[test]
fn a_device_is_refused_unread_naming_the_csv_line_and_path() {
    // /dev/null rather than /dev/zero: should this regress, the test fails at
    // once instead of reading until memory runs out (the CLI's test reads
    // /dev/zero's recipe under an address-space limit).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.txt"), b"ok").unwrap();
    let list = csv(dir.path(), &["ok.txt", "/dev/null"]);
    let error = read(&list).unwrap_err();
    assert_refused(
        error,
        &list,
        3,
        Path::new("/dev/null"),
        "a character device",
    );
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let list = csv(dir.path(), &["pipe"]);
    let (send, receive) = mpsc::channel();
    let reader = std::thread::spawn({
        let list = list.clone();
        move || send.send(read(&list)).unwrap()
    });
    let outcome = match receive.recv_timeout(HANG) {
        Ok(outcome) => outcome,
        Err(_) => {
            // The source blocked opening the FIFO: open its other end so that the
            // thread finishes, then fail.
            let _writer = std::fs::OpenOptions::new().write(true).open(&fifo);
            reader.join().unwrap();
            panic!("reading a CSV that lists a FIFO blocked for {HANG:?}");
        }
    };
    reader.join().unwrap();
    assert_refused(outcome.unwrap_err(), &list, 2, &fifo, "a FIFO");
}

#[test]
fn directories_and_sockets_are_refused_and_links_to_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("real.txt"), b"real").unwrap();
    std::os::unix::fs::symlink(dir.path().join("real.txt"), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink("/dev/null", dir.path().join("null-link")).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();

    let list = csv(dir.path(), &["link", "real.txt"]);
    assert_eq!(read(&list).unwrap(), [b"real", b"real"]);
    for (row, kind) in [
        ("sub", "a directory"),
        ("sock", "a socket"),
        ("null-link", "a character device"),
    ] {
        let list = csv(dir.path(), &["real.txt", row]);
        assert_refused(
            read(&list).unwrap_err(),
            &list,
            3,
            &dir.path().join(row),
            kind,
        );
    }
}

#[test]
fn a_file_over_the_value_limit_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse: it takes no space, and reading it would take 4 GiB of memory.
    let big = dir.path().join("big.bin");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(MAX_VALUE_SIZE + 1).unwrap();
    let list = csv(dir.path(), &["big.bin"]);
    match read(&list).unwrap_err() {
        SourceError::TooLarge {
            file,
            location,
            size,
            limit,
            ..
        } => {
            assert_eq!(file, list.display().to_string());
            assert_eq!(location, "line 2");
            assert_eq!((size, limit), (MAX_VALUE_SIZE + 1, MAX_VALUE_SIZE));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_row_over_the_row_limit_is_an_error_not_a_growing_buffer() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.txt"), b"ok").unwrap();
    let long = "x".repeat(2 * MAX_ROW_BYTES as usize);
    let list = csv(dir.path(), &["ok.txt", "ok.txt", &long]);
    let error = read(&list).unwrap_err();
    assert!(
        matches!(&error, SourceError::TooLarge { location, .. } if location == "line 4"),
        "{error:?}"
    );
    // A row just under the limit (a long key) is read.
    let key = "k".repeat(MAX_ROW_BYTES as usize - 100);
    let keyed = dir.path().join("keyed.csv");
    std::fs::write(&keyed, format!("id,path\n{key},ok.txt\n")).unwrap();
    let options = CsvOptions {
        key_column: Some("id".into()),
        ..Default::default()
    };
    let records: Vec<_> = CsvSource::new(&[keyed], options)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key, key.as_bytes());
    // The header row is bounded the same way (a CSV file that is endless, such
    // as /dev/zero, ends there too).
    let header = dir.path().join("header.csv");
    std::fs::write(&header, "h".repeat(2 * MAX_ROW_BYTES as usize)).unwrap();
    let error = read(&header).unwrap_err();
    assert!(
        matches!(&error, SourceError::TooLarge { location, .. } if location == "line 1 (header)"),
        "{error:?}"
    );
}
