//! Hugging Face `save_to_disk` directories: the rows of a `Dataset` (its
//! `state.json` lists the `data-NNNNN-of-NNNNN.arrow` files, Arrow IPC streams),
//! or of one split of a `DatasetDict` (`dataset_dict.json` lists the splits, a
//! folder each). The columns are taken as the Parquet source takes them
//! ([`TableOptions`], through the same [`TableColumns`] and [`Batch`]), so a
//! table saved to disk gives the same records, fields and metadata
//! (`huggingface`, `class_labels`, `class_names`, `value`; from the `huggingface`
//! schema metadata of each file, which `datasets` writes beside
//! `dataset_info.json`) as the same table in a Parquet file. Binary columns are
//! copied as they are (an Image's encoded bytes are not decoded).
//!
//! Every file is opened as a regular file only. The data files are those
//! `state.json` names, in its order (never a listing of the directory), each a
//! plain file name in the directory. Each IPC message is framed here before
//! Arrow sees it: its metadata of at most [`MAX_MESSAGE_METADATA`] bytes, its
//! body no longer than what is left of the file, so nothing is allocated that
//! the file does not hold; the JSON files are at most [`MAX_JSON_SIZE`] bytes.
//! A file that ends before its end-of-stream marker is truncated (`datasets`
//! always writes it). Each batch's field columns are copied out of its message,
//! which a record's fields would otherwise keep alive until their shard is
//! written, so memory stays at about one batch.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Component, Path, PathBuf};

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::MessageHeader;
use arrow_schema::SchemaRef;
use bcd_fields::contain_panics;
use serde_json::Value;

use crate::parquet_fields::{FieldTypes, SourceMetadata};
use crate::regular_file::{open_regular, read_bounded, regular_error};
use crate::table_rows::{Batch, TableColumns, TableOptions};
use crate::{Fused, Record, Skipped, Source, SourceError};

/// Largest `state.json` or `dataset_dict.json` read.
pub const MAX_JSON_SIZE: u64 = 16 << 20;

/// Largest metadata (flatbuffer) of one IPC message: a schema or a batch header.
pub const MAX_MESSAGE_METADATA: u32 = 64 << 20;

/// Which split and columns a [`HfDiskSource`] reads.
#[derive(Clone, Debug, Default)]
pub struct HfDiskOptions {
    /// The columns, as the Parquet source takes them.
    pub columns: TableOptions,
    /// The split of a `DatasetDict` (required for one, refused for a `Dataset`).
    pub split: Option<String>,
}

/// Whether `dir` looks like a `save_to_disk` directory: `state.json` with
/// `dataset_info.json`, or `dataset_dict.json`.
pub fn is_hf_disk(dir: &Path) -> bool {
    dir.join("dataset_dict.json").is_file()
        || (dir.join("state.json").is_file() && dir.join("dataset_info.json").is_file())
}

/// One data file being read.
struct OpenFile {
    /// Shared with its records' origins.
    path: Arc<Path>,
    reader: BufReader<File>,
    /// Bytes of the file not read yet.
    left: u64,
    /// Byte offset of the next message.
    offset: u64,
    /// Whether the end-of-stream marker was read.
    ended: bool,
    /// The stream's schema, once read, and its dictionaries by id.
    schema: Option<SchemaRef>,
    dictionaries: HashMap<i64, ArrayRef>,
    columns: Option<TableColumns>,
    batch: Option<Batch>,
    /// The body of the record batch `batch` was read from, and the memory of the
    /// one before, which the next body is read into: a body is most of a file
    /// (`datasets` writes batches of 1,000 rows), and memory fresh from the
    /// system is zeroed page by page by the kernel as it is first written.
    body: Option<Buffer>,
    spare: Vec<u8>,
    row_in_batch: usize,
    rows_before: u64,
}

/// Streams the rows of a `save_to_disk` directory, file by file in `state.json`'s
/// order, rows in order.
pub struct HfDiskSource {
    pending: VecDeque<PathBuf>,
    current: Option<OpenFile>,
    options: TableOptions,
    skipped: Skipped,
    field_types: FieldTypes,
    metadata: SourceMetadata,
}

impl HfDiskSource {
    /// A source over the directory `dir` (for a `DatasetDict`, its split
    /// `options.split`). `state.json` is read here, and the first data file's
    /// schema for [`Source::metadata`].
    pub fn new(dir: &Path, options: HfDiskOptions) -> Result<Fused<HfDiskSource>, SourceError> {
        Self::from_dirs(std::slice::from_ref(&dir.to_owned()), options)
    }

    /// A source over several directories in order, as one table: the field
    /// types and the ClassLabel names must agree across all their files (as
    /// across the files of one directory), which a chain of sources would not
    /// check.
    pub fn from_dirs(
        dirs: &[PathBuf],
        options: HfDiskOptions,
    ) -> Result<Fused<HfDiskSource>, SourceError> {
        let mut taken = vec![(options.columns.value_column.as_str(), "value column")];
        if let Some(key) = &options.columns.key_column {
            taken.push((key.as_str(), "key column"));
        }
        options.columns.fields.refuse(&taken)?;
        let mut pending = VecDeque::new();
        for dir in dirs {
            let dataset = choose_split(dir, options.split.as_deref())?;
            pending.extend(data_files(&dataset)?);
        }
        let mut source = HfDiskSource {
            pending,
            current: None,
            options: options.columns,
            skipped: Skipped::default(),
            field_types: FieldTypes::default(),
            metadata: SourceMetadata::default(),
        };
        // The first file's schema now, so the metadata is known before any row
        // (an error is reported again when the file is read).
        if let Some(first) = source.pending.front().cloned() {
            let _ = contain_panics(|| {
                let mut file = source.open(first)?;
                source.read_schema(&mut file)
            });
        }
        Ok(Fused::new(source))
    }

    fn open(&self, path: PathBuf) -> Result<OpenFile, SourceError> {
        let (file, len) = open_regular(&path).map_err(|e| regular_error(&path, e))?;
        Ok(OpenFile {
            path: Arc::from(path),
            reader: BufReader::new(file),
            left: len,
            offset: 0,
            ended: false,
            schema: None,
            dictionaries: HashMap::new(),
            columns: None,
            batch: None,
            body: None,
            spare: Vec::new(),
            row_in_batch: 0,
            rows_before: 0,
        })
    }

    /// Reads messages up to the schema and takes the columns it gives.
    fn read_schema(&mut self, file: &mut OpenFile) -> Result<(), SourceError> {
        if next_message(file)?.is_some() || file.schema.is_none() {
            return Err(corrupt_at(
                file,
                0,
                "the stream does not begin with a schema".into(),
            ));
        }
        let schema = file.schema.clone().expect("read above");
        file.columns = Some(TableColumns::new(
            &file.path,
            &schema,
            &self.options,
            &mut self.field_types,
            &mut self.metadata,
        )?);
        Ok(())
    }

    /// The next record batch of `file`, made into [`Batch`]; false at its end.
    fn load_batch(&mut self, file: &mut OpenFile) -> Result<bool, SourceError> {
        if file.columns.is_none() {
            self.read_schema(file)?;
        }
        // The rows of the batch before are all read and their records own their
        // bytes: its body's memory is taken back for the next one (unless some
        // array still holds it, when it is let go of).
        file.rows_before += file.batch.take().map_or(0, |b| b.values.len() as u64);
        if let Some(Ok(spare)) = file.body.take().map(Buffer::into_vec::<u8>) {
            file.spare = spare;
        }
        let Some(batch) = next_message_batch(file)? else {
            return Ok(false);
        };
        let columns = file.columns.as_ref().expect("read above");
        let mut loaded = Batch::new(&batch, &file.path, &self.options, columns)?;
        loaded.own_fields(&file.path)?;
        file.batch = Some(loaded);
        file.row_in_batch = 0;
        Ok(true)
    }

    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        loop {
            if self.current.is_none() {
                let path = self.pending.pop_front()?;
                match self.open(path) {
                    Ok(file) => self.current = Some(file),
                    Err(e) => return Some(Err(e)),
                }
            }
            let mut file = self.current.take().expect("opened above");
            let exhausted =
                (file.batch.as_ref()).is_none_or(|b| file.row_in_batch >= b.values.len());
            if exhausted {
                let loaded =
                    contain_panics(|| self.load_batch(&mut file)).unwrap_or_else(|panic| {
                        Err(corrupt_at(
                            &file,
                            file.offset,
                            format!("the Arrow decoder failed ({panic})"),
                        ))
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
            let batch = file.batch.as_ref().expect("loaded above");
            let record = batch.record(i, row, &file.path, &self.options);
            self.current = Some(file);
            match record {
                Some(record) => return Some(record),
                None => self.skipped.add("row with a null"),
            }
        }
    }
}

/// The messages of `file` until one is a record batch; `None` after its
/// end-of-stream marker. A file that ends before the marker is truncated
/// (`datasets` always writes it): cut at a message boundary, it would otherwise
/// read as a shorter table.
fn next_message_batch(file: &mut OpenFile) -> Result<Option<RecordBatch>, SourceError> {
    while !file.ended {
        if let Some(batch) = next_message(file)? {
            return Ok(Some(batch));
        }
    }
    Ok(None)
}

/// Reads one IPC message of `file` (its framing, metadata and body, each bounded
/// before it is read) and decodes it: a record batch, or `None` for a schema, a
/// dictionary or the end-of-stream marker (after which `file.ended`).
fn next_message(file: &mut OpenFile) -> Result<Option<RecordBatch>, SourceError> {
    let at = file.offset;
    let mut framed = read_exact(file, 4, at, Vec::new())?;
    if framed == [0xff; 4] {
        framed.extend(read_exact(file, 4, at, Vec::new())?);
    }
    let size = u32::from_le_bytes(framed[framed.len() - 4..].try_into().expect("4 bytes"));
    if size == 0 {
        // End of stream: what follows is not read.
        file.ended = true;
        return Ok(None);
    }
    if size > MAX_MESSAGE_METADATA {
        return Err(SourceError::TooLarge {
            file: file.path.display().to_string(),
            location: format!("message at byte {at}"),
            what: "the message metadata".into(),
            size: size.into(),
            limit: MAX_MESSAGE_METADATA.into(),
        });
    }
    let metadata = read_exact(file, u64::from(size), at, Vec::new())?;
    let message = arrow_ipc::root_as_message(&metadata).map_err(|e| {
        corrupt_at(
            file,
            at,
            format!("the message metadata is not a valid flatbuffer ({e})"),
        )
    })?;
    let body_len = u64::try_from(message.bodyLength()).map_err(|_| {
        corrupt_at(
            file,
            at,
            "the message declares a negative body length".into(),
        )
    })?;
    let spare = match message.header_type() {
        MessageHeader::RecordBatch => std::mem::take(&mut file.spare),
        _ => Vec::new(),
    };
    let body = Buffer::from_vec(read_exact(file, body_len, at, spare)?);
    let version = message.version();
    let path = file.path.clone();
    let arrow = |e: arrow_schema::ArrowError| corrupt_in(&path, at, e.to_string());
    match (message.header_type(), &file.schema) {
        (MessageHeader::Schema, None) => {
            let schema = message
                .header_as_schema()
                .ok_or_else(|| corrupt_at(file, at, "the schema message holds no schema".into()))?;
            let schema = arrow_ipc::convert::try_fb_to_schema(schema).map_err(arrow)?;
            file.schema = Some(Arc::new(schema));
            Ok(None)
        }
        (MessageHeader::Schema, Some(_)) => {
            Err(corrupt_at(file, at, "a second schema in the stream".into()))
        }
        (_, None) => Err(corrupt_at(file, at, "a message before the schema".into())),
        (MessageHeader::DictionaryBatch, Some(schema)) => {
            let dictionary = message.header_as_dictionary_batch().ok_or_else(|| {
                corrupt_at(
                    file,
                    at,
                    "the dictionary message holds no dictionary".into(),
                )
            })?;
            let schema = schema.clone();
            let mut dictionaries = std::mem::take(&mut file.dictionaries);
            let read = arrow_ipc::reader::read_dictionary(
                &body,
                dictionary,
                &schema,
                &mut dictionaries,
                &version,
            );
            file.dictionaries = dictionaries;
            read.map_err(arrow)?;
            Ok(None)
        }
        (MessageHeader::RecordBatch, Some(schema)) => {
            let batch = message
                .header_as_record_batch()
                .ok_or_else(|| corrupt_at(file, at, "the batch message holds no batch".into()))?;
            // Arrow checks every buffer and node against the body and validates
            // the arrays it builds.
            file.body = Some(body.clone());
            arrow_ipc::reader::read_record_batch(
                &body,
                batch,
                schema.clone(),
                &file.dictionaries,
                None,
                &version,
            )
            .map(Some)
            .map_err(arrow)
        }
        (other, Some(_)) => Err(corrupt_at(
            file,
            at,
            format!("a message of type {other:?}, which a stream does not hold"),
        )),
    }
}

/// Reads `len` bytes of the message at byte `at` (into `memory` when it has room
/// for them), refusing more than the file holds before anything is allocated.
fn read_exact(
    file: &mut OpenFile,
    len: u64,
    at: u64,
    memory: Vec<u8>,
) -> Result<Vec<u8>, SourceError> {
    if len > file.left {
        return Err(corrupt_at(
            file,
            at,
            format!(
                "the message declares {len} more bytes, but the file holds only {} more",
                file.left
            ),
        ));
    }
    // Read into reserved, not zero-filled, memory: a batch's body is a large
    // part of the file, and filling it with zeros first is one more pass over it.
    let mut bytes = memory;
    bytes.clear();
    if bytes.capacity() < len as usize {
        bytes = Vec::with_capacity(len as usize);
    }
    let read = (&mut file.reader)
        .take(len)
        .read_to_end(&mut bytes)
        .map_err(|source| SourceError::Io {
            path: file.path.to_path_buf(),
            source,
        })?;
    if read as u64 != len {
        // The file shrank since it was opened.
        return Err(SourceError::Io {
            path: file.path.to_path_buf(),
            source: std::io::ErrorKind::UnexpectedEof.into(),
        });
    }
    file.left -= len;
    file.offset += len;
    Ok(bytes)
}

fn corrupt_at(file: &OpenFile, at: u64, reason: String) -> SourceError {
    corrupt_in(&file.path, at, reason)
}

fn corrupt_in(path: &Path, at: u64, reason: String) -> SourceError {
    SourceError::Corrupt {
        file: path.display().to_string(),
        location: format!("message at byte {at}"),
        reason,
    }
}

/// The JSON document in the file at `path`, of at most [`MAX_JSON_SIZE`] bytes.
fn read_json(path: &Path) -> Result<Value, SourceError> {
    let text = read_bounded(path, MAX_JSON_SIZE, "the JSON document")?;
    serde_json::from_slice(&text).map_err(|e| SourceError::Invalid {
        file: path.display().to_string(),
        location: format!("line {}, column {}", e.line(), e.column()),
        reason: format!("not JSON as `datasets` writes it: {e}"),
    })
}

/// A name `datasets` writes inside its directory: one plain path component.
fn plain_name(name: &str) -> bool {
    let mut components = Path::new(name).components();
    matches!(components.next(), Some(Component::Normal(_))) && components.next().is_none()
}

/// The directory of the `Dataset` to read: `dir`, or its split `split` if `dir` is
/// a `DatasetDict`.
fn choose_split(dir: &Path, split: Option<&str>) -> Result<PathBuf, SourceError> {
    let dict = dir.join("dataset_dict.json");
    if !dict.exists() {
        return match split {
            None => Ok(dir.to_owned()),
            Some(split) => Err(SourceError::Usage(format!(
                "{}: `split` {split:?} given, but this is a single Dataset (it has no dataset_dict.json), not a DatasetDict",
                dir.display()
            ))),
        };
    }
    let invalid = |reason: String| SourceError::Invalid {
        file: dict.display().to_string(),
        location: "\"splits\"".into(),
        reason,
    };
    let splits: Vec<String> = match read_json(&dict)?.get("splits") {
        Some(Value::Array(splits)) => splits
            .iter()
            .map(|s| match s.as_str() {
                Some(name) if plain_name(name) => Ok(name.to_owned()),
                _ => Err(invalid(format!("{s} is not the name of a split folder"))),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(invalid("no list of split names".into())),
    };
    match split {
        Some(split) if splits.iter().any(|s| s == split) => Ok(dir.join(split)),
        Some(split) => Err(SourceError::Usage(format!(
            "{}: no split {split:?}; the splits are {splits:?}",
            dir.display()
        ))),
        None => Err(SourceError::Usage(format!(
            "{}: a DatasetDict of splits {splits:?}: choose one with `split`",
            dir.display()
        ))),
    }
}

/// The data files `state.json` of the `Dataset` in `dir` names, in its order.
fn data_files(dir: &Path) -> Result<VecDeque<PathBuf>, SourceError> {
    let state = dir.join("state.json");
    let invalid = |reason: String| SourceError::Invalid {
        file: state.display().to_string(),
        location: "\"_data_files\"".into(),
        reason,
    };
    match read_json(&state)?.get("_data_files") {
        Some(Value::Array(files)) => files
            .iter()
            .map(
                |entry| match entry.get("filename").and_then(Value::as_str) {
                    Some(name) if plain_name(name) => Ok(dir.join(name)),
                    _ => Err(invalid(format!(
                        "{entry} does not name a file of the directory (`filename`)"
                    ))),
                },
            )
            .collect(),
        _ => Err(invalid("no list of data files".into())),
    }
}

impl Iterator for HfDiskSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

impl Source for HfDiskSource {
    fn keyed(&self) -> bool {
        self.options.key_column.is_some()
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    fn metadata(&self) -> serde_json::Map<String, Value> {
        self.metadata.source_map()
    }

    fn column_metadata(&self) -> crate::ColumnMetadata {
        self.metadata.columns().clone()
    }
}
