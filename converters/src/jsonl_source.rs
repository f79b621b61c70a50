//! JSON Lines files (`.jsonl`, also gzip or zstd compressed, told by their magic
//! bytes): one JSON object per line, one record per object.
//!
//! The value is the string field [`JsonlOptions::value_field`] (its UTF-8 bytes,
//! or with [`JsonlOptions::value_base64`] the bytes its base64 text encodes); the
//! key, with [`JsonlOptions::key_field`], is that field's string or its integer
//! in decimal. Every other field of the object is stored beside the record, typed
//! by an Arrow schema, as arrow-json decodes it: lines are decoded in batches
//! into Arrow record batches and a record's fields are its row of the batch's
//! field columns ([`Fields::row`], read as [`crate::FieldValue::Arrow`]).
//!
//! The schema is [`JsonlOptions::schema`] when given (fields it does not name
//! are then left out). Otherwise it is inferred by arrow-json's
//! `infer_json_schema` from the first [`INFER_LINES`] lines of the source (fewer
//! when they pass [`INFER_BYTES`]), across files in order: integers are Int64,
//! other numbers Float64, an integer and a float in one field Float64, arrays
//! lists, objects structs, a field that is always null Null; other mixes (a
//! number and a string, a scalar and an object) are an error naming the first
//! line that brings the conflict. A later line that does not fit the inferred
//! schema fails naming its file and line: a field of another type (arrow-json's
//! error), or a field the schema lacks (arrow-json's strict mode, since leaving
//! it out would lose data silently; pass a schema to choose the fields).
//! Either way the value field is a string column and the key field a string or
//! an integer one (added when the schema lacks them).
//!
//! Blank lines are passed over and a UTF-8 byte-order mark at the start of a file
//! is dropped. A line that is not one JSON object, is longer than
//! [`MAX_LINE_BYTES`], nests more than [`MAX_DEPTH`] levels, has no value (or a
//! null one), a value that is not a string, bad base64, or a key that is missing,
//! null or neither string nor integer fails naming its file and line.
//!
//! Lines are read in order on the thread that takes the records, in chunks of
//! at most [`BATCH_ROWS`] lines or the line that passes [`BATCH_BYTES`], and
//! decoded on [`JsonlOptions::threads`] threads of their own, each chunk into
//! one Arrow batch; the records come back in the lines' order, and an error
//! after the records of the lines before it, whichever thread decodes what.
//! Memory holds at most two chunks a decode thread (one without them), and no
//! more than [`IN_FLIGHT_BYTES`] of lines past a chunk.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_json::reader::{Decoder, ReaderBuilder};
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};
use base64::Engine;

use crate::compression::{self, Compression};
use crate::jsonl_fields::{arrow_message, infer_schema, value_and_key_columns};
pub use crate::jsonl_fields::{INFER_BYTES, INFER_LINES};
use crate::regular_file::{open_regular, ReadRegularError};
use crate::{
    Fields, Fused, LazyInput, Origin, Record, RowAt, Skipped, Source, SourceColumns, SourceError,
};

/// Longest line accepted: 64 MiB. A longer one is an error before it is held.
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// Deepest nesting of arrays and objects accepted in a line: 128 levels, the
/// limit of `serde_json` (which infers the schema).
pub const MAX_DEPTH: usize = 128;
/// Lines decoded into one Arrow batch at most.
pub const BATCH_ROWS: usize = 1024;
/// Bytes of lines decoded into one batch at most (the line that passes it is
/// the last one).
pub const BATCH_BYTES: usize = 8 << 20;
/// Bytes of lines handed to the decode threads and not yet given back as
/// records, at most (and one chunk more): 32 MiB, whatever the threads.
pub const IN_FLIGHT_BYTES: usize = 4 * BATCH_BYTES;
/// Decode threads by default: one a core, at most this many (more decode
/// faster than one writer takes the records).
pub const DEFAULT_THREADS_MAX: usize = 8;

/// How a [`JsonlSource`] reads its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonlOptions {
    /// The string field holding the value. Default: `text`.
    pub value_field: String,
    /// The value field is base64 text (RFC 4648, standard alphabet, padding
    /// optional) of the value's bytes.
    pub value_base64: bool,
    /// Key records by this field (a string, or an integer written in decimal).
    /// Default: keyless.
    pub key_field: Option<String>,
    /// The fields and their types. Default: inferred (see the module
    /// documentation).
    pub schema: Option<SchemaRef>,
    /// Threads decoding lines into records, beside the one reading them
    /// (`0`: that one decodes them too). Default: one a core, at most
    /// [`DEFAULT_THREADS_MAX`].
    pub threads: usize,
}

impl Default for JsonlOptions {
    fn default() -> JsonlOptions {
        JsonlOptions {
            value_field: "text".into(),
            value_base64: false,
            key_field: None,
            schema: None,
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(DEFAULT_THREADS_MAX),
        }
    }
}

/// One line: which file, its number from 1, its bytes (without the newline).
struct Line {
    file: usize,
    number: u64,
    bytes: Vec<u8>,
}

/// The lines of one (decompressed) file, each bounded by [`MAX_LINE_BYTES`].
struct LineReader {
    reader: BufReader<Box<dyn Read + Send>>,
    /// Number of the last line read.
    number: u64,
}

/// A decoded batch and where its rows came from.
struct Batch {
    batch: RecordBatch,
    /// Its field columns, which each record holds a row of (`None`: no field).
    fields: Option<Arc<SourceColumns>>,
    lines: Vec<(usize, u64)>,
}

/// The records of a chunk of lines, in order, and the error that ended them
/// (the chunk's later lines give no record).
struct Decoded {
    records: Vec<Record>,
    error: Option<SourceError>,
}

/// Decodes chunks of lines into records: the schema's decoder and what a
/// record is made of. The source's own (without decode threads) or a decode
/// thread's; each decodes a chunk alone, so chunks decode in any order.
struct LineDecoder {
    /// Shared with their records' origins.
    files: Arc<[Arc<Path>]>,
    builder: ReaderBuilder,
    decoder: Decoder,
    schema: SchemaRef,
    value_at: usize,
    key_at: Option<usize>,
    /// Field names of the columns, `None` for the value and key columns.
    field_names: Arc<[Option<Arc<str>>]>,
    value_base64: bool,
}

/// Streams the objects of JSON Lines files as records with fields.
///
/// The lines are read on the thread that calls `next` and decoded in chunks
/// (at most [`BATCH_ROWS`] lines or [`BATCH_BYTES`]) on [`JsonlOptions::threads`]
/// threads of their own, each chunk alone, and given back in order: at most
/// two chunks per thread are in flight.
pub struct JsonlSource {
    /// Shared with their records' origins.
    files: Arc<[Arc<Path>]>,
    /// For each file, how to open it when it is not a local path (an object in a
    /// store, streamed).
    inputs: Vec<Option<LazyInput>>,
    /// The file `reader` reads, and the next one to open.
    current: usize,
    reader: Option<LineReader>,
    /// Lines read ahead to infer the schema, to decode first.
    pending: VecDeque<Line>,
    /// Decodes the chunks without decode threads (and is what they copy).
    decoder: LineDecoder,
    /// Decode threads to start, and those started (at the first chunk).
    threads: usize,
    decoding: Option<DecodeThreads>,
    /// Chunks handed out and not yet given back, in order, and their lines'
    /// bytes.
    queue: VecDeque<Chunk>,
    queued_bytes: usize,
    /// Every line is in a chunk handed out (the end, or a read error, reached).
    read_all: bool,
    /// The records of the chunk being given back, and the error after them.
    records: std::vec::IntoIter<Record>,
    error: Option<SourceError>,
    skipped: Skipped,
}

/// A chunk handed out, to be given back in its turn.
enum Chunk {
    /// Being decoded by decode thread `n`, of these bytes of lines.
    Thread(usize, usize),
    /// To be decoded here (no decode threads).
    Here(Vec<Line>),
    /// A read error where the chunk would have begun.
    Failed(SourceError),
}

/// The decode threads: each takes chunks from its own channel and gives their
/// records back on its own, so chunk `i` goes to thread `i % n` and comes back
/// from it in order.
struct DecodeThreads {
    lines: Vec<SyncSender<Vec<Line>>>,
    decoded: Vec<Receiver<Decoded>>,
    handles: Vec<JoinHandle<()>>,
    /// Chunks handed out so far.
    sent: usize,
}

impl DecodeThreads {
    /// Starts `n` threads decoding with copies of `decoder`; `None` if not even
    /// one could be started (the source then decodes on its own thread).
    fn start(n: usize, decoder: &LineDecoder) -> Option<DecodeThreads> {
        let mut threads = DecodeThreads {
            lines: Vec::new(),
            decoded: Vec::new(),
            handles: Vec::new(),
            sent: 0,
        };
        for i in 0..n {
            let Ok(mut decoder) = decoder.copy() else {
                break;
            };
            // Two chunks a thread at most (`fill`): one being decoded, one waiting;
            // their records wait in `decoded` without blocking the thread.
            let (to_thread, lines) = sync_channel::<Vec<Line>>(1);
            let (done, decoded) = sync_channel::<Decoded>(2);
            let spawned = std::thread::Builder::new()
                .name(format!("jsonl-decode-{i}"))
                .spawn(move || {
                    for chunk in lines {
                        if done.send(decoder.decode(chunk)).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(handle) => {
                    threads.lines.push(to_thread);
                    threads.decoded.push(decoded);
                    threads.handles.push(handle);
                }
                Err(_) => break,
            }
        }
        (!threads.handles.is_empty()).then_some(threads)
    }

    fn len(&self) -> usize {
        self.handles.len()
    }

    /// Hands `chunk` to the next thread; which one, to take its records back.
    fn send(&mut self, chunk: Vec<Line>) -> Result<usize, SourceError> {
        let n = self.sent % self.len();
        self.sent += 1;
        self.lines[n].send(chunk).map_err(|_| stopped())?;
        Ok(n)
    }

    /// The records of the oldest chunk thread `n` has.
    fn receive(&mut self, n: usize) -> Result<Decoded, SourceError> {
        self.decoded[n].recv().map_err(|_| stopped())
    }
}

impl Drop for DecodeThreads {
    /// Closes the channels and waits for the threads, which end after the chunk
    /// each is decoding: no thread outlives the source.
    fn drop(&mut self) {
        self.decoded.clear();
        self.lines.clear();
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

/// The error of line `line` of file `file` (of `files`).
fn line_error(
    files: &[Arc<Path>],
    file: usize,
    line: u64,
    reason: impl Into<String>,
) -> SourceError {
    SourceError::Invalid {
        file: files[file].display().to_string(),
        location: format!("line {line}"),
        reason: reason.into(),
    }
}

/// A decode thread's channel closed: it stopped, which only a bug can cause.
fn stopped() -> SourceError {
    SourceError::Usage("internal error: a JSON Lines decode thread stopped".into())
}

impl JsonlSource {
    /// A source over the JSON Lines files `paths`, in order. Every file is
    /// checked to exist, and the schema is inferred unless given, before the
    /// source is returned.
    pub fn new(
        paths: &[PathBuf],
        options: JsonlOptions,
    ) -> Result<Fused<JsonlSource>, SourceError> {
        for path in paths {
            std::fs::metadata(path).map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
        }
        Self::start(paths.iter().map(|p| (p.clone(), None)).collect(), options)
    }

    /// A source over inputs opened one after another as they are reached (objects
    /// in a store, streamed), in order, named in records' origins and messages
    /// by their names (URIs, say).
    pub fn from_inputs(
        inputs: Vec<LazyInput>,
        options: JsonlOptions,
    ) -> Result<Fused<JsonlSource>, SourceError> {
        Self::start(
            inputs
                .into_iter()
                .map(|input| (PathBuf::from(&input.name), Some(input)))
                .collect(),
            options,
        )
    }

    fn start(
        files: Vec<(PathBuf, Option<LazyInput>)>,
        options: JsonlOptions,
    ) -> Result<Fused<JsonlSource>, SourceError> {
        let (files, inputs): (Vec<PathBuf>, _) = files.into_iter().unzip();
        let files: Arc<[Arc<Path>]> = files.into_iter().map(Arc::from).collect();
        let mut source = JsonlSource {
            // Replaced below, once the schema is known.
            decoder: LineDecoder::empty(Arc::clone(&files))?,
            files,
            inputs,
            current: 0,
            reader: None,
            pending: VecDeque::new(),
            threads: options.threads,
            decoding: None,
            queue: VecDeque::new(),
            queued_bytes: 0,
            read_all: false,
            records: Vec::new().into_iter(),
            error: None,
            skipped: Skipped::default(),
        };
        let (schema, strict) = match &options.schema {
            Some(schema) => (schema.as_ref().clone(), false),
            None => (source.infer()?, true),
        };
        let schema = Arc::new(value_and_key_columns(
            schema,
            &options.value_field,
            options.key_field.as_deref(),
            options.schema.is_some(),
        )?);
        source.decoder = LineDecoder::new(Arc::clone(&source.files), schema, &options, strict)?;
        Ok(Fused::new(source))
    }

    /// The schema the lines are decoded with (given or inferred, with the value
    /// and key columns).
    pub fn schema(&self) -> &SchemaRef {
        &self.decoder.schema
    }

    fn path(&self, file: usize) -> &Path {
        &self.files[file]
    }

    fn error_at(&self, file: usize, line: u64, reason: impl Into<String>) -> SourceError {
        line_error(&self.files, file, line, reason)
    }

    /// Reads the first lines into `pending` and infers the schema from them.
    fn infer(&mut self) -> Result<Schema, SourceError> {
        let mut values = Vec::new();
        let mut bytes = 0;
        while values.len() < INFER_LINES && bytes < INFER_BYTES {
            let Some(line) = self.read_line()? else { break };
            let value: serde_json::Value = serde_json::from_slice(&line.bytes)
                .map_err(|e| self.error_at(line.file, line.number, json_error(&e)))?;
            if !value.is_object() {
                return Err(self.error_at(line.file, line.number, "not a JSON object"));
            }
            bytes += line.bytes.len();
            values.push(value);
            self.pending.push_back(line);
        }
        let lines: Vec<&[u8]> = self.pending.iter().map(|line| &line.bytes[..]).collect();
        infer_schema(&values, &lines).map_err(|(at, reason)| {
            let line = &self.pending[at];
            self.error_at(line.file, line.number, reason)
        })
    }

    /// The next non-blank line of the files, read from disk.
    fn read_line(&mut self) -> Result<Option<Line>, SourceError> {
        loop {
            if self.reader.is_none() {
                if self.current == self.files.len() {
                    return Ok(None);
                }
                self.reader = Some(match &self.inputs[self.current] {
                    Some(input) => {
                        let raw = (input.open)().map_err(|source| SourceError::Io {
                            path: self.files[self.current].to_path_buf(),
                            source,
                        })?;
                        decode(self.path(self.current), raw)?
                    }
                    None => open(self.path(self.current))?,
                });
            }
            let reader = self.reader.as_mut().expect("opened above");
            let file = self.current;
            match reader.next_line(&self.files[file])? {
                Some((number, bytes)) => {
                    if bytes.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Ok(Some(Line {
                        file,
                        number,
                        bytes,
                    }));
                }
                None => {
                    self.reader = None;
                    self.current += 1;
                }
            }
        }
    }

    /// The next line: read ahead for inference, else from disk.
    fn next_line(&mut self) -> Result<Option<Line>, SourceError> {
        match self.pending.pop_front() {
            Some(line) => Ok(Some(line)),
            None => self.read_line(),
        }
    }

    /// Reads the next chunk of lines: at most [`BATCH_ROWS`], the last the one
    /// that reaches [`BATCH_BYTES`]. The lines read before an error come first,
    /// as a chunk of their own.
    fn read_chunk(&mut self) -> (Vec<Line>, Option<SourceError>) {
        let mut lines = Vec::new();
        let mut bytes = 0;
        while lines.len() < BATCH_ROWS && bytes < BATCH_BYTES {
            match self.next_line() {
                Ok(Some(line)) => {
                    bytes += line.bytes.len();
                    lines.push(line);
                }
                Ok(None) => {
                    self.read_all = true;
                    break;
                }
                Err(error) => {
                    self.read_all = true;
                    return (lines, Some(error));
                }
            }
        }
        (lines, None)
    }

    /// Hands out chunks until two a decode thread are in flight (one without
    /// threads), or [`IN_FLIGHT_BYTES`] of lines, or every line is handed out.
    fn fill(&mut self) {
        if self.decoding.is_none() && self.threads > 0 {
            self.decoding = DecodeThreads::start(self.threads, &self.decoder);
            // Without them, decoding here.
            self.threads = 0;
        }
        let most = self.decoding.as_ref().map_or(1, |t| 2 * t.len());
        while !self.read_all && self.queue.len() < most && self.queued_bytes < IN_FLIGHT_BYTES {
            let (lines, error) = self.read_chunk();
            if !lines.is_empty() {
                let bytes = lines.iter().map(|line| line.bytes.len()).sum();
                let chunk = match &mut self.decoding {
                    Some(threads) => match threads.send(lines) {
                        Ok(n) => {
                            self.queued_bytes += bytes;
                            Chunk::Thread(n, bytes)
                        }
                        Err(error) => Chunk::Failed(error),
                    },
                    None => Chunk::Here(lines),
                };
                self.queue.push_back(chunk);
            }
            if let Some(error) = error {
                self.queue.push_back(Chunk::Failed(error));
            }
        }
    }

    /// The records of the next chunk, in order; `None` after the last.
    fn next_chunk(&mut self) -> Option<Decoded> {
        self.fill();
        let decoded = match self.queue.pop_front()? {
            Chunk::Thread(n, bytes) => match &mut self.decoding {
                Some(threads) => {
                    self.queued_bytes -= bytes;
                    threads.receive(n).unwrap_or_else(|error| Decoded {
                        records: Vec::new(),
                        error: Some(error),
                    })
                }
                None => Decoded {
                    records: Vec::new(),
                    error: Some(stopped()),
                },
            },
            Chunk::Here(lines) => self.decoder.decode(lines),
            Chunk::Failed(error) => Decoded {
                records: Vec::new(),
                error: Some(error),
            },
        };
        Some(decoded)
    }
}

impl LineDecoder {
    fn new(
        files: Arc<[Arc<Path>]>,
        schema: SchemaRef,
        options: &JsonlOptions,
        strict: bool,
    ) -> Result<LineDecoder, SourceError> {
        let value_at = schema.index_of(&options.value_field).map_err(internal)?;
        let key_at = match &options.key_field {
            Some(key) => Some(schema.index_of(key).map_err(internal)?),
            None => None,
        };
        let field_names = schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| {
                (i != value_at && Some(i) != key_at).then(|| Arc::from(field.name().as_str()))
            })
            .collect();
        let builder = ReaderBuilder::new(Arc::clone(&schema))
            // One more than a batch holds: a batch is flushed before it fills, so a
            // line is always decoded whole.
            .with_batch_size(BATCH_ROWS + 1)
            .with_strict_mode(strict);
        Ok(LineDecoder {
            files,
            decoder: builder.clone().build_decoder().map_err(internal)?,
            builder,
            value_at,
            key_at,
            field_names,
            value_base64: options.value_base64,
            schema,
        })
    }

    /// A decoder of no column, for a source whose schema is being inferred.
    fn empty(files: Arc<[Arc<Path>]>) -> Result<LineDecoder, SourceError> {
        let schema = Arc::new(Schema::empty());
        let builder = ReaderBuilder::new(Arc::clone(&schema));
        Ok(LineDecoder {
            files,
            decoder: builder.clone().build_decoder().map_err(internal)?,
            builder,
            schema,
            value_at: 0,
            key_at: None,
            field_names: Arc::from(Vec::new()),
            value_base64: false,
        })
    }

    /// Another decoder of the same lines (for a decode thread).
    fn copy(&self) -> Result<LineDecoder, SourceError> {
        Ok(LineDecoder {
            files: Arc::clone(&self.files),
            builder: self.builder.clone(),
            decoder: self.builder.clone().build_decoder().map_err(internal)?,
            schema: Arc::clone(&self.schema),
            value_at: self.value_at,
            key_at: self.key_at,
            field_names: Arc::clone(&self.field_names),
            value_base64: self.value_base64,
        })
    }

    /// The records of `lines`, in order, up to the first line or record in error.
    fn decode(&mut self, lines: Vec<Line>) -> Decoded {
        let batch = match self.decode_batch(&lines) {
            Ok(batch) => batch,
            Err(error) => {
                return Decoded {
                    records: Vec::new(),
                    error: Some(error),
                }
            }
        };
        let mut records = Vec::with_capacity(batch.batch.num_rows());
        for row in 0..batch.batch.num_rows() {
            match self.record(&batch, row) {
                Ok(record) => records.push(record),
                Err(error) => {
                    return Decoded {
                        records,
                        error: Some(error),
                    }
                }
            }
        }
        Decoded {
            records,
            error: None,
        }
    }

    /// Decodes `lines` (at least one) into one batch.
    fn decode_batch(&mut self, lines: &[Line]) -> Result<Batch, SourceError> {
        // A failed chunk may leave rows behind; each chunk starts afresh.
        if !self.decoder.is_empty() || self.decoder.has_partial_record() {
            self.decoder = self.builder.clone().build_decoder().map_err(internal)?;
        }
        for line in lines {
            let files = &self.files;
            let at = |reason: String| line_error(files, line.file, line.number, reason);
            if nesting_exceeds(&line.bytes, MAX_DEPTH) {
                return Err(at(format!(
                    "arrays and objects nested more than {MAX_DEPTH} levels deep"
                )));
            }
            // arrow-json's decoder lets some invalid JSON through (a trailing comma):
            // the line is checked as the inference window's lines are.
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&line.bytes) {
                return Err(at(json_error(&e)));
            }
            let before = self.decoder.len();
            let consumed = self
                .decoder
                .decode(&line.bytes)
                .map_err(|e| at(format!("not valid JSON: {}", arrow_message(&e))))?;
            if self.decoder.has_partial_record() {
                return Err(at(
                    "the line ends inside a JSON value: each line must hold one whole JSON object"
                        .into(),
                ));
            }
            if consumed < line.bytes.len() || self.decoder.len() != before + 1 {
                return Err(at("more than one JSON value on the line".into()));
            }
        }
        match self.decoder.flush() {
            Ok(Some(batch)) => Ok(Batch {
                fields: self.field_columns(&batch)?,
                batch,
                lines: lines.iter().map(|line| (line.file, line.number)).collect(),
            }),
            Ok(None) => Err(internal(ArrowError::JsonError(
                "a batch of lines decoded to nothing".into(),
            ))),
            Err(error) => Err(self.locate(lines, error)),
        }
    }

    /// The error of the first of `lines` that fails to decode alone: a batch's
    /// decoding error does not say which line it is about.
    fn locate(&self, lines: &[Line], batch_error: ArrowError) -> SourceError {
        for line in lines {
            let mut decoder = match self.builder.clone().build_decoder() {
                Ok(decoder) => decoder,
                Err(error) => return internal(error),
            };
            let result = decoder.decode(&line.bytes).and_then(|_| decoder.flush());
            if let Err(error) = result {
                return line_error(&self.files, line.file, line.number, arrow_message(&error));
            }
        }
        let (first, last) = (&lines[0], &lines[lines.len() - 1]);
        SourceError::Invalid {
            file: self.files[first.file].display().to_string(),
            location: format!(
                "lines {} to {} (of this and the next files)",
                first.number, last.number
            ),
            reason: arrow_message(&batch_error),
        }
    }

    /// The field columns of a decoded batch, shared by its records.
    fn field_columns(
        &self,
        batch: &RecordBatch,
    ) -> Result<Option<Arc<SourceColumns>>, SourceError> {
        let (names, arrays): (Vec<Arc<str>>, Vec<ArrayRef>) = batch
            .columns()
            .iter()
            .zip(self.field_names.iter())
            .filter_map(|(column, name)| Some((Arc::clone(name.as_ref()?), Arc::clone(column))))
            .unzip();
        if names.is_empty() {
            return Ok(None);
        }
        SourceColumns::new(names, arrays, batch.num_rows())
            .map(|columns| Some(Arc::new(columns)))
            .ok_or_else(|| internal(ArrowError::JsonError("columns of unequal lengths".into())))
    }

    /// The record of row `row` of `batch`.
    fn record(&self, batch: &Batch, row: usize) -> Result<Record, SourceError> {
        let (file, line) = batch.lines[row];
        let at = |reason: String| line_error(&self.files, file, line, reason);
        let columns = batch.batch.columns();
        let value_column = columns[self.value_at].as_string::<i32>();
        let value_name = self.schema.field(self.value_at).name();
        if value_column.is_null(row) {
            return Err(at(format!(
                "no value: the field {value_name:?} is missing or null"
            )));
        }
        let text = value_column.value(row);
        let value = match self.value_base64 {
            false => text.as_bytes().to_vec(),
            true => BASE64
                .decode(text)
                .map_err(|e| at(format!("the field {value_name:?} is not valid base64: {e}")))?,
        };
        let key = match self.key_at {
            None => Vec::new(),
            Some(k) => {
                let column = &columns[k];
                let name = self.schema.field(k).name();
                if column.is_null(row) {
                    return Err(at(format!("no key: the field {name:?} is missing or null")));
                }
                match column.data_type() {
                    DataType::Int64 => column
                        .as_primitive::<Int64Type>()
                        .value(row)
                        .to_string()
                        .into_bytes(),
                    _ => column.as_string::<i32>().value(row).as_bytes().to_vec(),
                }
            }
        };
        // The fields: the row of the batch's field columns, shared.
        let fields = match &batch.fields {
            Some(columns) => Fields::row(Arc::clone(columns), row)
                .ok_or_else(|| internal(ArrowError::JsonError("a row past the batch".into())))?,
            None => Fields::new(),
        };
        Ok(Record {
            key,
            value,
            origin: Origin::Row {
                file: Arc::clone(&self.files[file]),
                row: RowAt::Line(line),
            },
            fields,
        })
    }
}

/// Base64 as `value_base64` reads it: the standard alphabet, padded or not.
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// A JSON syntax error of one line: where in the line, and what.
fn json_error(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let what = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(what, _)| what);
    format!("not valid JSON at column {}: {what}", error.column())
}

/// An arrow error that only a bug of this module can cause.
fn internal(error: ArrowError) -> SourceError {
    SourceError::Usage(format!("internal error in the JSON Lines source: {error}"))
}

/// Opens a file (regular files only, without blocking on a FIFO) and undoes its
/// gzip or zstd compression, told by its magic bytes.
fn open(path: &Path) -> Result<LineReader, SourceError> {
    let io_error = |source| SourceError::Io {
        path: path.to_owned(),
        source,
    };
    let file = match open_regular(path) {
        Ok((file, _)) => file,
        Err(ReadRegularError::Io(source)) => return Err(io_error(source)),
        Err(ReadRegularError::NotRegular(kind)) => {
            return Err(SourceError::Usage(format!(
                "{}: it is {kind}; only regular files are read as JSON Lines",
                path.display()
            )))
        }
        Err(ReadRegularError::TooLarge(_)) => unreachable!("open_regular does not bound sizes"),
    };
    decode(path, Box::new(file))
}

/// Undoes the gzip or zstd compression of an input, told by its magic bytes.
fn decode(path: &Path, raw: Box<dyn Read + Send>) -> Result<LineReader, SourceError> {
    let io_error = |source| SourceError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::with_capacity(1 << 16, raw);
    let prefix = reader.fill_buf().map_err(io_error)?;
    if let Some(compression) = compression::unsupported_compression(prefix) {
        return Err(SourceError::Usage(format!(
            "{}: {compression} files are not supported; decompress it first",
            path.display()
        )));
    }
    let decoded = Compression::sniff(prefix)
        .decoder(reader)
        .map_err(io_error)?;
    Ok(LineReader {
        reader: BufReader::with_capacity(1 << 16, decoded),
        number: 0,
    })
}

impl LineReader {
    /// The next line and its number, without its `\n` (nor a `\r` before it),
    /// the first without a byte-order mark; `None` at the end of the file.
    fn next_line(&mut self, path: &Path) -> Result<Option<(u64, Vec<u8>)>, SourceError> {
        let io_error = |source| SourceError::Io {
            path: path.to_owned(),
            source,
        };
        let mut line = Vec::new();
        loop {
            let buffer = match self.reader.fill_buf() {
                Ok(buffer) => buffer,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_error(e)),
            };
            if buffer.is_empty() {
                if line.is_empty() {
                    return Ok(None);
                }
                break;
            }
            let (take, done) = match buffer.iter().position(|&b| b == b'\n') {
                Some(end) => (end, true),
                None => (buffer.len(), false),
            };
            if line.len() + take > MAX_LINE_BYTES {
                return Err(SourceError::TooLarge {
                    file: path.display().to_string(),
                    location: format!("line {}", self.number + 1),
                    what: "a line".into(),
                    size: (line.len() + take) as u64,
                    limit: MAX_LINE_BYTES as u64,
                });
            }
            line.extend_from_slice(&buffer[..take]);
            self.reader.consume(take + usize::from(done));
            if done {
                break;
            }
        }
        self.number += 1;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if self.number == 1 && line.starts_with(b"\xef\xbb\xbf") {
            line.drain(..3);
        }
        Ok(Some((self.number, line)))
    }
}

/// Whether arrays and objects nest deeper than `limit` in the JSON text `line`
/// (brackets inside strings do not count).
fn nesting_exceeds(line: &[u8], limit: usize) -> bool {
    // Nesting deeper than `limit` takes more than `limit` opening brackets, and
    // most lines have far fewer: counted in one pass the compiler vectorises,
    // where the scan below goes a byte at a time (a tenth of a JSON Lines
    // ingest's CPU when it ran on every line).
    let opening: usize = line
        .iter()
        .map(|&b| usize::from(b == b'[' || b == b'{'))
        .sum();
    if opening <= limit {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in line {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

impl Iterator for JsonlSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(record) = self.records.next() {
                return Some(Ok(record));
            }
            if let Some(error) = self.error.take() {
                return Some(Err(error));
            }
            let Decoded { records, error } = self.next_chunk()?;
            self.records = records.into_iter();
            self.error = error;
        }
    }
}

impl Source for JsonlSource {
    fn keyed(&self) -> bool {
        self.decoder.key_at.is_some()
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings() {
        assert!(!nesting_exceeds(br#"{"a": [[1]]}"#, 3));
        assert!(nesting_exceeds(br#"{"a": [[[1]]]}"#, 3));
        assert!(!nesting_exceeds(br#"{"a": "[[[[[\"[[["}"#, 1));
        assert!(!nesting_exceeds(br#"{"a": "\\", "b": []}"#, 2));
    }

    #[test]
    fn lines_in_flight_are_bounded_by_bytes_whatever_the_threads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.jsonl");
        // Lines of 3 MiB: a chunk is three of them (the one passing BATCH_BYTES).
        let line = format!("{{\"text\": \"{}\"}}\n", "x".repeat(3 << 20));
        std::fs::write(&path, line.repeat(40)).unwrap();
        let options = JsonlOptions {
            threads: 8,
            ..JsonlOptions::default()
        };
        let mut source = JsonlSource::new(&[path], options).unwrap();
        assert!(source.next().unwrap().is_ok());
        let inner = source.get_ref();
        let chunk = BATCH_BYTES + line.len();
        // The bytes bound stopped the handing out, not the chunks' count.
        assert!(inner.queued_bytes > 0 && inner.queued_bytes < IN_FLIGHT_BYTES + chunk);
        assert!(inner.queue.len() < 2 * 8);
        assert_eq!(source.count(), 39);
    }

    #[test]
    fn many_brackets_are_not_deep_nesting() {
        // More opening brackets than the limit, each closed: not deep.
        let wide = format!("{{\"a\": [{}]}}", vec!["[]"; 300].join(","));
        assert!(!nesting_exceeds(wide.as_bytes(), 128));
        // More than the limit inside a string, and one level outside.
        let quoted = format!("{{\"a\": \"{}\"}}", "[".repeat(300));
        assert!(!nesting_exceeds(quoted.as_bytes(), 128));
        // Exactly the limit deep, then one more.
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        assert!(!nesting_exceeds(deep(128).as_bytes(), 128));
        assert!(nesting_exceeds(deep(129).as_bytes(), 128));
        // Unclosed: depth counts up all the same.
        assert!(nesting_exceeds("[".repeat(129).as_bytes(), 128));
    }
}
