//! The Parquet source: a file of arbitrary bytes never panics outside the decoder
//! (whose panics the source turns into errors, as it does for the CLI), never
//! allocates what a page header claims (run with `-malloc_limit_mb`), and every
//! error names the file.
//!
//! Input: the file. The columns read are the file's first (values) and second
//! (keys), then the second alone with nulls skipped.
#![no_main]

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::OnceLock;

use bcd_converters::parquet_source::ParquetSource;
use bcd_converters::TableOptions;
use bcd_fields::containing_panics;
use libfuzzer_sys::fuzz_target;

thread_local! {
    /// Set while this harness reads the schema with the parquet crate itself.
    static PEEKING: Cell<bool> = const { Cell::new(false) };
}

fn path() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input.parquet");
        (dir, path)
    });
    path
}

/// The names of the file's top-level columns, if its footer parses.
fn columns(path: &PathBuf) -> Vec<String> {
    PEEKING.with(|p| p.set(true));
    let names = std::panic::catch_unwind(|| {
        let file = std::fs::File::open(path).ok()?;
        let metadata = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .ok()?;
        let schema = metadata.file_metadata().schema_descr();
        Some(
            schema
                .root_schema()
                .get_fields()
                .iter()
                .map(|f| f.name().to_owned())
                .collect::<Vec<_>>(),
        )
    });
    PEEKING.with(|p| p.set(false));
    names.ok().flatten().unwrap_or_default()
}

fuzz_target!(
    init: {
        // libfuzzer-sys aborts on every panic; the parquet crate's panics on
        // corrupt data are contained by the source (and by `columns`), as the
        // CLI's hook lets them be. Any other panic still aborts.
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if containing_panics() || PEEKING.with(Cell::get) {
                return;
            }
            abort(info);
        }));
    },
    |data: &[u8]| {
        let path = path();
        std::fs::write(path, data).unwrap();
        let names = columns(path);
        let mut passes = Vec::new();
        if let Some(value) = names.first() {
            passes.push((value.clone(), names.get(1).cloned(), false));
        }
        if let Some(second) = names.get(1) {
            passes.push((second.clone(), None, true));
        }
        if passes.is_empty() {
            passes.push(("v".to_owned(), None, false));
        }
        let shown = path.display().to_string();
        for (value_column, key_column, skip_nulls) in passes {
            let options = TableOptions {
                value_column,
                key_column,
                skip_nulls,
                ..Default::default()
            };
            let source = match ParquetSource::new(std::slice::from_ref(path), options) {
                Ok(source) => source,
                Err(error) => {
                    assert!(error.to_string().contains(&shown), "{error}");
                    continue;
                }
            };
            for record in source.take(100_000) {
                if let Err(error) = record {
                    let message = error.to_string();
                    assert!(message.contains(&shown), "{message}");
                }
            }
        }
    }
);
