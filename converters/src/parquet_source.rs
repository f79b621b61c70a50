//! Binary columns of Parquet files (pyarrow, Spark, Hugging Face `datasets`
//! exports), streamed one record batch at a time, with the other columns as
//! fields.
//!
//! Values come from a binary, large_binary, string, large_string (UTF-8 bytes),
//! binary_view, string_view or fixed_size_binary column, or a struct with a `bytes`
//! field (how `datasets` stores Image and Audio features). Keys come from a string
//! or binary column (as bytes) or an integer column (as decimal text);
//! dictionary-encoded columns of those types work too. Every page compression of
//! the `parquet` crate's default build is read (snappy, gzip, zstd, lz4, brotli).
//!
//! Fields ([`TableOptions::fields`]): every other column (or the ones chosen),
//! a record's fields its row of the batch's columns ([`crate::Fields::row`],
//! read as [`crate::FieldValue::Arrow`]), so any Arrow type (nested, dates,
//! dictionaries) is kept exactly; of a struct value column with `bytes` and
//! `path` (a Hugging Face Image or Audio feature) the `path` too, as field
//! `<column>.path`. A row whose `bytes` are null but whose `path` is set takes
//! its value from that file, read relative to the Parquet file's directory: only
//! a relative path without `..` (so inside that directory), naming a regular file
//! or a link to one, of at most [`MAX_VALUE_SIZE`](crate::MAX_VALUE_SIZE) bytes.
//! (`datasets` writes such rows for images made from local files: the path as
//! the user gave it, which its own reader resolves against the working
//! directory; absolute paths name files of the machine that wrote them, and a
//! file from elsewhere must not make the ingest read files of this one.) A
//! missing or refused file fails the run naming the file, row and column; a row
//! whose `bytes` and `path` are both null is null. A field column's type
//! must agree across files (integers may widen). The source's
//! [`Source::metadata`]: `huggingface` (the parsed `huggingface` schema metadata
//! `datasets` writes), `class_labels` (the names of each ClassLabel feature among
//! the fields, by column; also `class_names` when there is exactly one) and
//! `value` (`{"column": ..., "hf_struct": true|false, "key_column": ...}`, the
//! key column only when there is one).
//!
//! Memory: every page header of the columns read is checked before the row group
//! is decoded (a page decodes to at most
//! [`MAX_PAGE_SIZE`] bytes, and no more than its compressed bytes can expand to),
//! binary columns are decoded as views (a dictionary value repeated by many rows is
//! held once, not once per row), and each row group is read in batches of as many
//! rows as fit in [`BATCH_BYTES`] by what its pages declare (at most 256 rows,
//! at least one; up to 8192 small rows while they fit in 4 MiB). A field column
//! of strings or binaries keeps its type, so a dictionary-encoded one is decoded
//! as a copy of its entry per row: its longest entry bounds a row.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use bcd_fields::contain_panics;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::ColumnChunkMetaData;

use crate::parquet_columns::{projected_leaves, view_schema};
use crate::parquet_compat::{v2_pages_always_compressed, FlagsSetTrue};
use crate::parquet_fields::{field_specs, FieldTypes, SourceMetadata};
use crate::parquet_pages::{batch_rows, check_chunk, Decoding, PageError, PageErrorKind};
use crate::random_access::{FileAccess, ParquetInput};
use crate::table_rows::{Batch, TableColumns, TableOptions};
use crate::{Fused, Record, Skipped, Source, SourceError};
use parquet::file::reader::Length;

mod open;

pub use crate::parquet_pages::{BATCH_BYTES, MAX_PAGE_SIZE};
use open::expand_inputs;

struct OpenFile {
    /// Shared with its records' origins.
    path: Arc<Path>,
    file: ParquetInput,
    metadata: ArrowReaderMetadata,
    /// The leaf columns read (and whether each is a field's), and the same as a mask.
    leaves: Vec<(usize, bool)>,
    mask: ProjectionMask,
    /// The fields, and whether the value column's `path` is read.
    columns: TableColumns,
    /// Whether binary columns are read as views (see [`view_schema`]).
    views: bool,
    /// The next row group to read, and the reader of the current one.
    next_group: usize,
    reader: Option<ParquetRecordBatchReader>,
    batch: Option<Batch>,
    /// Next row within `batch`, and rows of the file before `batch`.
    row_in_batch: usize,
    rows_before: u64,
}

/// Streams rows of one or more Parquet files, in the order given, rows in order.
pub struct ParquetSource {
    pending: VecDeque<(PathBuf, Option<ParquetInput>)>,
    /// Boxed: it is taken out and put back for every row, and is large (a
    /// Parquet reader and its state), a copy each way when it was not.
    current: Option<Box<OpenFile>>,
    options: TableOptions,
    skipped: Skipped,
    field_types: FieldTypes,
    metadata: SourceMetadata,
}

impl ParquetSource {
    /// A source over `paths` (files, directories or patterns; see [`expand_inputs`]).
    /// Each file's schema is checked when it is reached; the first file's footer is
    /// read here for [`Source::metadata`] (a footer that cannot be read is reported
    /// when the file is reached).
    pub fn new(
        paths: &[PathBuf],
        options: TableOptions,
    ) -> Result<Fused<ParquetSource>, SourceError> {
        let mut pending = VecDeque::new();
        for path in paths {
            pending.extend(expand_inputs(path)?.into_iter().map(|p| (p, None)));
        }
        Self::start(pending, options)
    }

    fn start(
        pending: VecDeque<(PathBuf, Option<ParquetInput>)>,
        options: TableOptions,
    ) -> Result<Fused<ParquetSource>, SourceError> {
        let mut taken = vec![(options.value_column.as_str(), "value column")];
        if let Some(key) = &options.key_column {
            taken.push((key.as_str(), "key column"));
        }
        options.fields.refuse(&taken)?;
        let mut source = ParquetSource {
            pending,
            current: None,
            options,
            skipped: Skipped::default(),
            field_types: FieldTypes::default(),
            metadata: SourceMetadata::default(),
        };
        if let Some((path, input)) = source.pending.front().cloned() {
            let _ = contain_panics(|| source.peek(&path, input));
        }
        Ok(Fused::new(source))
    }

    /// Takes the metadata of the file at `path` into [`Source::metadata`].
    fn peek(&mut self, path: &Path, input: Option<ParquetInput>) -> Result<(), SourceError> {
        let file = match input {
            Some(input) => input,
            None => ParquetInput(Arc::new(
                File::open(path)
                    .and_then(FileAccess::new)
                    .map_err(|source| SourceError::Io {
                        path: path.to_owned(),
                        source,
                    })?,
            )),
        };
        let loaded = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| SourceError::Usage(e.to_string()))?;
        let schema = loaded.schema();
        let fields = field_specs(
            path,
            schema,
            &self.options.fields,
            &self.options.value_column,
            self.options.key_column.as_deref(),
        )?;
        self.metadata.add(
            path,
            schema,
            &self.options.value_column,
            self.options.key_column.as_deref(),
            &fields,
        )
    }

    /// A source over inputs already opened for ranged reads (objects in a store),
    /// named by the paths given (URIs, say) in records' origins and messages.
    pub fn from_inputs(
        inputs: Vec<(PathBuf, ParquetInput)>,
        options: TableOptions,
    ) -> Result<Fused<ParquetSource>, SourceError> {
        Self::start(
            inputs.into_iter().map(|(p, i)| (p, Some(i))).collect(),
            options,
        )
    }

    /// Decodes the next batch of the current file into (values, keys) columns.
    fn load_batch(&self, file: &mut OpenFile) -> Result<bool, SourceError> {
        let rows_so_far =
            file.rows_before + file.batch.as_ref().map_or(0, |b| b.values.len() as u64);
        let batch: RecordBatch = loop {
            if file.reader.is_none() && !Self::next_row_group(file)? {
                return Ok(false);
            }
            match file.reader.as_mut().and_then(Iterator::next) {
                None => file.reader = None,
                Some(Ok(batch)) => break batch,
                Some(Err(e)) => {
                    let (file, location) = (
                        file.path.display().to_string(),
                        format!("rows from {rows_so_far}"),
                    );
                    let reason = e.to_string();
                    // A string column holding other bytes is well-formed Parquet
                    // (pyarrow reads it) whose values are not text: not corrupt.
                    return Err(match reason.contains("non UTF-8") {
                        true => SourceError::Invalid {
                            file,
                            location,
                            reason: format!(
                                "a string (UTF-8) column holds bytes that are not UTF-8 ({reason}); the Parquet reader checks every string it decodes"
                            ),
                        },
                        false => SourceError::Corrupt {
                            file,
                            location,
                            reason,
                        },
                    });
                }
            }
        };
        let loaded = Batch::new(&batch, &file.path, &self.options, &file.columns)?;
        file.rows_before = rows_so_far;
        file.batch = Some(loaded);
        file.row_in_batch = 0;
        Ok(true)
    }

    /// Checks the pages of the next row group's columns and starts reading it, in
    /// batches sized by what the pages declare; false after the last row group.
    fn next_row_group(file: &mut OpenFile) -> Result<bool, SourceError> {
        let group = file.next_group;
        let Some(row_group) = file.metadata.metadata().row_groups().get(group) else {
            return Ok(false);
        };
        file.next_group += 1;
        let rows = u64::try_from(row_group.num_rows()).unwrap_or(0);
        let created_by = file.metadata.metadata().file_metadata().created_by();
        let v2_always_compressed = v2_pages_always_compressed(created_by);
        let mut per_row = 0u64;
        let mut compressed_flags = Vec::new();
        for &(leaf, is_field) in &file.leaves {
            // Field columns keep their types: a dictionary-encoded string column is
            // decoded as plain strings, each row a copy.
            let decoding = Decoding {
                rows,
                expands_dictionary: !file.views || is_field,
                v2_always_compressed,
            };
            let column = row_group
                .columns()
                .get(leaf)
                .ok_or_else(|| SourceError::Corrupt {
                    file: file.path.display().to_string(),
                    location: format!("file metadata, row group {group}"),
                    reason: format!("no column chunk for column {leaf}"),
                })?;
            let bytes = check_chunk(&file.file, column, decoding)
                .map_err(|e| page_error(&file.path, group, column, e))?;
            per_row = per_row.saturating_add(bytes.per_row);
            compressed_flags.extend(bytes.compressed_flags);
        }
        let input = match compressed_flags.is_empty() {
            true => file.file.clone(),
            false => ParquetInput(Arc::new(FlagsSetTrue::new(
                file.file.0.clone(),
                compressed_flags,
            ))),
        };
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(input, file.metadata.clone())
                .with_projection(file.mask.clone())
                .with_row_groups(vec![group])
                .with_batch_size(batch_rows(per_row))
                .build()
                .map_err(|e| SourceError::Corrupt {
                    file: file.path.display().to_string(),
                    location: format!("row group {group}"),
                    reason: e.to_string(),
                })?;
        file.reader = Some(reader);
        Ok(true)
    }

    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        loop {
            if self.current.is_none() {
                let (path, input) = self.pending.pop_front()?;
                let opened =
                    contain_panics(|| self.open(path.clone(), input)).unwrap_or_else(|panic| {
                        Err(corrupt_file(&path, "file metadata".into(), panic))
                    });
                match opened {
                    Ok(file) => self.current = Some(Box::new(file)),
                    Err(e) => return Some(Err(e)),
                }
            }
            let mut file = self.current.take().expect("opened above");
            let exhausted = file
                .batch
                .as_ref()
                .is_none_or(|b| file.row_in_batch >= b.values.len());
            if exhausted {
                let rows =
                    file.rows_before + file.batch.as_ref().map_or(0, |b| b.values.len() as u64);
                let loaded =
                    contain_panics(|| self.load_batch(&mut file)).unwrap_or_else(|panic| {
                        Err(corrupt_file(&file.path, format!("rows from {rows}"), panic))
                    });
                match loaded {
                    Ok(true) => {}
                    Ok(false) => continue, // next file
                    Err(e) => return Some(Err(e)),
                }
            }
            let i = file.row_in_batch;
            file.row_in_batch += 1;
            let row = file.rows_before + i as u64;
            let record = self.row(&file, i, row);
            self.current = Some(file);
            match record {
                Some(record) => return Some(record),
                None => {
                    self.skipped.add("row with a null");
                    continue;
                }
            }
        }
    }

    /// Row `i` of the current batch (row `row` of the file) as a record; `None`
    /// if it is to be skipped for a null.
    fn row(&self, file: &OpenFile, i: usize, row: u64) -> Option<Result<Record, SourceError>> {
        let batch = file.batch.as_ref().expect("loaded above");
        batch.record(i, row, &file.path, &self.options)
    }
}

/// A refused page as a [`SourceError`] naming the row group, column and offset.
fn page_error(
    path: &Path,
    group: usize,
    column: &ColumnChunkMetaData,
    error: PageError,
) -> SourceError {
    let location = format!(
        "row group {group}, column {}, page at byte {}",
        column.column_path(),
        error.offset
    );
    match error.kind {
        PageErrorKind::Corrupt(reason) => SourceError::Corrupt {
            file: path.display().to_string(),
            location,
            reason,
        },
        PageErrorKind::TooLarge(size) => SourceError::TooLarge {
            file: path.display().to_string(),
            location,
            what: "a decoded page".into(),
            size,
            limit: MAX_PAGE_SIZE,
        },
        PageErrorKind::Io(source) => SourceError::Io {
            path: path.to_owned(),
            source,
        },
    }
}

fn corrupt_file(path: &Path, location: String, panic: String) -> SourceError {
    SourceError::Corrupt {
        file: path.display().to_string(),
        location,
        reason: format!("the Parquet decoder failed ({panic})"),
    }
}

impl Iterator for ParquetSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

impl Source for ParquetSource {
    fn keyed(&self) -> bool {
        self.options.key_column.is_some()
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        self.metadata.source_map()
    }

    fn column_metadata(&self) -> crate::ColumnMetadata {
        self.metadata.columns().clone()
    }
}
