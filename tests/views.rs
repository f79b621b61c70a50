//! Views in the store (FORMAT.md, "Views"): a view reads back as written, holds
//! through appends and merges, and is refused, naming its file, when the
//! dataset it is read with is not the one it was evaluated over (fewer records,
//! or rewritten underneath); gc and remove_empty know its files.

use std::fs;
use std::path::Path;

use bcd::{CreateOptions, Dataset, Error, GcOptions, MergeOptions, PartSource, View, ViewRecords};

fn create(dir: &Path, tag: &str, records: usize) -> Dataset {
    let options = CreateOptions {
        keyed: true,
        max_shard_size: 200,
        ..Default::default()
    };
    let mut dataset = Dataset::create(dir, options).unwrap();
    dataset
        .extend((0..records).map(|i| (format!("{tag}{i}").into_bytes(), vec![i as u8; 40])))
        .unwrap();
    dataset
}

fn view(dataset: &Dataset, indices: &[u64]) -> View {
    let binding = dataset.view_binding().unwrap();
    let mut list = ViewRecords::new(binding.records);
    for &i in indices {
        list.push(i).unwrap();
    }
    View {
        expression: Some("size > 0".into()),
        binding,
        indices: list.finish(),
    }
}

fn indices(dataset: &Dataset, name: &str) -> Vec<u64> {
    dataset.view(name).unwrap().indices.iter().collect()
}

#[test]
fn a_view_reads_back_and_survives_appends_and_merges() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let mut dataset = create(&dir, "a", 30);
    assert!(dataset.shards() > 2);
    dataset
        .write_view("odd", &view(&dataset, &[1, 3, 29]), false)
        .unwrap();
    let file = fs::read(dir.join("view.odd")).unwrap();
    assert_eq!(
        file.len(),
        96 + 8 + 3 * 4,
        "96-byte header, expression padded to 8, 4 bytes a record"
    );
    assert_eq!(dataset.view_names().unwrap(), ["odd"]);
    let read = dataset.view("odd").unwrap();
    assert_eq!(read.expression.as_deref(), Some("size > 0"));
    assert_eq!(
        (read.binding.records, read.binding.shards),
        (30, dataset.shards())
    );

    // Appended records: still valid, not in it.
    dataset
        .extend((0..10).map(|i| (format!("b{i}").into_bytes(), vec![1u8; 40])))
        .unwrap();
    let reopened = Dataset::open(&dir).unwrap();
    assert_eq!(indices(&reopened, "odd"), [1, 3, 29]);

    // A merge appends parts: the target's views stay valid.
    let part = tmp.path().join("part");
    drop(create(&part, "p", 12));
    let mut target = Dataset::open(&dir).unwrap();
    target
        .merge(&[PartSource::new(&part)], &MergeOptions::default())
        .unwrap();
    assert_eq!(target.len(), 52);
    assert_eq!(indices(&Dataset::open(&dir).unwrap(), "odd"), [1, 3, 29]);

    // Without `replace`, a name is taken once; with it, replaced whole.
    let dataset = Dataset::open(&dir).unwrap();
    let taken = dataset
        .write_view("odd", &view(&dataset, &[0]), false)
        .unwrap_err();
    assert!(matches!(taken, Error::ViewExists { .. }), "{taken}");
    dataset
        .write_view("odd", &view(&dataset, &[0, 51]), true)
        .unwrap();
    assert_eq!(indices(&dataset, "odd"), [0, 51]);
    dataset.drop_view("odd").unwrap();
    assert!(matches!(dataset.view("odd"), Err(Error::NoSuchView { .. })));
    assert!(matches!(
        dataset.drop_view("odd"),
        Err(Error::NoSuchView { .. })
    ));
    assert!(matches!(
        dataset.view("../x"),
        Err(Error::InvalidViewName { .. })
    ));
}

/// A view of another state than the dataset's is refused, never read as other
/// records: the dataset rewritten underneath with the same number of records,
/// or with fewer.
#[test]
fn a_view_of_a_dataset_rewritten_underneath_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let dataset = create(&dir, "a", 30);
    dataset
        .write_view("v", &view(&dataset, &[2, 5]), false)
        .unwrap();
    let kept = fs::read(dir.join("view.v")).unwrap();
    drop(dataset);

    for (tag, records) in [("other", 30), ("a", 20), ("a", 31)] {
        fs::remove_dir_all(&dir).unwrap();
        drop(create(&dir, tag, records));
        fs::write(dir.join("view.v"), &kept).unwrap();
        let dataset = Dataset::open(&dir).unwrap();
        let error = dataset.view("v").unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, Error::StaleView { .. }), "{message}");
        assert!(
            message.contains("view.v") && message.contains("does not belong"),
            "{message}"
        );
        // Listed as unreadable, never dropped by a read.
        assert_eq!(dataset.view_names().unwrap(), ["v"]);
    }
}

#[test]
fn a_damaged_view_is_refused_naming_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let dataset = create(&dir, "a", 10);
    dataset
        .write_view("v", &view(&dataset, &[2, 5]), false)
        .unwrap();
    let path = dir.join("view.v");
    let mut bytes = fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&path, &bytes).unwrap();
    let message = dataset.view("v").unwrap_err().to_string();
    assert!(
        message.contains("view.v") && message.contains("checksum"),
        "{message}"
    );
    // Larger than any view of this dataset: refused before it is mapped.
    fs::write(&path, vec![0u8; 96 + 65536 + 8 * 10 + 1]).unwrap();
    let message = dataset.view("v").unwrap_err().to_string();
    assert!(message.contains("more than any view"), "{message}");
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_view_is_refused_without_blocking() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let dataset = create(&dir, "a", 3);
    let path = dir.join("view.v");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let message = bcd::error_chain(&dataset.view("v").unwrap_err());
    assert!(
        message.contains("view.v") && message.contains("FIFO"),
        "{message}"
    );
}

#[test]
fn gc_keeps_views_and_removes_their_temporaries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let dataset = create(&dir, "a", 10);
    dataset
        .write_view("v", &view(&dataset, &[1]), false)
        .unwrap();
    let leftover = dir.join(".view.v.tmp-1-2");
    fs::write(&leftover, b"half").unwrap();
    assert_eq!(
        dataset.uncommitted_files().unwrap(),
        std::slice::from_ref(&leftover)
    );
    drop(dataset);
    let report = Dataset::gc(&dir, &GcOptions::default()).unwrap();
    assert_eq!(report.files, [leftover]);
    assert_eq!(indices(&Dataset::open(&dir).unwrap(), "v"), [1]);
}

#[test]
fn an_empty_dataset_removed_takes_its_views() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let dataset = Dataset::create(&dir, CreateOptions::default()).unwrap();
    dataset
        .write_view("none", &view(&dataset, &[]), false)
        .unwrap();
    assert_eq!(dataset.view("none").unwrap().indices.len(), 0);
    dataset.remove_empty(true).unwrap();
    assert!(!dir.exists());
}
