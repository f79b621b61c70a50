//! Binary columns of Parquet files (pyarrow, Spark, Hugging Face `datasets`
//! exports), streamed one record batch at a time.
//!
//! Values come from a binary, large_binary, string, large_string (UTF-8 bytes),
//! binary_view, string_view or fixed_size_binary column, or a struct with a `bytes`
//! field (how `datasets` stores Image and Audio features). Keys come from a string
//! or binary column (as bytes) or an integer column (as decimal text);
//! dictionary-encoded columns of those types work too. Every page compression of
//! the `parquet` crate's default build is read (snappy, gzip, zstd, lz4, brotli).
//!
//! Memory: every page header of the columns read is checked before the row group
//! is decoded (a page decodes to at most
//! [`MAX_PAGE_SIZE`] bytes, and no more than its compressed bytes can expand to),
//! binary columns are decoded as views (a dictionary value repeated by many rows is
//! held once, not once per row), and each row group is read in batches of as many
//! rows as fit in [`BATCH_BYTES`] by what its
//! pages declare (at most 256 rows, at least one).

use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::ColumnChunkMetaData;

use crate::parquet_columns::{
    bytes_at, check_key_type, check_value_type, key_bytes_column, projected_leaves,
    value_bytes_column, view_schema,
};
use crate::parquet_pages::{batch_rows, check_chunk, Decoding, PageError, PageErrorKind};
use crate::random_access::{FileAccess, ParquetInput};
use crate::{Fields, Fused, Origin, Record, Skipped, Source, SourceError};
use parquet::file::reader::Length;

pub use crate::parquet_pages::{BATCH_BYTES, MAX_PAGE_SIZE};

/// Which columns a [`ParquetSource`] reads.
#[derive(Clone, Debug, Default)]
pub struct ParquetOptions {
    /// Column holding the values.
    pub value_column: String,
    /// Column holding the keys; without it the source is keyless.
    pub key_column: Option<String>,
    /// Skip (and count) rows whose value or key is null instead of failing.
    pub skip_nulls: bool,
}

struct OpenFile {
    path: PathBuf,
    file: ParquetInput,
    metadata: ArrowReaderMetadata,
    /// The leaf columns read, and the same as a mask.
    leaves: Vec<usize>,
    mask: ProjectionMask,
    /// Whether binary columns are read as views (see [`view_schema`]).
    views: bool,
    /// The next row group to read, and the reader of the current one.
    next_group: usize,
    reader: Option<ParquetRecordBatchReader>,
    batch: Option<(ArrayRef, Option<ArrayRef>)>,
    /// Next row within `batch`, and rows of the file before `batch`.
    row_in_batch: usize,
    rows_before: u64,
}

/// Streams rows of one or more Parquet files, in the order given, rows in order.
pub struct ParquetSource {
    pending: VecDeque<(PathBuf, Option<ParquetInput>)>,
    current: Option<OpenFile>,
    options: ParquetOptions,
    skipped: Skipped,
}

/// Files a Parquet argument names: the file itself, a directory's `*.parquet` files
/// sorted by name, or the files a `*`/`?`/`[...]` pattern in the last component matches.
pub fn expand_inputs(input: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let io = |path: &Path, source| SourceError::Io {
        path: path.to_owned(),
        source,
    };
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pattern = name.contains(['*', '?', '[']).then(|| name.clone());
    let (dir, matcher) = match pattern {
        Some(pattern) => {
            let glob = globset::Glob::new(&pattern)
                .map_err(|e| SourceError::Usage(format!("bad pattern {pattern:?}: {e}")))?
                .compile_matcher();
            (
                input.parent().unwrap_or(Path::new(".")).to_owned(),
                Some(glob),
            )
        }
        None if input.is_dir() => (input.to_owned(), None),
        None => {
            std::fs::metadata(input).map_err(|e| io(input, e))?;
            return Ok(vec![input.to_owned()]);
        }
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
        let entry = entry.map_err(|e| io(&dir, e))?;
        let file_name = entry.file_name();
        let wanted = match &matcher {
            Some(glob) => glob.is_match(&file_name),
            None => Path::new(&file_name)
                .extension()
                .is_some_and(|e| e == "parquet"),
        };
        if wanted && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(SourceError::Usage(format!(
            "{}: no Parquet files found",
            input.display()
        )));
    }
    Ok(files)
}

impl ParquetSource {
    /// A source over `paths` (files, directories or patterns; see [`expand_inputs`]).
    /// Each file's schema is checked when it is reached.
    pub fn new(
        paths: &[PathBuf],
        options: ParquetOptions,
    ) -> Result<Fused<ParquetSource>, SourceError> {
        let mut pending = VecDeque::new();
        for path in paths {
            pending.extend(expand_inputs(path)?.into_iter().map(|p| (p, None)));
        }
        Ok(Fused::new(ParquetSource {
            pending,
            current: None,
            options,
            skipped: Skipped::default(),
        }))
    }

    /// A source over inputs already opened for ranged reads (objects in a store),
    /// named by the paths given (URIs, say) in records' origins and messages.
    pub fn from_inputs(
        inputs: Vec<(PathBuf, ParquetInput)>,
        options: ParquetOptions,
    ) -> Fused<ParquetSource> {
        Fused::new(ParquetSource {
            pending: inputs.into_iter().map(|(p, i)| (p, Some(i))).collect(),
            current: None,
            options,
            skipped: Skipped::default(),
        })
    }

    fn open(&self, path: PathBuf, input: Option<ParquetInput>) -> Result<OpenFile, SourceError> {
        let corrupt = |reason: String| SourceError::Corrupt {
            archive: path.display().to_string(),
            location: "file metadata".into(),
            reason,
        };
        let io = |source| SourceError::Io {
            path: path.clone(),
            source,
        };
        let file = match input {
            Some(input) => input,
            None => ParquetInput(Arc::new(
                File::open(&path).and_then(FileAccess::new).map_err(io)?,
            )),
        };
        let file_len = file.len();
        let loaded = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| corrupt(e.to_string()))?;
        check_chunks(&path, loaded.metadata(), file_len)?;
        let schema = loaded.schema().clone();
        let find = |name: &str| {
            schema.index_of(name).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                SourceError::Usage(format!(
                    "{}: no column {name:?}; the columns are {names:?}",
                    path.display()
                ))
            })
        };
        let value = find(&self.options.value_column)?;
        check_value_type(
            &path,
            &self.options.value_column,
            schema.field(value).data_type(),
        )?;
        let mut columns = vec![self.options.value_column.as_str()];
        if let Some(key) = &self.options.key_column {
            let index = find(key)?;
            check_key_type(&path, key, schema.field(index).data_type())?;
            columns.push(key);
        }
        // Views when the crate accepts them (it does for every type checked above);
        // otherwise the types as written, with batches sized for copied dictionaries.
        let viewed =
            ArrowReaderOptions::new().with_schema(Arc::new(view_schema(&schema, &columns)));
        let (metadata, views) =
            match ArrowReaderMetadata::try_new(loaded.metadata().clone(), viewed) {
                Ok(metadata) => (metadata, true),
                Err(_) => (loaded, false),
            };
        let leaves = projected_leaves(
            metadata.parquet_schema(),
            &schema,
            &self.options.value_column,
            self.options.key_column.as_deref(),
        );
        let mask = ProjectionMask::leaves(metadata.parquet_schema(), leaves.iter().copied());
        Ok(OpenFile {
            path,
            file,
            metadata,
            leaves,
            mask,
            views,
            next_group: 0,
            reader: None,
            batch: None,
            row_in_batch: 0,
            rows_before: 0,
        })
    }

    /// Decodes the next batch of the current file into (values, keys) columns.
    fn load_batch(&self, file: &mut OpenFile) -> Result<bool, SourceError> {
        let rows_so_far = file.rows_before
            + file
                .batch
                .as_ref()
                .map_or(0, |(values, _)| values.len() as u64);
        let batch: RecordBatch = loop {
            if file.reader.is_none() && !Self::next_row_group(file)? {
                return Ok(false);
            }
            match file.reader.as_mut().and_then(Iterator::next) {
                None => file.reader = None,
                Some(Ok(batch)) => break batch,
                Some(Err(e)) => {
                    return Err(SourceError::Corrupt {
                        archive: file.path.display().to_string(),
                        location: format!("rows from {rows_so_far}"),
                        reason: e.to_string(),
                    })
                }
            }
        };
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .cloned()
                .expect("projected column is present")
        };
        let values = value_bytes_column(
            &column(&self.options.value_column),
            &file.path,
            &self.options.value_column,
        )?;
        let keys = match &self.options.key_column {
            Some(name) => Some(key_bytes_column(&column(name), &file.path, name)?),
            None => None,
        };
        file.rows_before = rows_so_far;
        file.batch = Some((values, keys));
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
        let decoding = Decoding {
            rows: u64::try_from(row_group.num_rows()).unwrap_or(0),
            expands_dictionary: !file.views,
        };
        let mut per_row = 0u64;
        for &leaf in &file.leaves {
            let column = row_group
                .columns()
                .get(leaf)
                .ok_or_else(|| SourceError::Corrupt {
                    archive: file.path.display().to_string(),
                    location: format!("file metadata, row group {group}"),
                    reason: format!("no column chunk for column {leaf}"),
                })?;
            let bytes = check_chunk(&file.file, column, decoding)
                .map_err(|e| page_error(&file.path, group, column, e))?;
            per_row = per_row.saturating_add(bytes.per_row);
        }
        let input = file.file.clone();
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(input, file.metadata.clone())
                .with_projection(file.mask.clone())
                .with_row_groups(vec![group])
                .with_batch_size(batch_rows(per_row))
                .build()
                .map_err(|e| SourceError::Corrupt {
                    archive: file.path.display().to_string(),
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
                    Ok(file) => self.current = Some(file),
                    Err(e) => return Some(Err(e)),
                }
            }
            let mut file = self.current.take().expect("opened above");
            let exhausted = file
                .batch
                .as_ref()
                .is_none_or(|(values, _)| file.row_in_batch >= values.len());
            if exhausted {
                let rows =
                    file.rows_before + file.batch.as_ref().map_or(0, |(v, _)| v.len() as u64);
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
            let (values, keys) = file.batch.as_ref().expect("loaded above");
            let value = bytes_at(values.as_ref(), i);
            let key = keys.as_ref().map(|k| bytes_at(k.as_ref(), i));
            let null = match (&value, &key) {
                (None, _) => Some(&self.options.value_column),
                (_, Some(None)) => self.options.key_column.as_ref(),
                _ => None,
            };
            let origin = Origin::Row {
                file: file.path.clone(),
                row: format!("row {row}"),
            };
            let record = match null {
                Some(_) if self.options.skip_nulls => {
                    self.skipped.add("row with a null");
                    self.current = Some(file);
                    continue;
                }
                Some(column) => Err(SourceError::Invalid {
                    file: file.path.display().to_string(),
                    location: format!("row {row}"),
                    reason: format!(
                        "column {column:?} is null (pass `skip_nulls` to skip such rows)"
                    ),
                }),
                None => Ok(Record {
                    key: key.flatten().unwrap_or_default().to_vec(),
                    value: value.unwrap_or_default().to_vec(),
                    origin,
                    fields: Fields::new(),
                }),
            };
            self.current = Some(file);
            return Some(record);
        }
    }
}

/// Checks that every column chunk lies inside the file. The `parquet` crate panics
/// on a negative chunk offset or size (`ColumnChunkMetaData::byte_range`), which
/// corrupt metadata can declare.
fn check_chunks(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
    file_len: u64,
) -> Result<(), SourceError> {
    for (group, row_group) in metadata.row_groups().iter().enumerate() {
        for column in row_group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let len = column.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(start, len)| start.checked_add(len));
            if end.is_none_or(|end| end > file_len) {
                return Err(SourceError::Corrupt {
                    archive: path.display().to_string(),
                    location: format!("file metadata, row group {group}, column {}", column.column_path()),
                    reason: format!(
                        "the column chunk (byte {start}, {len} bytes) is not inside the {file_len}-byte file"
                    ),
                });
            }
        }
    }
    Ok(())
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
            archive: path.display().to_string(),
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

thread_local! {
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running Parquet decoding whose panics [`ParquetSource`]
/// turns into errors. The `parquet` crate panics on some corrupt files instead of
/// returning an error (e.g. definition levels that disagree with their page); the
/// source reports those as a corrupt file naming the rows, so a panic hook can use
/// this to stay quiet about them.
pub fn decoding_parquet() -> bool {
    DECODING.with(Cell::get)
}

/// Runs `f`, returning the message of a panic in it instead of unwinding further.
fn contain_panics<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    DECODING.with(|d| d.set(true));
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    DECODING.with(|d| d.set(false));
    result.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown failure".into())
            // One line: assertion messages span several.
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

fn corrupt_file(path: &Path, location: String, panic: String) -> SourceError {
    SourceError::Corrupt {
        archive: path.display().to_string(),
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
}
