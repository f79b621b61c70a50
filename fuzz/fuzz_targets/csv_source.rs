//! The CSV source: arbitrary CSV text naming paths in a small tree never panics
//! and never blocks; only regular files are read (a FIFO, `/dev/zero` behind a
//! link, a directory or a socket are errors naming the CSV file), and every error
//! names the CSV file.
//!
//! Input: one flag byte, then the CSV text. Flag bits 0-1 pick the delimiter
//! (`,` `;` tab `|`); bit 2 keys rows by column `id`. The tree (made once per
//! process) holds `a` ("alpha"), `b` (empty), `d/c` ("see"), `l` -> `a`,
//! `z` -> `/dev/zero`, a FIFO `p`, a socket `s` and the directory `d`.
#![no_main]

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::OnceLock;

use bcd_converters::csv_source::{CsvOptions, CsvSource, MAX_ROW_BYTES};
use bcd_converters::SourceError;
use libfuzzer_sys::fuzz_target;

struct Tree {
    _dir: tempfile::TempDir,
    _socket: UnixListener,
    csv: PathBuf,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a"), b"alpha").unwrap();
        std::fs::write(root.join("b"), b"").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/c"), b"see").unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("l")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("z")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.join("p"))
            .status()
            .unwrap();
        assert!(fifo.success());
        let socket = UnixListener::bind(root.join("s")).unwrap();
        Tree {
            csv: root.join("list.csv"),
            _dir: dir,
            _socket: socket,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    // Absolute paths reach the whole machine: keep the fuzzer off /proc and /sys,
    // whose regular files can be endless (a bounded read of up to 4 GiB each).
    if text.windows(3).any(|w| w == b"pro" || w == b"sys") {
        return;
    }
    let tree = tree();
    std::fs::write(&tree.csv, text).unwrap();
    let options = CsvOptions {
        key_column: (flags & 4 != 0).then(|| "id".to_owned()),
        delimiter: [b',', b';', b'\t', b'|'][(flags & 3) as usize],
        ..CsvOptions::default()
    };
    let csv_name = tree.csv.display().to_string();
    for record in CsvSource::new(std::slice::from_ref(&tree.csv), options).unwrap() {
        match record {
            Ok(record) => {
                assert!(record.key.len() as u64 <= MAX_ROW_BYTES);
            }
            Err(error) => {
                let message = error.to_string();
                assert!(message.starts_with(&csv_name), "{message}");
                if let SourceError::NotRegularFile { kind, .. } = &error {
                    assert!(!kind.is_empty());
                }
            }
        }
    }
});
