//! Writing a shard's fields file `NNNNNN.fields.arrow` (FORMAT.md, "Fields"):
//! an Arrow IPC file written batch by batch into any `Write`, so a writer
//! holds one batch at a time, never the shard's fields.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_ipc::writer::{FileWriter, IpcWriteOptions};
use arrow_schema::{Schema, SchemaRef};

use crate::error::{FieldsError, Result};
use crate::fingerprint::Fingerprint;
use crate::ipc::SHARD_METADATA_KEY;

/// Writes a shard's fields file into `W` one record batch at a time
/// (FORMAT.md, "Fields"): uncompressed, the fingerprint's JSON under the
/// schema metadata key [`SHARD_METADATA_KEY`]. The schema is given first (the
/// shard's columns, known once its records are: see
/// [`BatchBuilder::shard_fields`](crate::BatchBuilder::shard_fields)); each
/// batch holds the next records' values of those columns, of those types.
/// Nothing is buffered beyond the message being written; [`finish`] writes the
/// footer.
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
    writer: FileWriter<W>,
    schema: SchemaRef,
    rows: u64,
}

impl<W: Write> ShardFileWriter<W> {
    /// Starts the file of a shard whose columns are `fields` (their order,
    /// types and field metadata as given) with fingerprint `fingerprint`.
    pub fn try_new(
        out: W,
        fields: &arrow_schema::Fields,
        fingerprint: &Fingerprint,
    ) -> Result<ShardFileWriter<W>> {
        let schema = Arc::new(
            Schema::new(fields.clone())
                .with_metadata([(SHARD_METADATA_KEY, fingerprint.to_json_string())]),
        );
        let writer = FileWriter::try_new_with_options(out, &schema, IpcWriteOptions::default())
            .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))?;
        Ok(ShardFileWriter {
            writer,
            schema,
            rows: 0,
        })
    }

    /// Appends the next records' fields: `batch` holds the file's columns, in
    /// its order, of its types (its field names and metadata are not looked
    /// at). A batch of no rows writes nothing.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = RecordBatch::try_new_with_options(
            self.schema.clone(),
            batch.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))?;
        self.writer
            .write(&batch)
            .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the footer and returns the writer.
    pub fn finish(mut self) -> Result<W> {
        self.writer
            .finish()
            .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))?;
        self.writer
            .into_inner()
            .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))
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
    let batch = RecordBatch::try_new_with_options(
        writer.schema.clone(),
        batch.columns().to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))?;
    writer
        .writer
        .write(&batch)
        .map_err(|e| FieldsError::arrow("encoding a shard's fields", e))?;
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
