//! Reading a shard's fields file `NNNNNN.fields.arrow` (an Arrow IPC file of
//! one or more record batches) zero-copy from a mapping, every declared length
//! checked before Arrow sees it. The writer is `ipc_writer.rs`.

use std::collections::HashSet;
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_ipc::reader::FileDecoder;
use arrow_ipc::{Block, MessageHeader};
use arrow_schema::{DataType, Field, Schema};

use crate::error::{FieldsError, Result};
use crate::fingerprint::Fingerprint;
use crate::guard::no_panic;

/// The schema metadata key holding the shard's fingerprint (JSON).
pub const SHARD_METADATA_KEY: &str = "bcd.shard";

/// Elements of nested arrays (a list's elements, a dictionary's values, a
/// run-end encoded array's runs) a file may declare per byte of its size.
/// A list of nulls costs no bytes per element, so without a bound a few bytes
/// could declare billions of them (each a JSON `null` when listed).
pub const NESTED_ELEMENTS_PER_BYTE: u64 = 16;

const MAGIC: &[u8; 6] = b"ARROW1";
const CONTINUATION: [u8; 4] = [0xff; 4];

/// The bytes a decoded file's buffers point into, kept alive by them.
struct Owner(Arc<dyn AsRef<[u8]> + Send + Sync>);

// Arrow asks its buffers' owners to be RefUnwindSafe. The owner is only read
// (through `as_ref`), so a panic cannot leave it half-changed.
impl std::panic::RefUnwindSafe for Owner {}

/// Reads a shard's fields file zero-copy: the returned batches' buffers point
/// into `bytes` (a mapping of the file, say), which they keep alive.
///
/// Returns `Ok(None)` when the file's fingerprint is not `expected` (the file
/// is stale: its shard's records are read as nulls). Refuses, with an error
/// naming `name` and what is wrong, anything [`encode_shard`] does not write or
/// Arrow would not validate: a file not in the IPC file format, compressed
/// buffers, buffers or messages outside the file, overlapping blocks, row
/// counts that do not sum to `expected.records`, dictionaries that do not
/// match their fields (or are deltas, or repeated), unions, more than
/// [`NESTED_ELEMENTS_PER_BYTE`] nested elements per byte, and every array
/// Arrow's validation rejects. It never panics (a panic inside Arrow becomes
/// an error) and allocates at most about the file's size (for buffers that are
/// not aligned in the file and must be copied).
///
/// `bytes.as_ref()` must return the same bytes on every call, for as long as
/// the owner lives (as a mapping, a `Vec` or a `Box<[u8]>` do).
pub fn decode_shard(
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    expected: &Fingerprint,
    name: &str,
) -> Result<Option<Vec<RecordBatch>>> {
    decode_shard_columns(bytes, expected, name, None)
}

/// [`decode_shard`] of the file's columns named in `columns` alone (those it
/// has, in its order; `None`: all): the file is checked as a whole, but only
/// those columns' arrays are made and validated, so a reader of one column
/// (an expression over a label, say) does not pay for the others (a caption's
/// UTF-8).
pub fn decode_shard_columns(
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    expected: &Fingerprint,
    name: &str,
    columns: Option<&[String]>,
) -> Result<Option<Vec<RecordBatch>>> {
    let mut batches = Vec::new();
    let fresh = decode_with(bytes, expected, name, columns, &mut |batch, _| {
        batches.push(batch);
        Ok(())
    })?;
    Ok(fresh.then_some(batches))
}

/// [`decode_shard`], handing each record batch to `visit` as it is decoded
/// (with the offset in the file where its block ends: the file's bytes before
/// it are not read again) instead of collecting them, so a reader that looks
/// at one batch at a time holds one at a time. Returns whether the file is the
/// shard's (`false`: stale, and nothing was visited). The same checks, in the
/// same order, as `decode_shard`; an error `visit` returns ends the decoding.
pub fn decode_shard_each(
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    expected: &Fingerprint,
    name: &str,
    mut visit: impl FnMut(RecordBatch, usize) -> Result<()>,
) -> Result<bool> {
    decode_with(bytes, expected, name, None, &mut visit)
}

/// The file of `bytes` as Arrow buffers over its bytes, decoded (`columns`
/// alone, when given) batch by batch into `visit`.
fn decode_with(
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    expected: &Fingerprint,
    name: &str,
    columns: Option<&[String]>,
    visit: &mut dyn FnMut(RecordBatch, usize) -> Result<()>,
) -> Result<bool> {
    let buffer = buffer_over(bytes);
    no_panic(name, "the fields file", || {
        decode(&buffer, expected, name, columns, visit)
    })
}

/// An Arrow buffer over `bytes`, which it keeps alive (`bytes.as_ref()` must
/// return the same bytes on every call, for as long as the owner lives).
pub(crate) fn buffer_over(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Buffer {
    let owner = Arc::new(Owner(bytes));
    let slice: &[u8] = owner.0.as_ref().as_ref();
    let len = slice.len();
    let ptr = NonNull::new(slice.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
    // SAFETY: `ptr` points to `len` readable bytes that live as long as
    // `owner`, which the buffer holds, and that are never written through it
    // (Arrow's buffers are immutable; `as_ref` returns the same bytes on every
    // call, as documented above).
    unsafe { Buffer::from_custom_allocation(ptr, len, owner.clone()) }
}

fn invalid(name: &str, what: impl Into<String>) -> FieldsError {
    FieldsError::invalid(name, what)
}

fn arrow_err(name: &str, what: &str) -> impl FnOnce(arrow_schema::ArrowError) -> FieldsError {
    let (name, what) = (name.to_owned(), what.to_owned());
    move |source| FieldsError::InvalidArrow { name, what, source }
}

fn decode(
    file: &Buffer,
    expected: &Fingerprint,
    name: &str,
    columns: Option<&[String]>,
    visit: &mut dyn FnMut(RecordBatch, usize) -> Result<()>,
) -> Result<bool> {
    let bytes: &[u8] = file.as_slice();
    let len = bytes.len();
    // "ARROW1", 2 bytes of padding, ..., footer, i32 footer length, "ARROW1".
    if len < 8 + 10 || &bytes[..6] != MAGIC || &bytes[len - 6..] != MAGIC {
        return Err(invalid(
            name,
            "not an Arrow IPC file (no ARROW1 magic at both ends)",
        ));
    }
    let footer_len = i32::from_le_bytes(bytes[len - 10..len - 6].try_into().unwrap_or_default());
    let footer_start = usize::try_from(footer_len)
        .ok()
        .filter(|&n| n > 0 && n <= len - 18)
        .map(|n| len - 10 - n)
        .ok_or_else(|| {
            invalid(
                name,
                format!("footer length {footer_len} does not fit the file of {len} bytes"),
            )
        })?;
    let footer = arrow_ipc::root_as_footer(&bytes[footer_start..len - 10])
        .map_err(|e| invalid(name, format!("the footer is not a valid IPC footer: {e}")))?;
    let fb_schema = footer
        .schema()
        .ok_or_else(|| invalid(name, "the footer has no schema"))?;
    if !fb_schema.endianness().equals_to_target_endianness() {
        return Err(invalid(name, "the file is big-endian"));
    }
    let schema = arrow_ipc::convert::try_fb_to_schema(fb_schema)
        .map_err(arrow_err(name, "reading the schema"))?;

    // Stale or not: the fingerprint first.
    let fingerprint = schema.metadata().get(SHARD_METADATA_KEY).ok_or_else(|| {
        invalid(
            name,
            format!("the schema has no \"{SHARD_METADATA_KEY}\" metadata"),
        )
    })?;
    if Fingerprint::from_json_str(fingerprint, name)? != *expected {
        return Ok(false);
    }

    let mut names = HashSet::new();
    for field in schema.fields() {
        crate::types::check_supported(field.data_type())
            .map_err(|what| invalid(name, format!("field \"{}\": {what}", field.name())))?;
        if !names.insert(field.name().as_str()) {
            return Err(invalid(
                name,
                format!("field \"{}\" appears twice", field.name()),
            ));
        }
    }
    let dictionaries = dictionary_fields(&schema, name)?;

    let mut check = Checks {
        name,
        data_end: footer_start as u64,
        nested_budget: NESTED_ELEMENTS_PER_BYTE.saturating_mul(len as u64),
    };
    let all_blocks = footer
        .dictionaries()
        .into_iter()
        .flatten()
        .chain(footer.recordBatches().into_iter().flatten());
    check.ranges(all_blocks)?;
    let schema = Arc::new(schema);
    let mut decoder = FileDecoder::new(schema.clone(), footer.version());
    if let Some(columns) = columns {
        let projection = (schema.fields().iter().enumerate())
            .filter(|(_, f)| columns.iter().any(|c| c == f.name()))
            .map(|(i, _)| i)
            .collect();
        decoder = decoder.with_projection(projection);
    }

    let mut seen_dictionaries = HashSet::new();
    for block in footer.dictionaries().iter().flatten() {
        let message_bytes = check.block(block, bytes)?;
        let message = check.message(message_bytes)?;
        let batch = message
            .header_as_dictionary_batch()
            .filter(|_| message.header_type() == MessageHeader::DictionaryBatch)
            .ok_or_else(|| invalid(name, "a dictionary block does not hold a dictionary batch"))?;
        let id = batch.id();
        let value_type = dictionaries
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| invalid(name, format!("dictionary {id} belongs to no field")))?;
        if batch.isDelta() {
            return Err(invalid(name, format!("dictionary {id} is a delta")));
        }
        if !seen_dictionaries.insert(id) {
            return Err(invalid(name, format!("dictionary {id} is given twice")));
        }
        let data = batch
            .data()
            .ok_or_else(|| invalid(name, format!("dictionary {id} has no data")))?;
        let field = Field::new("", value_type, true);
        check.batch_body(
            &data,
            std::slice::from_ref(&field),
            block.bodyLength(),
            None,
        )?;
        let buffer = check.slice(file, block);
        decoder
            .read_dictionary(block, &buffer)
            .map_err(arrow_err(name, &format!("reading dictionary {id}")))?;
    }

    let mut rows: u64 = 0;
    for (index, block) in footer.recordBatches().iter().flatten().enumerate() {
        let message_bytes = check.block(block, bytes)?;
        let message = check.message(message_bytes)?;
        let batch = message
            .header_as_record_batch()
            .filter(|_| message.header_type() == MessageHeader::RecordBatch)
            .ok_or_else(|| invalid(name, "a record batch block does not hold a record batch"))?;
        let length = u64::try_from(batch.length())
            .ok()
            .filter(|&n| n <= expected.records - rows)
            .ok_or_else(|| {
                invalid(
                    name,
                    format!(
                        "a record batch of {} rows after {rows} passes the shard's {} records",
                        batch.length(),
                        expected.records
                    ),
                )
            })?;
        check.batch_body(&batch, schema.fields(), block.bodyLength(), Some(length))?;
        let buffer = check.slice(file, block);
        let decoded = decoder
            .read_record_batch(block, &buffer)
            .map_err(arrow_err(name, &format!("reading record batch {index}")))?
            .ok_or_else(|| invalid(name, "a record batch block holds no message"))?;
        if decoded.num_rows() as u64 != length {
            return Err(invalid(
                name,
                "a record batch's row count changed while decoding",
            ));
        }
        rows += length;
        let (_, end) = check.range(block)?;
        visit(decoded, end as usize)?;
    }
    if rows != expected.records {
        return Err(invalid(
            name,
            format!(
                "its record batches hold {rows} rows, its shard {} records",
                expected.records
            ),
        ));
    }
    Ok(true)
}

/// Every dictionary id of the schema with its value type; refuses an id that
/// two fields of different value types share.
fn dictionary_fields(schema: &Schema, name: &str) -> Result<Vec<(i64, DataType)>> {
    fn walk(field: &Field, out: &mut Vec<(i64, DataType)>, name: &str) -> Result<()> {
        if let DataType::Dictionary(_, value) = field.data_type() {
            #[allow(deprecated)]
            let id = field.dict_id().ok_or_else(|| {
                invalid(
                    name,
                    format!("dictionary field \"{}\" has no id", field.name()),
                )
            })?;
            match out.iter().find(|(i, _)| *i == id) {
                Some((_, t)) if t != value.as_ref() => {
                    return Err(invalid(
                        name,
                        format!("dictionary {id} is shared by fields of different types"),
                    ))
                }
                Some(_) => {}
                None => out.push((id, value.as_ref().clone())),
            }
        }
        for child in children(field.data_type()) {
            walk(child, out, name)?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    for field in schema.fields() {
        walk(field, &mut out, name)?;
    }
    Ok(out)
}

/// A type's child fields, in the order the IPC format lays out their nodes.
fn children(t: &DataType) -> Vec<&Field> {
    match t {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.as_ref()],
        DataType::Struct(fields) => fields.iter().map(|f| f.as_ref()).collect(),
        DataType::RunEndEncoded(a, b) => vec![a.as_ref(), b.as_ref()],
        DataType::Dictionary(_, v) => children(v),
        _ => Vec::new(),
    }
}

/// The checks of what the file declares, before Arrow reads it.
struct Checks<'a> {
    name: &'a str,
    /// Where the footer starts: blocks must end before it.
    data_end: u64,
    /// Nested elements the file may still declare.
    nested_budget: u64,
}

impl Checks<'_> {
    /// Where a block starts and ends, checked to lie in the data part of
    /// the file, after its magic.
    fn range(&self, block: &Block) -> Result<(u64, u64)> {
        let name = self.name;
        let start = u64::try_from(block.offset()).ok();
        let meta = u64::try_from(block.metaDataLength())
            .ok()
            .filter(|&m| m >= 8);
        let body = u64::try_from(block.bodyLength()).ok();
        let (Some(start), Some(meta), Some(body)) = (start, meta, body) else {
            return Err(invalid(
                name,
                format!(
                    "a block has offset {}, metadata length {}, body length {}",
                    block.offset(),
                    block.metaDataLength(),
                    block.bodyLength()
                ),
            ));
        };
        let end = start.checked_add(meta).and_then(|e| e.checked_add(body));
        let end = end.filter(|&e| start >= 8 && e <= self.data_end).ok_or_else(|| {
            invalid(name, format!("a block at offset {start} ({meta} + {body} bytes) is outside the file's data"))
        })?;
        Ok((start, end))
    }

    /// Checks every block's range, and that no two overlap (so each message
    /// is read once, and the work is bounded by the file's size).
    fn ranges<'b>(&self, blocks: impl Iterator<Item = &'b Block>) -> Result<()> {
        let mut ranges = blocks.map(|b| self.range(b)).collect::<Result<Vec<_>>>()?;
        ranges.sort_unstable();
        if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
            return Err(invalid(
                self.name,
                format!("the block at offset {} overlaps another", w[1].0),
            ));
        }
        Ok(())
    }

    /// The block's metadata bytes (its range was checked by `ranges`).
    fn block<'b>(&self, block: &Block, bytes: &'b [u8]) -> Result<&'b [u8]> {
        let (start, _) = self.range(block)?;
        Ok(&bytes[start as usize..start as usize + block.metaDataLength() as usize])
    }

    /// The block's bytes as an Arrow buffer (no copy).
    fn slice(&self, file: &Buffer, block: &Block) -> Buffer {
        let start = block.offset() as usize;
        let len = block.metaDataLength() as usize + block.bodyLength() as usize;
        file.slice_with_length(start, len)
    }

    /// The flatbuffer message of a block's metadata (an encapsulated message:
    /// `0xFFFFFFFF`, i32 length, flatbuffer; or, before Arrow 0.15, i32
    /// length, flatbuffer), verified.
    fn message<'b>(&self, meta: &'b [u8]) -> Result<arrow_ipc::Message<'b>> {
        let rest = if meta[..4] == CONTINUATION {
            &meta[4..]
        } else {
            meta
        };
        let declared = i32::from_le_bytes(rest[..4].try_into().unwrap_or_default());
        let fb = usize::try_from(declared)
            .ok()
            .filter(|&n| n > 0 && n <= rest.len() - 4)
            .map(|n| &rest[4..4 + n])
            .ok_or_else(|| {
                invalid(
                    self.name,
                    format!("a message declares {declared} bytes of metadata"),
                )
            })?;
        let message = arrow_ipc::root_as_message(fb).map_err(|e| {
            invalid(
                self.name,
                format!("a message is not a valid IPC message: {e}"),
            )
        })?;
        Ok(message)
    }

    /// Checks a record batch (or a dictionary's) against its body and the
    /// fields it holds: no compression, every buffer inside the body, node
    /// lengths and null counts sane, top-level nodes `rows` long, a struct's
    /// children as long as it, and nested elements within the budget.
    fn batch_body(
        &mut self,
        batch: &arrow_ipc::RecordBatch,
        fields: &[impl AsRef<Field>],
        body_len: i64,
        rows: Option<u64>,
    ) -> Result<()> {
        let name = self.name;
        if batch.compression().is_some() {
            return Err(invalid(
                name,
                "its buffers are compressed (IPC compression is not supported)",
            ));
        }
        let body_len = body_len as u64;
        for buffer in batch.buffers().iter().flatten() {
            let start = u64::try_from(buffer.offset()).ok();
            let blen = u64::try_from(buffer.length()).ok();
            let inside = start
                .zip(blen)
                .and_then(|(s, l)| s.checked_add(l))
                .is_some_and(|e| e <= body_len);
            if !inside {
                return Err(invalid(
                    name,
                    format!(
                        "a buffer at {} of {} bytes is outside its message's body of {body_len} bytes",
                        buffer.offset(),
                        buffer.length()
                    ),
                ));
            }
        }
        let nodes = batch
            .nodes()
            .ok_or_else(|| invalid(name, "a record batch has no field nodes"))?;
        let mut lengths = Vec::with_capacity(nodes.len());
        for node in nodes.iter() {
            let (l, n) = (node.length(), node.null_count());
            if l < 0 || n < 0 || n > l || l > i64::from(i32::MAX) * 2 {
                return Err(invalid(
                    name,
                    format!("a field node has length {l} and null count {n}"),
                ));
            }
            lengths.push(l as u64);
        }
        let length = u64::try_from(batch.length())
            .map_err(|_| invalid(name, format!("a record batch has {} rows", batch.length())))?;
        let mut next = 0usize;
        for field in fields {
            match rows {
                // A record batch's columns are `rows` long.
                Some(rows) => self.node(field.as_ref(), &lengths, &mut next, Some(rows))?,
                // A dictionary's values are nested elements.
                None => {
                    self.node(field.as_ref(), &lengths, &mut next, None)?;
                    if lengths.first().is_some_and(|&l| l != length) {
                        return Err(invalid(
                            name,
                            "a dictionary's length differs from its batch's",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks the node of `field` (the next one) and its children's.
    fn node(
        &mut self,
        field: &Field,
        lengths: &[u64],
        next: &mut usize,
        exact: Option<u64>,
    ) -> Result<()> {
        let name = self.name;
        let length = *lengths.get(*next).ok_or_else(|| {
            invalid(
                name,
                "a record batch has fewer field nodes than its schema has fields",
            )
        })?;
        *next += 1;
        match exact {
            Some(want) if want != length => {
                return Err(invalid(
                    name,
                    format!("field \"{}\" has {length} values where {want} are expected", field.name()),
                ))
            }
            Some(_) => {}
            None => {
                self.nested_budget = self.nested_budget.checked_sub(length).ok_or_else(|| {
                    invalid(name, format!("its nested arrays declare more than {NESTED_ELEMENTS_PER_BYTE} elements per byte of the file"))
                })?
            }
        }
        match field.data_type() {
            // A dictionary's values come in their own batch.
            DataType::Dictionary(..) => {}
            DataType::Struct(children) => {
                for child in children.iter() {
                    self.node(child, lengths, next, Some(length))?;
                }
            }
            t => {
                for child in children(t) {
                    self.node(child, lengths, next, None)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::BatchBuilder;
    use crate::ipc_writer::encode_shard;
    use crate::value::{FieldValue, Fields};
    use arrow_array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
    use arrow_ipc::writer::{FileWriter, IpcWriteOptions};

    const FP: Fingerprint = Fingerprint {
        records: 3,
        data_len: 99,
        index_xxh3: 7,
        edges_xxh3: 8,
    };

    fn sample() -> RecordBatch {
        let mut b = BatchBuilder::new();
        for i in 0..3i64 {
            let mut f = Fields::new();
            f.push("n", FieldValue::Int64(i));
            f.push("s", FieldValue::String(format!("v{i}")));
            f.push(
                "l",
                FieldValue::List(vec![FieldValue::Float64(0.5); i as usize]),
            );
            f.push(
                "st",
                FieldValue::Struct(vec![
                    ("b".into(), FieldValue::Binary(vec![i as u8])),
                    ("z".into(), FieldValue::Null),
                ]),
            );
            b.push(&f, "r").unwrap();
        }
        b.finish().unwrap()
    }

    fn decode_vec(bytes: Vec<u8>, fp: &Fingerprint) -> Result<Option<Vec<RecordBatch>>> {
        decode_shard(Arc::new(bytes), fp, "000005.fields.arrow")
    }

    #[test]
    fn round_trips_zero_copy() {
        let batch = sample();
        let bytes = Arc::new(encode_shard(&batch, &FP).unwrap());
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = bytes.clone();
        let back = decode_shard(owner, &FP, "f").unwrap().unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].columns(), batch.columns());
        assert_eq!(back[0].schema().fields(), batch.schema().fields());
        // The string column's bytes are in the file.
        let s = back[0].column(1).to_data();
        let range = bytes.as_ptr_range();
        assert!(range.contains(&s.buffers()[1].as_ptr()));
    }

    /// A projection decodes only the columns asked for, as they are; the
    /// file is still checked whole (a stale file is still stale).
    #[test]
    fn a_projection_decodes_only_its_columns() {
        let batch = sample();
        let bytes = encode_shard(&batch, &FP).unwrap();
        let columns = ["st".to_owned(), "n".to_owned(), "absent".to_owned()];
        let back = decode_shard_columns(Arc::new(bytes.clone()), &FP, "f", Some(&columns))
            .unwrap()
            .unwrap();
        assert_eq!(back[0].num_columns(), 2);
        assert_eq!(back[0].column_by_name("n"), Some(batch.column(0)));
        assert_eq!(back[0].column_by_name("st"), Some(batch.column(3)));
        let stale = Fingerprint {
            edges_xxh3: 9,
            ..FP
        };
        assert!(
            decode_shard_columns(Arc::new(bytes), &stale, "f", Some(&columns))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn zero_rows_and_dictionaries_round_trip() {
        let empty = BatchBuilder::new().finish().unwrap();
        let fp0 = Fingerprint { records: 0, ..FP };
        let back = decode_vec(encode_shard(&empty, &fp0).unwrap(), &fp0)
            .unwrap()
            .unwrap();
        assert_eq!(back.iter().map(|b| b.num_rows()).sum::<usize>(), 0);

        let dict: DictionaryArray<arrow_array::types::Int32Type> =
            vec!["a", "b", "a"].into_iter().collect();
        let batch = RecordBatch::try_from_iter([("d", Arc::new(dict) as ArrayRef)]).unwrap();
        let back = decode_vec(encode_shard(&batch, &FP).unwrap(), &FP)
            .unwrap()
            .unwrap();
        assert_eq!(back[0].column(0), batch.column(0));
    }

    #[test]
    fn a_wrong_row_count_is_an_error() {
        let bytes = encode_shard(&sample(), &Fingerprint { records: 4, ..FP }).unwrap();
        let err = decode_vec(bytes, &Fingerprint { records: 4, ..FP })
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "000005.fields.arrow: its record batches hold 3 rows, its shard 4 records"
        );
        let bytes = encode_shard(&sample(), &Fingerprint { records: 2, ..FP }).unwrap();
        let err = decode_vec(bytes, &Fingerprint { records: 2, ..FP })
            .unwrap_err()
            .to_string();
        assert!(err.contains("passes the shard's 2 records"), "{err}");
    }

    #[test]
    fn compressed_files_are_refused() {
        // The tests build arrow-ipc with its lz4 codec (a dev-dependency
        // feature), so Arrow itself writes the compressed file.
        let batch = RecordBatch::try_from_iter([(
            "a",
            Arc::new(Int32Array::from(vec![1, 2, 3])) as ArrayRef,
        )])
        .unwrap();
        let schema = Arc::new(
            batch
                .schema()
                .as_ref()
                .clone()
                .with_metadata([(SHARD_METADATA_KEY, FP.to_json_string())]),
        );
        let batch = batch.with_schema(schema.clone()).unwrap();
        let options = IpcWriteOptions::default()
            .try_with_compression(Some(arrow_ipc::CompressionType::LZ4_FRAME))
            .unwrap();
        let mut out = Vec::new();
        let mut w = FileWriter::try_new_with_options(&mut out, &schema, options).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        let err = decode_vec(out, &FP).unwrap_err().to_string();
        assert_eq!(
            err,
            "000005.fields.arrow: its buffers are compressed (IPC compression is not supported)"
        );
    }

    #[test]
    fn every_truncation_and_byte_flip_is_an_error_or_a_valid_read() {
        let bytes = encode_shard(&sample(), &FP).unwrap();
        for cut in 0..bytes.len() {
            let err = decode_vec(bytes[..cut].to_vec(), &FP)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("000005.fields.arrow: "), "{err}");
        }
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[i] ^= flip;
                match decode_vec(damaged, &FP) {
                    Ok(Some(batches)) => {
                        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
                        for b in &batches {
                            for c in b.columns() {
                                c.to_data().validate_full().unwrap();
                            }
                        }
                    }
                    Ok(None) => {}
                    Err(e) => assert!(e.to_string().starts_with("000005.fields.arrow: "), "{e}"),
                }
            }
        }
    }

    #[test]
    fn a_file_of_another_shard_is_stale() {
        let bytes = encode_shard(&sample(), &FP).unwrap();
        for other in [
            Fingerprint { records: 4, ..FP },
            Fingerprint {
                data_len: 100,
                ..FP
            },
            Fingerprint {
                index_xxh3: 0,
                ..FP
            },
            Fingerprint {
                edges_xxh3: 0,
                ..FP
            },
        ] {
            assert!(decode_vec(bytes.clone(), &other).unwrap().is_none());
        }
    }

    #[test]
    fn a_file_without_a_fingerprint_is_an_error() {
        let batch =
            RecordBatch::try_from_iter([("a", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)])
                .unwrap();
        let mut out = Vec::new();
        let mut w = FileWriter::try_new(&mut out, &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        let err = decode_vec(out, &FP).unwrap_err().to_string();
        assert_eq!(
            err,
            "000005.fields.arrow: the schema has no \"bcd.shard\" metadata"
        );
    }

    /// The file with its footer's blocks replaced by `f`'s.
    fn refooter(bytes: &[u8], f: impl Fn(Vec<Block>) -> Vec<Block>) -> Vec<u8> {
        let len = bytes.len();
        let footer_len = i32::from_le_bytes(bytes[len - 10..len - 6].try_into().unwrap()) as usize;
        let footer_start = len - 10 - footer_len;
        let footer = arrow_ipc::root_as_footer(&bytes[footer_start..len - 10]).unwrap();
        let schema = arrow_ipc::convert::try_fb_to_schema(footer.schema().unwrap()).unwrap();
        let batches = f(footer.recordBatches().unwrap().iter().copied().collect());
        let mut fbb = flatbuffers::FlatBufferBuilder::new();
        let schema =
            arrow_ipc::convert::IpcSchemaEncoder::new().schema_to_fb_offset(&mut fbb, &schema);
        let dictionaries = fbb.create_vector::<Block>(&[]);
        let batches = fbb.create_vector(&batches);
        let mut builder = arrow_ipc::FooterBuilder::new(&mut fbb);
        builder.add_version(footer.version());
        builder.add_schema(schema);
        builder.add_dictionaries(dictionaries);
        builder.add_recordBatches(batches);
        let root = builder.finish();
        fbb.finish(root, None);
        let mut out = bytes[..footer_start].to_vec();
        out.extend_from_slice(fbb.finished_data());
        out.extend_from_slice(&(fbb.finished_data().len() as i32).to_le_bytes());
        out.extend_from_slice(MAGIC);
        out
    }

    #[test]
    fn hostile_blocks_are_refused() {
        let bytes = encode_shard(&sample(), &Fingerprint { records: 6, ..FP }).unwrap();
        let fp = Fingerprint { records: 6, ..FP };
        // The same batch twice: its rows would count twice.
        let twice = refooter(&bytes, |b| vec![b[0], b[0]]);
        let err = decode_vec(twice, &fp).unwrap_err().to_string();
        assert!(err.ends_with("overlaps another"), "{err}");
        let b0 = arrow_ipc::root_as_footer(
            &bytes[bytes.len()
                - 10
                - i32::from_le_bytes(bytes[bytes.len() - 10..bytes.len() - 6].try_into().unwrap())
                    as usize..bytes.len() - 10],
        )
        .unwrap()
        .recordBatches()
        .unwrap()
        .get(0);
        for block in [
            Block::new(
                b0.offset(),
                b0.metaDataLength(),
                b0.bodyLength() + (1 << 40),
            ),
            Block::new(b0.offset(), -8, b0.bodyLength()),
            Block::new(-16, b0.metaDataLength(), b0.bodyLength()),
            Block::new(0, b0.metaDataLength(), b0.bodyLength()),
            Block::new(b0.offset(), 4, b0.bodyLength()),
            Block::new(i64::MAX, i32::MAX, i64::MAX),
        ] {
            let err = decode_vec(refooter(&bytes, |_| vec![block]), &fp)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("000005.fields.arrow: a block"), "{err}");
        }
        let err = decode_vec(refooter(&bytes, |_| vec![]), &fp)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "000005.fields.arrow: its record batches hold 0 rows, its shard 6 records"
        );
    }

    #[test]
    fn a_list_of_a_billion_nulls_in_a_few_bytes_is_refused() {
        let values = arrow_array::NullArray::new(1 << 30);
        let list = arrow_array::ListArray::try_new(
            Arc::new(Field::new("item", DataType::Null, true)),
            arrow_buffer::OffsetBuffer::from_lengths([1 << 30]),
            Arc::new(values),
            None,
        )
        .unwrap();
        let batch = RecordBatch::try_from_iter([("l", Arc::new(list) as ArrayRef)]).unwrap();
        let fp = Fingerprint { records: 1, ..FP };
        let bytes = encode_shard(&batch, &fp).unwrap();
        assert!(bytes.len() < 2048);
        let err = decode_vec(bytes, &fp).unwrap_err().to_string();
        assert!(err.contains("more than 16 elements per byte"), "{err}");
    }
}
