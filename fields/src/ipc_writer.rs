//! Writing a shard's fields file `NNNNNN.fields.arrow` (FORMAT.md, "Fields"):
//! an Arrow IPC file written batch by batch into any `Write`, so a writer
//! holds one batch at a time, never the shard's fields.
//!
//! The messages are Arrow's (`IpcDataGenerator`, the layout of Arrow's
//! `FileWriter`: the same bytes); the footer is built here so that the
//! fingerprint can be given last: a file reader reads the schema of the
//! footer, and the schema message at the start of the file, written before
//! the shard is finished, may lack it ([`ShardFileEncoder`]).

use std::io::Write;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_ipc::convert::IpcSchemaEncoder;
use arrow_ipc::writer::{DictionaryTracker, FileWriter, IpcWriteOptions};
use arrow_schema::{Schema, SchemaRef};

use crate::error::{FieldsError, Result};
use crate::fingerprint::Fingerprint;
use crate::ipc::SHARD_METADATA_KEY;

const MAGIC: &[u8; 6] = b"ARROW1";
/// The alignment of messages and buffers, and the metadata version: Arrow's
/// defaults.
const ALIGNMENT: usize = 64;
const VERSION: arrow_ipc::MetadataVersion = arrow_ipc::MetadataVersion::V5;
/// The end-of-stream marker before the footer: a continuation and a metadata
/// length of 0 (as Arrow's `FileWriter` writes it).
const END_OF_STREAM: [u8; 8] = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];

fn arrow(e: arrow_schema::ArrowError) -> FieldsError {
    FieldsError::arrow("encoding a shard's fields", e)
}

fn io(e: std::io::Error) -> FieldsError {
    arrow(arrow_schema::ArrowError::from(e))
}

/// A schema of `fields`, with the fingerprint's JSON under
/// [`SHARD_METADATA_KEY`] when given.
fn shard_schema(fields: &arrow_schema::Fields, fingerprint: Option<&Fingerprint>) -> Schema {
    let schema = Schema::new(fields.clone());
    match fingerprint {
        Some(f) => schema.with_metadata([(SHARD_METADATA_KEY, f.to_json_string())]),
        None => schema,
    }
}

/// Encodes a shard's fields file into a `Write` given at each call, so that
/// the file can be written as the shard's records arrive, before its
/// fingerprint is known: [`ShardFileEncoder::start`] writes the leading magic
/// and the schema message of the shard's columns (without the fingerprint
/// when it is not known yet), [`ShardFileEncoder::write`] each batch as it
/// comes, and [`ShardFileEncoder::finish`] the footer, whose schema (the one
/// a file reader reads, FORMAT.md) holds the fingerprint. The bytes are those
/// of Arrow's `FileWriter` but for the leading schema's metadata. Nothing is
/// buffered beyond the message being written.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use bcd_fields::{decode_shard, Fingerprint, ShardFileEncoder};
///
/// let batch = RecordBatch::try_from_iter([("n", Arc::new(Int64Array::from(vec![1, 2])) as _)]).unwrap();
/// let mut file = Vec::new();
/// let mut encoder = ShardFileEncoder::start(&mut file, batch.schema().fields(), None).unwrap();
/// encoder.write(&mut file, &batch).unwrap();
/// // The shard's fingerprint is known once its records are.
/// let fingerprint = Fingerprint { records: 2, data_len: 10, index_xxh3: 1, edges_xxh3: 2 };
/// encoder.finish(&mut file, &fingerprint).unwrap();
/// let back = decode_shard(Arc::new(file), &fingerprint, "000000.fields.arrow").unwrap().unwrap();
/// assert_eq!(back[0].column(0), batch.column(0));
/// ```
pub struct ShardFileEncoder {
    /// Arrow's writer of the file's messages, into a buffer emptied into the
    /// caller's `Write` after each call (its footer is not used).
    writer: FileWriter<Vec<u8>>,
    /// The file's columns (no metadata): the batches are written as these.
    schema: SchemaRef,
    /// Bytes written so far: where the next block starts.
    offset: usize,
    dictionary_blocks: Vec<arrow_ipc::Block>,
    record_blocks: Vec<arrow_ipc::Block>,
    rows: u64,
}

/// A buffer emptied after a write keeps at most this much room for the next.
const KEPT_BUFFER: usize = 16 << 20;

impl ShardFileEncoder {
    /// Writes the start of the file of a shard whose columns are `fields`
    /// (their order, types and field metadata as given) into `out`: the magic
    /// and the schema message, with `fingerprint` when known (else the
    /// footer alone holds it).
    pub fn start(
        out: &mut dyn Write,
        fields: &arrow_schema::Fields,
        fingerprint: Option<&Fingerprint>,
    ) -> Result<ShardFileEncoder> {
        let options = IpcWriteOptions::try_new(ALIGNMENT, false, VERSION).map_err(arrow)?;
        let leading = shard_schema(fields, fingerprint);
        let writer =
            FileWriter::try_new_with_options(Vec::new(), &leading, options).map_err(arrow)?;
        let mut encoder = ShardFileEncoder {
            writer,
            schema: Arc::new(Schema::new(fields.clone())),
            offset: 0,
            dictionary_blocks: Vec::new(),
            record_blocks: Vec::new(),
            rows: 0,
        };
        // The magic and the schema message: no block.
        encoder.offset = encoder.writer.get_ref().len();
        encoder.drain(out)?;
        Ok(encoder)
    }

    /// Writes what Arrow's writer wrote into `out`, and empties its buffer.
    fn drain(&mut self, out: &mut dyn Write) -> Result<()> {
        let buffer = self.writer.get_mut();
        out.write_all(buffer).map_err(io)?;
        buffer.clear();
        if buffer.capacity() > KEPT_BUFFER {
            buffer.shrink_to(KEPT_BUFFER);
        }
        Ok(())
    }

    /// The file's columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends the next records' fields into `out` (the file `start` began):
    /// `batch` holds the file's columns, in its order, of its types (its field
    /// names and metadata are not looked at). A batch of no rows writes
    /// nothing.
    pub fn write(&mut self, out: &mut dyn Write, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.write_any(out, batch)
    }

    /// [`ShardFileEncoder::write`], a batch of no rows too.
    fn write_any(&mut self, out: &mut dyn Write, batch: &RecordBatch) -> Result<()> {
        let batch = RecordBatch::try_new_with_options(
            self.writer.schema().clone(),
            batch.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(arrow)?;
        self.writer.write(&batch).map_err(arrow)?;
        // The blocks of the messages written (the dictionaries', then the
        // batch's), as the footer lists them.
        let written = self.writer.get_ref();
        let mut at = 0;
        while at < written.len() {
            let message = |what: &str| FieldsError::Unsupported(format!("Arrow wrote {what}"));
            let prefix = written
                .get(at..at + 8)
                .ok_or_else(|| message("a truncated message"))?;
            let meta_len = i32::from_le_bytes(prefix[4..8].try_into().unwrap_or_default());
            let meta_end = at + 8 + usize::try_from(meta_len).unwrap_or(usize::MAX);
            let meta = written
                .get(at + 8..meta_end)
                .ok_or_else(|| message("a truncated message"))?;
            let parsed = arrow_ipc::root_as_message(meta)
                .map_err(|e| message(&format!("a message that does not parse: {e}")))?;
            let body = usize::try_from(parsed.bodyLength()).unwrap_or(usize::MAX);
            let block = arrow_ipc::Block::new(
                (self.offset + at) as i64,
                (8 + meta.len()) as i32,
                body as i64,
            );
            match parsed.header_type() {
                arrow_ipc::MessageHeader::DictionaryBatch => self.dictionary_blocks.push(block),
                _ => self.record_blocks.push(block),
            }
            at = meta_end.saturating_add(body);
        }
        self.offset += written.len();
        self.rows += batch.num_rows() as u64;
        self.drain(out)
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The batches written so far, read back from `file`: the bytes written
    /// into `out` from the start (a mapping of the unfinished file, say),
    /// which the batches point into. For a writer that must write the file
    /// otherwise (its columns changed); `name` names the file in errors.
    pub fn read_written(
        &self,
        file: Arc<dyn AsRef<[u8]> + Send + Sync>,
        name: &str,
    ) -> Result<Vec<RecordBatch>> {
        let len = (*file).as_ref().len();
        if len < self.offset {
            return Err(FieldsError::invalid(
                name,
                format!("{len} bytes, {} written", self.offset),
            ));
        }
        let buffer = crate::ipc::buffer_over(file);
        let mut decoder = arrow_ipc::reader::FileDecoder::new(self.schema.clone(), VERSION);
        let mut batches = Vec::with_capacity(self.record_blocks.len());
        let read = |e| FieldsError::arrow(format!("reading back the fields written to {name}"), e);
        let message = |block: &arrow_ipc::Block| {
            buffer.slice_with_length(
                block.offset() as usize,
                block.metaDataLength() as usize + block.bodyLength() as usize,
            )
        };
        for block in &self.dictionary_blocks {
            decoder
                .read_dictionary(block, &message(block))
                .map_err(read)?;
        }
        for block in &self.record_blocks {
            if let Some(batch) = decoder
                .read_record_batch(block, &message(block))
                .map_err(read)?
            {
                batches.push(batch);
            }
        }
        Ok(batches)
    }

    /// Writes the end of the file into `out`: the end-of-stream marker and
    /// the footer, whose schema holds `fingerprint` (as Arrow's writer would
    /// with that schema).
    pub fn finish(self, out: &mut dyn Write, fingerprint: &Fingerprint) -> Result<()> {
        out.write_all(&END_OF_STREAM).map_err(io)?;
        let mut fbb = flatbuffers::FlatBufferBuilder::new();
        let dictionaries = fbb.create_vector(&self.dictionary_blocks);
        let record_batches = fbb.create_vector(&self.record_blocks);
        // The dictionaries are numbered in the footer's schema as in the
        // leading one: in the same order, from the start.
        let mut tracker = DictionaryTracker::new(true);
        let schema = shard_schema(self.schema.fields(), Some(fingerprint));
        let schema = IpcSchemaEncoder::new()
            .with_dictionary_tracker(&mut tracker)
            .schema_to_fb_offset(&mut fbb, &schema);
        let root = {
            let mut footer = arrow_ipc::FooterBuilder::new(&mut fbb);
            footer.add_version(VERSION);
            footer.add_schema(schema);
            footer.add_dictionaries(dictionaries);
            footer.add_recordBatches(record_batches);
            footer.finish()
        };
        fbb.finish(root, None);
        let footer = fbb.finished_data();
        out.write_all(footer).map_err(io)?;
        out.write_all(&(footer.len() as i32).to_le_bytes())
            .map_err(io)?;
        out.write_all(MAGIC).map_err(io)?;
        out.flush().map_err(io)
    }
}

/// Writes a shard's fields file into `W` one record batch at a time
/// (FORMAT.md, "Fields"): uncompressed, the fingerprint's JSON under the
/// schema metadata key [`SHARD_METADATA_KEY`]. The schema is given first (the
/// shard's columns, known once its records are: see
/// [`BatchBuilder::shard_fields`](crate::BatchBuilder::shard_fields)); each
/// batch holds the next records' values of those columns, of those types.
/// Nothing is buffered beyond the message being written; [`finish`] writes the
/// footer. (A [`ShardFileEncoder`] writes a file before its fingerprint is
/// known.)
///
/// A column's dictionary (a `Dictionary` type) must be the same in every batch
/// (the IPC file format holds one dictionary per field): Arrow refuses a
/// replacement.
///
/// [`finish`]: ShardFileWriter::finish
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use bcd_fields::{decode_shard, Fingerprint, ShardFileWriter};
///
/// let fingerprint = Fingerprint { records: 5, data_len: 10, index_xxh3: 1, edges_xxh3: 2 };
/// let first = RecordBatch::try_from_iter([("label", Arc::new(Int64Array::from(vec![1, 2, 3])) as _)]).unwrap();
/// let second = RecordBatch::try_from_iter([("label", Arc::new(Int64Array::from(vec![4, 5])) as _)]).unwrap();
///
/// let mut writer = ShardFileWriter::try_new(Vec::new(), first.schema().fields(), &fingerprint).unwrap();
/// writer.write(&first).unwrap();
/// writer.write(&second).unwrap();
/// let bytes = writer.finish().unwrap();
///
/// let back = decode_shard(Arc::new(bytes), &fingerprint, "000000.fields.arrow").unwrap().unwrap();
/// assert_eq!(back.iter().map(|b| b.num_rows()).collect::<Vec<_>>(), [3, 2]);
/// ```
pub struct ShardFileWriter<W: Write> {
    out: W,
    encoder: ShardFileEncoder,
    fingerprint: Fingerprint,
}

impl<W: Write> ShardFileWriter<W> {
    /// Starts the file of a shard whose columns are `fields` (their order,
    /// types and field metadata as given) with fingerprint `fingerprint`.
    pub fn try_new(
        mut out: W,
        fields: &arrow_schema::Fields,
        fingerprint: &Fingerprint,
    ) -> Result<ShardFileWriter<W>> {
        let encoder = ShardFileEncoder::start(&mut out, fields, Some(fingerprint))?;
        Ok(ShardFileWriter {
            out,
            encoder,
            fingerprint: *fingerprint,
        })
    }

    /// Appends the next records' fields: `batch` holds the file's columns, in
    /// its order, of its types (its field names and metadata are not looked
    /// at). A batch of no rows writes nothing.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.encoder.write(&mut self.out, batch)
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.encoder.rows()
    }

    /// Writes the footer and returns the writer.
    pub fn finish(mut self) -> Result<W> {
        self.encoder.finish(&mut self.out, &self.fingerprint)?;
        Ok(self.out)
    }
}

/// Encodes a shard's fields as an Arrow IPC file of one record batch
/// (FORMAT.md, "Fields"), in memory: [`ShardFileWriter`] with one batch. The
/// batch's schema metadata is dropped.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use bcd_fields::{decode_shard, encode_shard, Fingerprint};
///
/// let batch = RecordBatch::try_from_iter([("label", Arc::new(Int64Array::from(vec![1, 2])) as _)]).unwrap();
/// let fingerprint = Fingerprint { records: 2, data_len: 10, index_xxh3: 1, edges_xxh3: 2 };
/// let bytes = encode_shard(&batch, &fingerprint).unwrap();
///
/// let back = decode_shard(Arc::new(bytes.clone()), &fingerprint, "000000.fields.arrow").unwrap().unwrap();
/// assert_eq!(back[0].column(0), batch.column(0));
/// // Another shard's file is stale.
/// let other = Fingerprint { edges_xxh3: 3, ..fingerprint };
/// assert!(decode_shard(Arc::new(bytes), &other, "000000.fields.arrow").unwrap().is_none());
/// ```
pub fn encode_shard(batch: &RecordBatch, fingerprint: &Fingerprint) -> Result<Vec<u8>> {
    let mut writer = ShardFileWriter::try_new(Vec::new(), batch.schema().fields(), fingerprint)?;
    // One batch even of no rows, as this project always wrote it.
    writer.encoder.write_any(&mut writer.out, batch)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::decode_shard;
    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, DictionaryArray, StringArray};

    const FP: Fingerprint = Fingerprint {
        records: 5,
        data_len: 9,
        index_xxh3: 1,
        edges_xxh3: 2,
    };

    /// What Arrow's own `FileWriter` writes for `batches` with the
    /// fingerprint in the schema (the writer before issue 27).
    fn arrow_file(batches: &[RecordBatch], fingerprint: &Fingerprint) -> Vec<u8> {
        let schema = shard_schema(batches[0].schema().fields(), Some(fingerprint));
        let mut writer = arrow_ipc::writer::FileWriter::try_new(Vec::new(), &schema).unwrap();
        for batch in batches {
            let batch = batch.clone().with_schema(Arc::new(schema.clone())).unwrap();
            writer.write(&batch).unwrap();
        }
        writer.finish().unwrap();
        writer.into_inner().unwrap()
    }

    fn dictionary_and_strings() -> RecordBatch {
        let d: DictionaryArray<Int32Type> = vec!["x", "y", "x", "z", "y"].into_iter().collect();
        let s = StringArray::from(vec![Some("a"), None, Some("ccc"), Some(""), Some("e")]);
        RecordBatch::try_from_iter([
            ("d", Arc::new(d) as ArrayRef),
            ("s", Arc::new(s) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn a_writer_given_the_fingerprint_first_writes_arrows_file_byte_for_byte() {
        let whole = dictionary_and_strings();
        let batches = [whole.slice(0, 2), whole.slice(2, 3)];
        let mut writer =
            ShardFileWriter::try_new(Vec::new(), whole.schema().fields(), &FP).unwrap();
        for batch in &batches {
            writer.write(batch).unwrap();
        }
        assert_eq!(writer.finish().unwrap(), arrow_file(&batches, &FP));
    }

    #[test]
    fn the_fingerprint_given_last_is_in_the_footer_and_only_the_leading_schema_differs() {
        let whole = dictionary_and_strings();
        let batches = [whole.slice(0, 2), whole.slice(2, 3)];
        let mut file = Vec::new();
        let mut encoder =
            ShardFileEncoder::start(&mut file, whole.schema().fields(), None).unwrap();
        for batch in &batches {
            encoder.write(&mut file, batch).unwrap();
        }
        assert_eq!(encoder.rows(), 5);
        encoder.finish(&mut file, &FP).unwrap();
        let back = decode_shard(Arc::new(file.clone()), &FP, "f")
            .unwrap()
            .unwrap();
        assert_eq!(back.len(), 2);
        let joined = arrow_select::concat::concat_batches(&whole.schema(), &back).unwrap();
        assert_eq!(joined, whole);

        // Arrow's file reader takes the schema, and so the fingerprint, from
        // the footer, as this crate's reader does.
        let reader =
            arrow_ipc::reader::FileReader::try_new(std::io::Cursor::new(file.clone()), None)
                .unwrap();
        assert_eq!(
            reader.schema().metadata()[SHARD_METADATA_KEY],
            FP.to_json_string()
        );

        // The same bytes as Arrow's file but for the leading schema message,
        // which lacks the metadata (shorter by a whole number of 64-byte
        // blocks, or not at all): every block and the footer's schema are
        // Arrow's.
        let arrow = arrow_file(&batches, &FP);
        let schema_end = |bytes: &[u8]| {
            let len = i32::from_le_bytes(bytes[68..72].try_into().unwrap()) as usize;
            72 + len
        };
        let (mine, theirs) = (schema_end(&file), schema_end(&arrow));
        assert!(mine <= theirs);
        assert_eq!(file[..64], arrow[..64]);
        // Blocks are placed by offset in the footer: the footers differ in
        // those offsets only when the schema messages differ in length.
        if mine == theirs {
            assert_eq!(file[mine..], arrow[theirs..]);
        } else {
            let data = |bytes: &[u8], start: usize| {
                let footer_len = i32::from_le_bytes(
                    bytes[bytes.len() - 10..bytes.len() - 6].try_into().unwrap(),
                );
                bytes[start..bytes.len() - 10 - footer_len as usize].to_vec()
            };
            assert_eq!(data(&file, mine), data(&arrow, theirs));
        }
    }

    #[test]
    fn the_batches_written_read_back_from_the_unfinished_file() {
        let whole = dictionary_and_strings();
        let mut file = Vec::new();
        let mut encoder =
            ShardFileEncoder::start(&mut file, whole.schema().fields(), None).unwrap();
        encoder.write(&mut file, &whole.slice(0, 2)).unwrap();
        encoder.write(&mut file, &whole.slice(2, 0)).unwrap();
        encoder.write(&mut file, &whole.slice(2, 3)).unwrap();
        let bytes = Arc::new(file.clone());
        let back = encoder.read_written(bytes.clone(), "f").unwrap();
        assert_eq!(back.len(), 2);
        let joined = arrow_select::concat::concat_batches(encoder.schema(), &back).unwrap();
        assert_eq!(joined.columns(), whole.columns());
        // Zero-copy: the strings are the bytes written.
        let range = bytes.as_ptr_range();
        let strings = back[0].column(1).to_data();
        assert!(range.contains(&strings.buffers()[1].as_ptr()));
        // Fewer bytes than were written is an error naming the file.
        let err = encoder
            .read_written(Arc::new(file[..file.len() - 1].to_vec()), "0.fields.arrow")
            .unwrap_err();
        assert!(err.to_string().contains("0.fields.arrow"), "{err}");
    }

    #[test]
    fn several_batches_read_back_zero_copy_in_order() {
        let first = RecordBatch::try_from_iter([(
            "s",
            Arc::new(StringArray::from(vec!["a", "bb", "ccc"])) as ArrayRef,
        )])
        .unwrap();
        let second = first.slice(0, 2);
        let mut writer =
            ShardFileWriter::try_new(Vec::new(), first.schema().fields(), &FP).unwrap();
        writer.write(&first).unwrap();
        writer.write(&first.slice(0, 0)).unwrap();
        writer.write(&second).unwrap();
        assert_eq!(writer.rows(), 5);
        let bytes = Arc::new(writer.finish().unwrap());
        let back = decode_shard(bytes.clone(), &FP, "f").unwrap().unwrap();
        // No empty batch is written.
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].columns(), first.columns());
        assert_eq!(back[1].columns(), second.columns());
        // Every batch's strings are the file's bytes.
        let range = bytes.as_ptr_range();
        for batch in &back {
            let data = batch.column(0).to_data();
            assert!(range.contains(&data.buffers()[1].as_ptr()));
        }
    }

    #[test]
    fn batches_sharing_a_dictionary_write_it_once_and_others_are_refused() {
        let d: DictionaryArray<Int32Type> = vec!["x", "y", "x", "z", "y"].into_iter().collect();
        let whole = RecordBatch::try_from_iter([("d", Arc::new(d) as ArrayRef)]).unwrap();
        let mut writer =
            ShardFileWriter::try_new(Vec::new(), whole.schema().fields(), &FP).unwrap();
        writer.write(&whole.slice(0, 2)).unwrap();
        writer.write(&whole.slice(2, 3)).unwrap();
        let back = decode_shard(Arc::new(writer.finish().unwrap()), &FP, "f")
            .unwrap()
            .unwrap();
        let joined = arrow_select::concat::concat_batches(&whole.schema(), &back).unwrap();
        assert_eq!(joined, whole);

        let other: DictionaryArray<Int32Type> = vec!["q"].into_iter().collect();
        let other = RecordBatch::try_from_iter([("d", Arc::new(other) as ArrayRef)]).unwrap();
        let mut writer =
            ShardFileWriter::try_new(Vec::new(), whole.schema().fields(), &FP).unwrap();
        writer.write(&whole).unwrap();
        let err = writer.write(&other).unwrap_err().to_string();
        assert_eq!(err, "encoding a shard's fields");
    }
}
