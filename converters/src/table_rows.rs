//! Records from Arrow record batches with a value column, shared by the sources
//! whose files are Arrow tables (Parquet, Hugging Face `save_to_disk`
//! directories), so the same table gives the same records, fields and metadata
//! whichever file holds it: which columns a schema gives ([`TableColumns`]), a
//! batch's columns as read ([`Batch`]) and one row as a [`Record`] ([`Batch::record`]).

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::Schema;

use crate::parquet_columns::{
    bytes_at, check_key_type, check_value_type, key_bytes_column, struct_child, value_bytes_column,
};
use crate::parquet_fields::{
    field_specs, read_beside, value_path_type, FieldColumn, FieldSpec, FieldTypes, SourceMetadata,
};
use crate::FieldSelection;
use crate::{Fields, Origin, Record, RowAt, SourceColumns, SourceError};

/// Which columns of an Arrow table a source reads (the Parquet source and
/// Hugging Face `save_to_disk` directories take the same options).
#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    /// Column holding the values.
    pub value_column: String,
    /// Column holding the keys; without it the source is keyless.
    pub key_column: Option<String>,
    /// Skip (and count) rows whose value or key is null instead of failing; a
    /// Hugging Face row whose bytes are null and whose path names no readable file
    /// counts as a null.
    pub skip_nulls: bool,
    /// Which other columns become fields. Default: all of them.
    pub fields: FieldSelection,
}

/// What a file's schema gives: its fields, and whether the value column's `path`
/// is read (a Hugging Face Image/Audio struct).
pub(crate) struct TableColumns {
    pub fields: Vec<FieldSpec>,
    pub value_path: bool,
}

impl TableColumns {
    /// Checks the value and key columns of the file at `path` with `schema`, and
    /// takes its field types into `types` (which must agree across files) and its
    /// metadata into `metadata`.
    pub(crate) fn new(
        path: &Path,
        schema: &Schema,
        options: &TableOptions,
        types: &mut FieldTypes,
        metadata: &mut SourceMetadata,
    ) -> Result<TableColumns, SourceError> {
        let find = |name: &str| {
            schema.index_of(name).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                SourceError::Usage(format!(
                    "{}: no column {name:?}; the columns are {names:?}",
                    path.display()
                ))
            })
        };
        let value_type = schema.field(find(&options.value_column)?).data_type();
        check_value_type(path, &options.value_column, value_type)?;
        if let Some(key) = &options.key_column {
            check_key_type(path, key, schema.field(find(key)?).data_type())?;
        }
        let value_path = value_path_type(value_type).is_some();
        let fields = field_specs(
            path,
            schema,
            &options.fields,
            &options.value_column,
            options.key_column.as_deref(),
        )?;
        for spec in &fields {
            let data_type = match &spec.column {
                FieldColumn::Column(name) => schema.field(find(name)?).data_type(),
                FieldColumn::ValuePath => value_path_type(value_type).expect("checked"),
            };
            types.check(path, &spec.name, data_type)?;
        }
        metadata.add(
            path,
            schema,
            &options.value_column,
            options.key_column.as_deref(),
            &fields,
        )?;
        Ok(TableColumns { fields, value_path })
    }

    /// The top-level columns read whole for the fields.
    pub(crate) fn whole(&self) -> Vec<&str> {
        (self.fields.iter())
            .filter_map(|spec| match &spec.column {
                FieldColumn::Column(name) => Some(name.as_str()),
                FieldColumn::ValuePath => None,
            })
            .collect()
    }
}

/// The field columns of a batch of `rows` rows (read from the file at
/// `path`), shared by its records; `None` for no field.
fn shared_columns(
    names: Vec<Arc<str>>,
    arrays: Vec<ArrayRef>,
    rows: usize,
    path: &Path,
) -> Result<Option<Arc<SourceColumns>>, SourceError> {
    if names.is_empty() {
        return Ok(None);
    }
    match SourceColumns::new(names, arrays, rows) {
        Some(columns) => Ok(Some(Arc::new(columns))),
        None => Err(SourceError::Corrupt {
            file: path.display().to_string(),
            location: "record batch".into(),
            reason: "field columns of another length than the value column".into(),
        }),
    }
}

/// One decoded batch of the columns read.
pub(crate) struct Batch {
    /// The values as a bytes-like array (a struct's `bytes` unwrapped).
    pub values: ArrayRef,
    keys: Option<ArrayRef>,
    /// The `path` of a struct value column, null where the struct is.
    paths: Option<ArrayRef>,
    /// One column per field of the file, which each record holds a row of
    /// (`None`: no field).
    fields: Option<Arc<SourceColumns>>,
}

impl Batch {
    /// The columns of `batch` (read from the file at `path`) that `columns` names.
    pub(crate) fn new(
        batch: &RecordBatch,
        path: &Path,
        options: &TableOptions,
        columns: &TableColumns,
    ) -> Result<Batch, SourceError> {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| SourceError::Corrupt {
                    file: path.display().to_string(),
                    location: "record batch".into(),
                    reason: format!("no column {name:?}, which the schema has"),
                })
        };
        let value_column = column(&options.value_column)?;
        let values = value_bytes_column(&value_column, path, &options.value_column)?;
        let keys = match &options.key_column {
            Some(name) => Some(key_bytes_column(&column(name)?, path, name)?),
            None => None,
        };
        let paths = match columns.value_path {
            true => struct_child(&value_column, "path", path, &options.value_column)?,
            false => None,
        };
        let arrays = (columns.fields.iter())
            .map(|spec| match &spec.column {
                FieldColumn::Column(name) => column(name),
                FieldColumn::ValuePath => Ok(paths.clone().expect("the path is read")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let names = columns
            .fields
            .iter()
            .map(|spec| spec.name.clone())
            .collect();
        let fields = shared_columns(names, arrays, values.len(), path)?;
        Ok(Batch {
            values,
            keys,
            paths,
            fields,
        })
    }

    /// Copies the field columns into buffers of their own. A record's fields
    /// hold their column until the shard is written; a column decoded in place
    /// from a whole message (an Arrow IPC body) would hold that message, values
    /// and all, for every record of the batch still in flight.
    pub(crate) fn own_fields(&mut self, path: &Path) -> Result<(), SourceError> {
        // `take` copies (`concat` of one array would return a slice of it).
        let Some(fields) = &self.fields else {
            return Ok(());
        };
        let rows = UInt64Array::from_iter_values(0..self.values.len() as u64);
        let arrays = (fields.arrays().iter())
            .map(|array| {
                arrow_select::take::take(array.as_ref(), &rows, None).map_err(|e| {
                    SourceError::Corrupt {
                        file: path.display().to_string(),
                        location: "record batch".into(),
                        reason: e.to_string(),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.fields = shared_columns(fields.names().to_vec(), arrays, self.values.len(), path)?;
        Ok(())
    }

    /// Row `i` of this batch (row `row` of the file at `path`) as a record; `None`
    /// if it is to be skipped for a null.
    pub(crate) fn record(
        &self,
        i: usize,
        row: u64,
        path: &Arc<Path>,
        options: &TableOptions,
    ) -> Option<Result<Record, SourceError>> {
        let origin = Origin::Row {
            file: Arc::clone(path),
            row: RowAt::Row(row),
        };
        let null = |column: &str| {
            if options.skip_nulls {
                return None;
            }
            Some(Err(SourceError::Invalid {
                file: path.display().to_string(),
                location: format!("row {row}"),
                reason: format!("column {column:?} is null (pass `skip_nulls` to skip such rows)"),
            }))
        };
        let column = &options.value_column;
        let bytes = bytes_at(self.values.as_ref(), i);
        // A Hugging Face Image/Audio row may name its file instead of holding it.
        let written = match bytes {
            Some(_) => None,
            None => self.paths.as_ref().and_then(|p| bytes_at(p.as_ref(), i)),
        };
        if bytes.is_none() && written.is_none() {
            return null(column);
        }
        let key = match (&self.keys, &options.key_column) {
            (Some(keys), Some(key_column)) => match bytes_at(keys.as_ref(), i) {
                Some(key) => key.to_vec(),
                None => return null(key_column),
            },
            _ => Vec::new(),
        };
        let value = match (bytes, written) {
            (Some(value), _) => value.to_vec(),
            (None, written) => {
                let written = String::from_utf8_lossy(written.unwrap_or_default());
                match read_beside(path, row, column, &written) {
                    Ok(value) => value,
                    // Null bytes and a path that names no readable file: a null.
                    Err(_) if options.skip_nulls => return None,
                    Err(error) => return Some(Err(error)),
                }
            }
        };
        // The fields: the row of the batch's field columns, shared.
        let fields = match &self.fields {
            Some(shared) => match Fields::row(Arc::clone(shared), i) {
                Some(fields) => fields,
                None => {
                    return Some(Err(SourceError::Corrupt {
                        file: path.display().to_string(),
                        location: format!("row {row}"),
                        reason: "a row past its batch's field columns".into(),
                    }))
                }
            },
            None => Fields::new(),
        };
        Some(Ok(Record {
            key,
            value,
            origin,
            fields,
        }))
    }
}
