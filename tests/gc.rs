//! `Dataset::gc`: what no manifest references is removed (leftovers of killed
//! writers, staging parts of abandoned jobs), committed data never, and nothing
//! while a writer runs.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bcd::{CreateOptions, Dataset, Error, GcOptions};
use bcd_test_support::{read_all, tree_snapshot};

fn create(dir: &Path, records: usize) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        max_shard_size: 100,
        ..Default::default()
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    let mut extend = dataset.begin_extend().unwrap();
    for i in 0..records {
        extend
            .push(format!("k{i}").as_bytes(), &[i as u8; 30])
            .unwrap();
    }
    for shard in extend.close_shard().unwrap() {
        extend.write_sidecar(shard.id, "stats.json", b"{}").unwrap();
    }
    extend.set_commit_file(b"{}".to_vec());
    extend.commit().unwrap();
    dataset
}

fn touch(path: &Path, bytes: &[u8], age: Duration) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
    let file = File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - age).unwrap();
}

fn dry() -> GcOptions {
    GcOptions {
        dry_run: true,
        ..GcOptions::default()
    }
}

#[test]
fn leftovers_past_the_commit_are_listed_then_removed_and_committed_files_never() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let dataset = create(&dir, 10);
    let shards = dataset.shards();
    let records = read_all(&dataset);
    drop(dataset);
    let committed = tree_snapshot(&dir).unwrap();
    let hour = Duration::from_secs(3600);
    let mut leftovers: Vec<PathBuf> = [
        format!("{shards:06}.bin"),
        format!("{shards:06}.idx"),
        format!("{:06}.stats.json", shards + 1),
        format!("commit.{:06}.json", shards + 2),
        ".manifest.json.tmp".into(),
        ".bcd-index.tmp-77-1".into(),
        format!(".commit.{shards:06}.json.tmp"),
    ]
    .iter()
    .map(|name| dir.join(name))
    .collect();
    for path in &leftovers {
        touch(path, b"left", 2 * hour);
    }
    // A new one is kept by --older-than.
    let fresh = dir.join(format!("{:06}.bin", shards + 1));
    touch(&fresh, b"new", Duration::ZERO);

    let listed = Dataset::gc(
        &dir,
        &GcOptions {
            older_than: Some(hour),
            ..dry()
        },
    )
    .unwrap();
    leftovers.sort();
    assert_eq!(listed.files, leftovers);
    assert_eq!(listed.bytes, 4 * leftovers.len() as u64);
    // Dry: nothing removed.
    assert!(leftovers.iter().all(|p| p.exists()));

    let removed = Dataset::gc(
        &dir,
        &GcOptions {
            older_than: Some(hour),
            ..GcOptions::default()
        },
    )
    .unwrap();
    assert_eq!(removed.files, leftovers);
    assert!(leftovers.iter().all(|p| !p.exists()));
    assert!(fresh.exists());
    let removed = Dataset::gc(&dir, &GcOptions::default()).unwrap();
    assert_eq!(removed.files, [fresh]);
    // Exactly the committed files are left (and the lock file), untouched.
    let mut now = tree_snapshot(&dir).unwrap();
    now.remove(Path::new(".bcd.lock"));
    let mut before = committed;
    before.remove(Path::new(".bcd.lock"));
    assert_eq!(now, before);
    assert_eq!(read_all(&Dataset::open(&dir).unwrap()), records);
    assert!(Dataset::gc(&dir, &GcOptions::default())
        .unwrap()
        .files
        .is_empty());
}

#[test]
fn abandoned_staging_jobs_are_removed_and_running_ones_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    drop(create(&dir, 3));
    let staging = dir.join("_staging");
    // An abandoned job: two parts, one committed, one with a leftover shard.
    let abandoned = staging.join("job-a");
    drop(create(&abandoned.join("000000-x"), 5));
    drop(create(&abandoned.join("000001-y"), 0));
    fs::write(abandoned.join("000001-y/000000.bin"), b"partial").unwrap();
    fs::write(abandoned.join(".bcd-job.lock"), b"").unwrap();
    // A job whose driver holds its job lock.
    let running = staging.join("job-b");
    drop(create(&running.join("000000-z"), 2));
    let job_lock = File::create(running.join(".bcd-job.lock")).unwrap();
    job_lock.try_lock().unwrap();
    // A job one of whose tasks is writing its part.
    let writing = staging.join("job-c");
    let mut part = create(&writing.join("000000-w"), 2);
    let extend = part.begin_extend().unwrap();

    let listed = Dataset::gc(&dir, &dry()).unwrap();
    let mut expected: Vec<PathBuf> = tree_snapshot(&abandoned)
        .unwrap()
        .into_keys()
        .map(|p| abandoned.join(p))
        .collect();
    expected.sort();
    let mut files = listed.files.clone();
    files.sort();
    assert_eq!(files, expected);
    assert_eq!(listed.kept_jobs, [running.clone(), writing.clone()]);
    assert!(abandoned.exists());

    let report = Dataset::gc(&dir, &GcOptions::default()).unwrap();
    assert_eq!(report.files, listed.files);
    assert!(!abandoned.exists());
    assert!(running.join("000000-z/manifest.json").exists());
    assert!(writing.join("000000-w/manifest.json").exists());

    // Once they are done, they go too, and _staging with them.
    drop(extend);
    drop(part);
    drop(job_lock);
    Dataset::gc(&dir, &GcOptions::default()).unwrap();
    assert!(!staging.exists());
    assert_eq!(Dataset::open(&dir).unwrap().len(), 3);
}

#[test]
fn gc_refuses_while_a_writer_holds_the_dataset_and_outside_a_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let mut dataset = create(&dir, 3);
    fs::write(dir.join("000099.bin"), b"x").unwrap();
    let extend = dataset.begin_extend().unwrap();
    let err = Dataset::gc(&dir, &GcOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err:?}");
    drop(extend);
    // The extend removed nothing of that leftover's kind (shard files are
    // overwritten, not removed); gc does.
    assert_eq!(
        Dataset::gc(&dir, &GcOptions::default()).unwrap().files,
        [dir.join("000099.bin")]
    );
    let err = Dataset::gc(tmp.path(), &GcOptions::default()).unwrap_err();
    assert!(matches!(err, Error::NotADataset { .. }), "{err:?}");
}

/// A part whose claim a task attempt holds (FORMAT.md, "Staging": the attempt
/// may not have made the part's own lock yet) is kept with its job; once the
/// claim is let go, the job goes.
#[test]
fn a_job_with_a_part_claim_held_is_kept_until_it_is_let_go() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    drop(create(&dir, 3));
    let job = dir.join(bcd::format::STAGING_DIR).join("job");
    let part = job.join("000000-attempt");
    fs::create_dir_all(&part).unwrap();
    touch(&part.join("000000.bin"), b"partial", Duration::ZERO);
    let claim_path = job.join(format!("000000-attempt{}", bcd::format::PART_CLAIM_SUFFIX));
    let claim = File::create(&claim_path).unwrap();
    claim.lock().unwrap();

    let report = Dataset::gc(&dir, &GcOptions::default()).unwrap();
    assert!(report.files.is_empty(), "{:?}", report.files);
    assert_eq!(report.kept_jobs, vec![job.clone()]);
    assert!(part.join("000000.bin").exists());

    drop(claim);
    let report = Dataset::gc(&dir, &GcOptions::default()).unwrap();
    assert!(report.files.contains(&claim_path), "{:?}", report.files);
    assert!(report.files.contains(&part.join("000000.bin")));
    assert!(!dir.join(bcd::format::STAGING_DIR).exists());
}
