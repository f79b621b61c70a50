//! Opening a Parquet file: expanding an argument into files, reading and
//! checking the footer and the schema, and choosing the columns to decode.

use super::*;

/// Files a Parquet argument names: the file itself, a directory's `*.parquet` files
/// sorted by name, or the files a `*`/`?`/`[...]` pattern in the last component matches.
pub(crate) fn expand_inputs(input: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let io = |path: &Path, source| SourceError::Io {
        path: path.to_owned(),
        source,
    };
    let name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pattern = name.contains(['*', '?', '[']).then(|| name.clone());
    let (dir, matcher) = match pattern {
        Some(pattern) => {
            let glob = globset::Glob::new(&pattern)
                .map_err(|e| SourceError::Usage(format!("bad pattern {pattern:?}: {e}")))?
                .compile_matcher();
            (
                input.parent().unwrap_or(Path::new(".")).to_owned(),
                Some(glob),
            )
        }
        None if input.is_dir() => (input.to_owned(), None),
        None => {
            std::fs::metadata(input).map_err(|e| io(input, e))?;
            return Ok(vec![input.to_owned()]);
        }
    };
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
        let entry = entry.map_err(|e| io(&dir, e))?;
        let file_name = entry.file_name();
        let wanted = match &matcher {
            Some(glob) => glob.is_match(&file_name),
            None => Path::new(&file_name)
                .extension()
                .is_some_and(|e| e == "parquet"),
        };
        if wanted && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(SourceError::Usage(format!(
            "{}: no Parquet files found",
            input.display()
        )));
    }
    Ok(files)
}

impl ParquetSource {
    pub(super) fn open(
        &mut self,
        path: PathBuf,
        input: Option<ParquetInput>,
    ) -> Result<OpenFile, SourceError> {
        let corrupt = |reason: String| SourceError::Corrupt {
            file: path.display().to_string(),
            location: "file metadata".into(),
            reason,
        };
        let io = |source| SourceError::Io {
            path: path.clone(),
            source,
        };
        let file = match input {
            Some(input) => input,
            None => ParquetInput(Arc::new(
                File::open(&path).and_then(FileAccess::new).map_err(io)?,
            )),
        };
        let file_len = file.len();
        let loaded = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| corrupt(e.to_string()))?;
        check_chunks(&path, loaded.metadata(), file_len)?;
        let schema = loaded.schema().clone();
        let table = TableColumns::new(
            &path,
            &schema,
            &self.options,
            &mut self.field_types,
            &mut self.metadata,
        )?;
        let mut columns = vec![self.options.value_column.as_str()];
        columns.extend(self.options.key_column.as_deref());
        // Views when the crate accepts them (it does for every type checked above);
        // otherwise the types as written, with batches sized for copied dictionaries.
        let viewed =
            ArrowReaderOptions::new().with_schema(Arc::new(view_schema(&schema, &columns)));
        let (metadata, views) =
            match ArrowReaderMetadata::try_new(loaded.metadata().clone(), viewed) {
                Ok(metadata) => (metadata, true),
                Err(_) => (loaded, false),
            };
        let leaves = projected_leaves(
            metadata.parquet_schema(),
            &schema,
            &self.options.value_column,
            self.options.key_column.as_deref(),
            table.value_path,
            &table.whole(),
        );
        let mask = ProjectionMask::leaves(
            metadata.parquet_schema(),
            leaves.iter().map(|&(leaf, _)| leaf),
        );
        Ok(OpenFile {
            path: Arc::from(path),
            file,
            metadata,
            leaves,
            mask,
            columns: table,
            views,
            next_group: 0,
            reader: None,
            batch: None,
            row_in_batch: 0,
            rows_before: 0,
        })
    }
}

/// Checks that every column chunk lies inside the file. The `parquet` crate panics
/// on a negative chunk offset or size (`ColumnChunkMetaData::byte_range`), which
/// corrupt metadata can declare.
fn check_chunks(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
    file_len: u64,
) -> Result<(), SourceError> {
    for (group, row_group) in metadata.row_groups().iter().enumerate() {
        for column in row_group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or(column.data_page_offset());
            let len = column.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(start, len)| start.checked_add(len));
            if end.is_none_or(|end| end > file_len) {
                return Err(SourceError::Corrupt {
                    file: path.display().to_string(),
                    location: format!("file metadata, row group {group}, column {}", column.column_path()),
                    reason: format!(
                        "the column chunk (byte {start}, {len} bytes) is not inside the {file_len}-byte file"
                    ),
                });
            }
        }
    }
    Ok(())
}
