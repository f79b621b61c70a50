//! Records from Arrow record batches that another program hands over (a
//! pyarrow table through the Arrow C stream interface, say): a value column and
//! an optional key column read as bytes, with the Parquet source's rules for
//! which column types are accepted. Nothing is copied: values are slices of the
//! batch's buffers.

use std::path::Path;

use arrow_array::{Array, ArrayRef, RecordBatch};

use crate::parquet_columns::{
    bytes_at, check_key_type, check_value_type, key_bytes_column, value_bytes_column,
};
use crate::SourceError;

/// The value (and key) column of one record batch, as bytes-like arrays.
pub struct BatchColumns {
    value: ArrayRef,
    key: Option<ArrayRef>,
}

impl BatchColumns {
    /// The columns named `value_column` and `key_column` of `batch`. `origin`
    /// names the data in messages. A missing column, or one of a type that holds
    /// no bytes (value: binary, string, fixed_size_binary or struct<bytes>,
    /// dictionaries of those; key: string, binary or integer, as decimal text),
    /// is an error naming it.
    pub fn new(
        batch: &RecordBatch,
        value_column: &str,
        key_column: Option<&str>,
        origin: &str,
    ) -> Result<BatchColumns, SourceError> {
        let path = Path::new(origin);
        let column = |name: &str| {
            batch.column_by_name(name).ok_or_else(|| {
                let names: Vec<&str> = batch
                    .schema_ref()
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect();
                SourceError::Usage(format!("{origin}: no column {name:?} (columns: {names:?})"))
            })
        };
        let value = column(value_column)?;
        check_value_type(path, value_column, value.data_type())?;
        let value = value_bytes_column(value, path, value_column)?;
        let key = match key_column {
            Some(name) => {
                let key = column(name)?;
                check_key_type(path, name, key.data_type())?;
                Some(key_bytes_column(key, path, name)?)
            }
            None => None,
        };
        Ok(BatchColumns { value, key })
    }

    /// Rows in the batch.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    /// Whether the batch has no rows.
    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// Row `i`'s value, `None` if null.
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        bytes_at(self.value.as_ref(), i)
    }

    /// Row `i`'s key (`Some(None)` if null), or `None` without a key column.
    pub fn key(&self, i: usize) -> Option<Option<&[u8]>> {
        self.key.as_ref().map(|k| bytes_at(k.as_ref(), i))
    }
}
