//! `merge` and `gc` as the front ends run them: the target created from the
//! first part's settings when missing, and the summaries both front ends print
//! (the CLI's `--json`, Python's return values) made once, here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bcd::{
    CreateOptions, Dataset, Dedup, GcOptions, GcReport, Manifest, MergeOnDuplicate, MergeOptions,
    MergeSummary, MergedValueDuplicate, PartSource,
};

use crate::dedup_report::{ContentDuplicate, DedupReport};
use crate::OnDuplicate;

/// Settings of one merge run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeRunOptions {
    /// Copy the parts' files and leave the parts as they are (default: move them).
    pub copy: bool,
    /// What to do with a key found twice.
    pub on_duplicate: OnDuplicate,
    /// Which records are duplicates: keys (the default), or with
    /// [`Dedup::Content`] also a part record whose value repeats an earlier
    /// record's (left out and reported whatever `on_duplicate` says).
    pub dedup: Dedup,
    /// Write each record left out for its value to this file, one JSON object
    /// per line, once the merge commits.
    pub dedup_report: Option<PathBuf>,
    /// Memory the duplicate checks may hold before they spill to disk
    /// ([`Dataset::set_memory_limit`]); `None`: the default.
    pub memory_limit: Option<u64>,
}

/// What a merge run did.
#[derive(Clone, Debug, PartialEq)]
pub struct MergeReport {
    /// The store's summary.
    pub summary: MergeSummary,
    /// Whether the run created the target.
    pub created: bool,
    /// Seconds the run took.
    pub seconds: f64,
}

impl MergeReport {
    /// The summary as one JSON object: `parts`, `records`, `skipped`, `shards`,
    /// `rewritten_shards`, `linked_files`, `copied_files`, `bytes_stored`,
    /// `created`, `seconds`, `parts_not_removed` (`[{"path", "error"}]`),
    /// `already_merged` (paths of parts an interrupted merge had committed),
    /// `skipped_values` and `content_duplicates` (the records left out for their
    /// value, as [`ContentDuplicate::to_json`] gives them: `origin` is the part).
    pub fn to_json(&self) -> serde_json::Value {
        let s = &self.summary;
        serde_json::json!({
            "parts": s.parts,
            "records": s.records,
            "skipped": s.skipped,
            "skipped_values": s.value_duplicates.len(),
            "content_duplicates": s.value_duplicates.iter()
                .map(|d| content_duplicate(d).to_json()).collect::<Vec<_>>(),
            "shards": s.shards,
            "rewritten_shards": s.rewritten_shards,
            "linked_files": s.linked_files,
            "copied_files": s.copied_files,
            "bytes_stored": s.bytes_stored,
            "created": self.created,
            "seconds": self.seconds,
            "parts_not_removed": s.parts_not_removed.iter().map(|(path, error)| {
                serde_json::json!({"path": path.display().to_string(), "error": error})
            }).collect::<Vec<_>>(),
            "already_merged": s.already_merged.iter().map(|path| path.display().to_string())
                .collect::<Vec<_>>(),
        })
    }

    /// The summary as one line of text.
    pub fn to_text(&self) -> String {
        let s = &self.summary;
        let how = match (s.linked_files, s.copied_files) {
            (_, 0) => "moved".to_owned(),
            (0, _) => "copied".to_owned(),
            (l, c) => format!("{l} files linked, {c} copied"),
        };
        let before = match s.already_merged.len() {
            0 => String::new(),
            n => format!(
                "; {n} part(s) already merged by an interrupted merge, nothing of them added ({})",
                s.already_merged
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let values = match s.value_duplicates.len() {
            0 => String::new(),
            n => format!(", {n} repeated values skipped"),
        };
        format!(
            "merged {} part(s): {} records in {} shards ({how}), {} duplicates skipped{values}, {} shards rewritten, {:.2} s{before}",
            s.parts, s.records, s.shards, s.skipped, s.rewritten_shards, self.seconds
        )
    }
}

/// A part record left out for its value, as the reports name it.
fn content_duplicate(duplicate: &MergedValueDuplicate) -> ContentDuplicate {
    // A keyless record has an empty key here; keyless parts are named by index.
    let keyed = !duplicate.key.is_empty() || !duplicate.of_key.is_empty();
    ContentDuplicate {
        key: keyed.then(|| duplicate.key.clone()),
        index: duplicate.record,
        origin: duplicate.part.display().to_string(),
        of: duplicate.of,
        of_key: keyed.then(|| duplicate.of_key.clone()),
    }
}

/// Merges the datasets `parts`, in order, into `into` in one commit (see
/// [`Dataset::merge`]). A missing or empty `into` is created with the first
/// part's settings (keyed, compression, max_shard_size), and removed again if
/// the merge fails. Fields come along (FORMAT.md section 9): shards moved whole
/// keep their fields and statistics files (written anew when the part's class
/// indices are renumbered into the target's vocabulary), a shard rewritten
/// without dropped duplicates gets both anew, and the commit file of the merged
/// state unifies the schemas, merges the metadata (`bcd_fields::merge_metadata`)
/// and adds up the statistics.
pub fn merge(
    parts: &[PathBuf],
    into: &Path,
    options: &MergeRunOptions,
) -> bcd::Result<MergeReport> {
    let started = Instant::now();
    // Missing: no directory, or one without a manifest (holding a job's staging
    // parts, or what a run killed while creating the dataset left: `create`
    // refuses anything else).
    let missing = std::fs::symlink_metadata(into.join(bcd::format::MANIFEST_NAME)).is_err();
    let (mut dataset, created) = if missing {
        let Some(first) = parts.first() else {
            return Err(bcd::Error::NotADataset {
                path: into.to_owned(),
            });
        };
        let settings = Manifest::read(first)?;
        let create = CreateOptions {
            keyed: settings.keyed,
            compression: settings.compression,
            max_shard_size: settings.max_shard_size,
        };
        (Dataset::create(into, create)?, true)
    } else {
        (Dataset::open(into)?, false)
    };
    dataset.set_memory_limit(options.memory_limit);
    let sources: Vec<PartSource> = parts.iter().map(PartSource::new).collect();
    // The parts' metadata merged into the target's before anything is written:
    // a conflict leaves the target as it was.
    let fields = match crate::merge_fields::FieldsMerge::plan(&dataset, parts) {
        Ok(fields) => fields,
        Err(e) => {
            if created {
                let _ = dataset.remove_empty(true);
            }
            return Err(bcd::Error::Hook {
                what: format!("merging the parts' metadata into {}", into.display()),
                source: Box::new(e),
            });
        }
    };
    let commit_file = |input: &bcd::MergeCommitInput<'_>| {
        fields
            .commit_file(input)
            .map(Some)
            .map_err(|e| Box::new(e) as bcd::HookError)
    };
    let merge_options = MergeOptions {
        copy: options.copy,
        on_duplicate: match options.on_duplicate {
            OnDuplicate::Error => MergeOnDuplicate::Error,
            OnDuplicate::Skip => MergeOnDuplicate::Skip,
        },
        dedup: options.dedup,
        sidecars: &fields,
        commit_file: Some(&commit_file),
    };
    // Created before the merge, so that an unwritable path fails it first.
    let report_error = |what: &str, e: crate::ReportError| bcd::Error::Hook {
        what: what.to_owned(),
        source: Box::new(e),
    };
    let report = DedupReport::new(options.dedup_report.as_deref(), false)
        .map_err(|e| report_error("nothing was merged", e));
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            if created {
                let _ = dataset.remove_empty(true);
            }
            return Err(e);
        }
    };
    match dataset.merge(&sources, &merge_options) {
        Ok(summary) => {
            let mut report = report;
            let written = summary
                .value_duplicates
                .iter()
                .try_for_each(|d| report.add(content_duplicate(d)))
                .and_then(|()| report.finish().map(drop));
            written.map_err(|e| {
                report_error(
                    "the merge was committed, but its dedup report was not written",
                    e,
                )
            })?;
            Ok(MergeReport {
                summary,
                created,
                seconds: started.elapsed().as_secs_f64(),
            })
        }
        Err(e) => {
            if created {
                let _ = dataset.remove_empty(true);
            }
            Err(e)
        }
    }
}

/// The report of [`Dataset::gc`] as one JSON object: `files` (paths),
/// `bytes`, `kept_jobs` (paths) and `dry_run`.
pub fn gc_json(report: &GcReport, options: &GcOptions) -> serde_json::Value {
    let paths = |list: &[PathBuf]| -> Vec<String> {
        list.iter().map(|p| p.display().to_string()).collect()
    };
    serde_json::json!({
        "files": paths(&report.files),
        "bytes": report.bytes,
        "kept_jobs": paths(&report.kept_jobs),
        "dry_run": options.dry_run,
    })
}

/// Parses a duration like `30m`, `1h`, `2d`, `90s` or `1.5h` (a number and one
/// of the units s, m, h, d).
pub fn parse_duration(text: &str) -> Result<Duration, crate::InvalidValue> {
    let invalid = || crate::InvalidValue {
        value: text.to_owned(),
        expected: "expected a number and a unit s, m, h or d (30m, 1h, 2d)".to_owned(),
    };
    let text_trimmed = text.trim();
    let split = text_trimmed
        .char_indices()
        .last()
        .map(|(i, _)| i)
        .ok_or_else(invalid)?;
    let (number, unit) = text_trimmed.split_at(split);
    let seconds_per = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(invalid()),
    };
    let value: f64 = number.trim().parse().map_err(|_| invalid())?;
    if !value.is_finite() || value < 0.0 {
        return Err(invalid());
    }
    Duration::try_from_secs_f64(value * seconds_per).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_the_parts_found_merged_already() {
        let report = MergeReport {
            summary: MergeSummary {
                parts: 0,
                already_merged: vec![PathBuf::from("a"), PathBuf::from("b")],
                ..MergeSummary::default()
            },
            created: false,
            seconds: 0.5,
        };
        assert_eq!(
            report.to_text(),
            "merged 0 part(s): 0 records in 0 shards (moved), 0 duplicates skipped, 0 shards rewritten, 0.50 s; \
             2 part(s) already merged by an interrupted merge, nothing of them added (a, b)"
        );
        assert_eq!(
            report.to_json()["already_merged"],
            serde_json::json!(["a", "b"])
        );
        assert_eq!(report.to_json()["records"], 0);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("0s").unwrap(), Duration::ZERO);
        for bad in ["", "h", "1", "1w", "-1h", "nanh", "1 x", "1e400d"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.to_string().contains("30m"), "{bad}: {err:?}");
        }
    }
}
