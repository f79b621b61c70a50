//! What the user typed, as clap parses it. Validation into library objects happens
//! in the command modules.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::size::parse_size;

/// Create, inspect, read and verify bitcask-dataset datasets.
#[derive(Debug, Parser)]
#[command(name = "bcd", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `--compression` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompressionArg {
    /// Independent LZ4 blocks, readable by the Python reference.
    Lz4,
    /// Values stored as they are.
    None,
}

impl From<CompressionArg> for bcd::Compression {
    fn from(arg: CompressionArg) -> Self {
        match arg {
            CompressionArg::Lz4 => bcd::Compression::Lz4,
            CompressionArg::None => bcd::Compression::None,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create an empty dataset in a new or empty directory.
    Create {
        /// Directory of the new dataset.
        dataset: PathBuf,
        /// Records carry unique keys (default: keyless, as the reference).
        #[arg(long)]
        keyed: bool,
        /// How values are stored.
        #[arg(long, value_enum, default_value_t = CompressionArg::Lz4)]
        compression: CompressionArg,
        /// Start a new shard before one would exceed this size: bytes, or with a unit
        /// (K/M/G = KiB/MiB/GiB, KB/MB/GB = powers of 1000).
        #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "1GiB")]
        max_shard_size: u64,
    },
    /// Show a dataset's settings and size.
    Info {
        /// The dataset directory.
        dataset: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write one value to stdout (or a file), by key or by index.
    Get {
        /// The dataset directory.
        dataset: PathBuf,
        /// The key (its bytes as given; see --hex).
        #[arg(required_unless_present = "index", conflicts_with = "index")]
        key: Option<OsString>,
        /// Read the record at this position instead; negative counts from the end.
        #[arg(long, short = 'i', allow_negative_numbers = true, value_name = "I")]
        index: Option<i64>,
        /// KEY is hexadecimal, for binary keys.
        #[arg(long)]
        hex: bool,
        /// Write the value to FILE instead of stdout.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List keys, one per line (record indexes for keyless datasets).
    Ls {
        /// The dataset directory.
        dataset: PathBuf,
        /// End each key with a NUL byte instead of a newline (for keys containing newlines).
        #[arg(long, short = '0')]
        null: bool,
    },
    /// Decode every record and report anything wrong (non-zero exit if so).
    Verify {
        /// The dataset directory.
        dataset: PathBuf,
    },
}
