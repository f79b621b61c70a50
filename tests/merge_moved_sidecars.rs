//! `SidecarRewrite::moved`: a shard moved whole by `Dataset::merge` can have a
//! sidecar written anew (the fields layer renumbers class indices into the
//! target's vocabulary this way) instead of linked; a failing hook leaves the
//! target as it was and the part whole.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use bcd::{Compression, CreateOptions, Dataset, Error, MergeOptions, PartSource, SidecarRewrite};
use bcd_test_support::{read_all, snapshot, Record};

fn records(range: std::ops::Range<usize>) -> Vec<Record> {
    range
        .map(|i| {
            (
                format!("k{i:04}").into_bytes(),
                format!("value {i} ").repeat(3).into_bytes(),
            )
        })
        .collect()
}

/// A keyed dataset of small shards, each with a `rows.txt` sidecar of its keys.
fn dataset_with_sidecars(dir: &Path, records: &[Record]) {
    let options = CreateOptions {
        keyed: true,
        compression: Compression::Lz4,
        max_shard_size: 200,
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    let mut finished = Vec::new();
    for (key, value) in records {
        extend.push(key, value).unwrap();
        finished.extend(extend.take_finished_shards());
    }
    finished.extend(extend.close_shard().unwrap());
    let mut at = 0;
    for shard in finished {
        let n = shard.fingerprint.records as usize;
        let keys: Vec<&str> = records[at..at + n]
            .iter()
            .map(|(k, _)| std::str::from_utf8(k).unwrap())
            .collect();
        at += n;
        extend
            .write_sidecar(shard.id, "rows.txt", keys.join("\n").as_bytes())
            .unwrap();
    }
    extend.commit().unwrap();
}

/// Writes every moved `rows.txt` upper-cased; fails at shard `fail_at`.
struct Upper {
    fail_at: Option<u64>,
}

impl SidecarRewrite for Upper {
    fn moved(
        &self,
        part: &Dataset,
        from: u64,
        suffix: &str,
    ) -> Result<Option<Vec<u8>>, bcd::HookError> {
        if Some(from) == self.fail_at {
            return Err("the hook refuses".into());
        }
        if suffix != "rows.txt" {
            return Ok(None);
        }
        let bytes = fs::read(part.path().join(format!("{from:06}.rows.txt")))?;
        Ok(Some(bytes.to_ascii_uppercase()))
    }
}

#[test]
fn a_moved_shards_sidecar_can_be_written_anew_instead_of_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let (part, target) = (tmp.path().join("part"), tmp.path().join("target"));
    dataset_with_sidecars(&part, &records(0..12));
    let shards = Dataset::open(&part).unwrap().shards();
    assert!(shards > 1, "small shards");
    let mut dataset = Dataset::create(
        &target,
        CreateOptions {
            keyed: true,
            compression: Compression::Lz4,
            max_shard_size: 200,
        },
    )
    .unwrap();
    let hook = Upper { fail_at: None };
    let options = MergeOptions {
        sidecars: &hook,
        ..MergeOptions::default()
    };
    let summary = dataset.merge(&[PartSource::new(&part)], &options).unwrap();
    assert_eq!(summary.rewritten_shards, 0, "{summary:?}");
    assert_eq!(read_all(&dataset), records(0..12));
    for shard in 0..shards {
        let written = fs::read_to_string(target.join(format!("{shard:06}.rows.txt"))).unwrap();
        assert!(
            written.starts_with('K') && !written.contains('k'),
            "{written}"
        );
        // The shard's data file was moved (linked, then the part removed).
        let data = fs::metadata(target.join(format!("{shard:06}.bin"))).unwrap();
        assert_eq!(data.nlink(), 1);
    }
    assert!(!part.exists(), "the merged part is removed");
}

#[test]
fn a_failing_moved_hook_leaves_the_target_as_it_was_and_the_part_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (part, target) = (tmp.path().join("part"), tmp.path().join("target"));
    dataset_with_sidecars(&part, &records(0..12));
    dataset_with_sidecars(&target, &records(100..103));
    let (part_before, target_before) = (snapshot(&part), snapshot(&target));
    let mut dataset = Dataset::open(&target).unwrap();
    // Shard 1: the first shard's sidecar is written by then.
    let hook = Upper { fail_at: Some(1) };
    let options = MergeOptions {
        sidecars: &hook,
        ..MergeOptions::default()
    };
    let err = dataset
        .merge(&[PartSource::new(&part)], &options)
        .unwrap_err();
    assert!(matches!(err, Error::Hook { .. }), "{err}");
    assert!(err.to_string().contains("000001.rows.txt"), "{err}");
    assert_eq!(snapshot(&target), target_before);
    assert_eq!(snapshot(&part), part_before);
}
