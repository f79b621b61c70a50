//! `--view NAME` and `--where EXPR`: the records a command reads, when not all
//! of them. Shared by `ls`, `get`, `stats` and `export` (no command file
//! imports another); the work is the library's (`bcd_pipeline::views`).

use anyhow::Result;
use bcd::{Dataset, ViewIndices};
use bcd_remote::RemoteDataset;

use crate::output::UsageError;

/// The records of view `view`, or those `where_` selects, of a local dataset
/// (`None`: all).
pub fn local(
    dataset: &Dataset,
    view: Option<&str>,
    where_: Option<&str>,
) -> Result<Option<ViewIndices>> {
    Ok(match (view, where_) {
        (Some(name), _) => Some(dataset.view(name)?.indices),
        (None, Some(expression)) => Some(bcd_pipeline::views::select(dataset, expression)?),
        (None, None) => None,
    })
}

/// The records of view `view` of a dataset in object storage (`--where`
/// reads fields, which only a local dataset has).
pub fn remote(
    dataset: &RemoteDataset,
    view: Option<&str>,
    where_: Option<&str>,
) -> Result<Option<ViewIndices>> {
    if where_.is_some() {
        return Err(UsageError(format!(
            "--where reads the fields of a local dataset; `bcd pull {} DIR` first (--view reads a view in place)",
            dataset.remote().uri()
        ))
        .into());
    }
    Ok(match view {
        Some(name) => Some(dataset.view(name)?.indices),
        None => None,
    })
}

/// The records as a list of indices, for the exporters.
pub fn records(selection: Option<ViewIndices>) -> Option<Vec<u64>> {
    selection.map(|indices| indices.iter().collect())
}
