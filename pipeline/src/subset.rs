//! Subsets of a dataset, for evaluation sets: which records `bcd export --sample N
//! [--balance-by FIELD] [--seed S]` takes, and the copy of records into a new
//! dataset (`--into`).
//!
//! A uniform sample is the set `bcd.partition(n, seed=S, epoch=0,
//! num_samples=N)` yields; a balanced one takes an equal count from each class
//! where the classes allow it (a class smaller than its share gives all its
//! records and the rest is spread over the others). Both are in record order and
//! deterministic for the seed (`bcd_sampling::uniform_subset`,
//! `bcd_sampling::balanced_subset`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::ArrayRef;
use bcd::{CreateOptions, Dataset};
use bcd_fields::{FieldValue, Fields};
use bcd_sampling::PlanError;

use crate::export::ExportError;
use crate::fields::{DatasetFields, ShardRows};
use crate::fields_extend::{FieldsExtend, FieldsExtendOptions};
use crate::OnDuplicate;

/// How many records to sample, and with which seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleOptions {
    /// Records in the subset.
    pub count: u64,
    /// The seed (default 0).
    pub seed: u64,
}

/// Why a subset cannot be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SampleError {
    /// More records asked for than the dataset holds.
    #[error("`sample` asks for {asked} records, but {dataset} holds {available}")]
    TooLarge {
        /// The sample size.
        asked: u64,
        /// Records in the dataset.
        available: u64,
        /// The dataset.
        dataset: String,
    },
    /// Categories that do not give one per record.
    #[error("{got} categories for the {expected} records of {dataset}")]
    CategoriesLength {
        /// Categories given.
        got: u64,
        /// Records.
        expected: u64,
        /// The dataset.
        dataset: String,
    },
}

/// The records of a subset of `dataset`'s `len` records, in record order:
/// uniform, or with `categories` (one code per record, as
/// [`field_categories`](crate::field_categories) reads them from a stored field)
/// equal per class where the classes allow it.
pub fn sample_records(
    dataset: &Dataset,
    options: &SampleOptions,
    categories: Option<&[u32]>,
) -> Result<Vec<u64>, SampleError> {
    sample_records_of(dataset, None, options, categories)
}

/// [`sample_records`] of the records `within` (a view's, in increasing
/// order; `None`: all): a subset of them, in record order; `categories`
/// still gives one code per record of the dataset.
pub fn sample_records_of(
    dataset: &Dataset,
    within: Option<&[u64]>,
    options: &SampleOptions,
    categories: Option<&[u32]>,
) -> Result<Vec<u64>, SampleError> {
    let name = dataset.path().display().to_string();
    if let Some(categories) = categories.filter(|c| c.len() != dataset.len()) {
        return Err(SampleError::CategoriesLength {
            got: categories.len() as u64,
            expected: dataset.len() as u64,
            dataset: name,
        });
    }
    let Some(within) = within else {
        return sample_positions(dataset.len() as u64, name, options, categories);
    };
    let categories: Option<Vec<u32>> =
        categories.map(|codes| within.iter().map(|&i| codes[i as usize]).collect());
    let positions = sample_positions(within.len() as u64, name, options, categories.as_deref())?;
    Ok(positions.into_iter().map(|p| within[p as usize]).collect())
}

fn sample_positions(
    len: u64,
    name: String,
    options: &SampleOptions,
    categories: Option<&[u32]>,
) -> Result<Vec<u64>, SampleError> {
    let too_large = |error: PlanError| match error {
        PlanError::SampleTooLarge { asked, available } => SampleError::TooLarge {
            asked,
            available,
            dataset: name.clone(),
        },
        other => unreachable!("subsets fail only by size: {other}"),
    };
    match categories {
        None => bcd_sampling::uniform_subset(len, options.count, options.seed).map_err(too_large),
        Some(categories) if categories.len() as u64 != len => Err(SampleError::CategoriesLength {
            got: categories.len() as u64,
            expected: len,
            dataset: name,
        }),
        Some(categories) => bcd_sampling::balanced_subset(categories, options.count, options.seed)
            .map_err(too_large),
    }
}

/// Settings of a copy into a new dataset.
#[derive(Clone, Debug, Default)]
pub struct CopyOptions {
    /// The records to copy, in this order (default: all, in order).
    pub records: Option<Vec<u64>>,
    /// Set to stop the copy at the next record: nothing is committed and the new
    /// dataset is removed.
    pub interrupt: Option<Arc<AtomicBool>>,
}

/// What a copy did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopySummary {
    /// The new dataset.
    pub dataset: PathBuf,
    /// Records copied.
    pub records: u64,
    /// Their stored bytes.
    pub bytes_stored: u64,
    /// The views of the source carried to the copy (each holding the copied
    /// records it held).
    pub views: Vec<String>,
    /// Views of the source that could not be read (of another state of it,
    /// or corrupt), not carried.
    pub unreadable_views: Vec<String>,
}

/// Copies records of `dataset` into a new dataset at `into` (a missing path or
/// an empty directory) with the same settings (keyed, compression, shard size),
/// in one commit. Each record is copied whole: its key, its value as stored (LZ4
/// values are not compressed again, so they read back identical) and its fields
/// (labels, WebDataset members, `bcd.value_ext`: the source's columns, of the
/// records copied, in their new order), through the [`FieldsExtend`] every
/// extend with fields uses, so the new dataset's statistics are its own and its
/// commit file carries the source's metadata (class names, how the value was
/// extracted). On any failure, or an interrupt, nothing is committed and the new
/// dataset is removed. Then the source's views are carried
/// ([`crate::views::carry_views`]): a failure there is an error saying the
/// records were committed.
pub fn copy_into(
    dataset: &Dataset,
    into: &Path,
    options: &CopyOptions,
) -> Result<CopySummary, ExportError> {
    let made_directory = !into.exists();
    let manifest = dataset.manifest();
    let mut target = Dataset::create(
        into,
        CreateOptions {
            keyed: manifest.keyed,
            compression: manifest.compression,
            max_shard_size: manifest.max_shard_size,
        },
    )?;
    let result = copy_records(dataset, &mut target, options);
    match result {
        Ok(summary) => {
            let (views, unreadable_views) =
                crate::views::carry_views(dataset, &target, options.records.as_deref()).map_err(
                    |source| ExportError::ViewsNotCarried {
                        dataset: into.to_owned(),
                        source: Box::new(source),
                    },
                )?;
            Ok(CopySummary {
                dataset: into.to_owned(),
                views,
                unreadable_views,
                ..summary
            })
        }
        Err(error) => {
            // Best effort: the copy's error is what the caller needs to see.
            let _ = target.remove_empty(made_directory);
            Err(error)
        }
    }
}

fn copy_records(
    dataset: &Dataset,
    target: &mut Dataset,
    options: &CopyOptions,
) -> Result<CopySummary, ExportError> {
    let interrupted = || {
        options
            .interrupt
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    };
    let all: Vec<u64>;
    let records = match &options.records {
        Some(records) => records,
        None => {
            all = (0..dataset.len() as u64).collect();
            &all
        }
    };
    let source = DatasetFields::load(dataset)?;
    let names: Vec<Arc<str>> = (source.schema.fields().iter())
        .map(|field| Arc::from(field.name().as_str()))
        .collect();
    let mut columns = ShardColumns::default();
    // The one extend with fields: each record whole, its statistics its own;
    // the source's content hashes, when it keeps them, kept by the copy too.
    let options = FieldsExtendOptions {
        store: bcd::ExtendOptions {
            content_hashes: dataset.keeps_content_hashes()?,
            ..bcd::ExtendOptions::default()
        },
        ..FieldsExtendOptions::default()
    };
    let mut extend = FieldsExtend::begin_with(target, OnDuplicate::Error, options)?;
    extend.add_metadata(source.metadata.clone())?;
    for field in source.schema.fields() {
        for (key, value) in field.metadata() {
            extend.set_column_metadata(field.name(), key, value);
        }
    }
    for &record in records {
        if interrupted() {
            return Err(ExportError::Interrupted);
        }
        let index = usize::try_from(record).unwrap_or(usize::MAX);
        let key = if dataset.keyed() {
            dataset.key_at(index)?
        } else {
            &[]
        };
        let stored = dataset.stored_at(index)?;
        let (arrays, row) = columns.of(dataset, &source, index)?;
        let mut fields = Fields::new();
        for (name, array) in names.iter().zip(arrays) {
            fields.push(name.clone(), FieldValue::Arrow(array.clone(), row));
        }
        let origin = format_args!("record {index} of {}", dataset.path().display());
        extend.push_stored(key, stored, &fields, &origin)?;
    }
    if interrupted() {
        return Err(ExportError::Interrupted);
    }
    let committed = extend.commit()?;
    Ok(CopySummary {
        dataset: PathBuf::new(),
        records: committed.records,
        bytes_stored: committed.bytes_stored,
        views: Vec::new(),
        unreadable_views: Vec::new(),
    })
}

/// The fields of the source shard last read, as the dataset schema's columns
/// (a copy in record order reads each shard once).
#[derive(Default)]
struct ShardColumns {
    shard: Option<u64>,
    rows: Option<ShardRows>,
}

impl ShardColumns {
    /// The columns of the shard holding record `index`, and its row there.
    fn of(
        &mut self,
        dataset: &Dataset,
        fields: &DatasetFields,
        index: usize,
    ) -> Result<(&[ArrayRef], usize), ExportError> {
        let shard = dataset.value_location(index)?.shard;
        if self.shard != Some(shard) {
            let batches = fields.shard_batches(dataset, shard, None)?;
            self.rows = Some(ShardRows::new(batches));
            self.shard = Some(shard);
        }
        let rows = self.rows.as_ref().expect("set above");
        let (batch, row) = rows.row(index - dataset.shard_first_record(shard) as usize);
        Ok((batch.columns(), row))
    }
}
