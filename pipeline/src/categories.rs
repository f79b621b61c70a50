//! Each record's category from a stored field: the classes `bcd export --sample
//! N --balance-by FIELD` balances, and those of `bcd.torch`'s
//! `balance_by="field"`. The codes are [`bcd_fields::CategoryCodes`]' (classes
//! numbered by first appearance in record order, nulls one more class after
//! them), read shard by shard through [`DatasetFields`], so every front end
//! gets the same ones.

use bcd::Dataset;
use bcd_fields::CategoryCodes;

use crate::fields::{DatasetFields, FieldsIoError};

/// Why a field cannot give each record's category.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CategoriesError {
    /// The dataset stores no such field.
    #[error("{dataset} has no field \"{field}\" for `balance_by` ({})", field_list(.fields))]
    NoField {
        /// The field asked for.
        field: String,
        /// The dataset.
        dataset: String,
        /// The fields it has, in schema order.
        fields: Vec<String>,
    },
    /// The field's type cannot give categories (a float or nested field), or
    /// its files could not be read; the message names the field or the file.
    #[error(transparent)]
    Fields(#[from] FieldsIoError),
}

fn field_list(fields: &[String]) -> String {
    match fields {
        [] => "it has no fields".to_owned(),
        names => format!("its fields: {}", names.join(", ")),
    }
}

/// Each record's category code from the stored field `field`, in record order
/// (one per record: records of shards without fields are nulls, one class).
///
/// Errors name the dataset and the field: a field the dataset does not have
/// (listing those it has), a field of a type that has no categories (floats,
/// nested values), a file of fields that cannot be read.
pub fn field_categories(dataset: &Dataset, field: &str) -> Result<Vec<u32>, CategoriesError> {
    let name = dataset.path().display().to_string();
    let fields = DatasetFields::load(dataset)?;
    let Some(stored) = fields.schema.field(field) else {
        return Err(CategoriesError::NoField {
            field: field.to_owned(),
            dataset: name,
            fields: (fields.schema.fields().iter())
                .map(|f| f.name().clone())
                .collect(),
        });
    };
    let what = format!("field \"{field}\" of {name}");
    let mut codes = CategoryCodes::new(what, stored.data_type()).map_err(FieldsIoError::from)?;
    let columns = [field.to_owned()];
    for shard in 0..dataset.shards() {
        for batch in fields.shard_batches(dataset, shard, Some(&columns))? {
            codes
                .push(batch.column(0).as_ref())
                .map_err(FieldsIoError::from)?;
        }
    }
    Ok(codes.finish())
}
