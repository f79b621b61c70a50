//! `labels: Folder`: a directory tree's class folders numbered as torchvision's
//! `ImageFolder` numbers them. torchvision itself is not installed (it needs
//! torch); its `find_classes` and `make_dataset` (torchvision 0.20,
//! `torchvision/datasets/folder.py`) are copied below and run on the same tree, and
//! every record's `label` and `label_index` must be what they give the file.

use std::fs;
use std::path::Path;
use std::process::Command;

use bcd_converters::dir_source::{DirOptions, DirSource, LabelMode};
use bcd_converters::{FieldValue, Source};
use bcd_test_support::venv_python;
use serde_json::{json, Value};

/// torchvision's functions, as they are (less the extension checks: every file is
/// valid, as for a source without `include`), on the tree at argv[1]; prints the
/// classes and each file's (relative path, class index).
const TORCHVISION: &str = r#"
import json, os, sys

def find_classes(directory):
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    class_to_idx = {cls_name: i for i, cls_name in enumerate(classes)}
    return classes, class_to_idx

def make_dataset(directory, class_to_idx, allow_empty=False):
    directory = os.path.expanduser(directory)
    instances = []
    available_classes = set()
    for target_class in sorted(class_to_idx.keys()):
        class_index = class_to_idx[target_class]
        target_dir = os.path.join(directory, target_class)
        if not os.path.isdir(target_dir):
            continue
        for root, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                item = path, class_index
                instances.append(item)
                if target_class not in available_classes:
                    available_classes.add(target_class)
    empty_classes = set(class_to_idx.keys()) - available_classes
    if empty_classes and not allow_empty:
        raise FileNotFoundError(f"Found no valid file for the classes {', '.join(sorted(empty_classes))}. ")
    return instances

root = sys.argv[1]
classes, class_to_idx = find_classes(root)
try:
    make_dataset(root, class_to_idx)
    default_refuses = None
except FileNotFoundError as e:
    default_refuses = str(e)
samples = make_dataset(root, class_to_idx, allow_empty=True)
print(json.dumps({
    "classes": classes,
    "samples": sorted([os.path.relpath(p, root), i] for p, i in samples),
    "default_refuses": default_refuses,
}))
"#;

fn torchvision(root: &Path) -> Value {
    let out = Command::new(venv_python())
        .arg("-c")
        .arg(TORCHVISION)
        .arg(root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn write(root: &Path, path: &str) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, path.to_string_lossy().as_bytes()).unwrap();
}

/// A tree whose class names sort differently by byte, by UTF-16 unit and by
/// case-folding, with a hidden class, an empty one, nested folders, a symbolic link
/// to a class folder and files directly under the root.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for path in [
        "cat/1.jpg",
        "cat/2.jpg",
        "Dog/a.png",
        "Dog/deeper/still/b.png",
        ".hidden/x.jpg",
        "10/ten.jpg",
        "9/nine.jpg",
        "\u{e4}pfel/a.jpg",
        "\u{ff5e}wide/w.jpg",
        "\u{1f600}smile/s.jpg",
        "with space/s.txt",
        "README.txt",
        ".DS_Store",
    ] {
        write(root, path);
    }
    fs::create_dir(root.join("empty")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(root.join("cat"), root.join("link-to-cat")).unwrap();
    }
    dir
}

/// (key, label, label_index) of every record, the skipped counts and metadata.
fn labels(root: &Path, options: &DirOptions) -> (Vec<Value>, Vec<(String, u64)>, Value) {
    let mut source = DirSource::new(root, options).unwrap();
    let mut records = Vec::new();
    for record in source.by_ref() {
        let record = record.unwrap();
        let names: Vec<&str> = record.fields.iter().map(|(n, _)| &**n).collect();
        assert_eq!(names, ["label", "label_index"]);
        let (Some(FieldValue::String(label)), Some(FieldValue::Int64(index))) =
            (record.fields.get("label"), record.fields.get("label_index"))
        else {
            panic!("{:?}", record.fields)
        };
        let key = String::from_utf8(record.key).unwrap();
        assert_eq!(key.split('/').next(), Some(label.as_str()));
        records.push(json!([key, label, index]));
    }
    records.sort_by_key(|r| r.to_string());
    let skipped = source
        .skipped()
        .0
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
    (records, skipped, Value::Object(source.metadata()))
}

fn folder_labels() -> DirOptions {
    DirOptions {
        labels: Some(LabelMode::Folder),
        follow_links: true,
        ..DirOptions::default()
    }
}

#[test]
fn class_indices_are_imagefolders() {
    let dir = tree();
    let reference = torchvision(dir.path());
    let (records, skipped, metadata) = labels(dir.path(), &folder_labels());
    let classes = reference["classes"].as_array().unwrap();
    assert_eq!(metadata, json!({ "class_names": classes }));
    // Code point order: upper case, digits as text, a hidden folder, then U+FF5E
    // before U+1F600 (UTF-16 order would put the emoji first).
    assert_eq!(
        classes
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect::<Vec<_>>(),
        [
            ".hidden",
            "10",
            "9",
            "Dog",
            "cat",
            "empty",
            "link-to-cat",
            "with space",
            "\u{e4}pfel",
            "\u{ff5e}wide",
            "\u{1f600}smile"
        ]
    );
    let want: Vec<Value> = {
        let mut want: Vec<Value> = reference["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let (path, index) = (s[0].as_str().unwrap(), s[1].as_i64().unwrap());
                json!([path, classes[index as usize], index])
            })
            .collect();
        want.sort_by_key(|r| r.to_string());
        want
    };
    assert_eq!(records, want);
    // The two files directly under the root are in no class; torchvision's
    // default refuses the empty class, which keeps its index here.
    assert_eq!(skipped, [("not in a class folder".to_owned(), 2)]);
    assert!(
        reference["default_refuses"]
            .as_str()
            .unwrap()
            .contains("empty"),
        "{reference}"
    );
}

#[test]
fn filters_and_unfollowed_links_leave_the_indices_alone() {
    let dir = tree();
    let (all, _, all_metadata) = labels(dir.path(), &folder_labels());
    let index_of = |key: &str| {
        all.iter()
            .find(|r| r[0] == key)
            .map(|r| r[2].clone())
            .unwrap()
    };
    // Only .jpg files, no links followed: fewer records, the same numbers, the same
    // class list (the link to cat is still a class, its files are skipped).
    let options = DirOptions {
        labels: Some(LabelMode::Folder),
        include: vec!["*.jpg".into()],
        exclude: vec!["README.txt".into(), "9/**".into()],
        ..DirOptions::default()
    };
    // A dangling link is no class (and, links not followed, only skipped).
    #[cfg(unix)]
    std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("dangling")).unwrap();
    let (records, skipped, metadata) = labels(dir.path(), &options);
    assert_eq!(metadata, all_metadata);
    let keys: Vec<&str> = records.iter().map(|r| r[0].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            ".hidden/x.jpg",
            "10/ten.jpg",
            "cat/1.jpg",
            "cat/2.jpg",
            "\u{e4}pfel/a.jpg",
            "\u{ff5e}wide/w.jpg",
            "\u{1f600}smile/s.jpg"
        ]
    );
    for record in &records {
        assert_eq!(record[2], index_of(record[0].as_str().unwrap()), "{record}");
    }
    // Neither README.txt (excluded) nor .DS_Store and the links (not included) are
    // counted.
    assert!(skipped.is_empty(), "{skipped:?}");
    // Unfiltered, the two links at the top (to cat, dangling) are skipped as links,
    // the two files there as in no class.
    let options = DirOptions {
        labels: Some(LabelMode::Folder),
        ..DirOptions::default()
    };
    let (records, skipped, metadata) = labels(dir.path(), &options);
    assert_eq!(metadata, all_metadata);
    assert_eq!(records.len() + 2, all.len());
    #[cfg(unix)]
    assert_eq!(
        skipped,
        [
            ("not in a class folder".to_owned(), 2),
            ("symlink".to_owned(), 2)
        ]
    );
}

#[test]
fn the_dataset_being_written_is_no_class_and_a_root_without_folders_is_an_error() {
    let dir = tree();
    let mut options = folder_labels();
    options.skip_dirs = vec![dir.path().join("empty")];
    let (_, _, metadata) = labels(dir.path(), &options);
    let names = metadata["class_names"].as_array().unwrap();
    assert!(!names.contains(&json!("empty")), "{metadata}");
    assert_eq!(names.len(), 10);

    let flat = tempfile::tempdir().unwrap();
    write(flat.path(), "a.jpg");
    let error = DirSource::new(flat.path(), &folder_labels())
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("no class folder"), "{error}");
    // Without labels the same tree is fine.
    assert_eq!(
        DirSource::new(flat.path(), &DirOptions::default())
            .unwrap()
            .count(),
        1
    );
}

#[cfg(unix)]
#[test]
fn a_class_folder_name_that_is_not_utf8_is_an_error_naming_it() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9");
    fs::create_dir(dir.path().join(name)).unwrap();
    fs::write(dir.path().join(name).join("1.jpg"), b"x").unwrap();
    let error = DirSource::new(dir.path(), &folder_labels())
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("class folder \"caf\u{fffd}\"") && error.contains("not valid UTF-8"),
        "{error}"
    );
}
