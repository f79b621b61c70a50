//! Renumbering a run's class indices into the dataset's vocabulary, on the
//! Arrow batch of a shard's fields, before the shard's fields file is written.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::DataType;

use crate::error::{FieldsError, Result};
use crate::metadata::Remap;

impl Remap {
    /// `batch` with every listed column renumbered (`what` names the batch in
    /// errors: the shard, the part). A negative index is kept (Hugging Face's
    /// `-1`, no label); an index the run's vocabulary does not have is an error,
    /// as is a listed column nested in another (`objects.category`) that `batch`
    /// holds. Columns of other than integer types are left as they are.
    pub fn apply(&self, batch: &RecordBatch, what: &str) -> Result<RecordBatch> {
        if self.columns.is_empty() {
            return Ok(batch.clone());
        }
        let schema = batch.schema();
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        for (name, to) in &self.columns {
            match schema.index_of(name) {
                Ok(at) => {
                    if let Some(renumbered) = renumber(&columns[at], to, name, what)? {
                        columns[at] = renumbered;
                    }
                }
                Err(_) => {
                    let top = name.split('.').next().unwrap_or(name);
                    if name.contains('.') && schema.index_of(top).is_ok() {
                        return Err(FieldsError::Unsupported(format!(
                            "{what}: the class indices of the nested column \"{name}\" would have to be renumbered to the dataset's class names, which is not supported; give its classes in the dataset's order"
                        )));
                    }
                }
            }
        }
        RecordBatch::try_new(schema, columns)
            .map_err(|e| FieldsError::arrow(format!("{what}: renumbering class indices"), e))
    }
}

/// `array` (an integer column) with index `i` replaced by `to[i]`; `None` when
/// it is not an integer column.
fn renumber(array: &ArrayRef, to: &[i64], column: &str, what: &str) -> Result<Option<ArrayRef>> {
    let data_type = array.data_type().clone();
    if !data_type.is_integer() {
        return Ok(None);
    }
    let strict = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let context = || format!("{what}: class indices of column \"{column}\"");
    let wide = cast_with_options(array, &DataType::Int64, &strict)
        .map_err(|e| FieldsError::arrow(context(), e))?;
    let wide = wide
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64 gives an Int64Array");
    let mut out = Vec::with_capacity(wide.len());
    for (row, index) in wide.iter().enumerate() {
        out.push(match index {
            None => None,
            Some(i) if i < 0 => Some(i),
            Some(i) => match usize::try_from(i).ok().and_then(|i| to.get(i)) {
                Some(&new) => Some(new),
                None => {
                    return Err(FieldsError::Unsupported(format!(
                        "{what}, row {row}: class index {i} of column \"{column}\" is not among the {} class names given with it",
                        to.len()
                    )))
                }
            },
        });
    }
    let renumbered: ArrayRef = Arc::new(Int64Array::from(out));
    // Back to the column's own type; a new index it cannot hold is an error.
    let back = cast_with_options(&renumbered, &data_type, &strict)
        .map_err(|e| FieldsError::arrow(context(), e))?;
    Ok(Some(back))
}
