//! The hf-disk source: a data file of arbitrary bytes in a `save_to_disk`
//! directory never panics outside Arrow's decoder (whose panics the source turns
//! into errors), never allocates what a message claims beyond the file (run with
//! `-malloc_limit_mb`), and every error names the file.
//!
//! Input: the one data file `state.json` names. The columns read are those of
//! `fixtures/hf_disk/photos` (seeds: its data files): `image` with the key `id`,
//! then `caption` with nulls skipped.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use bcd_converters::hf_disk_source::{HfDiskOptions, HfDiskSource};
use bcd_converters::TableOptions;
use bcd_fields::containing_panics;
use libfuzzer_sys::fuzz_target;

/// The directory, with `state.json` and `dataset_info.json` written once.
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        std::fs::write(
            path.join("state.json"),
            r#"{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}"#,
        )
        .unwrap();
        std::fs::write(path.join("dataset_info.json"), "{}").unwrap();
        (dir, path)
    });
    path
}

fuzz_target!(
    init: {
        // libfuzzer-sys aborts on every panic; the Arrow decoder's panics on
        // corrupt data are contained by the source, as the CLI's hook lets them
        // be. Any other panic still aborts.
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if containing_panics() {
                return;
            }
            abort(info);
        }));
    },
    |data: &[u8]| {
        let dir = dir();
        let file = dir.join("data-00000-of-00001.arrow");
        std::fs::write(&file, data).unwrap();
        let shown = file.display().to_string();
        for (value_column, key_column, skip_nulls) in
            [("image", Some("id"), false), ("caption", None, true)]
        {
            let options = HfDiskOptions {
                columns: TableOptions {
                    value_column: value_column.into(),
                    key_column: key_column.map(Into::into),
                    skip_nulls,
                    ..Default::default()
                },
                split: None,
            };
            let source = match HfDiskSource::new(dir, options) {
                Ok(source) => source,
                Err(error) => panic!("the directory itself is good: {error}"),
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
