//! Writing Arrow record batches to one Parquet file, all or nothing: the file is
//! written under a temporary name in its directory, synced, and renamed into
//! place when complete; on any failure (or when dropped unfinished) the
//! temporary file is removed. The target is checked as a tar export's is
//! (not a directory, not ending in `/`, not `.` or `..`, in an existing
//! directory) before anything is written.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::tar_export::{check_target, sync_parent, temporary_path, ExportError, Partial};

/// A Parquet file being written.
pub struct ParquetExport {
    path: PathBuf,
    writer: Option<ArrowWriter<BufWriter<File>>>,
    partial: Partial,
    rows: u64,
}

fn write_error(path: &Path) -> impl Fn(io::Error) -> ExportError + '_ {
    move |source| ExportError::Write {
        path: path.to_owned(),
        source,
    }
}

fn parquet_error(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ExportError + '_ {
    move |e| ExportError::Write {
        path: path.to_owned(),
        source: io::Error::other(e.to_string()),
    }
}

impl ParquetExport {
    /// Starts `path` with `schema`; `metadata` is stored as the file's key-value
    /// metadata (Hugging Face `datasets` reads its features from the
    /// `huggingface` key). Columns are Snappy-compressed, as pyarrow writes them.
    pub fn create(
        path: &Path,
        schema: SchemaRef,
        metadata: HashMap<String, String>,
    ) -> Result<ParquetExport, ExportError> {
        check_target(path, &path.to_string_lossy())?;
        let tmp = temporary_path(path);
        let file = File::create(&tmp).map_err(write_error(path))?;
        let partial = Partial {
            tmp,
            committed: false,
        };
        let mut schema = schema.as_ref().clone();
        schema.metadata.extend(metadata);
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let writer = ArrowWriter::try_new(
            BufWriter::with_capacity(1 << 20, file),
            std::sync::Arc::new(schema),
            Some(properties),
        )
        .map_err(parquet_error(path))?;
        Ok(ParquetExport {
            path: path.to_owned(),
            writer: Some(writer),
            partial,
            rows: 0,
        })
    }

    /// Appends the rows of `batch` (of the schema given to `create`).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), ExportError> {
        let writer = self.writer.as_mut().expect("open until finished");
        writer.write(batch).map_err(parquet_error(&self.path))?;
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Ends the file: its footer, an fsync, the rename into place and an fsync
    /// of its directory. Returns the rows written.
    pub fn finish(mut self) -> Result<u64, ExportError> {
        let writer = self.writer.take().expect("open until finished");
        let buffered = writer.into_inner().map_err(parquet_error(&self.path))?;
        let file = buffered
            .into_inner()
            .map_err(|e| write_error(&self.path)(e.into_error()))?;
        file.sync_all().map_err(write_error(&self.path))?;
        drop(file);
        std::fs::rename(&self.partial.tmp, &self.path).map_err(write_error(&self.path))?;
        self.partial.committed = true;
        sync_parent(&self.path).map_err(write_error(&self.path))?;
        Ok(self.rows)
    }
}
