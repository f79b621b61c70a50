//! `Dataset::merge`: whole datasets appended in one commit, their shards moved
//! (hard links) or copied with their sidecars, keys checked across all of them.
//! Crash and fault tests are in crash_consistency/merge.rs.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bcd::{
    Compression, CreateOptions, Dataset, Error, MergeCommitInput, MergeOnDuplicate, MergeOptions,
    PartSource, ShardFingerprint, SidecarRewrite,
};
use bcd_test_support::sim_storage::{Config, SimStorage};
use bcd_test_support::{read_all, snapshot, Record, INDEX_FILE, INDEX_FILE_ALWAYS};

const SHARD: u64 = 200;

fn options(keyed: bool) -> CreateOptions {
    CreateOptions {
        keyed,
        compression: Compression::Lz4,
        max_shard_size: SHARD,
    }
}

fn records(tag: &str, range: std::ops::Range<usize>) -> Vec<Record> {
    range
        .map(|i| {
            let value = format!("{tag} value {i} ").repeat(1 + i % 4).into_bytes();
            (format!("k{i:04}").into_bytes(), value)
        })
        .collect()
}

/// A keyed dataset in `dir` holding `records`, each shard with a `rows.txt`
/// sidecar listing its keys (so a test can see a sidecar follow its shard).
fn dataset_with_sidecars(dir: &Path, records: &[Record]) -> Dataset {
    let mut dataset = Dataset::create(dir, options(true)).unwrap();
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
        let rows: Vec<String> = records[at..at + n]
            .iter()
            .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
            .collect();
        at += n;
        extend
            .write_sidecar(shard.id, "rows.txt", rows.join("\n").as_bytes())
            .unwrap();
    }
    extend.commit().unwrap();
    dataset
}

fn keyed(dir: &Path, records: &[Record]) -> Dataset {
    let mut dataset = Dataset::create(dir, options(true)).unwrap();
    dataset.extend(records.iter().map(|(k, v)| (k, v))).unwrap();
    dataset
}

fn parts(paths: &[&PathBuf]) -> Vec<PartSource> {
    paths.iter().map(|p| PartSource::new(*p)).collect()
}

fn sidecar(dir: &Path, shard: u64) -> String {
    fs::read_to_string(dir.join(format!("{shard:06}.rows.txt"))).unwrap()
}

#[test]
fn parts_are_appended_in_order_their_shards_moved_by_hard_links_with_their_sidecars() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let old = records("t", 0..30);
    let mut dataset = dataset_with_sidecars(&target, &old);
    let in_a = records("a", 30..70);
    let in_b = records("b", 70..90);
    let part_a = dataset_with_sidecars(&a, &in_a);
    let part_b = dataset_with_sidecars(&b, &in_b);
    let old_shards = dataset.shards();
    // What each part shard is, to find it again in the target.
    let mut expected = Vec::new();
    for part in [&part_a, &part_b] {
        for shard in 0..part.shards() {
            let data = fs::metadata(part.shard_data_path(shard)).unwrap();
            expected.push((
                part.shard_fingerprint(shard).unwrap(),
                sidecar(part.path(), shard),
                (data.dev(), data.ino()),
            ));
        }
    }
    drop((part_a, part_b));

    let summary = dataset
        .merge(&parts(&[&a, &b]), &MergeOptions::default())
        .unwrap();
    assert_eq!(summary.parts, 2);
    assert_eq!(summary.records, 60);
    assert_eq!(summary.skipped, 0);
    assert_eq!(summary.shards, expected.len() as u64);
    assert_eq!(summary.copied_files, 0);
    // .bin, .idx and the sidecar of every shard.
    assert_eq!(summary.linked_files, 3 * expected.len() as u64);
    assert!(summary.parts_not_removed.is_empty(), "{summary:?}");

    let all: Vec<Record> = [old, in_a, in_b].concat();
    assert_eq!(read_all(&dataset), all);
    let reopened = Dataset::open(&target).unwrap();
    assert_eq!(read_all(&reopened), all);
    for (key, value) in &all {
        assert_eq!(reopened.get(key).unwrap().unwrap(), &value[..]);
        assert_eq!(dataset.get(key).unwrap().unwrap(), &value[..]);
    }
    for (i, (fingerprint, rows, inode)) in expected.iter().enumerate() {
        let shard = old_shards + i as u64;
        // The same file (a link), so the same fingerprint, and its sidecar along.
        let data = fs::metadata(reopened.shard_data_path(shard)).unwrap();
        assert_eq!((data.dev(), data.ino()), *inode);
        assert_eq!(reopened.shard_fingerprint(shard).unwrap(), *fingerprint);
        assert_eq!(&sidecar(&target, shard), rows);
    }
    // The parts are gone, directories included.
    assert!(!a.exists() && !b.exists());
    assert!(reopened.uncommitted_files().unwrap().is_empty());
    assert!(reopened.verify().is_empty());
}

#[test]
fn with_copy_the_parts_are_left_as_they_were() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let a = tmp.path().join("a");
    let mut dataset = keyed(&target, &records("t", 0..10));
    drop(dataset_with_sidecars(&a, &records("a", 10..40)));
    // The merge takes the part's lock: with the lock file in place, nothing changes.
    fs::write(a.join(".bcd.lock"), b"").unwrap();
    let before = snapshot(&a);
    let options = MergeOptions {
        copy: true,
        ..MergeOptions::default()
    };
    let summary = dataset.merge(&parts(&[&a]), &options).unwrap();
    assert_eq!(summary.linked_files, 0);
    assert_eq!(summary.copied_files, 3 * summary.shards);
    assert_eq!(snapshot(&a), before);
    let part = Dataset::open(&a).unwrap();
    assert_eq!(read_all(&part), records("a", 10..40));
    let merged = Dataset::open(&target).unwrap();
    assert_eq!(
        read_all(&merged),
        [records("t", 0..10), records("a", 10..40)].concat()
    );
    // Copies, not links.
    let first_new = merged.shards() - summary.shards;
    assert_eq!(
        fs::metadata(merged.shard_data_path(first_new))
            .unwrap()
            .nlink(),
        1
    );
    assert_eq!(sidecar(&target, first_new), sidecar(&a, 0));
}

#[test]
fn where_links_are_impossible_files_are_copied_and_the_parts_still_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let a = tmp.path().join("a");
    keyed(&target, &records("t", 0..10));
    keyed(&a, &records("a", 10..30));
    let storage = SimStorage::new(
        &target,
        Config {
            no_hard_links: true,
            real_sync: true,
            ..Config::pass()
        },
    );
    storage.watch(&a);
    let mut dataset = storage.open(&target);
    let summary = dataset
        .merge(&parts(&[&a]), &MergeOptions::default())
        .unwrap();
    assert_eq!(summary.linked_files, 0);
    assert_eq!(summary.copied_files, 2 * summary.shards);
    assert!(!a.exists());
    assert_eq!(
        read_all(&Dataset::open(&target).unwrap()),
        [records("t", 0..10), records("a", 10..30)].concat()
    );
}

#[test]
fn parts_whose_settings_differ_are_refused_naming_the_part_and_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let mut dataset = keyed(&target, &records("t", 0..10));
    let good = tmp.path().join("good");
    keyed(&good, &records("g", 10..20));
    let keyless = tmp.path().join("keyless");
    Dataset::create(&keyless, options(false))
        .unwrap()
        .extend_values([b"v"])
        .unwrap();
    let raw = tmp.path().join("raw");
    Dataset::create(
        &raw,
        CreateOptions {
            compression: Compression::None,
            ..options(true)
        },
    )
    .unwrap();
    let before = [snapshot(&target), snapshot(&good)];
    for (bad, reason) in [
        (&keyless, "it is keyless, the target keyed"),
        (&raw, "its compression is none, the target's lz4"),
        (&target, "it is the target itself"),
        (&good, "it is named twice"),
    ] {
        let err = dataset
            .merge(&parts(&[&good, bad]), &MergeOptions::default())
            .unwrap_err();
        assert!(matches!(err, Error::MergePart { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains(reason), "{message}");
        assert!(message.contains(&*bad.to_string_lossy()), "{message}");
        assert!(message.contains("nothing was merged"), "{message}");
        let lock = |mut files: BTreeMap<String, Vec<u8>>| {
            files.remove(".bcd.lock");
            files
        };
        assert_eq!(lock(snapshot(&target)), lock(before[0].clone()));
        assert_eq!(lock(snapshot(&good)), lock(before[1].clone()));
    }
    let missing = tmp.path().join("missing");
    let err = dataset
        .merge(&parts(&[&missing]), &MergeOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::NotADataset { .. }), "{err:?}");
    assert_eq!(dataset.len(), 10);
}

#[test]
fn a_part_another_writer_holds_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let a = tmp.path().join("a");
    let mut dataset = keyed(&target, &records("t", 0..5));
    let mut part = keyed(&a, &records("a", 5..10));
    let extend = part.begin_extend().unwrap();
    let err = dataset
        .merge(&parts(&[&a]), &MergeOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err:?}");
    drop(extend);
    // And a merge holds the target's lock: no extend meanwhile (checked by the
    // lock itself); once it is done, the target extends as usual.
    dataset
        .merge(&parts(&[&a]), &MergeOptions::default())
        .unwrap();
    dataset.extend([(b"later", b"x")]).unwrap();
    assert_eq!(Dataset::open(&target).unwrap().len(), 11);
}

#[test]
fn a_duplicate_key_fails_naming_it_and_both_copies_and_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut dataset = keyed(&target, &records("t", 0..20));
    keyed(&a, &records("a", 20..40));
    // Key k0035 is in a's second shard and in b; k0005 is in the target and in b.
    let mut in_b = records("b", 35..36);
    keyed(&b, &in_b);
    let before = [snapshot(&target), snapshot(&a), snapshot(&b)];
    let err = dataset
        .merge(&parts(&[&a, &b]), &MergeOptions::default())
        .unwrap_err();
    let Error::DuplicateKeyInMerge {
        key,
        first,
        first_record,
        second,
        second_record,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(key.0, b"k0035");
    let part_a = Dataset::open(&a).unwrap();
    let at = part_a.position(b"k0035").unwrap().unwrap();
    let location = part_a.value_location(at).unwrap();
    assert_eq!(first, &part_a.shard_data_path(location.shard));
    assert_eq!(
        *first_record,
        at as u64 - part_a.shard_first_record(location.shard)
    );
    assert_eq!(second, &b.join("000000.bin"));
    assert_eq!(*second_record, 0);
    let message = err.to_string();
    assert!(message.contains("\"k0035\""), "{message}");
    assert!(message.contains(&*first.to_string_lossy()), "{message}");
    assert!(message.contains(&*second.to_string_lossy()), "{message}");

    // Against the target's copy.
    in_b.push((b"k0005".to_vec(), b"again".to_vec()));
    in_b.remove(0);
    fs::remove_dir_all(&b).unwrap();
    keyed(&b, &in_b);
    let err = dataset
        .merge(&parts(&[&a, &b]), &MergeOptions::default())
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&*target.join("000000.bin").to_string_lossy()),
        "{message}"
    );
    assert!(message.contains("\"k0005\""), "{message}");

    let unlocked = |dir: &Path| {
        let mut files = snapshot(dir);
        files.remove(".bcd.lock");
        files
    };
    let mut expected = before.clone();
    for files in &mut expected {
        files.remove(".bcd.lock");
    }
    assert_eq!(unlocked(&target), expected[0]);
    assert_eq!(unlocked(&a), expected[1]);
    assert_eq!(read_all(&dataset), records("t", 0..20));
}

/// Records every call, keeps the rows of `rows.txt` that were kept.
#[derive(Default)]
struct KeepRows {
    calls: Mutex<Vec<(String, usize, ShardFingerprint)>>,
}

impl SidecarRewrite for KeepRows {
    fn rewrite(
        &self,
        suffix: &str,
        bytes: &[u8],
        kept_rows: &[bool],
        fingerprint: &ShardFingerprint,
    ) -> Result<Option<Vec<u8>>, bcd::HookError> {
        self.calls
            .lock()
            .unwrap()
            .push((suffix.to_owned(), kept_rows.len(), *fingerprint));
        let text = std::str::from_utf8(bytes)?;
        let rows: Vec<&str> = text
            .split('\n')
            .zip(kept_rows)
            .filter(|(_, &k)| k)
            .map(|(r, _)| r)
            .collect();
        Ok(Some(rows.join("\n").into_bytes()))
    }
}

#[test]
fn with_skip_the_first_copy_wins_and_only_shards_that_lose_a_record_are_rewritten() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut dataset = dataset_with_sidecars(&target, &records("t", 0..10));
    let in_a = records("a", 5..40);
    let part_a = dataset_with_sidecars(&a, &in_a);
    // b repeats two keys of a and one of the target, and adds its own.
    let in_b: Vec<Record> = [
        records("b", 3..4),
        records("b", 12..13),
        records("b", 100..130),
        records("b", 39..40),
    ]
    .concat();
    let part_b = dataset_with_sidecars(&b, &in_b);
    let a_shards = part_a.shards();
    let b_shards = part_b.shards();
    // Which part-a shards hold a key of the target (k0005..k0009).
    let a_losing: Vec<u64> = (5..10)
        .map(|i| {
            let at = part_a
                .position(format!("k{i:04}").as_bytes())
                .unwrap()
                .unwrap();
            part_a.value_location(at).unwrap().shard
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    drop((part_a, part_b));

    let rewrite = KeepRows::default();
    let seen = Arc::new(Mutex::new(None));
    let seen_by_hook = seen.clone();
    let hook = move |input: &MergeCommitInput<'_>| -> Result<Option<Vec<u8>>, bcd::HookError> {
        let parts: Vec<Vec<(u64, u64, u64, bool)>> = input
            .parts
            .iter()
            .map(|p| {
                p.shards
                    .iter()
                    .map(|s| (s.from, s.to, s.records, s.rewritten))
                    .collect()
            })
            .collect();
        *seen_by_hook.lock().unwrap() = Some((input.target.len(), input.shards, parts));
        Ok(Some(b"{\"merged\": true}".to_vec()))
    };
    let options = MergeOptions {
        on_duplicate: MergeOnDuplicate::Skip,
        sidecars: &rewrite,
        commit_file: Some(&hook),
        ..MergeOptions::default()
    };
    let old_shards = dataset.shards();
    let summary = dataset.merge(&parts(&[&a, &b]), &options).unwrap();

    // The target's k0005..k0009 win over a's; a's k0012 and k0039 over b's; the
    // target's k0003 over b's.
    let kept_a: Vec<Record> = in_a
        .iter()
        .filter(|(k, _)| k.as_slice() >= b"k0010")
        .cloned()
        .collect();
    let kept_b = records("b", 100..130);
    let expected = [records("t", 0..10), kept_a, kept_b.clone()].concat();
    assert_eq!(read_all(&dataset), expected);
    assert_eq!(read_all(&Dataset::open(&target).unwrap()), expected);
    assert_eq!(summary.skipped, 5 + 3);
    assert_eq!(summary.records, (expected.len() - 10) as u64);

    // Rewritten: a's shards that held k0005..k0009, and b's first (k0003, k0012)
    // and last (k0039) shards, unless every record of one was dropped.
    let (_, shards, merged) = seen.lock().unwrap().take().unwrap();
    assert_eq!(shards, dataset.shards());
    let rewritten_a: Vec<u64> = merged[0].iter().filter(|s| s.3).map(|s| s.0).collect();
    let dropped_whole_a = a_shards - merged[0].len() as u64;
    assert_eq!(
        rewritten_a.len() as u64 + dropped_whole_a,
        a_losing.len() as u64
    );
    assert!(rewritten_a.iter().all(|s| a_losing.contains(s)));
    let moved_b: Vec<u64> = merged[1].iter().filter(|s| !s.3).map(|s| s.0).collect();
    assert!(!moved_b.contains(&0) && !moved_b.contains(&(b_shards - 1)));
    assert_eq!(
        summary.rewritten_shards,
        merged.iter().flatten().filter(|s| s.3).count() as u64
    );
    // New numbers follow one another from the old count.
    let tos: Vec<u64> = merged.iter().flatten().map(|s| s.1).collect();
    assert_eq!(tos, (old_shards..dataset.shards()).collect::<Vec<_>>());

    // Every sidecar lists exactly its shard's keys: moved ones as they were,
    // rewritten ones through the hook, with the new shard's fingerprint.
    let reopened = Dataset::open(&target).unwrap();
    for shard in old_shards..reopened.shards() {
        let first = reopened.shard_first_record(shard) as usize;
        let keys: Vec<String> = (first..first + reopened.shard_records(shard) as usize)
            .map(|i| String::from_utf8(reopened.key_at(i).unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(sidecar(&target, shard), keys.join("\n"), "shard {shard}");
    }
    let calls = rewrite.calls.lock().unwrap();
    assert_eq!(calls.len() as u64, summary.rewritten_shards);
    for (suffix, _, fingerprint) in calls.iter() {
        assert_eq!(suffix, "rows.txt");
        let shard = (old_shards..reopened.shards())
            .find(|&s| reopened.shard_fingerprint(s).unwrap() == *fingerprint)
            .expect("the fingerprint of a new shard");
        assert!(shard >= old_shards);
    }
    assert_eq!(
        reopened
            .read_commit_file(reopened.shards(), 1000)
            .unwrap()
            .unwrap(),
        b"{\"merged\": true}"
    );
    assert!(reopened.verify().is_empty());
}

#[test]
fn by_default_a_rewritten_shard_keeps_no_sidecar() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let a = tmp.path().join("a");
    let mut dataset = keyed(&target, &records("t", 0..3));
    drop(dataset_with_sidecars(&a, &records("a", 0..12)));
    let options = MergeOptions {
        on_duplicate: MergeOnDuplicate::Skip,
        ..MergeOptions::default()
    };
    let summary = dataset.merge(&parts(&[&a]), &options).unwrap();
    assert_eq!(summary.skipped, 3);
    assert_eq!(summary.rewritten_shards, 1);
    let rewritten = dataset.shards() - summary.shards;
    assert!(!target.join(format!("{rewritten:06}.rows.txt")).exists());
    assert!(target
        .join(format!("{:06}.rows.txt", rewritten + 1))
        .exists());
    assert_eq!(
        read_all(&dataset),
        [records("t", 0..3), records("a", 3..12)].concat()
    );
}

#[test]
fn keys_are_checked_through_persisted_indexes_and_the_target_index_stays_right() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let dataset = keyed(&target, &records("t", 0..200));
    drop(dataset);
    let storage = Arc::new(bcd::storage::FileSystem);
    let mut dataset = Dataset::open_with(&target, INDEX_FILE_ALWAYS, storage.clone()).unwrap();
    assert!(dataset.uses_index_file());
    let mut paths = Vec::new();
    let mut expected = records("t", 0..200);
    for p in 0..4 {
        let path = tmp.path().join(format!("p{p}"));
        let rows = records("p", 200 + p * 100..300 + p * 100 + 5);
        let mut part = Dataset::create(&path, options(true)).unwrap();
        part.extend(rows.iter().map(|(k, v)| (k, v))).unwrap();
        drop(part);
        // Parts 0 and 2 with an index file, 1 and 3 without.
        if p % 2 == 0 {
            let part = Dataset::open_with(&path, INDEX_FILE_ALWAYS, storage.clone()).unwrap();
            assert!(part.uses_index_file());
        }
        // Each part's last 5 keys are the next part's first 5 (skipped).
        let from = if p == 0 { 0 } else { 5 };
        expected.extend_from_slice(&rows[from..]);
        paths.push(path);
    }
    let sources: Vec<PartSource> = paths.iter().map(PartSource::new).collect();
    let err = dataset
        .merge(&sources, &MergeOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::DuplicateKeyInMerge { .. }), "{err}");
    assert!(paths[2].join(INDEX_FILE).exists());
    let options = MergeOptions {
        on_duplicate: MergeOnDuplicate::Skip,
        ..MergeOptions::default()
    };
    let summary = dataset.merge(&sources, &options).unwrap();
    assert_eq!(summary.skipped, 15);
    assert_eq!(read_all(&dataset), expected);
    for (i, (key, _)) in expected.iter().enumerate() {
        assert_eq!(dataset.position(key).unwrap(), Some(i));
    }
    let reopened = Dataset::open_with(&target, INDEX_FILE_ALWAYS, storage).unwrap();
    assert!(reopened.uses_index_file());
    for (i, (key, _)) in expected.iter().enumerate() {
        assert_eq!(reopened.position(key).unwrap(), Some(i));
    }
    assert!(reopened.verify().is_empty());
}

#[test]
fn keyless_parts_are_appended_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let a = tmp.path().join("a");
    let empty = tmp.path().join("empty");
    let values = |n: usize, tag: &str| -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{tag}{i}").repeat(i % 9).into_bytes())
            .collect()
    };
    let mut dataset = Dataset::create(&target, options(false)).unwrap();
    dataset.extend_values(values(10, "t")).unwrap();
    Dataset::create(&a, options(false))
        .unwrap()
        .extend_values(values(10, "t"))
        .unwrap();
    Dataset::create(&empty, options(false)).unwrap();
    let options = MergeOptions {
        on_duplicate: MergeOnDuplicate::Skip,
        ..MergeOptions::default()
    };
    let summary = dataset.merge(&parts(&[&empty, &a]), &options).unwrap();
    assert_eq!((summary.records, summary.skipped), (10, 0));
    let all: Vec<Record> = [values(10, "t"), values(10, "t")]
        .concat()
        .into_iter()
        .map(|v| (Vec::new(), v))
        .collect();
    assert_eq!(read_all(&Dataset::open(&target).unwrap()), all);
    assert!(!a.exists() && !empty.exists());
    // Nothing to merge is a merge of nothing, and commits nothing.
    let manifest = fs::read(target.join("manifest.json")).unwrap();
    assert_eq!(dataset.merge(&[], &options).unwrap().records, 0);
    let empty = tmp.path().join("empty-again");
    Dataset::create(
        &empty,
        CreateOptions {
            keyed: false,
            ..CreateOptions::default()
        },
    )
    .unwrap();
    let summary = dataset.merge(&parts(&[&empty]), &options).unwrap();
    assert_eq!((summary.records, summary.shards), (0, 0));
    assert!(!empty.exists());
    assert_eq!(fs::read(target.join("manifest.json")).unwrap(), manifest);
}

#[test]
fn a_leftover_of_a_killed_writer_is_replaced_and_unknown_files_keep_a_part_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    let a = tmp.path().join("a");
    let mut dataset = keyed(&target, &records("t", 0..5));
    let shards = dataset.shards();
    // Leftovers past the committed count, as a killed writer leaves them.
    fs::write(target.join(format!("{shards:06}.bin")), b"junk").unwrap();
    fs::write(target.join(format!("{shards:06}.rows.txt")), b"junk").unwrap();
    keyed(&a, &records("a", 5..15));
    fs::write(a.join("notes.txt"), b"mine").unwrap();
    dataset
        .merge(&parts(&[&a]), &MergeOptions::default())
        .unwrap();
    assert_eq!(
        read_all(&Dataset::open(&target).unwrap()),
        [records("t", 0..5), records("a", 5..15)].concat()
    );
    assert!(!target.join(format!("{shards:06}.rows.txt")).exists());
    let left: Vec<String> = snapshot(&a).into_keys().collect();
    assert_eq!(left, ["notes.txt"]);
}
