//! The persisted index (`.bcd-index`) as tests see it: its name, spelled out
//! rather than taken from the library so that a rename is caught, and open
//! options that force or forbid it whatever the dataset's size.

use bcd::OpenOptions;

/// The persisted index's file name in a dataset directory.
pub const INDEX_FILE: &str = ".bcd-index";

/// Open options that write the index file at any size.
pub const INDEX_FILE_ALWAYS: OpenOptions = OpenOptions {
    index_file_min_records: Some(0),
    index_file_min_bytes: None,
    index_file_min_tail: 0,
};

/// Open options that never write the index file.
pub const INDEX_FILE_NEVER: OpenOptions = OpenOptions {
    index_file_min_records: None,
    index_file_min_bytes: None,
    index_file_min_tail: 0,
};
