//! The records a run left out because their value repeats an earlier record's
//! ([`bcd::Dedup::Content`]): one JSON object each, in the summary the front
//! ends print (`--json`, Python's return values) and, as JSON Lines, in the file
//! `--dedup-report` (Python's `dedup_report=`) names.
//!
//! An object names the record left out by `"key"` (its key as text when UTF-8,
//! else `"key_hex"`, as `ls --fields` prints keys) or, keyless, `"index"` (its
//! position among the records the run read, from 0; in a merge, its index in
//! its part), where it came from (`"origin"`: the source's name for it, or the
//! part), and `"duplicate_of"`: the record kept, by its index in the dataset
//! after the commit and its key.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// One record left out for its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentDuplicate {
    /// Its key (keyed datasets).
    pub key: Option<Vec<u8>>,
    /// Its position among the records the run read (in a merge, its index in
    /// its part).
    pub index: u64,
    /// Where it came from.
    pub origin: String,
    /// The index, in the dataset after the commit, of the record whose value
    /// it repeats.
    pub of: u64,
    /// That record's key (keyed datasets).
    pub of_key: Option<Vec<u8>>,
}

/// Adds a record's name to `object`: `"key"` as text when UTF-8, else
/// `"key_hex"` (the key escaped), or `"index"` without a key.
pub fn add_record_name(object: &mut Map<String, Value>, key: Option<&[u8]>, index: u64) {
    match key {
        Some(key) => match std::str::from_utf8(key) {
            Ok(text) => object.insert("key".into(), text.into()),
            Err(_) => object.insert(
                "key_hex".into(),
                bcd::DisplayKey(key.to_vec()).to_string().into(),
            ),
        },
        None => object.insert("index".into(), index.into()),
    };
}

impl ContentDuplicate {
    /// The record as one JSON object (see the module documentation).
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        add_record_name(&mut object, self.key.as_deref(), self.index);
        object.insert("origin".into(), self.origin.clone().into());
        let mut of = Map::new();
        of.insert("index".into(), self.of.into());
        if let Some(key) = &self.of_key {
            add_record_name(&mut of, Some(key), self.of);
        }
        object.insert("duplicate_of".into(), Value::Object(of));
        Value::Object(object)
    }
}

/// Collects a run's content duplicates: counts them, keeps them for the
/// summary when asked, and writes them to a report file, which takes its name
/// only when the run commits ([`DedupReport::finish`]); until then it is
/// `NAME.tmp-<pid>`, removed if the run fails.
#[derive(Debug)]
pub struct DedupReport {
    file: Option<(BufWriter<File>, PathBuf, PathBuf)>,
    list: Option<Vec<ContentDuplicate>>,
    count: u64,
}

/// Why a dedup report could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {what}", path.display())]
pub struct ReportError {
    /// The report file.
    pub path: PathBuf,
    /// What failed.
    pub what: String,
    /// The cause.
    #[source]
    pub source: io::Error,
}

impl DedupReport {
    /// A report written to `path` (when given), keeping every duplicate in
    /// memory too when `keep_list`.
    pub fn new(path: Option<&Path>, keep_list: bool) -> Result<DedupReport, ReportError> {
        let file = match path {
            None => None,
            Some(path) => {
                let mut name = path.as_os_str().to_owned();
                name.push(format!(".tmp-{}", std::process::id()));
                let temporary = PathBuf::from(name);
                let file = File::create(&temporary).map_err(|source| ReportError {
                    path: temporary.clone(),
                    what: "cannot create the dedup report".into(),
                    source,
                })?;
                Some((BufWriter::new(file), temporary, path.to_owned()))
            }
        };
        Ok(DedupReport {
            file,
            list: keep_list.then(Vec::new),
            count: 0,
        })
    }

    /// Records one duplicate.
    pub fn add(&mut self, duplicate: ContentDuplicate) -> Result<(), ReportError> {
        self.count += 1;
        if let Some((out, temporary, _)) = &mut self.file {
            let mut line = duplicate.to_json().to_string();
            line.push('\n');
            out.write_all(line.as_bytes())
                .map_err(|source| ReportError {
                    path: temporary.clone(),
                    what: "writing the dedup report failed".into(),
                    source,
                })?;
        }
        if let Some(list) = &mut self.list {
            list.push(duplicate);
        }
        Ok(())
    }

    /// Duplicates recorded so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Flushes the report and gives it its name; returns the duplicates kept.
    pub fn finish(mut self) -> Result<Vec<ContentDuplicate>, ReportError> {
        if let Some((out, temporary, path)) = self.file.take() {
            let fail = |what: &str, source| ReportError {
                path: temporary.clone(),
                what: what.to_owned(),
                source,
            };
            let file = out
                .into_inner()
                .map_err(|e| fail("writing the dedup report failed", e.into_error()))?;
            file.sync_all()
                .map_err(|e| fail("writing the dedup report failed", e))?;
            std::fs::rename(&temporary, &path).map_err(|source| ReportError {
                path,
                what: format!("cannot rename {} to it", temporary.display()),
                source,
            })?;
        }
        Ok(self.list.take().unwrap_or_default())
    }
}

impl Drop for DedupReport {
    /// A report not finished (the run failed) is removed.
    fn drop(&mut self) {
        if let Some((_, temporary, _)) = self.file.take() {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate(key: Option<&[u8]>) -> ContentDuplicate {
        ContentDuplicate {
            key: key.map(<[u8]>::to_vec),
            index: 4,
            origin: "entry 4".into(),
            of: 1,
            of_key: key.map(|_| b"first".to_vec()),
        }
    }

    #[test]
    fn objects_name_records_as_ls_does() {
        assert_eq!(
            duplicate(Some(b"a/2.jpg")).to_json(),
            serde_json::json!({"key": "a/2.jpg", "origin": "entry 4",
                "duplicate_of": {"index": 1, "key": "first"}})
        );
        assert_eq!(
            duplicate(Some(b"\xff")).to_json()["key_hex"],
            serde_json::json!("\"\\xff\"")
        );
        assert_eq!(
            duplicate(None).to_json(),
            serde_json::json!({"index": 4, "origin": "entry 4", "duplicate_of": {"index": 1}})
        );
    }

    #[test]
    fn the_file_appears_only_when_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dups.jsonl");
        let mut report = DedupReport::new(Some(&path), true).unwrap();
        report.add(duplicate(None)).unwrap();
        report.add(duplicate(Some(b"k"))).unwrap();
        assert!(!path.exists());
        let kept = report.finish().unwrap();
        assert_eq!(kept.len(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines,
            [duplicate(None).to_json(), duplicate(Some(b"k")).to_json()]
        );

        let failed = dir.path().join("failed.jsonl");
        let mut report = DedupReport::new(Some(&failed), false).unwrap();
        report.add(duplicate(None)).unwrap();
        drop(report);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
