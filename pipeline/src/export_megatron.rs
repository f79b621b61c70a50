//! A dataset of token records to a Megatron indexed dataset (`bcd export
//! --to PREFIX --format megatron`): `PREFIX.bin`, the values one after
//! another, and `PREFIX.idx` as Megatron Core's `_IndexWriter` writes it
//! ([`bcd_converters::megatron_index::write_index`]).
//!
//! The dtype is the one the dataset's metadata records (`megatron.dtype`, set
//! by the Megatron source) or the one declared; the documents come from the
//! `document` field (non-decreasing, as Megatron numbers them), or are one per
//! record without it; the `mode` field of a multimodal dataset becomes the
//! sequence modes. A dataset ingested from a Megatron dataset comes back byte
//! for byte (the metadata's `document_count` restores trailing empty
//! documents). Both files are written under temporary names beside the target
//! and renamed at the end; on failure nothing is left.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::{Array, Int64Array};
use arrow_schema::DataType;
use bcd::Dataset;
use bcd_converters::megatron_index::{write_index, Dtype};
use bcd_converters::megatron_source::{dataset_files, METADATA_KEY};
use serde_json::Value;

use crate::fields::DatasetFields;
use crate::ExportError;

/// Settings of one Megatron export.
#[derive(Clone, Debug, Default)]
pub struct MegatronExportOptions {
    /// The tokens' dtype (NumPy's name: `uint16`, `int32`, ...). Default: the
    /// dataset metadata's; required when it has none, refused when it differs.
    pub dtype: Option<String>,
    /// Set to stop the export at the next record: nothing is left.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// The records to export, in this order (default: all, in order): a
    /// view's, a `--where` selection's. Their `document` fields must still
    /// not decrease; documents none of them is in are written empty.
    pub records: Option<Vec<u64>>,
}

/// What a Megatron export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MegatronExportSummary {
    /// Sequences (records) written.
    pub sequences: u64,
    /// Document indices written (documents plus the closing one).
    pub document_indices: u64,
    /// Bytes of the `.bin`.
    pub bytes: u64,
    /// The dtype.
    pub dtype: &'static str,
}

/// Why a Megatron export cannot be written; nothing was left.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MegatronExportError {
    /// No dtype: neither declared nor in the dataset metadata.
    #[error("the dataset does not record the tokens' dtype; declare `dtype` (one of {})", Dtype::names().join(", "))]
    NoDtype,
    /// A declared dtype Megatron does not have.
    #[error("`dtype` {name:?} is not one of Megatron's: {}", Dtype::names().join(", "))]
    UnknownDtype {
        /// As declared.
        name: String,
    },
    /// A declared dtype other than the one the dataset's tokens have.
    #[error("`dtype` {declared} differs from the dataset's tokens, which are {recorded}")]
    DtypeDiffers {
        /// Declared.
        declared: String,
        /// In the metadata.
        recorded: String,
    },
    /// A record that cannot be a sequence.
    #[error("record {record}: {reason}")]
    Record {
        /// The record's index.
        record: usize,
        /// What is wrong.
        reason: String,
    },
    /// Writing or renaming a file failed.
    #[error("{}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl MegatronExportError {
    /// Whether the options cannot work, found before anything was written.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::NoDtype | Self::UnknownDtype { .. } | Self::DtypeDiffers { .. }
        )
    }
}

/// A temporary file beside its target, removed unless renamed onto it.
struct Staged {
    temp: PathBuf,
    target: PathBuf,
    done: bool,
}

impl Staged {
    fn create(target: PathBuf) -> Result<(Staged, File), MegatronExportError> {
        let mut temp = target.clone().into_os_string();
        temp.push(format!(".bcd-tmp-{}", std::process::id()));
        let temp = PathBuf::from(temp);
        let _ = fs::remove_file(&temp);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|source| MegatronExportError::Io {
                path: temp.clone(),
                source,
            })?;
        let staged = Staged {
            temp,
            target,
            done: false,
        };
        Ok((staged, file))
    }

    fn rename(&mut self) -> Result<(), MegatronExportError> {
        fs::rename(&self.temp, &self.target).map_err(|source| MegatronExportError::Io {
            path: self.target.clone(),
            source,
        })?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_file(&self.temp);
        }
    }
}

fn finish(file: BufWriter<File>, path: &Path) -> Result<(), MegatronExportError> {
    let io = |source| MegatronExportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = file.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)
}

/// The dtype of the export: declared, recorded, and the two agreeing.
fn export_dtype(
    declared: Option<&str>,
    recorded: Option<&str>,
) -> Result<Dtype, MegatronExportError> {
    let parse = |name: &str| {
        Dtype::from_name(name).ok_or_else(|| MegatronExportError::UnknownDtype {
            name: name.to_owned(),
        })
    };
    match (declared, recorded) {
        (Some(declared), Some(recorded)) if declared != recorded => {
            parse(declared)?;
            Err(MegatronExportError::DtypeDiffers {
                declared: declared.to_owned(),
                recorded: recorded.to_owned(),
            })
        }
        (Some(name), _) | (None, Some(name)) => parse(name),
        (None, None) => Err(MegatronExportError::NoDtype),
    }
}

/// A shard's number and its records' `document` and `mode` fields (empty when
/// the dataset has no such field).
type ShardFields = (u64, Vec<Option<i64>>, Vec<Option<i64>>);

/// An integer field of every record of `shard`, `None` where null.
fn int_column(
    fields: &DatasetFields,
    dataset: &Dataset,
    shard: u64,
    name: &str,
) -> Result<Vec<Option<i64>>, ExportError> {
    let batches = fields.shard_batches(dataset, shard, Some(&[name.to_owned()]))?;
    let mut out = Vec::new();
    for batch in batches {
        let column = arrow_cast::cast(batch.column(0), &DataType::Int64).map_err(|e| {
            ExportError::Fields(
                bcd_fields::FieldsError::Unsupported(format!("field {name:?}: {e}")).into(),
            )
        })?;
        let column = column
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("cast to Int64");
        out.extend((0..column.len()).map(|i| column.is_valid(i).then(|| column.value(i))));
    }
    Ok(out)
}

/// Writes `dataset` as the Megatron dataset `prefix` (`PREFIX.bin`,
/// `PREFIX.idx`), all or nothing.
pub fn export_megatron(
    dataset: &Dataset,
    prefix: &Path,
    options: &MegatronExportOptions,
) -> Result<MegatronExportSummary, ExportError> {
    let fields = DatasetFields::load(dataset)?;
    let described = fields.metadata.get(METADATA_KEY);
    let recorded = described
        .and_then(|m| m.get("dtype"))
        .and_then(Value::as_str);
    let dtype = export_dtype(options.dtype.as_deref(), recorded)?;
    let has = |name: &str| fields.schema.fields().iter().any(|f| f.name() == name);
    let (has_document, has_mode) = (has("document"), has("mode"));

    let (idx_path, bin_path) = dataset_files(prefix);
    let (mut bin_staged, bin_file) = Staged::create(bin_path.clone())?;
    let (mut idx_staged, idx_file) = Staged::create(idx_path.clone())?;
    let mut bin = BufWriter::new(bin_file);
    let bin_io = |source| MegatronExportError::Io {
        path: bin_staged.temp.clone(),
        source,
    };

    let all = 0..dataset.len() as u64;
    let records: Box<dyn Iterator<Item = u64>> = match &options.records {
        Some(records) => Box::new(records.iter().copied()),
        None => Box::new(all),
    };
    let mut lengths: Vec<i32> =
        Vec::with_capacity(options.records.as_ref().map_or(dataset.len(), Vec::len));
    let mut documents: Vec<u64> = Vec::new();
    let mut modes: Vec<i8> = Vec::new();
    let mut buffer = Vec::new();
    let mut bytes = 0u64;
    let mut shard_fields: Option<ShardFields> = None;
    for record in records {
        let record = usize::try_from(record).unwrap_or(usize::MAX);
        if (options.interrupt.as_ref()).is_some_and(|flag| flag.load(Ordering::Relaxed)) {
            return Err(ExportError::Interrupted);
        }
        let bad = |reason: String| MegatronExportError::Record { record, reason };
        let value = dataset.at_with_buffer(record, &mut buffer)?;
        if value.len() % dtype.size() != 0 {
            return Err(bad(format!(
                "its value of {} bytes is not a whole number of {dtype} tokens ({} bytes each)",
                value.len(),
                dtype.size()
            ))
            .into());
        }
        let tokens = i32::try_from(value.len() / dtype.size())
            .map_err(|_| bad("more tokens than Megatron's int32 lengths hold".into()))?;
        bin.write_all(value).map_err(bin_io)?;
        bytes += value.len() as u64;
        lengths.push(tokens);

        if has_document || has_mode {
            let shard = dataset.value_location(record)?.shard;
            if shard_fields.as_ref().is_none_or(|(s, _, _)| *s != shard) {
                let load = |name| match has(name) {
                    true => int_column(&fields, dataset, shard, name),
                    false => Ok(Vec::new()),
                };
                shard_fields = Some((shard, load("document")?, load("mode")?));
            }
            let (_, document_column, mode_column) = shard_fields.as_ref().expect("loaded");
            let row = record - dataset.shard_first_record(shard) as usize;
            if has_document {
                let document = document_column[row]
                    .filter(|d| *d >= 0)
                    .ok_or_else(|| bad("its `document` field is null or negative".into()))?
                    as u64;
                if documents.last().is_some_and(|last| document < *last) {
                    return Err(bad(format!(
                        "its document {document} comes after document {}; Megatron's documents are runs of sequences in order (Megatron datasets appended in separate ingests each number theirs from 0: ingest them in one run)",
                        documents.last().expect("checked")
                    ))
                    .into());
                }
                documents.push(document);
            }
            if has_mode {
                let mode = mode_column[row]
                    .and_then(|m| i8::try_from(m).ok())
                    .ok_or_else(|| bad("its `mode` field is null or not an int8".into()))?;
                modes.push(mode);
            }
        }
    }
    finish(bin, &bin_staged.temp)?;

    // Document indices: where each document starts, then the closing one (as
    // IndexedDatasetBuilder's end_document writes them). A recorded count keeps
    // documents without sequences at the end.
    let n = lengths.len() as u64;
    let starts: Vec<i64> = if has_document {
        let needed = documents.last().map_or(1, |last| last + 2);
        let recorded = (described.and_then(|m| m.get("document_count")))
            .and_then(Value::as_u64)
            .filter(|count| *count >= needed.saturating_sub(1).max(1));
        let count = recorded.unwrap_or(needed);
        let mut starts = Vec::new();
        let mut next = 0usize;
        for document in 0..count {
            while next < documents.len() && documents[next] < document {
                next += 1;
            }
            starts.push(next as i64);
        }
        starts
    } else {
        (0..=n as i64).collect()
    };
    let index = write_index(dtype, &lengths, &starts, has_mode.then_some(&modes[..]));
    let mut idx = BufWriter::new(idx_file);
    idx.write_all(&index)
        .map_err(|source| MegatronExportError::Io {
            path: idx_staged.temp.clone(),
            source,
        })?;
    finish(idx, &idx_staged.temp)?;
    bin_staged.rename()?;
    if let Err(error) = idx_staged.rename() {
        // The pair is what a reader needs: a new .bin beside an old .idx is not
        // left behind.
        let _ = fs::remove_file(&bin_path);
        return Err(error.into());
    }
    Ok(MegatronExportSummary {
        sequences: n,
        document_indices: starts.len() as u64,
        bytes,
        dtype: dtype.name(),
    })
}
