//! `bcd_pipeline::export` as a library: typed errors, progress, interruption, and
//! no temporary file left on any failure path (issues 9 and 14.8).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bcd::{CreateOptions, Dataset};
use bcd_converters::tar_export::{self, Split, Target};
use bcd_pipeline::{export, ExportError, ExportOptions, ExportProgress};

fn dataset(dir: &Path, count: usize) -> Dataset {
    let path = dir.join("ds");
    let mut dataset = Dataset::create(
        &path,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..count)
        .map(|i| (format!("{i:04}.bin").into_bytes(), vec![i as u8; 100 + i]))
        .collect();
    dataset
        .extend(records.iter().map(|(k, v)| (&k[..], &v[..])))
        .unwrap();
    Dataset::open(&path).unwrap()
}

/// The names of the files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn progress_is_reported_after_every_member_with_the_running_totals() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 5);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let options = ExportOptions {
        progress: Some(Arc::new(move |p: &ExportProgress| {
            sink.lock().unwrap().push(*p)
        })),
        ..ExportOptions::new(Target::File(out.join("all.tar")))
    };
    let summary = export(&ds, &options).unwrap();
    assert_eq!(summary.members, 5);
    let seen = seen.lock().unwrap();
    let members: Vec<u64> = seen.iter().map(|p| p.members).collect();
    assert_eq!(members, [1, 2, 3, 4, 5]);
    assert!(seen.iter().all(|p| p.total_members == 5));
    assert_eq!(seen[4].bytes, summary.bytes);
    assert_eq!(listing(&out), ["all.tar"]);
}

#[test]
fn an_interrupted_export_removes_its_partial_archive_and_keeps_completed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 10);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for (target, split, left) in [
        (Target::File(out.join("one.tar")), Split::default(), vec![]),
        (
            Target::Pattern(out.join("part-%02d.tar").to_string_lossy().into_owned()),
            Split {
                max_members: Some(3),
                max_bytes: None,
            },
            vec!["part-00.tar"],
        ),
    ] {
        // The flag is raised from the progress callback after the fifth member, as
        // a signal handler would between two records.
        let flag = Arc::new(AtomicBool::new(false));
        let raise = Arc::clone(&flag);
        let options = ExportOptions {
            split,
            interrupt: Some(Arc::clone(&flag)),
            progress: Some(Arc::new(move |p: &ExportProgress| {
                if p.members == 5 {
                    raise.store(true, Ordering::Relaxed);
                }
            })),
            ..ExportOptions::new(target.clone())
        };
        let error = export(&ds, &options).unwrap_err();
        assert!(matches!(error, ExportError::Interrupted), "{error:?}");
        assert!(!error.is_usage() && error.write_error().is_none());
        assert_eq!(listing(&out), left, "{target:?}");
    }
}

#[test]
fn a_failure_at_the_rename_removes_the_temporary_archive() {
    // The target is checked when the export starts; a directory put in its place
    // while the archive is written makes the final rename fail.
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 3);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let target = out.join("late.tar");
    let in_the_way = target.clone();
    let options = ExportOptions {
        progress: Some(Arc::new(move |p: &ExportProgress| {
            if p.members == 3 {
                std::fs::create_dir(&in_the_way).unwrap();
                std::fs::write(in_the_way.join("keep"), b"x").unwrap();
            }
        })),
        ..ExportOptions::new(Target::File(target.clone()))
    };
    let error = export(&ds, &options).unwrap_err();
    let io = error.write_error().expect("a write error");
    assert_ne!(io.kind(), std::io::ErrorKind::BrokenPipe);
    assert!(error.to_string().contains("late.tar"), "{error}");
    assert_eq!(listing(&out), ["late.tar"]);
    assert!(target.is_dir(), "the directory in the way is untouched");
}

#[test]
fn bad_targets_and_patterns_are_usage_errors_found_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(dir.path(), 2);
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let split = Split {
        max_members: Some(1),
        max_bytes: None,
    };
    let pattern = |p: &str| Target::Pattern(out.join(p).to_string_lossy().into_owned());
    for (target, split) in [
        (Target::File(out.clone()), Split::default()),
        (Target::File(out.join("sub/")), Split::default()),
        (Target::File(out.join("..")), Split::default()),
        (Target::File(out.join("missing/x.tar")), Split::default()),
        (Target::File(out.join("x.tar")), split),
        (Target::Stdout, split),
        (pattern("x-%70000d.tar"), split),
        (pattern("x-%0100d.tar"), split),
        (pattern("x-%d/"), split),
    ] {
        let options = ExportOptions {
            split,
            ..ExportOptions::new(target.clone())
        };
        let error = export(&ds, &options).unwrap_err();
        assert!(error.is_usage(), "{target:?}: {error}");
        assert!(
            matches!(error, ExportError::Archive(ref e) if e.is_usage()),
            "{error:?}"
        );
        assert!(listing(&out).is_empty(), "{target:?}: {:?}", listing(&out));
        assert_eq!(listing(dir.path()), ["ds", "out"], "{target:?}");
    }
    // An unsafe key is not a usage error: it names the record.
    let path = dir.path().join("unsafe");
    let mut unsafe_ds = Dataset::create(
        &path,
        CreateOptions {
            keyed: true,
            ..Default::default()
        },
    )
    .unwrap();
    unsafe_ds.extend([(&b"../x"[..], &b"v"[..])]).unwrap();
    let error = export(
        &Dataset::open(&path).unwrap(),
        &ExportOptions::new(Target::File(out.join("u.tar"))),
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            ExportError::Archive(tar_export::ExportError::UnsafeName { index: 0, .. })
        ),
        "{error:?}"
    );
    assert!(!error.is_usage());
    assert!(listing(&out).is_empty());
}
