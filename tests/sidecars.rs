//! Files beside the shards (sidecars and commit files): written with an extend,
//! committed with it or removed with it, tied to their shard by its fingerprint,
//! and cleaned up when a crashed writer left them.

use std::fs;

use bcd::{CreateOptions, Dataset, ShardFingerprint};

fn create(dir: &std::path::Path) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        max_shard_size: 64,
        ..Default::default()
    };
    Dataset::create(dir, options).unwrap()
}

fn records(n: usize, tag: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("{tag}{i:03}").into_bytes(),
                vec![i as u8; 10 + i % 7],
            )
        })
        .collect()
}

#[test]
fn sidecars_and_commit_file_are_committed_with_their_shards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    let mut extend = dataset.begin_extend().unwrap();
    let mut written = Vec::new();
    for chunk in records(20, "k").chunks(3) {
        extend.push_batch(chunk).unwrap();
        written.extend(extend.take_finished_shards());
    }
    written.extend(extend.close_shard().unwrap());
    assert!(written.len() > 2, "{written:?}");
    for shard in &written {
        let text = format!(
            "shard {} has {} records",
            shard.id, shard.fingerprint.records
        );
        extend
            .write_sidecar(shard.id, "note.txt", text.as_bytes())
            .unwrap();
    }
    extend.set_commit_file(b"{\"state\": 1}".to_vec());
    extend.commit().unwrap();

    let dataset = Dataset::open(&path).unwrap();
    assert_eq!(dataset.shards(), written.len() as u64);
    let mut total = 0;
    for shard in &written {
        // The fingerprint computed while writing is the one of the files.
        assert_eq!(
            dataset.shard_fingerprint(shard.id).unwrap(),
            shard.fingerprint
        );
        assert_eq!(dataset.shard_records(shard.id), shard.fingerprint.records);
        assert_eq!(dataset.shard_first_record(shard.id), total);
        total += shard.fingerprint.records;
        let note = dataset.map_sidecar(shard.id, "note.txt").unwrap().unwrap();
        assert!(std::str::from_utf8(&note)
            .unwrap()
            .starts_with(&format!("shard {}", shard.id)));
        // And it is the definition's, from the bytes.
        let (bin, idx) = (
            fs::read(path.join(format!("{:06}.bin", shard.id))).unwrap(),
            fs::read(path.join(format!("{:06}.idx", shard.id))).unwrap(),
        );
        assert_eq!(
            ShardFingerprint::of(shard.fingerprint.records, &bin, &idx),
            shard.fingerprint
        );
    }
    assert_eq!(total, 20);
    assert_eq!(dataset.commit_files().unwrap(), vec![dataset.shards()]);
    assert_eq!(
        dataset
            .read_commit_file(dataset.shards(), 100)
            .unwrap()
            .unwrap(),
        b"{\"state\": 1}"
    );
    assert!(dataset.read_commit_file(dataset.shards(), 5).is_err());
    assert_eq!(dataset.read_commit_file(0, 100).unwrap(), None);
    assert_eq!(
        dataset.map_sidecar(0, "other").unwrap().map(|d| d.len()),
        None
    );
    assert!(dataset.uncommitted_files().unwrap().is_empty());
}

#[test]
fn an_extend_not_committed_removes_its_sidecars() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    dataset.extend(records(4, "a")).unwrap();
    let before = bcd_test_support::snapshot(&path);
    {
        let mut extend = dataset.begin_extend().unwrap();
        extend.push_batch(&records(10, "b")).unwrap();
        for shard in extend.close_shard().unwrap() {
            extend.write_sidecar(shard.id, "stats.json", b"{}").unwrap();
        }
        extend.set_commit_file(b"{}".to_vec());
        // Not a shard this extend wrote.
        assert!(extend.write_sidecar(0, "stats.json", b"{}").is_err());
        assert!(extend.write_sidecar(99, "stats.json", b"{}").is_err());
        // Not a sidecar name.
        assert!(extend.write_sidecar(1, "bin", b"{}").is_err());
        assert!(extend.write_sidecar(1, "../x", b"{}").is_err());
    }
    assert_eq!(bcd_test_support::snapshot(&path), before);
}

#[test]
fn stale_files_of_a_crashed_writer_are_reported_and_removed_by_the_next_extend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    dataset.extend(records(3, "a")).unwrap();
    let shards = dataset.shards();
    let stale = [
        format!("{shards:06}.fields.arrow"),
        format!("{:06}.stats.json", shards + 3),
        format!("commit.{:06}.json", shards + 1),
        format!(".commit.{shards:06}.json.tmp"),
    ];
    for name in &stale {
        fs::write(path.join(name), b"left by a crashed writer").unwrap();
    }
    // Sidecars of committed shards and commit files up to the state are not stale.
    let kept = [
        format!("{:06}.stats.json", shards - 1),
        format!("commit.{shards:06}.json"),
    ];
    for name in &kept {
        fs::write(path.join(name), b"{}").unwrap();
    }
    let dataset = Dataset::open(&path).unwrap();
    let mut reported: Vec<String> = dataset
        .uncommitted_files()
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    reported.sort();
    let mut expected = stale.to_vec();
    expected.sort();
    assert_eq!(reported, expected);
    assert_eq!(dataset.commit_files().unwrap(), vec![shards]);

    let mut dataset = dataset;
    dataset.extend(records(2, "b")).unwrap();
    for name in &stale {
        assert!(!path.join(name).exists(), "{name} was left");
    }
    for name in &kept {
        assert!(path.join(name).exists(), "{name} was removed");
    }
}

#[test]
fn a_metadata_only_commit_replaces_the_commit_file_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    let mut extend = dataset.begin_extend().unwrap();
    extend.set_commit_file(b"one".to_vec());
    assert_eq!(extend.commit().unwrap().records, 0);
    assert_eq!(dataset.read_commit_file(0, 10).unwrap().unwrap(), b"one");
    let mut extend = dataset.begin_extend().unwrap();
    extend.set_commit_file(b"two".to_vec());
    extend.commit().unwrap();
    assert_eq!(dataset.read_commit_file(0, 10).unwrap().unwrap(), b"two");
    assert!(dataset.uncommitted_files().unwrap().is_empty());
    // The commit file of an empty dataset goes with it.
    dataset.remove_empty(true).unwrap();
    assert!(!path.exists());
}

#[test]
fn a_sidecar_that_is_not_a_regular_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    dataset.extend(records(1, "a")).unwrap();
    fs::create_dir(path.join("000000.fields.arrow")).unwrap();
    let error = dataset
        .map_sidecar(0, "fields.arrow")
        .unwrap_err()
        .to_string();
    assert!(error.contains("000000.fields.arrow"), "{error}");
}

#[test]
fn a_sidecar_kept_open_is_written_while_its_shard_is_and_committed_once_finished() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    let mut extend = dataset.begin_extend().unwrap();
    let mut opened = Vec::new();
    for chunk in records(20, "k").chunks(2) {
        extend.push_batch(chunk).unwrap();
        // A line per push into the open shard's sidecar, from its first push.
        let shard = extend.open_shard().unwrap();
        if !opened.contains(&shard) {
            extend.open_sidecar(shard, "log.txt").unwrap();
            opened.push(shard);
        }
        let mut out = extend.open_sidecar_writer(shard, "log.txt").unwrap();
        writeln!(out, "{} records", chunk.len()).unwrap();
        for finished in extend.take_finished_shards() {
            if finished.id != shard {
                extend.finish_sidecar(finished.id, "log.txt").unwrap();
            }
        }
    }
    // Open twice is refused.
    let last = *opened.last().unwrap();
    assert!(extend.open_sidecar(last, "log.txt").is_err());
    for finished in extend.close_shard().unwrap() {
        extend.finish_sidecar(finished.id, "log.txt").unwrap();
    }
    assert!(opened.len() > 2, "{opened:?}");
    extend.commit().unwrap();
    let dataset = Dataset::open(&path).unwrap();
    let lines: usize = opened
        .iter()
        .map(|&s| {
            let text = fs::read_to_string(dataset.sidecar_path(s, "log.txt")).unwrap();
            text.lines().map(|l| assert_eq!(l, "2 records")).count()
        })
        .sum();
    assert!(lines >= 10, "{lines}");
}

#[test]
fn a_sidecar_left_open_fails_the_commit_and_a_taken_one_is_removed() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d");
    let mut dataset = create(&path);
    let files = |path: &std::path::Path| {
        let mut names: Vec<_> = (fs::read_dir(path).unwrap())
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != ".bcd.lock")
            .collect();
        names.sort();
        names
    };
    let before = files(&path);
    let mut extend = dataset.begin_extend().unwrap();
    extend.push_batch(&records(2, "k")).unwrap();
    let shard = extend.open_shard().unwrap();
    extend.open_sidecar(shard, "a.txt").unwrap();
    extend.open_sidecar(shard, "b.txt").unwrap();
    write!(extend.open_sidecar_writer(shard, "a.txt").unwrap(), "kept").unwrap();
    write!(extend.open_sidecar_writer(shard, "b.txt").unwrap(), "taken").unwrap();
    // What was written, mapped, and the file gone.
    let taken = extend.take_sidecar(shard, "b.txt").unwrap();
    assert_eq!(&taken[..], b"taken");
    assert!(!extend.dataset().sidecar_path(shard, "b.txt").exists());
    assert!(extend.open_sidecar_writer(shard, "b.txt").is_err());
    // "a.txt" is still open: nothing is committed, the files are removed.
    let err = extend.commit().unwrap_err().to_string();
    assert!(err.contains("a.txt") && err.contains("unfinished"), "{err}");
    let dataset = Dataset::open(&path).unwrap();
    assert_eq!(dataset.len(), 0);
    assert_eq!(files(&path), before);
}
