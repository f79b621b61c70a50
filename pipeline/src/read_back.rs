//! Nothing is committed that cannot be read back (issue 20): before the
//! manifest moves, every file of fields an extend wrote is read back with the
//! readers that open a dataset (the decoder and alignment of `fields.rs`'
//! `read_fields_file`, a batch at a time, and [`read_stats_file`],
//! [`CommitFile::decode`] with the bound
//! [`MAX_COMMIT_FILE`]). A file that does not read back, or reads back as
//! something else than was written, fails the extend with
//! [`FieldsIoError::ReadBack`] naming the file; the extend is then dropped
//! uncommitted, so the dataset is left as it was.
//!
//! A shard's sidecars are read from disk (the store writes and fsyncs them when
//! asked, so they are there to read); the commit file is written by the store's
//! commit itself, just before the manifest, so its bytes are decoded here as
//! handed over, and the commit reads the written file back byte for byte
//! (`src/extend.rs`, `write_read_back`).

use std::path::{Path, PathBuf};

use bcd::Dataset;
use bcd_fields::{CommitFile, DatasetSchema, FieldsError, Fingerprint};

use bcd_fields::{FIELDS_SUFFIX, STATS_SUFFIX};

use crate::fields::{each_aligned_batch, read_stats_file, FieldsIoError, MAX_COMMIT_FILE};

fn read_back_error(file: PathBuf, source: impl Into<FieldsIoError>) -> FieldsIoError {
    FieldsIoError::ReadBack {
        file,
        source: Box::new(source.into()),
    }
}

fn differs(file: &Path, what: String) -> FieldsError {
    FieldsError::Invalid {
        name: file.display().to_string(),
        what,
    }
}

/// Reads shard `shard`'s fields file back from disk as opening the dataset
/// will (decoded, checked against the shard's fingerprint `print`, aligned to
/// the dataset schema `schema` being committed) and checks it holds `rows` rows.
/// One batch at a time, each let go of once checked (its pages of the mapped
/// file too): reading a shard's file back costs a batch of memory, not the
/// file.
pub(crate) fn check_fields_file(
    dataset: &Dataset,
    shard: u64,
    print: &Fingerprint,
    schema: &DatasetSchema,
    rows: usize,
) -> Result<(), FieldsIoError> {
    let file = dataset.sidecar_path(shard, FIELDS_SUFFIX);
    let missing = || {
        let what = "missing, or not the fields of its shard (its fingerprint differs)";
        read_back_error(file.clone(), differs(&file, what.into()))
    };
    let bytes = dataset
        .map_sidecar(shard, FIELDS_SUFFIX)
        .map_err(|e| read_back_error(file.clone(), e))?
        .ok_or_else(missing)?;
    let name = file.display().to_string();
    let mut read = 0;
    let fresh = each_aligned_batch(bytes, print, &name, schema, |batch| {
        read += batch.num_rows();
        Ok(())
    })
    .map_err(|e| read_back_error(file.clone(), e))?;
    if !fresh {
        return Err(missing());
    }
    if read != rows {
        let what = format!("{read} rows read back, {rows} written");
        return Err(read_back_error(file.clone(), differs(&file, what)));
    }
    Ok(())
}

/// Reads shard `shard`'s statistics file back from disk as opening the
/// dataset will, and checks it is the one written (`written`, with the shard's
/// fingerprint `print`): a statistics file that reads as another shard's would
/// silently be replaced by sizes computed from the records.
pub(crate) fn check_stats_file(
    dataset: &Dataset,
    shard: u64,
    print: &Fingerprint,
    written: &[u8],
) -> Result<(), FieldsIoError> {
    let file = dataset.sidecar_path(shard, STATS_SUFFIX);
    let stats = read_stats_file(dataset, shard, || Ok(*print))
        .map_err(|e| read_back_error(file.clone(), e))?;
    let Some(mut stats) = stats else {
        let what = "missing, or not the statistics of its shard (its fingerprint differs)";
        return Err(read_back_error(file.clone(), differs(&file, what.into())));
    };
    stats.fingerprint = Some(*print);
    if stats.encode() != written {
        let what = "reads back as other statistics than were written".to_owned();
        return Err(read_back_error(file.clone(), differs(&file, what)));
    }
    Ok(())
}

/// The bytes of `commit`, the commit file of the state with `shards` shards
/// of the dataset in `dir`, checked to decode (within the bound a reader
/// applies) to the same schema, metadata and statistics.
pub(crate) fn checked_commit_file(
    commit: &CommitFile,
    dir: &Path,
    shards: u64,
) -> Result<Vec<u8>, FieldsIoError> {
    let file = dir.join(bcd_fields::commit_file_name(shards));
    let bytes = commit.encode()?;
    if bytes.len() as u64 > MAX_COMMIT_FILE {
        let what = format!(
            "{} bytes, more than a reader reads of a commit file ({MAX_COMMIT_FILE}): the schema or the metadata is too large",
            bytes.len()
        );
        return Err(read_back_error(file.clone(), differs(&file, what)));
    }
    let name = file.display().to_string();
    let decoded =
        CommitFile::decode(&bytes, &name).map_err(|e| read_back_error(file.clone(), e))?;
    // Compared as bytes, re-encoded: what a reader sees is what was written.
    if decoded.encode()? != bytes {
        let what = "decodes to another schema, metadata or statistics than were written";
        return Err(read_back_error(file.clone(), differs(&file, what.into())));
    }
    Ok(bytes)
}
