//! The flags of each source format of `bcd ingest`, one flattened argument group
//! per format (`#[command(flatten)]` in `IngestArgs`), and how each group fills in
//! the library's [`SourceOptions`]. A flag the user did not give stays `None`
//! (or empty, or false), so that giving one to another format is refused even
//! with its default value; the library decides which format takes which option.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ValueEnum;

use bcd_pipeline::{
    parse_delimiter, parse_field_type, parse_fields, parse_value_ext, read_schema, SourceOptions,
};

use crate::output::{self, UsageError};

/// Source formats of `ingest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// A directory tree: every regular file, keyed by its relative path.
    Dir,
    /// Tar archives (.tar, .tar.gz/.tgz, .tar.zst), WebDataset shards, or - for stdin.
    Tar,
    /// Parquet files, directories of them, or patterns (needs --value-column).
    Parquet,
    /// Hugging Face `save_to_disk` directories (needs --value-column; a
    /// DatasetDict --split).
    HfDisk,
    /// CSV files listing file paths (one value per row).
    Csv,
    /// TFRecord files, plain or GZIP-compressed.
    Tfrecord,
    /// JSON Lines files (.jsonl, .jsonl.gz, .jsonl.zst): one record per object.
    Jsonl,
    /// Megatron indexed datasets: PREFIX (or PREFIX.idx) naming PREFIX.idx + PREFIX.bin.
    Megatron,
    /// LMDB environments: a directory holding data.mdb, or the data file.
    Lmdb,
    /// MosaicML Streaming (MDS) directories: index.json and its shards.
    Mds,
    /// LitData `optimize` output directories: index.json and its chunks.
    Litdata,
}

impl From<FormatArg> for bcd_pipeline::SourceFormat {
    fn from(arg: FormatArg) -> Self {
        match arg {
            FormatArg::Dir => bcd_pipeline::SourceFormat::Dir,
            FormatArg::Tar => bcd_pipeline::SourceFormat::Tar,
            FormatArg::Parquet => bcd_pipeline::SourceFormat::Parquet,
            FormatArg::HfDisk => bcd_pipeline::SourceFormat::HfDisk,
            FormatArg::Csv => bcd_pipeline::SourceFormat::Csv,
            FormatArg::Tfrecord => bcd_pipeline::SourceFormat::Tfrecord,
            FormatArg::Jsonl => bcd_pipeline::SourceFormat::Jsonl,
            FormatArg::Megatron => bcd_pipeline::SourceFormat::Megatron,
            FormatArg::Lmdb => bcd_pipeline::SourceFormat::Lmdb,
            FormatArg::Mds => bcd_pipeline::SourceFormat::Mds,
            FormatArg::Litdata => bcd_pipeline::SourceFormat::Litdata,
        }
    }
}

/// The flags of every source format, one group each, flattened into `bcd
/// ingest`'s arguments where they always were (so `--help` lists them in the
/// same order, under their formats' headings).
#[derive(Debug, clap::Args)]
pub struct SourceFlags {
    #[command(flatten)]
    pub dir: DirArgs,
    #[command(flatten)]
    pub tar: TarArgs,
    #[command(flatten)]
    pub parquet: ParquetArgs,
    #[command(flatten)]
    pub hf_disk: HfDiskArgs,
    #[command(flatten)]
    pub csv: CsvArgs,
    #[command(flatten)]
    pub tfrecord: TfrecordArgs,
    #[command(flatten)]
    pub jsonl: JsonlArgs,
    #[command(flatten)]
    pub lmdb: LmdbArgs,
    #[command(flatten)]
    pub fields: FieldsArgs,
}

impl SourceArgs for SourceFlags {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        let groups: [&dyn SourceArgs; 9] = [
            &self.dir,
            &self.tar,
            &self.parquet,
            &self.hf_disk,
            &self.csv,
            &self.tfrecord,
            &self.jsonl,
            &self.lmdb,
            &self.fields,
        ];
        for group in groups {
            group.apply(options)?;
        }
        Ok(())
    }
}

/// `--labels` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LabelsArg {
    /// label and label_index from each file's first folder, numbered as
    /// torchvision's ImageFolder.
    Folder,
}

impl From<LabelsArg> for bcd_converters::dir_source::LabelMode {
    fn from(arg: LabelsArg) -> Self {
        match arg {
            LabelsArg::Folder => bcd_converters::dir_source::LabelMode::Folder,
        }
    }
}

/// A group of source flags: it sets its fields of the options.
pub trait SourceArgs {
    /// Sets the options this group's flags give; a flag that cannot be used (a
    /// `--schema` file that cannot be read) is a usage error.
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError>;
}

/// `bcd ingest` flags: Directory sources (dir).
#[derive(Debug, clap::Args)]
pub struct DirArgs {
    /// Only files matching this glob (repeatable). Without '/' it matches file
    /// names at any depth; with '/', relative paths ('*' stays in one directory, '**' crosses).
    #[arg(long, value_name = "GLOB", help_heading = "Directory sources (dir)")]
    pub include: Vec<String>,
    /// Leave out files matching this glob (repeatable; same rules).
    #[arg(long, value_name = "GLOB", help_heading = "Directory sources (dir)")]
    pub exclude: Vec<String>,
    /// Follow symbolic links (default: skip and count them).
    #[arg(long, help_heading = "Directory sources (dir)")]
    pub follow_links: bool,
    /// Store fields from each file's path: `folder` gives label (its first folder
    /// under the root) and label_index (that folder's index among the sorted
    /// folders, as torchvision's ImageFolder); files directly under the root are
    /// skipped. Appended to an existing dataset, known classes keep the
    /// dataset's indices and new ones are numbered after them.
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        help_heading = "Directory sources (dir)"
    )]
    pub labels: Option<LabelsArg>,
}

/// `bcd ingest` flags: Tar sources (tar).
#[derive(Debug, clap::Args)]
pub struct TarArgs {
    /// Group members into WebDataset samples (a/b.jpg, a/b.cls, a/b.json: one
    /// record keyed a/b); the value is one member, the others are stored as fields.
    #[arg(long, help_heading = "Tar sources (tar)")]
    pub samples: bool,
    /// With --samples: the extensions of the member stored as the value, in order
    /// of preference [default: jpg,jpeg,png,webp,flac,wav,mp3,mp4,bin].
    #[arg(
        long,
        value_name = "EXTS",
        value_delimiter = ',',
        value_parser = parse_value_ext,
        help_heading = "Tar sources (tar)"
    )]
    pub value_ext: Vec<String>,
    /// With --samples: also store each top-level scalar of a JSON member as a typed
    /// field json.KEY.
    #[arg(long, help_heading = "Tar sources (tar)")]
    pub json_fields: bool,
    /// With --samples: skip (and count) bad samples (no value member, a duplicate
    /// extension, scattered members, an undecodable field) instead of failing.
    #[arg(long, help_heading = "Tar sources (tar)")]
    pub skip_bad_samples: bool,
}

/// `bcd ingest` flags: Parquet sources (parquet), and `--key-column` for CSV too.
#[derive(Debug, clap::Args)]
pub struct ParquetArgs {
    /// The column holding the values (parquet, hf-disk: required; mds: a column,
    /// litdata: a leaf, default the only binary one, else the only text one; lmdb
    /// with --lmdb-value pickle: the pickled dict's entry, default its only bytes
    /// entry).
    #[arg(
        long,
        value_name = "COL",
        help_heading = "Parquet sources (parquet, hf-disk)"
    )]
    pub value_column: Option<String>,
    /// The column holding the keys (parquet, hf-disk, mds, litdata: keyless
    /// without it; csv: default the path as written).
    #[arg(long, value_name = "COL", help_heading = "Parquet and CSV sources")]
    pub key_column: Option<String>,
    /// Skip (and count) rows whose value or key is null instead of failing.
    #[arg(long, help_heading = "Parquet sources (parquet, hf-disk)")]
    pub skip_nulls: bool,
}

/// `bcd ingest` flags: Hugging Face `save_to_disk` directories (hf-disk); the
/// columns are chosen with the Parquet flags.
#[derive(Debug, clap::Args)]
pub struct HfDiskArgs {
    /// The split of a DatasetDict to read (required for one: its dataset_dict.json
    /// lists them).
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "Hugging Face save_to_disk directories (hf-disk)"
    )]
    pub split: Option<String>,
}

impl SourceArgs for HfDiskArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.split = self.split.clone();
        Ok(())
    }
}

/// `bcd ingest` flags: CSV sources (csv).
#[derive(Debug, clap::Args)]
pub struct CsvArgs {
    /// The column holding file paths [default: path].
    #[arg(long, value_name = "COL", help_heading = "CSV sources (csv)")]
    pub path_column: Option<String>,
    /// Resolve relative paths against DIR (default: the CSV file's directory).
    #[arg(long, value_name = "DIR", help_heading = "CSV sources (csv)")]
    pub root: Option<OsString>,
    /// The field delimiter (one byte; `\t` for tab) [default: ,].
    #[arg(long, value_name = "C", value_parser = parse_delimiter, help_heading = "CSV sources (csv)")]
    pub delimiter: Option<u8>,
}

/// `bcd ingest` flags: TFRecord sources (tfrecord).
#[derive(Debug, clap::Args)]
pub struct TfrecordArgs {
    /// Store this bytes_list feature of each tf.train.Example (e.g.
    /// image/encoded) instead of the whole serialized record.
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "TFRecord sources (tfrecord)"
    )]
    pub feature: Option<String>,
    /// Key records by this bytes_list feature (e.g. image/filename).
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "TFRecord sources (tfrecord)"
    )]
    pub key_feature: Option<String>,
}

/// `bcd ingest` flags: JSON Lines sources (jsonl).
#[derive(Debug, clap::Args)]
pub struct JsonlArgs {
    /// The string field holding the value [default: text].
    #[arg(long, value_name = "NAME", help_heading = "JSON Lines sources (jsonl)")]
    pub value_field: Option<String>,
    /// The value field is base64 text of the value's bytes.
    #[arg(long, help_heading = "JSON Lines sources (jsonl)")]
    pub value_base64: bool,
    /// Key records by this field (a string, or an integer in decimal); keyless
    /// without it.
    #[arg(long, value_name = "NAME", help_heading = "JSON Lines sources (jsonl)")]
    pub key_field: Option<String>,
    /// The fields and their types, as a JSON file: [{"name": "label", "type":
    /// "int64"}, ...] with types int64, float64, float32, bool, string, binary,
    /// list<TYPE>; other fields are left out [default: inferred from the first
    /// 1000 lines].
    #[arg(long, value_name = "FILE", help_heading = "JSON Lines sources (jsonl)")]
    pub schema: Option<PathBuf>,
}

/// `--lmdb-value` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LmdbValueArg {
    /// The bytes as stored.
    Raw,
    /// A pickled bytes, (bytes, label) tuple or dict of fields (plain data
    /// only: a pickle that would run code is refused).
    Pickle,
    /// A Caffe Datum (convert_imageset): the image bytes, fields label,
    /// channels, height, width, encoded.
    CaffeDatum,
}

impl From<LmdbValueArg> for bcd_converters::lmdb_source::LmdbValue {
    fn from(arg: LmdbValueArg) -> Self {
        use bcd_converters::lmdb_source::LmdbValue;
        match arg {
            LmdbValueArg::Raw => LmdbValue::Raw,
            LmdbValueArg::Pickle => LmdbValue::Pickle,
            LmdbValueArg::CaffeDatum => LmdbValue::CaffeDatum,
        }
    }
}

/// `bcd ingest` flags: LMDB environments (lmdb).
#[derive(Debug, clap::Args)]
pub struct LmdbArgs {
    /// How each entry's value is read [default: raw].
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        help_heading = "LMDB environments (lmdb)"
    )]
    pub lmdb_value: Option<LmdbValueArg>,
    /// The named database to read (default: the unnamed one).
    #[arg(long, value_name = "NAME", help_heading = "LMDB environments (lmdb)")]
    pub lmdb_db: Option<String>,
}

impl SourceArgs for LmdbArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.lmdb_value = self.lmdb_value.map(Into::into);
        options.lmdb_db = self.lmdb_db.clone();
        Ok(())
    }
}

/// `bcd ingest` flags: The field options several formats share (parquet, hf-disk,
/// csv, tfrecord, mds, litdata).
#[derive(Debug, clap::Args)]
pub struct FieldsArgs {
    /// Which other columns (parquet, hf-disk, csv, mds), leaves (litdata) or
    /// features (tfrecord) become fields: all, none, or names separated by commas
    /// [default: all; tfrecord: all with --feature, else none].
    #[arg(
        long,
        value_name = "all|none|NAME,...",
        value_parser = parse_fields,
        help_heading = "Fields (parquet, hf-disk, csv, tfrecord, mds, litdata)"
    )]
    pub fields: Option<bcd_converters::FieldSelection>,
    /// Declare a CSV field column's type instead of inferring it (repeatable);
    /// TYPE is int64, float64, bool or string.
    #[arg(
        long,
        value_name = "NAME=TYPE",
        value_parser = parse_field_type,
        help_heading = "Fields (parquet, hf-disk, csv, tfrecord, mds, litdata)"
    )]
    pub field_type: Vec<(String, bcd_converters::FieldType)>,
}

impl SourceArgs for DirArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.include = self.include.clone();
        options.exclude = self.exclude.clone();
        options.follow_links = self.follow_links;
        options.labels = self.labels.map(Into::into);
        Ok(())
    }
}

impl SourceArgs for TarArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.samples = self.samples;
        options.value_ext = self.value_ext.clone();
        options.json_fields = self.json_fields;
        options.skip_bad_samples = self.skip_bad_samples;
        Ok(())
    }
}

impl SourceArgs for ParquetArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.value_column = self.value_column.clone();
        options.key_column = self.key_column.clone();
        options.skip_nulls = self.skip_nulls;
        Ok(())
    }
}

/// `--root` is not set here: the command makes it a local path first (a URI is
/// refused), by the rules of every location argument.
impl SourceArgs for CsvArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.path_column = self.path_column.clone();
        options.delimiter = self.delimiter;
        Ok(())
    }
}

impl SourceArgs for TfrecordArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.feature = self.feature.clone();
        options.key_feature = self.key_feature.clone();
        Ok(())
    }
}

impl SourceArgs for JsonlArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.value_field = self.value_field.clone();
        options.value_base64 = self.value_base64;
        options.key_field = self.key_field.clone();
        options.schema = self
            .schema
            .as_deref()
            .map(read_schema)
            .transpose()
            .map_err(|error| UsageError(format!("--schema {}", output::chain(&error))))?;
        Ok(())
    }
}

impl SourceArgs for FieldsArgs {
    fn apply(&self, options: &mut SourceOptions) -> Result<(), UsageError> {
        options.fields = self.fields.clone();
        options.field_type = self.field_type.clone();
        Ok(())
    }
}
