//! `Dataset.extend`: entries pulled from the caller's iterable with the GIL,
//! compressed and written without it, through the pipeline's one extend with
//! fields ([`FieldsExtend`]), and committed once.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator};

use bcd::{Dataset, Dedup, ExtendOptions, Lz4Mode};
use bcd_fields::Fields;
use bcd_pipeline::{
    ContentDuplicate, FieldsExtend, FieldsExtendOptions, NewRecord, Numbered, OnDuplicate,
};

use super::PyDataset;
use crate::buffers;
use crate::errors::fields_to_py;
use crate::field_values;
use crate::handle::Handle;
use crate::options::lz4_mode_arg;

/// `extend`'s duplicate checks: `dedup=` and `memory_limit=`.
pub(crate) struct Checks {
    pub(crate) dedup: Dedup,
    pub(crate) memory_limit: Option<u64>,
}

impl PyDataset {
    /// `extend`: checks the arguments, then runs the transaction.
    pub(super) fn extend_entries<'py>(
        &self,
        py: Python<'py>,
        entries: &Bound<'py, PyAny>,
        level: Option<&Bound<'py, PyAny>>,
        metadata: Option<&Bound<'py, PyAny>>,
        checks: Checks,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let metadata = field_values::metadata_arg(metadata)?;
        // Without `level`, the reference's bytes: level 9 on every value.
        let mode = lz4_mode_arg(level, Lz4Mode::default())?;
        buffers::check_not_single_buffer(entries)?;
        let mut entries = entries.try_iter()?;
        let handle = self.handle(py)?;
        // The iterator outlives the lock: dropping a generator runs its cleanup
        // code, which may use this dataset.
        let dedup = checks.dedup;
        let (records, duplicates) =
            self.extend_locked(py, &handle, &mut entries, mode, metadata, checks)?;
        if dedup == Dedup::Keys {
            return Ok(None);
        }
        let summary = serde_json::json!({
            "records": records,
            "skipped_values": duplicates.len(),
            "content_duplicates": duplicates.iter().map(ContentDuplicate::to_json).collect::<Vec<_>>(),
        });
        Ok(Some(
            py.import("json")?
                .call_method1("loads", (summary.to_string(),))?
                .cast_into::<PyDict>()?,
        ))
    }

    /// `extend` with the entries' iterator: takes the write lock and runs the
    /// transaction.
    fn extend_locked(
        &self,
        py: Python<'_>,
        handle: &Handle,
        entries: &mut Bound<'_, PyIterator>,
        mode: Lz4Mode,
        metadata: serde_json::Map<String, serde_json::Value>,
        checks: Checks,
    ) -> PyResult<(u64, Vec<ContentDuplicate>)> {
        let mut guard = handle.write(py)?;
        let dataset: &mut Dataset = &mut guard;
        dataset.set_lz4_mode(mode);
        let keyed = self.keyed;
        // Takes the writer lock and picks up shards other handles committed, so
        // they are never overwritten. Records go in whole through the one extend
        // with fields (a duplicate key fails it).
        let options = FieldsExtendOptions {
            store: ExtendOptions {
                dedup: checks.dedup,
                memory_limit: checks.memory_limit,
                ..ExtendOptions::default()
            },
            ..FieldsExtendOptions::default()
        };
        let mut extend = py
            .detach(|| FieldsExtend::begin_with(dataset, OnDuplicate::Error, options))
            .map_err(fields_to_py)?;
        let mut duplicates: Vec<ContentDuplicate> = Vec::new();
        if let Err(error) = extend.add_metadata(metadata) {
            py.detach(move || drop(extend));
            return Err(fields_to_py(error));
        }
        let mut rows: Vec<Fields> = Vec::new();

        // Pulled from the iterable per compression round: the store's one policy.
        let (batch_records, batch_bytes) = bcd::batch_limits(self.threads.load(Ordering::Relaxed));
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut values: Vec<Vec<u8>> = Vec::new();
        // Entries pulled before this batch: errors name an entry by its number.
        let mut pulled: u64 = 0;
        let outcome = (|| -> PyResult<()> {
            loop {
                // Pull one batch with the GIL held. Meanwhile every thread, and
                // Python code run by the iterable (or by a signal handler), may
                // read this dataset: it sees the committed records. That code may
                // also fork: a child's copy of this extend stops here, and writes
                // nothing.
                let mut bytes = 0;
                let mut exhausted = true;
                {
                    let _reads = handle.share(extend.dataset());
                    for entry in entries.by_ref() {
                        let entry = entry?;
                        extend.check_process().map_err(fields_to_py)?;
                        if let Ok(dict) = entry.cast::<PyDict>() {
                            let (key, value, record) = field_values::dict_entry(dict, keyed)?;
                            bytes += value.len();
                            match key {
                                Some(key) => {
                                    bytes += key.len();
                                    pairs.push((key, value));
                                }
                                None => values.push(value),
                            }
                            rows.push(record);
                        } else if keyed {
                            let (key, value) = buffers::keyed_entry(&entry)?;
                            bytes += key.len() + value.len();
                            pairs.push((key, value));
                            rows.push(Fields::new());
                        } else {
                            let value = buffers::keyless_entry(&entry)?;
                            bytes += value.len();
                            values.push(value);
                            rows.push(Fields::new());
                        }
                        if pairs.len() + values.len() >= batch_records || bytes >= batch_bytes {
                            exhausted = false;
                            break;
                        }
                    }
                    extend.check_process().map_err(fields_to_py)?;
                    if !exhausted {
                        // Let Ctrl-C stop a long extend from a non-Python iterable.
                        py.check_signals()?;
                    }
                }
                // Compress on all cores and write, without the GIL.
                let extend = &mut extend;
                let duplicates = &mut duplicates;
                let (pairs, values, rows) = (&mut pairs, &mut values, &mut rows);
                let first = pulled;
                pulled += rows.len() as u64;
                py.detach(move || -> PyResult<()> {
                    let origins: Vec<Numbered> = (0..rows.len() as u64)
                        .map(|at| Numbered {
                            what: "entry",
                            number: first + at,
                        })
                        .collect();
                    // Only one of the two is used: a keyed dataset takes pairs.
                    let entries = pairs
                        .iter()
                        .map(|(k, v)| (&k[..], &v[..]))
                        .chain(values.iter().map(|v| (&[][..], &v[..])));
                    let records: Vec<NewRecord<'_>> = entries
                        .zip(rows.iter())
                        .zip(&origins)
                        .map(|(((key, value), fields), origin)| NewRecord {
                            key,
                            value,
                            fields: Cow::Borrowed(fields),
                            origin,
                        })
                        .collect();
                    let skipped = extend.push_batch(&records).map_err(fields_to_py)?;
                    for duplicate in skipped.values {
                        let position = duplicate.position;
                        duplicates.push(ContentDuplicate {
                            key: keyed.then(|| records[position].key.to_vec()),
                            index: first + position as u64,
                            origin: records[position].origin.to_string(),
                            of: duplicate.of,
                            of_key: keyed.then_some(duplicate.of_key),
                        });
                    }
                    drop(records);
                    pairs.clear();
                    values.clear();
                    rows.clear();
                    Ok(())
                })?;
                if exhausted {
                    return Ok(());
                }
            }
        })();
        match outcome {
            Ok(()) => py
                .detach(move || extend.commit())
                .map(|committed| (committed.records, duplicates))
                .map_err(fields_to_py),
            Err(error) => {
                // Removes the uncommitted shard files (a forked child's copy
                // removes nothing).
                py.detach(move || drop(extend));
                Err(error)
            }
        }
    }
}
