//! Views (FORMAT.md, "Views"): which records an expression selects, evaluated
//! shard by shard over the mapped fields files (memory: one shard's columns
//! the expression reads, plus 4 bytes per selected record), and the view
//! commands every front end shares: create (from an expression or from
//! indices), refresh, list, and the records of an unpersisted selection
//! (`--where`, `Dataset.select`). The file and its checks are the store's
//! ([`bcd::View`]); the expression is `bcd-fields`' ([`Predicate`]).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use bcd::{Dataset, View, ViewIndices, ViewRecords, ViewRecordsError};
use bcd_fields::{Predicate, PredicateError};
use serde_json::{json, Value};

use crate::fields::{DatasetFields, FieldsIoError};

/// The pseudo-columns an expression may name besides the stored fields: the
/// record's index, its key (keyed datasets, as text) and its value's length in
/// bytes (uncompressed). A stored field of the same name wins; the
/// pseudo-column is then `"bcd.index"` (`"bcd.key"`, `"bcd.size"`).
pub const PSEUDO_COLUMNS: [&str; 3] = ["index", "key", "size"];

/// Why a view could not be made, refreshed or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The store failed, or the view file is missing, corrupt or of another
    /// state of the dataset.
    #[error(transparent)]
    Store(#[from] bcd::Error),
    /// The fields could not be read.
    #[error(transparent)]
    Fields(#[from] FieldsIoError),
    /// The expression names a missing field, compares incompatible types or
    /// is not an expression.
    #[error("the expression over {dataset}")]
    Predicate {
        /// The dataset.
        dataset: String,
        /// What is wrong.
        #[source]
        source: PredicateError,
    },
    /// `key` named, but a record's key is not UTF-8 text.
    #[error("record {index} of {dataset}: its key is not UTF-8, so the expression cannot compare `key` with text")]
    KeyNotText {
        /// The dataset.
        dataset: String,
        /// The record.
        index: u64,
    },
    /// A view made from indices has no expression to evaluate new records with.
    #[error("view {name:?} of {dataset} was made from a list of indices: it has no expression to evaluate the records appended since; create it again instead")]
    NoExpression {
        /// The dataset.
        dataset: String,
        /// The view.
        name: String,
    },
    /// Indices given for a view that the dataset does not have.
    #[error("the indices for {dataset}")]
    Indices {
        /// The dataset.
        dataset: String,
        /// Which one.
        #[source]
        source: ViewRecordsError,
    },
}

impl ViewError {
    /// Whether the caller's arguments are at fault (an expression, a name,
    /// indices), rather than the data.
    pub fn is_usage(&self) -> bool {
        match self {
            ViewError::Predicate { source, .. } => source.is_usage(),
            ViewError::NoExpression { .. } | ViewError::Indices { .. } => true,
            ViewError::Store(e) => matches!(
                e,
                bcd::Error::InvalidViewName { .. }
                    | bcd::Error::NoSuchView { .. }
                    | bcd::Error::ViewExists { .. }
            ),
            _ => false,
        }
    }
}

/// A view as `bcd view list` and `Dataset.views()` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewInfo {
    /// Its name.
    pub name: String,
    /// Records it selects (`None` when it cannot be read).
    pub records: Option<u64>,
    /// The expression (`None`: made from indices, or unreadable).
    pub expression: Option<String>,
    /// Records of the dataset it was evaluated over.
    pub evaluated_over: Option<u64>,
    /// Why it cannot be read (stale, corrupt), if it cannot.
    pub problem: Option<String>,
}

impl ViewInfo {
    /// The view `name` as it was read: its figures, or why it cannot be.
    pub fn of<E: std::error::Error + 'static>(name: String, view: Result<View, E>) -> ViewInfo {
        match view {
            Ok(view) => ViewInfo {
                name,
                records: Some(view.indices.len() as u64),
                expression: view.expression,
                evaluated_over: Some(view.binding.records),
                problem: None,
            },
            Err(error) => ViewInfo {
                name,
                records: None,
                expression: None,
                evaluated_over: None,
                problem: Some(bcd::error_chain(&error)),
            },
        }
    }

    /// As JSON (`bcd view list --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "records": self.records,
            "expression": self.expression,
            "evaluated_over": self.evaluated_over,
            "problem": self.problem,
        })
    }
}

/// What creating or refreshing a view did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSummary {
    /// Records the view selects.
    pub records: u64,
    /// Records of the dataset it is evaluated over.
    pub evaluated_over: u64,
    /// Records evaluated by this run (all of them on creation; those appended
    /// since on a refresh).
    pub evaluated: u64,
    /// Records it gained.
    pub added: u64,
}

fn name_of(dataset: &Dataset) -> String {
    dataset.path().display().to_string()
}

/// An expression compiled for `dataset`: its fields and the pseudo-columns.
pub struct Selector {
    predicate: Predicate,
    /// The stored fields it reads.
    stored: Vec<String>,
    /// The pseudo-columns it reads, by the name the batch gives them.
    pseudo: Vec<(String, Pseudo)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pseudo {
    Index,
    Key,
    Size,
}

impl Selector {
    /// Compiles `expression` against the fields of `dataset` and the
    /// pseudo-columns (see [`PSEUDO_COLUMNS`]).
    pub fn new(
        dataset: &Dataset,
        fields: &DatasetFields,
        expression: &str,
    ) -> Result<Selector, ViewError> {
        let stored_schema = fields.schema.arrow_schema();
        let mut all: Vec<Field> = stored_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut pseudo_names = Vec::new();
        for (name, kind, data_type) in [
            ("index", Pseudo::Index, DataType::UInt64),
            ("key", Pseudo::Key, DataType::Utf8),
            ("size", Pseudo::Size, DataType::UInt64),
        ] {
            if kind == Pseudo::Key && !dataset.keyed() {
                continue;
            }
            let shadowed = all.iter().any(|f| f.name() == name);
            let name = match shadowed {
                true => format!("bcd.{name}"),
                false => name.to_owned(),
            };
            all.push(Field::new(&name, data_type, false));
            pseudo_names.push((name, kind));
        }
        let schema = Schema::new(all);
        let predicate =
            Predicate::compile(expression, &schema).map_err(|source| ViewError::Predicate {
                dataset: name_of(dataset),
                source,
            })?;
        let mut stored = Vec::new();
        let mut pseudo = Vec::new();
        for column in predicate.columns() {
            match pseudo_names.iter().find(|(name, _)| name == column) {
                Some((name, kind)) => pseudo.push((name.clone(), *kind)),
                None => stored.push(column.clone()),
            }
        }
        Ok(Selector {
            predicate,
            stored,
            pseudo,
        })
    }

    /// Pushes the records of shards `from_shard..` that the expression selects
    /// onto `out`, in order.
    pub fn evaluate(
        &self,
        dataset: &Dataset,
        fields: &DatasetFields,
        from_shard: u64,
        out: &mut ViewRecords,
    ) -> Result<(), ViewError> {
        let name = name_of(dataset);
        for shard in from_shard..dataset.shards() {
            let first = dataset.shard_first_record(shard);
            let records = dataset.shard_records(shard) as usize;
            let batches = match self.stored.is_empty() {
                true => vec![no_columns(records)?],
                false => fields.shard_batches(dataset, shard, Some(&self.stored))?,
            };
            let mut at = first;
            for batch in batches {
                let rows = batch.num_rows();
                let batch = self.with_pseudo(dataset, batch, at)?;
                let selected =
                    self.predicate
                        .selection(&batch)
                        .map_err(|source| ViewError::Predicate {
                            dataset: name.clone(),
                            source,
                        })?;
                out.reserve(selected.count_set_bits());
                for row in selected.set_indices() {
                    out.push(at + row as u64)
                        .map_err(|source| ViewError::Indices {
                            dataset: name.clone(),
                            source,
                        })?;
                }
                at += rows as u64;
            }
        }
        Ok(())
    }

    /// `batch` (the fields of records `first..`) with the pseudo-columns the
    /// expression reads.
    fn with_pseudo(
        &self,
        dataset: &Dataset,
        batch: RecordBatch,
        first: u64,
    ) -> Result<RecordBatch, ViewError> {
        if self.pseudo.is_empty() {
            return Ok(batch);
        }
        let rows = batch.num_rows();
        let range = first..first + rows as u64;
        let mut fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut columns = batch.columns().to_vec();
        for (name, kind) in &self.pseudo {
            let (column, data_type): (ArrayRef, DataType) = match kind {
                Pseudo::Index => (
                    Arc::new(UInt64Array::from_iter_values(range.clone())),
                    DataType::UInt64,
                ),
                Pseudo::Size => {
                    let sizes = range
                        .clone()
                        .map(|i| dataset.value_len(i as usize).map(|n| n as u64))
                        .collect::<Result<Vec<_>, _>>()?;
                    (Arc::new(UInt64Array::from(sizes)), DataType::UInt64)
                }
                Pseudo::Key => {
                    let mut keys = Vec::with_capacity(rows);
                    for index in range.clone() {
                        let key = dataset.key_at(index as usize)?;
                        keys.push(std::str::from_utf8(key).map_err(|_| ViewError::KeyNotText {
                            dataset: name_of(dataset),
                            index,
                        })?);
                    }
                    (Arc::new(StringArray::from(keys)), DataType::Utf8)
                }
            };
            fields.push(Field::new(name, data_type, false));
            columns.push(column);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options).map_err(
            |source| {
                FieldsIoError::from(bcd_fields::FieldsError::Arrow {
                    context: "adding the pseudo-columns".into(),
                    source,
                })
                .into()
            },
        )
    }
}

/// A batch of `rows` rows and no column.
fn no_columns(rows: usize) -> Result<RecordBatch, ViewError> {
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(Arc::new(Schema::empty()), vec![], &options).map_err(
        |source| {
            FieldsIoError::from(bcd_fields::FieldsError::Arrow {
                context: "a batch without columns".into(),
                source,
            })
            .into()
        },
    )
}

/// The records of `dataset` that `expression` selects, in order, without
/// persisting them (`--where`, `Dataset.select`).
pub fn select(dataset: &Dataset, expression: &str) -> Result<ViewIndices, ViewError> {
    let fields = DatasetFields::load(dataset)?;
    let selector = Selector::new(dataset, &fields, expression)?;
    let mut records = ViewRecords::new(dataset.len() as u64);
    selector.evaluate(dataset, &fields, 0, &mut records)?;
    Ok(records.finish())
}

/// Creates the view `name` of `dataset`: the records `expression` selects now.
/// Fails if there is a view of that name, unless `replace`.
pub fn create_view(
    dataset: &Dataset,
    name: &str,
    expression: &str,
    replace: bool,
) -> Result<ViewSummary, ViewError> {
    refuse_existing(dataset, name, replace)?;
    let fields = DatasetFields::load(dataset)?;
    let selector = Selector::new(dataset, &fields, expression)?;
    let binding = dataset.view_binding()?;
    let mut records = ViewRecords::new(binding.records);
    selector.evaluate(dataset, &fields, 0, &mut records)?;
    let view = View {
        expression: Some(expression.to_owned()),
        binding,
        indices: records.finish(),
    };
    dataset.write_view(name, &view, replace)?;
    Ok(ViewSummary {
        records: view.indices.len() as u64,
        evaluated_over: binding.records,
        evaluated: binding.records,
        added: view.indices.len() as u64,
    })
}

/// Creates the view `name` of `dataset` from record indices (any order; a
/// repeated index counts once). Fails if there is a view of that name, unless
/// `replace`.
pub fn create_view_from_indices(
    dataset: &Dataset,
    name: &str,
    indices: Vec<u64>,
    replace: bool,
) -> Result<ViewSummary, ViewError> {
    refuse_existing(dataset, name, replace)?;
    let binding = dataset.view_binding()?;
    let records = ViewRecords::from_unsorted(binding.records, indices).map_err(|source| {
        ViewError::Indices {
            dataset: name_of(dataset),
            source,
        }
    })?;
    let view = View {
        expression: None,
        binding,
        indices: records.finish(),
    };
    dataset.write_view(name, &view, replace)?;
    Ok(ViewSummary {
        records: view.indices.len() as u64,
        evaluated_over: binding.records,
        evaluated: 0,
        added: view.indices.len() as u64,
    })
}

/// The records of `indices` (any order, repeats once) as a view's, unpersisted
/// (`Dataset.select`).
pub fn select_indices(dataset: &Dataset, indices: Vec<u64>) -> Result<ViewIndices, ViewError> {
    ViewRecords::from_unsorted(dataset.len() as u64, indices)
        .map(ViewRecords::finish)
        .map_err(|source| ViewError::Indices {
            dataset: name_of(dataset),
            source,
        })
}

fn refuse_existing(dataset: &Dataset, name: &str, replace: bool) -> Result<(), ViewError> {
    if !bcd::format::is_view_name(name) {
        return Err(bcd::Error::InvalidViewName {
            name: name.to_owned(),
        }
        .into());
    }
    let path = bcd::format::view_file_path(dataset.path(), name);
    if !replace && path.exists() {
        return Err(bcd::Error::ViewExists {
            path,
            name: name.to_owned(),
        }
        .into());
    }
    Ok(())
}

/// Extends the view `name` over the records appended to `dataset` since it
/// was evaluated (or since its last refresh): only those are evaluated, with
/// the view's own expression; its earlier records stay as they were.
pub fn refresh_view(dataset: &Dataset, name: &str) -> Result<ViewSummary, ViewError> {
    let old = dataset.view(name)?;
    let Some(expression) = old.expression.as_deref() else {
        return Err(ViewError::NoExpression {
            dataset: name_of(dataset),
            name: name.to_owned(),
        });
    };
    let binding = dataset.view_binding()?;
    let before = old.indices.len() as u64;
    if binding == old.binding {
        return Ok(ViewSummary {
            records: before,
            evaluated_over: binding.records,
            evaluated: 0,
            added: 0,
        });
    }
    let fields = DatasetFields::load(dataset)?;
    let selector = Selector::new(dataset, &fields, expression)?;
    let mut records = ViewRecords::extending(&old.indices, binding.records);
    selector.evaluate(dataset, &fields, old.binding.shards, &mut records)?;
    let view = View {
        expression: old.expression.clone(),
        binding,
        indices: records.finish(),
    };
    dataset.write_view(name, &view, true)?;
    let after = view.indices.len() as u64;
    Ok(ViewSummary {
        records: after,
        evaluated_over: binding.records,
        evaluated: binding.records - old.binding.records,
        added: after - before,
    })
}

/// Every view of `dataset`, in name order, each read and checked: one that
/// cannot be read (of another state of the dataset, corrupt) is listed with
/// the reason.
pub fn list_views(dataset: &Dataset) -> Result<Vec<ViewInfo>, ViewError> {
    let mut out = Vec::new();
    for name in dataset.view_names()? {
        let view = dataset.view(&name);
        out.push(ViewInfo::of(name, view));
    }
    Ok(out)
}

/// The views of `from` carried onto `to`, a copy of records `records` of it
/// (in that order: `to`'s record `j` is `from`'s record `records[j]`; `None`:
/// all of them, in order): each
/// readable view of `from` becomes a view of `to` of the same name and
/// expression holding the copied records it held. Returns the names carried
/// and those of the views of `from` that cannot be read (of another state of
/// it, or corrupt), which are not.
pub fn carry_views(
    from: &Dataset,
    to: &Dataset,
    records: Option<&[u64]>,
) -> Result<(Vec<String>, Vec<String>), ViewError> {
    let mut carried = Vec::new();
    let mut unreadable = Vec::new();
    let binding = to.view_binding()?;
    for name in from.view_names()? {
        let Ok(view) = from.view(&name) else {
            unreadable.push(name);
            continue;
        };
        let kept = match records {
            None => ViewRecords::extending(&view.indices, binding.records),
            Some(records) => {
                let mut kept = ViewRecords::new(binding.records);
                for (position, &index) in records.iter().enumerate() {
                    if view.indices.position_of(index).is_some() {
                        kept.push(position as u64)
                            .map_err(|source| ViewError::Indices {
                                dataset: name_of(to),
                                source,
                            })?;
                    }
                }
                kept
            }
        };
        let copy = View {
            expression: view.expression.clone(),
            binding,
            indices: kept.finish(),
        };
        to.write_view(&name, &copy, false)?;
        carried.push(name);
    }
    Ok((carried, unreadable))
}
