//! LitData chunks whose rows are an Arrow IPC footer (FORMAT.md, section 15,
//! "Arrow footer"): litdata 0.2.76's `BinaryWriter` keeps an item that is a
//! dict of JSON-like leaves only (str, int, float, bool, bytes, None, lists,
//! nested dicts) as a row of an Arrow table after the chunk's header, not as
//! pytree leaves. Which datasets are written so ([`footer_leaves`], from the
//! index's `types` and `data_format`, the writer's own rule), their leaves
//! (struct columns flattened with `.` as the pytree names them, a list one
//! leaf), and one chunk read batch by batch into records ([`FooterChunk`])
//! through the Arrow table code the Parquet and `save_to_disk` sources share
//! ([`crate::table_rows`]).
//!
//! Everything the chunk declares is checked before it is used: the chunk at
//! most [`MAX_SHARD_SIZE`] (it is mapped, and Arrow's buffers point into the
//! mapping), its length the index entry's, the header's item count and
//! offsets against the file, the IPC length against the file,
//! each message's metadata and body against what is left of the IPC data,
//! each batch's row count against the header's item count, and the declared
//! decompressed size of each IPC-compressed buffer (at most
//! [`MAX_FOOTER_BATCH_BYTES`] for a batch) before Arrow allocates it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::MessageHeader;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bcd_fields::contain_panics;
use serde_json::Value;

use crate::hf_disk_source::MAX_MESSAGE_METADATA;
use crate::litdata_index::LeafFormat;
use crate::parquet_fields::{FieldTypes, SourceMetadata};
use crate::regular_file::map_bounded;
use crate::sample_columns::Kind;
use crate::sample_shards::MAX_SHARD_SIZE;
use crate::table_rows::{Batch, TableColumns, TableOptions};
use crate::{Record, SourceError};

/// The last bytes of a chunk whose rows are an Arrow IPC footer.
pub const ARROW_FOOTER_MAGIC: &[u8; 8] = b"LDARW01\0";
/// The first bytes of an Arrow IPC file (the magic and its padding); an IPC
/// stream (older LitData writers) starts with a message instead.
const IPC_FILE_MAGIC: &[u8; 8] = b"ARROW1\0\0";
/// The last bytes of an Arrow IPC file, after its footer's length.
const IPC_FILE_END: &[u8; 6] = b"ARROW1";

/// Largest total of the decompressed sizes one IPC-compressed record batch
/// declares (LitData writes batches of 256 rows), checked before Arrow
/// allocates them.
pub const MAX_FOOTER_BATCH_BYTES: u64 = 1 << 30;

/// The JSON kind of a leaf, as LitData's `config.types` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JsonKind {
    Str,
    Bytes,
    Int,
    Float,
    Bool,
    /// Only ever None.
    Null,
    /// A list (or map): one leaf, its Arrow type as the footer gives it.
    List,
}

impl JsonKind {
    /// The Arrow type every chunk's column of this kind is read as; `None`
    /// for a list, read as the footer types it (a chunk whose lists are all
    /// empty types them `list<null>`; the dataset's schema unifies them).
    pub(crate) fn arrow_type(self) -> Option<DataType> {
        Some(match self {
            JsonKind::Str => DataType::Utf8,
            JsonKind::Bytes => DataType::Binary,
            JsonKind::Int => DataType::Int64,
            JsonKind::Float => DataType::Float64,
            JsonKind::Bool => DataType::Boolean,
            JsonKind::Null | JsonKind::List => return None,
        })
    }

    /// Its field's kind in the plan.
    pub(crate) fn kind(self) -> Kind {
        match self {
            JsonKind::Str => Kind::Utf8,
            JsonKind::Bytes => Kind::Binary,
            JsonKind::Int => Kind::Int64,
            JsonKind::Float => Kind::Float64,
            JsonKind::Bool => Kind::Bool,
            JsonKind::Null | JsonKind::List => Kind::Nested,
        }
    }

    fn name(self) -> &'static str {
        match self {
            JsonKind::Str => "str",
            JsonKind::Bytes => "bytes",
            JsonKind::Int => "int",
            JsonKind::Float => "float",
            JsonKind::Bool => "bool",
            JsonKind::Null => "null",
            JsonKind::List => "list",
        }
    }
}

/// One leaf of a footer dataset.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FooterLeaf {
    /// Its flattened name (`meta.src`).
    pub name: String,
    /// Its `data_format` (a leaf of `data_spec`), or its kind in `types` (a
    /// key the first item lacked, which only `types` and the footer hold).
    pub described: String,
    pub kind: JsonKind,
}

/// `_MEDIA_FORMAT_KEYS` of litdata's writer: a leaf of one of these formats
/// keeps the items as pytree leaves (`_data_format_is_arrow_safe`).
const MEDIA_FORMATS: [&str; 16] = [
    "audio",
    "video",
    "image",
    "jpeg",
    "jpeg_array",
    "pil",
    "tiff",
    "text",
    "file",
    "mesh",
    "pdf",
    "nifti",
    "graph",
    "tensor",
    "no_header_tensor",
    "no_header_numpy",
];

/// Deepest `types` read (nested dicts and lists).
const MAX_TYPES_DEPTH: usize = 32;

/// A `types` entry: `None` for one the writer keeps out of an Arrow table
/// (media, `json`: conflicting kinds, or unknown), else the leaves it gives
/// under `name` (a struct's children flattened).
fn type_leaves(
    name: &str,
    entry: &Value,
    depth: usize,
    out: &mut Vec<(String, JsonKind)>,
) -> Result<Option<()>, String> {
    if depth > MAX_TYPES_DEPTH {
        return Err(format!("nested deeper than {MAX_TYPES_DEPTH} levels"));
    }
    let (kind, object) = match entry {
        Value::String(kind) => (kind.as_str(), None),
        Value::Object(object) => match object.get("type").or_else(|| object.get("kind")) {
            None => ("struct", None),
            Some(Value::String(kind)) => (kind.as_str(), Some(object)),
            Some(other) => return Err(format!("{name:?} has type {other}")),
        },
        other => return Err(format!("{name:?} has type {other}")),
    };
    let scalar = match kind {
        "str" => JsonKind::Str,
        "bytes" => JsonKind::Bytes,
        "int" => JsonKind::Int,
        "float" => JsonKind::Float,
        "bool" => JsonKind::Bool,
        "null" => JsonKind::Null,
        "list" | "map" => {
            // Its elements must be JSON-like too ("json" there: no element
            // seen, or elements of conflicting kinds).
            match object.and_then(|o| o.get("value")) {
                None | Some(Value::Null) => {}
                Some(Value::String(unseen)) if unseen == "json" => {}
                Some(value) => {
                    if type_leaves(name, value, depth + 1, &mut Vec::new())?.is_none() {
                        return Ok(None);
                    }
                }
            }
            JsonKind::List
        }
        "struct" => {
            let fields = match (entry, object) {
                (_, Some(object)) => object.get("fields").unwrap_or(&Value::Null),
                (struct_map, None) => struct_map,
            };
            let Value::Object(fields) = fields else {
                return Err(format!("struct {name:?} without \"fields\""));
            };
            for (child, entry) in fields {
                let child = match name.is_empty() {
                    true => child.clone(),
                    false => format!("{name}.{child}"),
                };
                if type_leaves(&child, entry, depth + 1, out)?.is_none() {
                    return Ok(None);
                }
            }
            return Ok(Some(()));
        }
        _ => return Ok(None),
    };
    out.push((name.to_owned(), scalar));
    Ok(Some(()))
}

/// The leaves of a dataset whose chunks keep their rows as Arrow footers, or
/// `None` if LitData keeps them as pytree leaves: the writer's rule
/// (`is_arrow_footer_type` and `_data_format_is_arrow_safe`): `types` is a
/// dict of JSON-like entries only and no leaf has a media format. The
/// leaves of `data_spec` come first, in its order, with their formats; then
/// the keys only `types` names (which the first item lacked), in its order.
pub(crate) fn footer_leaves(
    types: &Value,
    formats: &[(String, LeafFormat)],
    spec_names: &[String],
) -> Result<Option<Vec<FooterLeaf>>, String> {
    let media = |name: &str| {
        let family = name.split(':').next().unwrap_or(name).to_lowercase();
        MEDIA_FORMATS.contains(&family.as_str())
    };
    if formats.iter().any(|(name, _)| media(name)) {
        return Ok(None);
    }
    // A dict item: a map of its keys' types (or a `struct` type).
    let is_struct = match types {
        Value::Object(o) => match o.get("type").or_else(|| o.get("kind")) {
            None => !o.is_empty(),
            Some(kind) => kind == "struct",
        },
        _ => false,
    };
    if !is_struct {
        return Ok(None);
    }
    let mut flat = Vec::new();
    if type_leaves("", types, 0, &mut flat)?.is_none() {
        return Ok(None);
    }
    let mut leaves = Vec::with_capacity(flat.len());
    for (name, (described, _)) in spec_names.iter().zip(formats) {
        let Some(&(_, kind)) = flat.iter().find(|(n, _)| n == name) else {
            return Err(format!(
                "data_spec's leaf {name:?} is not among the leaves of \"types\""
            ));
        };
        leaves.push(FooterLeaf {
            name: name.clone(),
            described: described.clone(),
            kind,
        });
    }
    for (name, kind) in flat {
        if !spec_names.contains(&name) {
            leaves.push(FooterLeaf {
                name,
                described: kind.name().to_owned(),
                kind,
            });
        }
    }
    Ok(Some(leaves))
}

/// What a source reads of each footer chunk: the leaves, and which are the
/// value, the key and the fields.
pub(crate) struct FooterPlan {
    /// Every leaf, by name, with the Arrow type its column is read as.
    pub leaves: Vec<(String, Option<DataType>)>,
    /// The value, key and field leaves (fields: `FieldSelection::Only`).
    pub options: TableOptions,
}

/// One chunk whose rows are an Arrow IPC footer, read a record batch at a
/// time.
pub(crate) struct FooterChunk {
    /// Shared with its records' origins.
    path: Arc<Path>,
    /// The header's item count.
    items: u64,
    /// The IPC file (or stream), and its byte offset in the chunk.
    ipc: Buffer,
    ipc_at: u64,
    /// The next message, and the one being decoded (for messages).
    pos: usize,
    message_at: usize,
    /// Whether the IPC data is a file (with a footer after the stream).
    is_file: bool,
    ended: bool,
    schema: Option<SchemaRef>,
    plan: Arc<FooterPlan>,
    columns: Option<TableColumns>,
    types: FieldTypes,
    rows: u64,
}

fn corrupt(path: &Path, location: impl Into<String>, reason: impl Into<String>) -> SourceError {
    SourceError::Corrupt {
        file: path.display().to_string(),
        location: location.into(),
        reason: reason.into(),
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

impl FooterChunk {
    /// Reads the chunk at `path` (of `chunk_bytes`, as its index entry says)
    /// and checks its header and the IPC data's bounds.
    pub(crate) fn open(
        path: PathBuf,
        chunk_bytes: u64,
        plan: Arc<FooterPlan>,
    ) -> Result<FooterChunk, SourceError> {
        // Mapped, as LitData's reader maps it: Arrow's buffers point into the
        // file's pages, which are never copied whole. At most a shard's limit
        // (the header's u32 offsets address no more).
        let bytes = map_bounded(&path, MAX_SHARD_SIZE, "a chunk with an Arrow footer")?;
        if bytes.len() as u64 != chunk_bytes {
            return Err(corrupt(
                &path,
                "its length",
                format!("{} bytes, but the index says {chunk_bytes}", bytes.len()),
            ));
        }
        let len = bytes.len();
        if len < 4 + 4 + 12 || &bytes[len - 8..] != ARROW_FOOTER_MAGIC {
            return Err(corrupt(
                &path,
                "its end",
                "no Arrow footer, though the index's \"types\" say LitData keeps the rows so (it keeps a chunk's items as pytree leaves only when pyarrow refuses them); bcd does not read such a mix",
            ));
        }
        let ipc_len = u64::from(u32_at(&bytes, len - 12));
        let ipc_end = len as u64 - 12;
        if ipc_len == 0 || ipc_len > ipc_end {
            return Err(corrupt(
                &path,
                format!("the Arrow footer's length at byte {ipc_end}"),
                format!("{ipc_len} bytes do not fit before it"),
            ));
        }
        let ipc_at = ipc_end - ipc_len;
        let items = u64::from(u32_at(&bytes, 0));
        // The header: the item count, then its n + 1 offsets, all before the
        // footer, rising from the header's end to the footer's start (all equal
        // when only the footer holds the rows; a classic body before it
        // otherwise, which LitData's reader does not use and neither does bcd).
        let header = 4 + 4 * (items + 1);
        if header > ipc_at {
            return Err(corrupt(
                &path,
                "the header",
                format!(
                    "{items} items' offsets do not fit before the Arrow footer at byte {ipc_at}"
                ),
            ));
        }
        // Read in place (a vector of them would be 8 bytes per declared item).
        let offsets = bytes[4..header as usize].chunks_exact(4);
        let offsets = offsets.map(|o| u64::from(u32_at(o, 0)));
        let (mut first, mut last, mut rising) = (None, 0, true);
        for offset in offsets {
            rising &= offset >= last;
            first.get_or_insert(offset);
            last = offset;
        }
        if first != Some(header) || !rising || last != ipc_at {
            return Err(corrupt(
                &path,
                "the header's offsets",
                format!("they do not rise from byte {header} to the Arrow footer at byte {ipc_at}"),
            ));
        }
        let ipc = Buffer::from(bytes).slice_with_length(ipc_at as usize, ipc_len as usize);
        let is_file = ipc.starts_with(IPC_FILE_MAGIC);
        Ok(FooterChunk {
            path: Arc::from(path),
            items,
            pos: if is_file { IPC_FILE_MAGIC.len() } else { 0 },
            message_at: 0,
            ipc,
            ipc_at,
            is_file,
            ended: false,
            schema: None,
            plan,
            columns: None,
            types: FieldTypes::default(),
            rows: 0,
        })
    }

    /// The header's item count.
    pub(crate) fn items(&self) -> u64 {
        self.items
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The location of byte `at` of the IPC data, for messages.
    fn at(&self, at: usize) -> String {
        format!("the Arrow footer, byte {}", self.ipc_at + at as u64)
    }

    /// The next record batch of the IPC data; `None` after its end-of-stream
    /// marker (and, for a file, its footer).
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, SourceError> {
        while !self.ended {
            let at = self.pos;
            self.message_at = at;
            let rest = &self.ipc[at..];
            let ends = || {
                corrupt(
                    &self.path,
                    self.at(at),
                    "the IPC data ends inside a message",
                )
            };
            let word = |i: usize| rest.get(i..i + 4).map(|w| u32_at(w, 0)).ok_or_else(ends);
            let (size, framing) = match word(0)? {
                0xffff_ffff => (word(4)?, 8),
                size => (size, 4),
            };
            if size == 0 {
                self.ended = true;
                self.pos = at + framing;
                self.check_end()?;
                return Ok(None);
            }
            if size > MAX_MESSAGE_METADATA {
                return Err(SourceError::TooLarge {
                    file: self.path.display().to_string(),
                    location: self.at(at),
                    what: "an IPC message's metadata".into(),
                    size: size.into(),
                    limit: MAX_MESSAGE_METADATA.into(),
                });
            }
            let size = size as usize;
            let metadata = rest.get(framing..framing + size).ok_or_else(ends)?;
            let message = arrow_ipc::root_as_message(metadata).map_err(|e| {
                corrupt(
                    &self.path,
                    self.at(at),
                    format!("the message metadata is not a valid flatbuffer ({e})"),
                )
            })?;
            let body_at = framing + size;
            let body_len = usize::try_from(message.bodyLength())
                .ok()
                .filter(|&n| n <= rest.len() - body_at)
                .ok_or_else(|| {
                    corrupt(
                        &self.path,
                        self.at(at),
                        format!(
                            "a body of {} bytes, but {} are left",
                            message.bodyLength(),
                            rest.len() - body_at
                        ),
                    )
                })?;
            let body = self.ipc.slice_with_length(at + body_at, body_len);
            self.pos = at + body_at + body_len;
            let arrow =
                |e: arrow_schema::ArrowError| corrupt(&self.path, self.at(at), e.to_string());
            match (message.header_type(), &self.schema) {
                (MessageHeader::Schema, None) => {
                    let schema = message.header_as_schema().ok_or_else(|| {
                        corrupt(
                            &self.path,
                            self.at(at),
                            "the schema message holds no schema",
                        )
                    })?;
                    let schema = arrow_ipc::convert::try_fb_to_schema(schema).map_err(arrow)?;
                    self.schema = Some(Arc::new(schema));
                }
                (MessageHeader::RecordBatch, Some(schema)) => {
                    let batch = message.header_as_record_batch().ok_or_else(|| {
                        corrupt(&self.path, self.at(at), "the batch message holds no batch")
                    })?;
                    let rows = u64::try_from(batch.length()).unwrap_or(u64::MAX);
                    if rows > self.items - self.rows {
                        return Err(corrupt(
                            &self.path,
                            self.at(at),
                            format!(
                                "a batch of {} rows after {} rows, but the header counts {} items",
                                batch.length(),
                                self.rows,
                                self.items
                            ),
                        ));
                    }
                    self.check_buffers(&batch, &body, at)?;
                    let decoded = arrow_ipc::reader::read_record_batch(
                        &body,
                        batch,
                        schema.clone(),
                        &HashMap::new(),
                        None,
                        &message.version(),
                    )
                    .map_err(arrow)?;
                    return Ok(Some(decoded));
                }
                (MessageHeader::Schema, Some(_)) => {
                    return Err(corrupt(&self.path, self.at(at), "a second schema"));
                }
                (_, None) => {
                    return Err(corrupt(
                        &self.path,
                        self.at(at),
                        "a message before the schema",
                    ));
                }
                (other, Some(_)) => {
                    return Err(corrupt(
                        &self.path,
                        self.at(at),
                        format!("a message of type {other:?}, which LitData's footers do not hold"),
                    ));
                }
            }
        }
        Ok(None)
    }

    /// Every buffer of a batch inside its body (Arrow slices them
    /// unchecked), and, for an IPC-compressed batch, the decompressed sizes
    /// they declare (an 8-byte prefix of each), bounded before Arrow
    /// allocates them.
    fn check_buffers(
        &self,
        batch: &arrow_ipc::RecordBatch<'_>,
        body: &Buffer,
        at: usize,
    ) -> Result<(), SourceError> {
        let mut total = 0u64;
        for buffer in batch.buffers().into_iter().flatten() {
            let (offset, length) = (buffer.offset(), buffer.length());
            let inside = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(length).ok())
                .and_then(|(o, l)| body.get(o..o.checked_add(l)?));
            let Some(bytes) = inside else {
                return Err(corrupt(
                    &self.path,
                    self.at(at),
                    format!("a buffer of {length} bytes at {offset} outside the batch's body"),
                ));
            };
            if batch.compression().is_none() {
                continue;
            }
            if let Some(prefix) = bytes.get(..8) {
                let declared = i64::from_le_bytes(prefix.try_into().expect("8 bytes"));
                total = total.saturating_add(u64::try_from(declared).unwrap_or(0));
            }
        }
        if total > MAX_FOOTER_BATCH_BYTES {
            return Err(SourceError::TooLarge {
                file: self.path.display().to_string(),
                location: self.at(at),
                what: "a compressed record batch's decompressed buffers".into(),
                size: total,
                limit: MAX_FOOTER_BATCH_BYTES,
            });
        }
        Ok(())
    }

    /// After the end-of-stream marker: nothing but an IPC file's footer.
    fn check_end(&self) -> Result<(), SourceError> {
        let rest = &self.ipc[self.pos..];
        let fits = match self.is_file {
            false => rest.is_empty(),
            true => {
                rest.len() >= 10
                    && rest.ends_with(IPC_FILE_END)
                    && u64::from(u32_at(rest, rest.len() - 10)) == rest.len() as u64 - 10
            }
        };
        if !fits {
            return Err(corrupt(
                &self.path,
                self.at(self.pos),
                match self.is_file {
                    true => "the IPC file's footer does not end it",
                    false => "bytes after the IPC stream's end",
                },
            ));
        }
        Ok(())
    }

    /// The batch with a column per leaf of the plan: struct columns flattened
    /// (`meta.src`), a leaf the chunk lacks (a key none of its items has) all
    /// null, a scalar leaf that is all null here (`null` typed) typed as the
    /// dataset's. A column of another type, or one `types` does not name, is
    /// an error.
    fn conform(&self, batch: &RecordBatch) -> Result<RecordBatch, SourceError> {
        let location = format!(
            "rows {} to {}",
            self.rows,
            self.rows + batch.num_rows() as u64
        );
        let invalid = |reason: String| SourceError::Invalid {
            file: self.path.display().to_string(),
            location: location.clone(),
            reason,
        };
        let flat = (batch.normalize(".", None))
            .map_err(|e| corrupt(&self.path, location.clone(), e.to_string()))?;
        let plan = &self.plan;
        for field in flat.schema().fields() {
            let known = plan.leaves.iter().any(|(n, _)| n == field.name());
            if !known && field.data_type() != &DataType::Null {
                return Err(invalid(format!(
                    "a column {:?} ({}), which the index's \"types\" do not name",
                    field.name(),
                    field.data_type()
                )));
            }
        }
        let rows = batch.num_rows();
        let mut fields = Vec::with_capacity(plan.leaves.len());
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(plan.leaves.len());
        for (name, target) in &plan.leaves {
            let column = match (flat.column_by_name(name), target) {
                (None, target) => new_null_array(target.as_ref().unwrap_or(&DataType::Null), rows),
                (Some(c), Some(t)) if c.data_type() != t => match c.data_type() {
                    DataType::Null => new_null_array(t, rows),
                    other => {
                        return Err(invalid(format!(
                            "column {name:?} is {other}, but the index's \"types\" make it {t}"
                        )))
                    }
                },
                (Some(c), _) => c.clone(),
            };
            fields.push(Field::new(name, column.data_type().clone(), true));
            columns.push(column);
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| corrupt(&self.path, location, e.to_string()))
    }

    /// The records of the next record batch, and whether the IPC data ended
    /// (they are then the last).
    pub(crate) fn read_records(&mut self) -> Result<(Vec<Record>, bool), SourceError> {
        let next = contain_panics(|| self.next_batch()).unwrap_or_else(|panic| {
            Err(corrupt(
                &self.path,
                self.at(self.message_at),
                format!("the Arrow decoder failed ({panic})"),
            ))
        })?;
        let Some(batch) = next else {
            return Ok((Vec::new(), true));
        };
        let conformed = self.conform(&batch)?;
        let plan = Arc::clone(&self.plan);
        let options = &plan.options;
        if self.columns.is_none() {
            self.columns = Some(TableColumns::new(
                &self.path,
                &conformed.schema(),
                options,
                &mut self.types,
                &mut SourceMetadata::default(),
            )?);
        }
        let columns = self.columns.as_ref().expect("made above");
        let mut loaded = Batch::new(&conformed, &self.path, options, columns)?;
        loaded.own_fields(&self.path)?;
        let key = (options.key_column.as_deref())
            .map(|name| (name, conformed.column_by_name(name).expect("conformed")));
        let mut records = Vec::with_capacity(conformed.num_rows());
        for i in 0..conformed.num_rows() {
            let row = self.rows + i as u64;
            let null = [(options.value_column.as_str(), &loaded.values)]
                .into_iter()
                .chain(key)
                .find(|(_, column)| column.is_null(i));
            if let Some((name, _)) = null {
                return Err(SourceError::Invalid {
                    file: self.path.display().to_string(),
                    location: format!("row {row}"),
                    reason: format!(
                        "leaf {name:?} is None; the value and the key must be present in every item"
                    ),
                });
            }
            // Nulls are refused above: a record is always given.
            if let Some(record) = loaded.record(i, row, &self.path, options) {
                records.push(record?);
            }
        }
        self.rows += conformed.num_rows() as u64;
        Ok((records, false))
    }

    /// After the last batch: the footer's rows are the header's items.
    pub(crate) fn finish(self) -> Result<(), SourceError> {
        if !self.ended || self.rows != self.items {
            return Err(corrupt(
                &self.path,
                "the Arrow footer",
                format!(
                    "it holds {} rows, but the header counts {} items",
                    self.rows, self.items
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn formats(names: &[&str]) -> Vec<(String, LeafFormat)> {
        (names.iter())
            .map(|n| (n.to_string(), LeafFormat::parse(n).unwrap()))
            .collect()
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn footer_leaves_follow_the_writers_rule() {
        let types = json!({
            "id": "str",
            "meta": {"type": "struct", "fields": {"src": "str", "page": {"type": "int", "optional": true}}},
            "toks": {"type": "list", "value": {"type": "struct", "fields": {"a": "int"}}},
            "late": {"type": "bytes", "optional": true},
        });
        let leaves = footer_leaves(
            &types,
            &formats(&["str", "str", "int", "json"]),
            &names(&["id", "meta.src", "meta.page", "toks"]),
        )
        .unwrap()
        .unwrap();
        let got: Vec<(&str, &str, JsonKind)> = (leaves.iter())
            .map(|l| (l.name.as_str(), l.described.as_str(), l.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("id", "str", JsonKind::Str),
                ("meta.src", "str", JsonKind::Str),
                ("meta.page", "int", JsonKind::Int),
                ("toks", "json", JsonKind::List),
                ("late", "bytes", JsonKind::Bytes),
            ]
        );
        // A media leaf, a `json` (conflicting) kind, a list of one, an item
        // that is not a dict: pytree leaves.
        let spec = names(&["id"]);
        for (types, format) in [
            (json!({"id": "str"}), "jpeg"),
            (json!({"id": "json"}), "str"),
            (json!({"id": {"type": "list", "value": "jpeg"}}), "str"),
            (json!("str"), "str"),
            (Value::Null, "str"),
        ] {
            assert_eq!(
                footer_leaves(&types, &formats(&[format]), &spec),
                Ok(None),
                "{types}"
            );
        }
        // A spec leaf `types` lacks is an error.
        assert!(footer_leaves(&json!({"x": "str"}), &formats(&["str"]), &spec).is_err());
    }
}
