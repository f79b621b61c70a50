//! `bcd export --sample N --balance-by FIELD` (issue 21): the classes of a stored
//! field, an equal count from each where the classes allow it (a class smaller
//! than its share gives all its records, the rest is spread over the others), in
//! record order, the same records for the same seed, to a new dataset or to tar;
//! and the errors for a field that is missing or has no classes.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

mod common;
use common::*;

/// An ImageFolder tree of 30 cats, 12 dogs and 3 owls, ingested with
/// `--labels folder` into `dir/ds` (small shards: the field spans many).
fn zoo(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    for (class, count) in [("cat", 30), ("dog", 12), ("owl", 3)] {
        std::fs::create_dir_all(tree.join(class)).unwrap();
        for i in 0..count {
            let value = format!("{class} picture {i} ").repeat(5 + i);
            std::fs::write(tree.join(format!("{class}/{i:02}.jpg")), value).unwrap();
        }
    }
    let ds = dir.join("ds");
    ok(&[
        "ingest",
        s(&tree),
        "--into",
        s(&ds),
        "--labels",
        "folder",
        "--max-shard-size",
        "2K",
        "--quiet",
    ]);
    ds
}

/// `bcd ls --fields` of a dataset: each record's fields.
fn field_rows(dataset: &Path) -> Vec<serde_json::Value> {
    String::from_utf8(ok(&["ls", s(dataset), "--fields"]))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The member names of a tar archive, in order.
fn member_names(archive: &Path) -> Vec<String> {
    let mut tar = tar::Archive::new(std::fs::File::open(archive).unwrap());
    tar.entries()
        .unwrap()
        .map(|entry| {
            let mut entry = entry.unwrap();
            let name = String::from_utf8(entry.path_bytes().into_owned()).unwrap();
            entry.read_to_end(&mut Vec::new()).unwrap();
            name
        })
        .collect()
}

/// Records per class (the folder of each key).
fn per_class<'a>(keys: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for key in keys {
        let class = key.split('/').next().unwrap().to_owned();
        *counts.entry(class).or_insert(0) += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|&(c, n)| (c.to_owned(), n)).collect()
}

/// The keys `export --sample count --seed seed --balance-by field` writes to tar.
fn balanced_keys(dir: &Path, ds: &Path, count: usize, seed: u64, field: &str) -> Vec<String> {
    let archive = dir.join(format!("{field}-{count}-{seed}.tar"));
    let (count, seed) = (count.to_string(), seed.to_string());
    ok(&[
        "export",
        s(ds),
        "--to",
        s(&archive),
        "--sample",
        &count,
        "--seed",
        &seed,
        "--balance-by",
        field,
    ]);
    member_names(&archive)
}

#[test]
fn balance_by_takes_an_equal_count_per_class_where_the_classes_allow() {
    let dir = tempfile::tempdir().unwrap();
    let ds = zoo(dir.path());
    // Room for 3 of each: equal counts.
    let keys = balanced_keys(dir.path(), &ds, 9, 0, "label");
    assert_eq!(
        per_class(keys.iter().map(String::as_str)),
        counts(&[("cat", 3), ("dog", 3), ("owl", 3)])
    );
    // The owls have 3: they give all, and the other 18 are spread, 9 and 9.
    let keys = balanced_keys(dir.path(), &ds, 21, 0, "label");
    assert_eq!(
        per_class(keys.iter().map(String::as_str)),
        counts(&[("cat", 9), ("dog", 9), ("owl", 3)])
    );
    // The dogs have 12: past 3 + 12 + 12 the cats take the rest.
    let keys = balanced_keys(dir.path(), &ds, 40, 0, "label");
    assert_eq!(
        per_class(keys.iter().map(String::as_str)),
        counts(&[("cat", 25), ("dog", 12), ("owl", 3)])
    );
    // In record order, no repeats.
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted);
    // An odd remainder: one class the seed picks gets the extra record.
    let keys = balanced_keys(dir.path(), &ds, 22, 0, "label");
    let got = per_class(keys.iter().map(String::as_str));
    assert!(
        got == counts(&[("cat", 10), ("dog", 9), ("owl", 3)])
            || got == counts(&[("cat", 9), ("dog", 10), ("owl", 3)]),
        "{got:?}"
    );
}

#[test]
fn balance_by_picks_the_same_records_for_the_same_seed_as_the_library_does() {
    let dir = tempfile::tempdir().unwrap();
    let ds = zoo(dir.path());
    let rows = field_rows(&ds);
    let keys: Vec<String> = String::from_utf8(ok(&["ls", s(&ds)]))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(keys.len(), 45);
    // The classes, numbered by first appearance in record order: the codes
    // every front end uses (bcd_fields::CategoryCodes).
    let mut seen: Vec<&str> = Vec::new();
    let codes: Vec<u32> = rows
        .iter()
        .map(|row| {
            let label = row["label"].as_str().unwrap();
            if !seen.contains(&label) {
                seen.push(label);
            }
            seen.iter().position(|&l| l == label).unwrap() as u32
        })
        .collect();
    for seed in [0, 1, 7] {
        let expected: Vec<String> = bcd_sampling::balanced_subset(&codes, 22, seed)
            .unwrap()
            .into_iter()
            .map(|record| keys[record as usize].clone())
            .collect();
        let got = balanced_keys(dir.path(), &ds, 22, seed, "label");
        assert_eq!(got, expected, "seed {seed}");
        assert_eq!(
            balanced_keys(dir.path(), &ds, 22, seed, "label_index"),
            expected,
            "seed {seed}: the class indices are the same classes"
        );
    }
    let differ = (1..8).any(|seed| {
        balanced_keys(dir.path(), &ds, 22, seed, "label")
            != balanced_keys(dir.path(), &ds, 22, 0, "label")
    });
    assert!(differ, "another seed, another subset");
}

#[test]
fn balance_by_into_a_new_dataset_copies_the_balanced_records_with_their_fields() {
    let dir = tempfile::tempdir().unwrap();
    let ds = zoo(dir.path());
    let ev = dir.path().join("ev");
    ok(&[
        "export",
        s(&ds),
        "--into",
        s(&ev),
        "--sample",
        "21",
        "--seed",
        "3",
        "--balance-by",
        "label",
    ]);
    let tar_keys = balanced_keys(dir.path(), &ds, 21, 3, "label");
    let rows = field_rows(&ev);
    let labels = rows.iter().map(|row| row["label"].as_str().unwrap());
    let mut by_label = BTreeMap::new();
    for label in labels {
        *by_label.entry(label.to_owned()).or_insert(0) += 1;
    }
    assert_eq!(by_label, counts(&[("cat", 9), ("dog", 9), ("owl", 3)]));
    // The same records as the tar export of the same seed, each with its label.
    let keys: Vec<String> = String::from_utf8(ok(&["ls", s(&ev)]))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(keys, tar_keys);
    for (key, row) in keys.iter().zip(&rows) {
        assert!(
            key.starts_with(row["label"].as_str().unwrap()),
            "{key}: {row}"
        );
    }
    ok(&["verify", s(&ev)]);
}

#[test]
fn a_field_that_is_missing_or_has_no_classes_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let ds = zoo(dir.path());
    let target = dir.path().join("ev");
    let archive = dir.path().join("ev.tar");
    let balance = |field: &str, into: bool| {
        let out = if into { "--into" } else { "--to" };
        let path = if into { s(&target) } else { s(&archive) };
        let message = fails(&[
            "export",
            s(&ds),
            out,
            path,
            "--sample",
            "5",
            "--balance-by",
            field,
        ]);
        assert!(!target.exists() && !archive.exists(), "{field}: {message}");
        message
    };
    for into in [true, false] {
        let message = balance("species", into);
        assert!(
            message.contains(&format!(
                "{} has no field \"species\" for --balance-by (its fields: label, label_index)",
                ds.display()
            )),
            "{message}"
        );
    }
    // A float field (a CSV column of scores) has no classes.
    for name in ["a", "b", "c"] {
        std::fs::write(dir.path().join(name), name).unwrap();
    }
    let csv = dir.path().join("scores.csv");
    std::fs::write(&csv, "path,score\na,0.5\nb,1.5\nc,0.5\n").unwrap();
    let scored = dir.path().join("scored");
    ok(&["ingest", s(&csv), "--into", s(&scored), "--quiet"]);
    let message = fails(&[
        "export",
        s(&scored),
        "--into",
        s(&target),
        "--sample",
        "2",
        "--balance-by",
        "score",
    ]);
    assert!(
        message.contains(&format!(
            "field \"score\" of {} has type Float64, which has no categories",
            scored.display()
        )),
        "{message}"
    );
    assert!(!target.exists());
}
