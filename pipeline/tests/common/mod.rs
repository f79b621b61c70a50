//! What the fields tests share.

use std::path::Path;

use arrow_array::RecordBatch;
use bcd::Dataset;
use bcd_pipeline::fields::DatasetFields;

/// Every shard's fields, joined, as the dataset schema's columns.
pub fn all_fields(path: &Path) -> Vec<RecordBatch> {
    let dataset = Dataset::open(path).unwrap();
    let state = DatasetFields::load(&dataset).unwrap();
    (0..dataset.shards())
        .map(|shard| {
            let batches = state.shard_batches(&dataset, shard, None).unwrap();
            arrow_select::concat::concat_batches(&state.schema.arrow_schema(), &batches).unwrap()
        })
        .collect()
}
