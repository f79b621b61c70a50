//! One shard's fields while its records arrive, when its batches cannot be
//! written into its file as they come (a later batch added a column or
//! widened a type, or a column holds a dictionary, which the file holds once):
//! the batches a writer built, kept in memory up to a budget and past it in an
//! unnamed scratch file, then handed back one at a time as the shard's
//! columns, whose types are those of all its records, when the shard ends.

use std::collections::HashSet;
use std::fs::File;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{Schema, SchemaRef};

use crate::conform::conform_batch;
use crate::error::{FieldsError, Result};
use crate::shard_dictionaries::{has_dictionary, SharedDictionaries};

/// Rows a writer puts in one record batch of a shard's fields file, at most.
pub const BATCH_ROWS: usize = 65_536;
/// About the bytes of Arrow data a writer puts in one record batch of a
/// shard's fields file, at most (a single larger record makes a larger batch).
pub const BATCH_BYTES: usize = 8 << 20;
/// Bytes of a shard's batches kept in memory until its end; past that they go
/// to a scratch file.
pub const SHARD_MEMORY_BYTES: usize = 32 << 20;

/// One shard's fields as record batches, in order, until the shard ends
/// (FORMAT.md, "Fields": a writer's memory). Batches are kept in memory while
/// they take at most a budget ([`SHARD_MEMORY_BYTES`] by default), and past it
/// are written to a scratch file (an unnamed temporary file in a directory the
/// caller gives, gone when it is closed or the process ends: nothing is left
/// behind whatever happens) as Arrow IPC streams, one per batch, each written
/// at its own offset (so a forked child's copy can neither move nor add to
/// it). [`ShardBatches::into_batches`] hands them back one at a time, each
/// converted to the shard's columns, which only the last record fixes (a later
/// record may widen a column's type or add a column).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int32Array, Int64Array, RecordBatch};
/// use arrow_schema::{DataType, Field};
/// use bcd_fields::ShardBatches;
///
/// let dir = std::env::temp_dir();
/// let mut shard = ShardBatches::with_budget(&dir, 0); // everything to the scratch file
/// let narrow = RecordBatch::try_from_iter([("n", Arc::new(Int32Array::from(vec![1, 2])) as _)]).unwrap();
/// let wide = RecordBatch::try_from_iter([("n", Arc::new(Int64Array::from(vec![3])) as _)]).unwrap();
/// shard.push(narrow).unwrap();
/// shard.push(wide).unwrap();
/// assert!(shard.spilled());
///
/// let columns = vec![Field::new("n", DataType::Int64, true)].into();
/// let back: Vec<RecordBatch> = shard.into_batches(&columns).unwrap().collect::<Result<_, _>>().unwrap();
/// assert_eq!(back[0].column(0).as_ref(), &Int64Array::from(vec![1, 2]) as &dyn arrow_array::Array);
/// assert_eq!(back[1].num_rows(), 1);
/// ```
#[derive(Debug)]
pub struct ShardBatches {
    rows: u64,
    /// The columns some batch had.
    columns: HashSet<String>,
    /// Whether some batch had a dictionary (at any depth).
    dictionaries: bool,
    memory: Vec<RecordBatch>,
    memory_bytes: usize,
    budget: usize,
    scratch_dir: PathBuf,
    scratch: Option<Scratch>,
}

/// The scratch file and where each batch's stream is in it.
#[derive(Debug)]
struct Scratch {
    file: File,
    /// Offset and length of each batch's IPC stream.
    streams: Vec<(u64, usize)>,
    end: u64,
}

impl ShardBatches {
    /// No batches yet; a scratch file, when needed, is made in `scratch_dir`.
    pub fn new(scratch_dir: &Path) -> ShardBatches {
        ShardBatches::with_budget(scratch_dir, SHARD_MEMORY_BYTES)
    }

    /// No batches yet, keeping at most `budget` bytes of them in memory.
    pub fn with_budget(scratch_dir: &Path, budget: usize) -> ShardBatches {
        ShardBatches {
            rows: 0,
            columns: HashSet::new(),
            dictionaries: false,
            memory: Vec::new(),
            memory_bytes: 0,
            budget,
            scratch_dir: scratch_dir.to_owned(),
            scratch: None,
        }
    }

    /// Records pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Whether some batch pushed had column `name`.
    pub fn has_column(&self, name: &str) -> bool {
        self.columns.contains(name)
    }

    /// Whether the batches went to the scratch file.
    pub fn spilled(&self) -> bool {
        self.scratch.is_some()
    }

    /// Adds the next records' batch.
    pub fn push(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.rows += batch.num_rows() as u64;
        for field in batch.schema().fields() {
            if !self.columns.contains(field.name()) {
                self.columns.insert(field.name().clone());
            }
            self.dictionaries |= has_dictionary(field.data_type());
        }
        if let Some(scratch) = &mut self.scratch {
            return scratch.write(&batch, &self.scratch_dir);
        }
        self.memory_bytes += batch.get_array_memory_size();
        self.memory.push(batch);
        if self.memory_bytes > self.budget {
            let mut scratch = Scratch::create(&self.scratch_dir)?;
            for batch in self.memory.drain(..) {
                scratch.write(&batch, &self.scratch_dir)?;
            }
            self.memory_bytes = 0;
            self.scratch = Some(scratch);
        }
        Ok(())
    }

    /// The batches, in order, each as the columns `fields` (by name, converted
    /// by the reading rules: narrower integers widened, missing columns and
    /// struct children null), which must be the shard's columns with the types
    /// of all its records (see [`crate::BatchBuilder::shard_fields`]).
    ///
    /// The file holds one dictionary per column, which batches built apart do
    /// not share: a dictionary column's values are first gathered over every
    /// batch (the distinct values its keys point to, in order of first use),
    /// and each batch handed back points into that one dictionary. A dictionary
    /// nested in another type, or of values other than primitives, booleans,
    /// strings and binaries, cannot be joined so: then the batches are joined
    /// into one, which is the shard's whole fields, in memory.
    pub fn into_batches(self, fields: &arrow_schema::Fields) -> Result<ShardBatchIter> {
        let schema = Arc::new(Schema::new(fields.clone()));
        let source = match self.scratch {
            Some(scratch) => Source::Scratch {
                file: scratch.file,
                streams: scratch.streams,
                next: 0,
                dir: self.scratch_dir,
            },
            None => Source::Memory {
                batches: self.memory,
                next: 0,
            },
        };
        let mut iter = ShardBatchIter {
            schema,
            source,
            shared: None,
        };
        if self.dictionaries {
            match SharedDictionaries::for_schema(&iter.schema) {
                Some(shared) if shared.is_empty() => {}
                Some(mut shared) => {
                    for batch in iter.by_ref() {
                        shared.add(&batch?)?;
                    }
                    shared.finish()?;
                    iter.source.rewind();
                    iter.shared = Some(shared);
                }
                None => {
                    let batches = iter.by_ref().collect::<Result<Vec<_>>>()?;
                    let one = arrow_select::concat::concat_batches(&iter.schema, &batches)
                        .map_err(|e| {
                            FieldsError::arrow("joining a shard's batches of fields", e)
                        })?;
                    iter.source = Source::Memory {
                        batches: vec![one],
                        next: 0,
                    };
                }
            }
        }
        Ok(iter)
    }
}

fn scratch_error(dir: &Path, what: &str) -> impl FnOnce(std::io::Error) -> FieldsError {
    let what = format!(
        "{what} the scratch file of a shard's fields (in {})",
        dir.display()
    );
    move |source| FieldsError::Scratch { what, source }
}

impl Scratch {
    fn create(dir: &Path) -> Result<Scratch> {
        let file = tempfile::tempfile_in(dir).map_err(scratch_error(dir, "creating"))?;
        Ok(Scratch {
            file,
            streams: Vec::new(),
            end: 0,
        })
    }

    /// Appends `batch` as an IPC stream of its own (its schema, the batch, the
    /// end marker), written with one positioned write.
    fn write(&mut self, batch: &RecordBatch, dir: &Path) -> Result<()> {
        let arrow = |e| FieldsError::arrow("encoding a shard's fields for its scratch file", e);
        let mut writer = StreamWriter::try_new(Vec::new(), &batch.schema()).map_err(arrow)?;
        writer.write(batch).map_err(arrow)?;
        writer.finish().map_err(arrow)?;
        let bytes = writer.into_inner().map_err(arrow)?;
        write_at(&self.file, &bytes, self.end).map_err(scratch_error(dir, "writing"))?;
        self.streams.push((self.end, bytes.len()));
        self.end += bytes.len() as u64;
        Ok(())
    }
}

#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(unix)]
fn read_at(file: &File, bytes: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, bytes, offset)
}

#[cfg(not(unix))]
fn write_at(mut file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(bytes)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, bytes: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(bytes)
}

enum Source {
    Memory {
        batches: Vec<RecordBatch>,
        next: usize,
    },
    Scratch {
        file: File,
        /// Offset and length of each batch's IPC stream.
        streams: Vec<(u64, usize)>,
        next: usize,
        dir: PathBuf,
    },
}

impl Source {
    /// Back to the first batch.
    fn rewind(&mut self) {
        match self {
            Source::Memory { next, .. } | Source::Scratch { next, .. } => *next = 0,
        }
    }
}

/// A shard's batches, one at a time, as its columns: from
/// [`ShardBatches::into_batches`].
pub struct ShardBatchIter {
    schema: SchemaRef,
    source: Source,
    /// The shard's dictionaries, when its batches' are joined.
    shared: Option<SharedDictionaries>,
}

impl ShardBatchIter {
    /// The shard's columns.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn next_raw(&mut self) -> Option<Result<RecordBatch>> {
        match &mut self.source {
            Source::Memory { batches, next } => {
                let batch = batches.get(*next)?.clone();
                *next += 1;
                Some(Ok(batch))
            }
            Source::Scratch {
                file,
                streams,
                next,
                dir,
            } => {
                let (offset, len) = *streams.get(*next)?;
                *next += 1;
                Some(read_stream(file, offset, len, dir))
            }
        }
    }
}

/// The batch of the IPC stream at `offset` (`len` bytes) of the scratch file.
fn read_stream(file: &File, offset: u64, len: usize, dir: &Path) -> Result<RecordBatch> {
    let mut bytes = vec![0; len];
    read_at(file, &mut bytes, offset).map_err(scratch_error(dir, "reading"))?;
    let arrow = |e| FieldsError::arrow("reading a shard's fields from its scratch file", e);
    let mut reader = StreamReader::try_new(Cursor::new(bytes), None).map_err(arrow)?;
    match reader.next() {
        Some(batch) => batch.map_err(arrow),
        None => Err(FieldsError::Unsupported(format!(
            "a stream of the scratch file of a shard's fields (in {}) holds no batch",
            dir.display()
        ))),
    }
}

impl Iterator for ShardBatchIter {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        let batch = self.next_raw()?;
        Some(batch.and_then(|batch| {
            let batch = conform_batch(
                &batch,
                &self.schema,
                "converting a batch of fields to its shard's columns",
            )?;
            match &self.shared {
                Some(shared) => shared.apply(batch),
                None => Ok(batch),
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int32Type;
    use arrow_array::{Array, ArrayRef, DictionaryArray, Int64Array, StringArray};
    use arrow_schema::{DataType, Field};

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn all(shard: ShardBatches, fields: &arrow_schema::Fields) -> Vec<RecordBatch> {
        let batches = shard.into_batches(fields).unwrap();
        batches.collect::<Result<_>>().unwrap()
    }

    #[test]
    fn batches_stay_in_memory_under_the_budget_and_spill_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let b = batch(vec![("n", Arc::new(Int64Array::from(vec![1, 2, 3])))]);
        let mut shard = ShardBatches::with_budget(dir.path(), 10 * b.get_array_memory_size());
        shard.push(b.clone()).unwrap();
        shard.push(b.clone()).unwrap();
        assert!(!shard.spilled());
        let mut shard = ShardBatches::with_budget(dir.path(), b.get_array_memory_size());
        shard.push(b.clone()).unwrap();
        assert!(!shard.spilled());
        shard.push(b.clone()).unwrap();
        assert!(shard.spilled());
        shard.push(b.clone()).unwrap();
        assert_eq!(shard.rows(), 9);
        let back = all(shard, b.schema().fields());
        assert_eq!(back, vec![b.clone(), b.clone(), b]);
        // The scratch file is unnamed: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn later_columns_and_wider_types_fill_earlier_batches() {
        let dir = tempfile::tempdir().unwrap();
        for budget in [0, usize::MAX] {
            let mut shard = ShardBatches::with_budget(dir.path(), budget);
            shard
                .push(batch(vec![(
                    "n",
                    Arc::new(arrow_array::Int32Array::from(vec![1, 2])),
                )]))
                .unwrap();
            shard
                .push(batch(vec![
                    ("s", Arc::new(StringArray::from(vec!["x"]))),
                    ("n", Arc::new(Int64Array::from(vec![1 << 40]))),
                ]))
                .unwrap();
            assert!(shard.has_column("s") && !shard.has_column("t"));
            let fields: arrow_schema::Fields = vec![
                Field::new("n", DataType::Int64, true),
                Field::new("s", DataType::Utf8, true),
            ]
            .into();
            let back = all(shard, &fields);
            assert_eq!(back.len(), 2);
            assert_eq!(
                back[0].column(0).as_ref(),
                &Int64Array::from(vec![1, 2]) as &dyn Array
            );
            assert_eq!(back[0].column(1).null_count(), 2);
            assert_eq!(
                back[1].column(0).as_ref(),
                &Int64Array::from(vec![1 << 40]) as &dyn Array
            );
        }
    }

    /// The values a dictionary column's rows point to.
    fn dictionary_rows(column: &ArrayRef) -> Vec<Option<String>> {
        let d = column.as_dictionary::<Int32Type>();
        let values = d.values().as_string::<i32>();
        d.keys()
            .iter()
            .map(|k| k.map(|k| values.value(k as usize).to_owned()))
            .collect()
    }

    #[test]
    fn batches_with_dictionaries_built_apart_share_one() {
        let dir = tempfile::tempdir().unwrap();
        let a: DictionaryArray<Int32Type> = vec!["cat", "dog", "unused"].into_iter().collect();
        // Only "cat" and "dog" are pointed to.
        let a = a.slice(0, 2);
        let b: DictionaryArray<Int32Type> =
            vec![Some("ant"), None, Some("cat")].into_iter().collect();
        let n = Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef;
        for budget in [0, usize::MAX] {
            let mut shard = ShardBatches::with_budget(dir.path(), budget);
            shard
                .push(batch(vec![("d", Arc::new(a.clone())), ("n", n.clone())]))
                .unwrap();
            // A batch without the column: its rows are null.
            shard.push(batch(vec![("n", n.clone())])).unwrap();
            shard.push(batch(vec![("d", Arc::new(b.clone()))])).unwrap();
            let fields: arrow_schema::Fields = vec![
                Field::new("d", a.data_type().clone(), true),
                Field::new("n", DataType::Int64, true),
            ]
            .into();
            let back = all(shard, &fields);
            assert_eq!(back.len(), 3);
            let rows: Vec<Option<String>> = back
                .iter()
                .flat_map(|b| dictionary_rows(b.column(0)))
                .collect();
            let want = [
                Some("cat"),
                Some("dog"),
                None,
                None,
                Some("ant"),
                None,
                Some("cat"),
            ];
            assert_eq!(rows, want.map(|v| v.map(str::to_owned)));
            // One dictionary, the values pointed to in order of first use.
            let first = back[0]
                .column(0)
                .as_dictionary::<Int32Type>()
                .values()
                .clone();
            assert_eq!(
                first.as_string::<i32>().iter().collect::<Vec<_>>(),
                [Some("cat"), Some("dog"), Some("ant")]
            );
            for b in &back {
                let values = b.column(0).as_dictionary::<Int32Type>().values();
                // The same buffers: the IPC writer sees one dictionary.
                assert!(values.to_data().ptr_eq(&first.to_data()));
            }
            // They write as one file, every batch apart.
            let mut writer = crate::ShardFileWriter::try_new(Vec::new(), &fields, &FP).unwrap();
            for b in &back {
                writer.write(b).unwrap();
            }
            let bytes = writer.finish().unwrap();
            let read = crate::decode_shard(Arc::new(bytes), &FP, "f")
                .unwrap()
                .unwrap();
            assert_eq!(read.len(), 3);
            let rows: Vec<Option<String>> = read
                .iter()
                .flat_map(|b| dictionary_rows(b.column(0)))
                .collect();
            assert_eq!(rows, want.map(|v| v.map(str::to_owned)));
        }
    }

    const FP: crate::Fingerprint = crate::Fingerprint {
        records: 7,
        data_len: 1,
        index_xxh3: 2,
        edges_xxh3: 3,
    };

    #[test]
    fn more_distinct_values_than_the_keys_can_number_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut shard = ShardBatches::with_budget(dir.path(), usize::MAX);
        for chunk in 0..3 {
            let d: DictionaryArray<arrow_array::types::Int8Type> = (0..100)
                .map(|i| format!("v{}", chunk * 100 + i))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect();
            shard.push(batch(vec![("d", Arc::new(d))])).unwrap();
        }
        let fields: arrow_schema::Fields = vec![Field::new(
            "d",
            DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
            true,
        )]
        .into();
        let err = shard.into_batches(&fields).err().unwrap();
        assert!(
            err.to_string()
                .contains("field \"d\": a shard's records hold 300 distinct values"),
            "{err}"
        );
    }

    #[test]
    fn a_nested_dictionary_joins_the_batches_into_one() {
        let dir = tempfile::tempdir().unwrap();
        let a: DictionaryArray<Int32Type> = vec!["cat", "dog"].into_iter().collect();
        let b: DictionaryArray<Int32Type> = vec!["ant"].into_iter().collect();
        let wrap = |d: DictionaryArray<Int32Type>| -> ArrayRef {
            let field = Arc::new(Field::new("d", d.data_type().clone(), true));
            Arc::new(arrow_array::StructArray::from(vec![(
                field,
                Arc::new(d) as ArrayRef,
            )]))
        };
        let mut shard = ShardBatches::with_budget(dir.path(), 0);
        shard.push(batch(vec![("s", wrap(a.clone()))])).unwrap();
        shard.push(batch(vec![("s", wrap(b))])).unwrap();
        let fields = batch(vec![("s", wrap(a))]).schema().fields().clone();
        let back = all(shard, &fields);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].num_rows(), 3);
    }

    #[test]
    fn a_scratch_directory_that_fails_is_named() {
        let mut shard = ShardBatches::with_budget(Path::new("/nonexistent/scratch"), 0);
        let err = shard
            .push(batch(vec![("n", Arc::new(Int64Array::from(vec![1])))]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "creating the scratch file of a shard's fields (in /nonexistent/scratch)"
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}
