//! What the user typed, as clap parses it. Validation into library objects happens
//! in the command modules.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use bcd_pipeline::{parse_lz4_mode, parse_size};

use crate::source_args::{FormatArg, SourceFlags};

/// Create, inspect, read and verify bitcask-dataset datasets.
#[derive(Debug, Parser)]
#[command(
    name = "bcd",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = "Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted."
)]
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
        dataset: OsString,
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
        /// The dataset: a directory, or an s3://, gs:// or az:// URI.
        dataset: OsString,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write one value to stdout (or a file), by key or by index.
    Get {
        /// The dataset: a directory, or an s3://, gs:// or az:// URI.
        dataset: OsString,
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
        output: Option<OsString>,
        /// Print the record's fields as one JSON object instead of its value.
        #[arg(long, conflicts_with = "output")]
        fields: bool,
        /// Read from the records of this view: --index I is the view's I-th
        /// record, and a KEY must be one of them.
        #[arg(long, value_name = "NAME")]
        view: Option<String>,
    },
    /// List keys, one per line (record indexes for keyless datasets).
    Ls {
        /// The dataset: a directory, or an s3://, gs:// or az:// URI.
        dataset: OsString,
        /// End each key with a NUL byte instead of a newline (for keys containing newlines).
        #[arg(long, short = '0', conflicts_with = "fields")]
        null: bool,
        /// Print one JSON object per record instead: `key` (or `index` for keyless
        /// datasets) and every field by its name (binary values base64-encoded).
        #[arg(long)]
        fields: bool,
        /// Only the records of this view.
        #[arg(long, value_name = "NAME", conflicts_with = "where_")]
        view: Option<String>,
        /// Only the records this SQL expression over the fields selects
        /// (`label = 'cat' AND width >= 256`; also `index`, `key`, `size`).
        #[arg(long = "where", value_name = "EXPR")]
        where_: Option<String>,
    },
    /// Show the statistics kept at write time: sizes, and per field nulls,
    /// min/max, distinct values and label counts (read, not computed from the records).
    Stats {
        /// The dataset directory.
        dataset: OsString,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Add per-shard figures.
        #[arg(long, conflicts_with_all = ["view", "where_"])]
        shards: bool,
        /// The statistics of this view's records (computed from their sizes
        /// and fields).
        #[arg(long, value_name = "NAME", conflicts_with = "where_")]
        view: Option<String>,
        /// The statistics of the records this SQL expression selects.
        #[arg(long = "where", value_name = "EXPR")]
        where_: Option<String>,
    },
    /// Read directory trees, tar/WebDataset archives, Parquet, CSV, TFRecord,
    /// JSON Lines files or Megatron indexed datasets into a dataset, in one commit.
    #[command(after_help = INGEST_AFTER_HELP)]
    Ingest(Box<IngestArgs>),
    /// Write a dataset's records (or a --sample of them) to tar, in order (member
    /// name = key, or index), or into a new dataset (--into).
    Export(ExportArgs),
    /// Append whole datasets (parts) to a dataset in one commit, in the order
    /// given: shards are moved (hard links, no byte copied) and the parts removed
    /// once it is committed; keys are checked across all of them.
    #[command(after_help = MERGE_AFTER_HELP)]
    Merge(MergeArgs),
    /// Remove what no manifest references: leftovers of killed writers, staging
    /// parts of failed or abandoned jobs; in object storage, unfinished multipart
    /// uploads and uploaded files of interrupted pushes. Never committed data;
    /// never while a writer holds a local dataset.
    Gc {
        /// The dataset: a directory, or an s3://, gs:// or az:// URI.
        dataset: OsString,
        /// Only list every file that would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Only remove what was last modified at least this long ago (30m, 1h,
        /// 2d) [default: no limit for a directory, 1h for a URI, whose newer
        /// objects may belong to a push in progress].
        #[arg(long, value_name = "DURATION", value_parser = bcd_pipeline::parse_duration)]
        older_than: Option<std::time::Duration>,
        /// Print one JSON object (files, bytes, kept_jobs, dry_run) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Decode every record and report anything wrong (non-zero exit if so).
    Verify {
        /// The dataset: a directory, or an s3://, gs:// or az:// URI.
        dataset: OsString,
        /// Also check every value against the content hash written with it
        /// (NNNNNN.xxh128, see `bcd dedup-index`): a flipped bit in a shard is
        /// named by shard and record. Local datasets.
        #[arg(long)]
        content: bool,
    },
    /// Give every shard of a dataset without content hashes its file
    /// (NNNNNN.xxh128, the XXH3-128 of each value), in one pass over the values:
    /// then ingest, merge and extend with --dedup content check new values
    /// against every record, and `verify --content` covers it. Later extends
    /// keep them.
    DedupIndex {
        /// The local dataset directory.
        dataset: OsString,
        /// Threads hashing values [default: all cores].
        #[arg(long, short = 'j', value_name = "N")]
        jobs: Option<usize>,
        /// Print one JSON object (shards_built, shards_present, records, bytes,
        /// seconds) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Named subsets of a dataset's records chosen by an expression over
    /// their fields, kept beside the shards: create, list, refresh, drop.
    #[command(subcommand)]
    View(ViewCommand),
    /// Make a dataset in object storage equal to a local one: upload what it
    /// lacks, then commit its manifest with a conditional write.
    Push {
        /// The local dataset directory.
        dataset: OsString,
        /// Where: s3://bucket/prefix, gs://bucket/prefix or az://container/prefix.
        uri: OsString,
        /// Replace a dataset there that is not an earlier state of this one
        /// (refused otherwise): its manifest is removed first, so that the
        /// prefix reads as no dataset, never as a mix, until the push commits.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        transfer: TransferArgs,
    },
    /// Make a local dataset equal to one in object storage: download what it
    /// lacks, then commit its manifest (resumable).
    Pull {
        /// The dataset in object storage.
        uri: OsString,
        /// The local dataset directory (created when missing).
        dataset: OsString,
        /// Replace a local dataset that is not an earlier state of the remote
        /// one (refused otherwise): the remote one is pulled beside it, then
        /// renamed into its place.
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        transfer: TransferArgs,
    },
}

/// `bcd view ...`.
#[derive(Debug, Subcommand)]
pub enum ViewCommand {
    /// Create a view: the records an SQL expression over the fields selects
    /// now (a snapshot: records appended later join only with `bcd view refresh`).
    #[command(after_help = VIEW_AFTER_HELP)]
    Create {
        /// The dataset directory.
        dataset: OsString,
        /// The view's name (A-Z, a-z, 0-9, '.', '_', '-').
        name: String,
        /// The SQL boolean expression: `label = 'cat' AND width >= 256`,
        /// `caption LIKE '%dog%'`, `label_index IN (3, 7)`, `score IS NOT NULL`,
        /// `key LIKE 'train/%'`.
        #[arg(long = "where", value_name = "EXPR")]
        where_: String,
        /// Replace a view of that name.
        #[arg(long)]
        replace: bool,
    },
    /// List the views: name, records, expression, and how many records of the
    /// dataset it was evaluated over.
    List {
        /// The dataset: a directory, or an s3://, gs:// or az:// URI.
        dataset: OsString,
        /// Print one JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Extend a view over the records appended since it was evaluated (only
    /// those are evaluated).
    Refresh {
        /// The dataset directory.
        dataset: OsString,
        /// The view.
        name: String,
    },
    /// Remove a view (the records are not touched).
    Drop {
        /// The dataset directory.
        dataset: OsString,
        /// The view.
        name: String,
    },
}

const VIEW_AFTER_HELP: &str = "\
Expressions: fields by name (a struct's child as meta.score), the pseudo-columns
index, key (keyed datasets) and size (the value's length); =, <>, <, <=, >, >=,
[NOT] BETWEEN, [NOT] IN (...), [NOT] LIKE / ILIKE, IS [NOT] NULL, AND, OR, NOT;
array_has(list, value) and cardinality(list) on lists.

Examples:
  bcd view create train.bcd cats --where \"label = 'cat'\"
  bcd view create train.bcd big --where 'width >= 256 AND height >= 256'
  bcd ls train.bcd --view cats
  bcd export train.bcd --view cats --to cats.tar
  bcd view refresh train.bcd cats";

/// How `push` and `pull` transfer files.
#[derive(Debug, clap::Args)]
pub struct TransferArgs {
    /// Requests in flight at once.
    #[arg(long, short = 'j', value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub concurrency: u64,
    /// Files larger than this go in parts (uploads) or ranges (downloads).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub multipart_threshold: u64,
    /// Size of a part or range (at least 5 MiB for S3).
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_positive_size)]
    pub part_size: u64,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `bcd merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The datasets to append, in order (settings must match the target's).
    #[arg(required = true, value_name = "PART")]
    pub parts: Vec<PathBuf>,
    /// The dataset to append to; created with the first part's settings if missing.
    #[arg(long, value_name = "DATASET")]
    pub into: PathBuf,
    /// Copy the parts' files and leave the parts as they are.
    #[arg(long)]
    pub copy: bool,
    /// What to do with a key in two datasets: fail, or keep the first copy (the
    /// target's, then earlier parts').
    #[arg(long, value_enum, default_value_t = DuplicateArg::Error)]
    pub on_duplicate: DuplicateArg,
    #[command(flatten)]
    pub dedup: DedupArgs,
    /// Print the summary as one JSON object on stdout (with --dedup content,
    /// every record left out for its value).
    #[arg(long)]
    pub json: bool,
}

/// The duplicate checks' flags, shared by `ingest` and `merge`.
#[derive(Debug, clap::Args)]
pub struct DedupArgs {
    /// Also leave out a record whose value is byte for byte an earlier record's
    /// (committed, or earlier in this run), found by its content hash (XXH3-128,
    /// kept beside the shards as NNNNNN.xxh128) and confirmed by comparing the
    /// bytes; such records are counted and reported, whatever --on-duplicate
    /// says. Every committed shard needs content hashes (`bcd dedup-index`).
    #[arg(long, value_enum, value_name = "WHAT", help_heading = "Dataset")]
    pub dedup: Option<DedupArg>,
    /// With --dedup content: write every record left out for its value to FILE,
    /// one JSON object per line (its key, or index, where it came from, and the
    /// record it repeats), once the run commits.
    #[arg(
        long,
        value_name = "FILE",
        requires = "dedup",
        help_heading = "Dataset"
    )]
    pub dedup_report: Option<PathBuf>,
    /// Memory the duplicate checks may hold (fingerprints of the keys and
    /// values written, 12-16 bytes each); past it they spill sorted runs to
    /// DATASET/.bcd-spill/ (removed when the run ends, or by the next writer or
    /// `bcd gc`) [default: a quarter of the machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Dataset")]
    pub memory_limit: Option<u64>,
}

/// `--dedup` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DedupArg {
    /// Repeated values, by content hash then bytes.
    Content,
}

impl DedupArgs {
    /// The library's setting.
    pub fn dedup(&self) -> bcd::Dedup {
        match self.dedup {
            Some(DedupArg::Content) => bcd::Dedup::Content,
            None => bcd::Dedup::Keys,
        }
    }
}

const MERGE_AFTER_HELP: &str = "\
All or nothing: on any error (settings that differ, a duplicate key, a failed
write, a kill) the target is as it was and every part whole. On one file system
nothing is copied: the cost is proportional to the shards and keys, not the bytes.

Examples:
  bcd merge part-0 part-1 part-2 --into train.bcd
  bcd merge nightly/*.bcd --into train.bcd --on-duplicate skip --copy
  bcd merge nightly/*.bcd --into train.bcd --dedup content --json";

/// `--on-duplicate` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DuplicateArg {
    /// Fail the run on a key seen before; nothing is committed.
    Error,
    /// Keep the first occurrence, skip (and count) the others.
    Skip,
}

/// Shown after `bcd ingest --help`: what each format reads, and the exit codes.
const INGEST_AFTER_HELP: &str = "\
Sources (the format is detected from each name unless --format is given):
  dir       a directory tree: every regular file, keyed by its relative path
  tar       .tar, .tar.gz/.tgz, .tar.zst, WebDataset shards, brace patterns
            (shards-{000000..000099}.tar), or - for stdin; keyed by member name
  parquet   .parquet/.pq files, directories of them, or patterns; needs --value-column
  csv       .csv/.tsv files listing file paths, one value per row
  tfrecord  .tfrecord files (also sharded names such as x.tfrecord-00000-of-00010),
            plain or GZIP-compressed; keyless unless --key-feature
  jsonl     .jsonl files (also .jsonl.gz, .jsonl.zst): one record per JSON object,
            the value its \"text\" field, the other fields stored beside it
  megatron  PREFIX (or PREFIX.idx) naming a Megatron indexed dataset PREFIX.idx +
            PREFIX.bin: one keyless record per sequence, its tokens as the value,
            fields document and length; the dtype kept as dataset metadata
  lmdb      a directory holding data.mdb (or the data file): every entry in key
            order, keyed by its key; --lmdb-value pickle|caffe-datum decodes values
  mds       a MosaicML Streaming (MDS) directory: index.json and its shards
            (shard.NNNNN.mds, also .zstd, .gz, .bz2, .br, .snappy); one record per
            sample, the value its --value-column (default: the only binary
            column), the others typed fields; keyless unless --key-column
  litdata   a LitData optimize directory: index.json and its chunk-R-N.bin files
            (plain, zstd, or rows kept as an Arrow footer); one record per item,
            the value its --value-column leaf (default: the only binary leaf,
            else the only str one, the key aside), the others typed fields

Examples:
  bcd ingest images/ --into ds --include '*.jpg'
  bcd ingest 'shards-{000000..000099}.tar' --into ds
  bcd ingest data/*.parquet --into ds --value-column image --key-column id
  bcd ingest list.csv --into ds --path-column file
  bcd ingest train.tfrecord --into ds --feature image/encoded --key-feature image/filename
  bcd ingest images/ --into ds --labels folder
  bcd ingest 'shards-{000000..000099}.tar' --into ds --samples --json-fields
  bcd ingest docs.jsonl.zst --into ds --key-field id
  bcd ingest hf.parquet --into ds --value-column image --fields label,caption
  bcd ingest list.csv --into ds --field-type label=int64
  bcd ingest corpus_text_document --into ds
  bcd ingest train.lmdb --into ds --lmdb-value pickle
  bcd ingest crawl-*.tar --into ds --on-duplicate skip --dedup content --dedup-report dups.jsonl
  bcd ingest mds/train/ --into ds --value-column jpg --key-column id
  bcd ingest litdata_out/ --into ds --fields label,caption

Fields: parquet, hf-disk, csv, tfrecord, mds and litdata sources store their
other columns (features, leaves) as fields beside each record (--fields
all|none|NAME,...); MDS pkl columns and LitData pickle leaves are refused unless
left out. CSV column types are
inferred from the first 1000 rows unless --field-type gives them. TFRecord fields
(the default with --feature) cost a prescan: every file is read twice.

Exit status: 0 success, 1 failure (nothing committed), 2 usage error,
130 interrupted by SIGINT, SIGTERM or SIGHUP (nothing committed).";

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    /// Directories, archives, brace patterns (shards-{000000..000099}.tar), Parquet,
    /// CSV, TFRecord or JSON Lines files, Megatron PREFIXes, LMDB environments, MDS
    /// or LitData directories, or - (a tar on stdin).
    #[arg(required = true, value_name = "SOURCE")]
    pub sources: Vec<OsString>,
    /// Source format (default: from each SOURCE: directories are dir, .tar* tar,
    /// .parquet parquet, .csv csv, .tfrecord tfrecord, .jsonl* jsonl, PREFIX naming
    /// PREFIX.idx + PREFIX.bin megatron, a directory holding data.mdb or an LMDB
    /// data file lmdb, a directory with an MDS or LitData index.json mds or
    /// litdata).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// The dataset: created when missing or empty, appended to otherwise; a
    /// directory, or an s3://, gs:// or az:// URI (staged locally, then pushed
    /// with a conditional commit).
    #[arg(long, value_name = "DATASET", help_heading = "Dataset")]
    pub into: OsString,
    /// With a URI --into: keep the local copy in DIR between runs, so a later run
    /// pulls only what changed (default: a temporary directory, removed after).
    #[arg(long, value_name = "DIR", help_heading = "Dataset")]
    pub staging: Option<OsString>,
    /// Create the dataset keyless (values only).
    #[arg(long, help_heading = "Dataset")]
    pub keyless: bool,
    /// Compression of a dataset this run creates [default: lz4].
    #[arg(long, value_enum, help_heading = "Dataset")]
    pub compression: Option<CompressionArg>,
    /// max_shard_size of a dataset this run creates [default: 1GiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Dataset")]
    pub max_shard_size: Option<u64>,
    /// LZ4 effort: 1..12 (high-compression levels), fast, or reference (level 9 on
    /// every value, byte-identical to the Python reference). Levels skip values
    /// that do not compress (stored as literal-only LZ4 blocks).
    #[arg(long, default_value = "5", value_parser = parse_lz4_mode, help_heading = "Dataset")]
    pub level: bcd::Lz4Mode,
    /// What to do with a key seen before.
    #[arg(long, value_enum, default_value_t = DuplicateArg::Error, help_heading = "Dataset")]
    pub on_duplicate: DuplicateArg,
    #[command(flatten)]
    pub dedup: DedupArgs,
    /// Compression threads [default: all cores].
    #[arg(long, short = 'j', value_name = "N", help_heading = "Output")]
    pub jobs: Option<usize>,
    /// No progress bar.
    #[arg(long, short = 'q', help_heading = "Output")]
    pub quiet: bool,
    /// Print the summary as one JSON object on stdout.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// The flags of each source format.
    #[command(flatten)]
    pub source: SourceFlags,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["to", "into"])))]
pub struct ExportArgs {
    /// The dataset: a directory, or an s3://, gs:// or az:// URI.
    pub dataset: OsString,
    /// OUT.tar, - for stdout, with --split-* a numbered pattern (shards-%06d.tar),
    /// or OUT.parquet: one row per record with its key, value and fields.
    #[arg(long, value_name = "OUT")]
    pub to: Option<OsString>,
    /// Copy the records into a new dataset instead (a missing path or an empty
    /// directory), with the same settings, in one commit; values are copied as
    /// stored.
    #[arg(long, value_name = "NEWDS", conflicts_with_all = ["split_size", "split_count", "rename_unsafe"])]
    pub into: Option<PathBuf>,
    /// Start a new archive before one would exceed SIZE of member data.
    #[arg(long, value_name = "SIZE", value_parser = parse_positive_size)]
    pub split_size: Option<u64>,
    /// Start a new archive after N members.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub split_count: Option<u64>,
    /// Export keys that are unsafe member names (absolute, '..', empty, NUL) under
    /// cleaned names instead of failing.
    #[arg(long)]
    pub rename_unsafe: bool,
    /// Keyless datasets: suffix after the zero-padded index (e.g. .jpg).
    #[arg(long, default_value = "", value_name = "SUFFIX")]
    pub keyless_suffix: String,
    /// Tar: write each record as a WebDataset sample, KEY.<value extension> and
    /// one member per field (KEY.cls, KEY.json, ...); --split-count then counts
    /// samples, and a sample never spans two archives.
    #[arg(long, conflicts_with = "into", help_heading = "Fields")]
    pub samples: bool,
    /// OUT.parquet: the value as a Hugging Face Image struct {bytes, path}
    /// (the default when the dataset came from such a column).
    #[arg(long, conflicts_with = "into", help_heading = "Fields")]
    pub hf_image: bool,
    /// Export a subset of N records, in record order: a uniform sample, or with
    /// --balance-by an equal count per class where the classes allow it.
    #[arg(long, value_name = "N", help_heading = "Subsets")]
    pub sample: Option<u64>,
    /// The seed of --sample: the same seed picks the same records.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 0,
        requires = "sample",
        help_heading = "Subsets"
    )]
    pub seed: u64,
    /// Balance --sample over the classes of this field: a class smaller than its
    /// share gives all its records and the rest is spread over the others.
    #[arg(
        long,
        value_name = "FIELD",
        requires = "sample",
        help_heading = "Subsets"
    )]
    pub balance_by: Option<String>,
    /// What --to is written as. Default: Parquet for OUT.parquet, else tar;
    /// megatron writes OUT.bin and OUT.idx, a Megatron indexed dataset.
    #[arg(long, value_enum, value_name = "FORMAT", requires = "to")]
    pub format: Option<ExportFormat>,
    /// --format megatron: the tokens' dtype (uint8, int8, int16, int32, int64,
    /// float64, float32, uint16). Default: the one the dataset recorded when it
    /// was ingested from a Megatron dataset.
    #[arg(long, value_name = "DTYPE", help_heading = "Megatron")]
    pub dtype: Option<String>,
    /// Only the records of this view.
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with = "where_",
        help_heading = "Subsets"
    )]
    pub view: Option<String>,
    /// Only the records this SQL expression over the fields selects
    /// (`label = 'cat' AND width >= 256`; also `index`, `key`, `size`).
    #[arg(long = "where", value_name = "EXPR", help_heading = "Subsets")]
    pub where_: Option<String>,
}

/// The formats `bcd export --to` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A tar archive (or several, with --split-*).
    Tar,
    /// One Parquet file.
    Parquet,
    /// A Megatron indexed dataset: OUT.bin and OUT.idx.
    Megatron,
}

/// A SIZE that must not be zero.
pub fn parse_positive_size(text: &str) -> Result<u64, String> {
    match parse_size(text).map_err(|e| e.to_string())? {
        0 => Err("must be at least one byte".into()),
        n => Ok(n),
    }
}
