//! Renumbering a run's class indices into the dataset's vocabulary, on the
//! Arrow batch of a shard's fields, before the shard's fields file is written.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, Int64Array, LargeListArray, ListArray, RecordBatch,
    StructArray,
};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::DataType;

use crate::error::{FieldsError, Result};
use crate::metadata::Remap;

impl Remap {
    /// `batch` with every listed column renumbered (`what` names the batch in
    /// errors: the shard, the part). A column is a top-level column, or a path
    /// into one through struct children and list elements (`objects.category`
    /// for a list of structs, or a struct of lists, as `datasets` writes a
    /// `Sequence` of dicts). A negative index is kept (Hugging Face's `-1`, no
    /// label), as is a null; an index the run's vocabulary does not have is an
    /// error, as is a new index the column's integer type cannot hold. A column
    /// that is not an integer, or a path `batch` does not hold, is left as it is.
    pub fn apply(&self, batch: &RecordBatch, what: &str) -> Result<RecordBatch> {
        if self.columns.is_empty() {
            return Ok(batch.clone());
        }
        let schema = batch.schema();
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        for (name, to) in &self.columns {
            let at = |column: &str| schema.index_of(column).ok();
            // A top-level name may hold dots itself (`image.path`).
            let (index, path): (usize, Vec<&str>) = match at(name) {
                Some(index) => (index, Vec::new()),
                None => {
                    let mut segments = name.split('.');
                    let Some(index) = segments.next().and_then(at) else {
                        continue;
                    };
                    (index, segments.collect())
                }
            };
            let site = Site {
                to,
                column: name,
                what,
            };
            if let Some(renumbered) = site.array(&columns[index], &path)? {
                columns[index] = renumbered;
            }
        }
        RecordBatch::try_new(schema, columns)
            .map_err(|e| FieldsError::arrow(format!("{what}: renumbering class indices"), e))
    }
}

/// One column's renumbering, and what errors name.
struct Site<'a> {
    to: &'a [i64],
    column: &'a str,
    what: &'a str,
}

impl Site<'_> {
    /// `array` with the integers at `path` (struct children by name; lists are
    /// looked through) renumbered; `None` when there is nothing to renumber.
    fn array(&self, array: &ArrayRef, path: &[&str]) -> Result<Option<ArrayRef>> {
        let arrow = |e| FieldsError::arrow(self.context(), e);
        Ok(Some(match array.data_type() {
            DataType::List(field) => {
                let list = array.as_list::<i32>();
                let Some(values) = self.array(list.values(), path)? else {
                    return Ok(None);
                };
                let (offsets, nulls) = (list.offsets().clone(), list.nulls().cloned());
                Arc::new(ListArray::try_new(field.clone(), offsets, values, nulls).map_err(arrow)?)
            }
            DataType::LargeList(field) => {
                let list = array.as_list::<i64>();
                let Some(values) = self.array(list.values(), path)? else {
                    return Ok(None);
                };
                let (offsets, nulls) = (list.offsets().clone(), list.nulls().cloned());
                Arc::new(
                    LargeListArray::try_new(field.clone(), offsets, values, nulls)
                        .map_err(arrow)?,
                )
            }
            DataType::FixedSizeList(field, size) => {
                let list = array.as_fixed_size_list();
                let Some(values) = self.array(list.values(), path)? else {
                    return Ok(None);
                };
                let nulls = list.nulls().cloned();
                Arc::new(
                    FixedSizeListArray::try_new(field.clone(), *size, values, nulls)
                        .map_err(arrow)?,
                )
            }
            DataType::Struct(fields) if !path.is_empty() => {
                let parent = array.as_struct();
                let Some(at) = fields.iter().position(|f| f.name() == path[0]) else {
                    return Ok(None);
                };
                let Some(child) = self.array(parent.column(at), &path[1..])? else {
                    return Ok(None);
                };
                let mut children = parent.columns().to_vec();
                children[at] = child;
                let nulls = parent.nulls().cloned();
                Arc::new(StructArray::try_new(fields.clone(), children, nulls).map_err(arrow)?)
            }
            data_type if path.is_empty() && data_type.is_integer() => self.integers(array)?,
            _ => return Ok(None),
        }))
    }

    fn context(&self) -> String {
        format!("{}: class indices of column \"{}\"", self.what, self.column)
    }

    /// An integer array with index `i` replaced by `to[i]`.
    fn integers(&self, array: &ArrayRef) -> Result<ArrayRef> {
        let strict = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let wide = cast_with_options(array, &DataType::Int64, &strict)
            .map_err(|e| FieldsError::arrow(self.context(), e))?;
        let wide = wide.as_primitive::<arrow_array::types::Int64Type>();
        let mut out = Vec::with_capacity(wide.len());
        for (row, index) in wide.iter().enumerate() {
            out.push(match index {
                None => None,
                Some(i) if i < 0 => Some(i),
                Some(i) => match usize::try_from(i).ok().and_then(|i| self.to.get(i)) {
                    Some(&new) => Some(new),
                    None => {
                        return Err(FieldsError::Unsupported(format!(
                            "{}, row {row}: class index {i} of column \"{}\" is not among the {} class names given with it",
                            self.what,
                            self.column,
                            self.to.len()
                        )))
                    }
                },
            });
        }
        let renumbered: ArrayRef = Arc::new(Int64Array::from(out));
        // Back to the column's own type; a new index it cannot hold is an error.
        cast_with_options(&renumbered, array.data_type(), &strict)
            .map_err(|e| FieldsError::arrow(self.context(), e))
    }
}
