//! The model-based test of issue 20: random sequences of what users do to
//! datasets (ingest labelled trees, append new classes, merge parts, cut copies
//! with `export --into`, push and pull through a local S3 server, gc, and
//! ingests killed at a system call and run again), each checked against a plain
//! model of the records every dataset must hold: keys, values, labels, the
//! meaning of every `label_index` (its class name), indices that never change
//! once given, `bcd verify`, and the Python reference reading every dataset.
//!
//! `make test` runs a few cases with the fixed seed of `.cargo/config.toml`;
//! `make soak-model` runs many with random seeds (tests/README.md records soaks).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use bcd_test_support::s3::{S3Server, BUCKET};
use bcd_test_support::{proptest_cases, read_all, reference_batch, Rng};
use common::{finish, s, Run};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use serde_json::{json, Value};

/// The classes trees draw their folders from.
const CLASSES: [&str; 5] = ["ant", "bee", "cat", "dog", "eel"];

/// One record as the model knows it: its value and its folder.
#[derive(Clone, Debug, PartialEq)]
struct Expected {
    value: Vec<u8>,
    label: String,
}

/// What a dataset must hold, by key.
type Model = BTreeMap<String, Expected>;

/// The local datasets of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Local {
    Main,
    Part,
    Copy,
    Pulled,
}

impl Local {
    const ALL: [Local; 4] = [Local::Main, Local::Part, Local::Copy, Local::Pulled];

    fn name(self) -> &'static str {
        match self {
            Local::Main => "main.bcd",
            Local::Part => "part.bcd",
            Local::Copy => "copy.bcd",
            Local::Pulled => "pulled.bcd",
        }
    }
}

/// Where an ingest is killed: the `n`th call of one of these system calls.
#[derive(Clone, Debug)]
struct KillPoint {
    syscalls: &'static str,
    n: u32,
}

#[derive(Clone, Debug)]
enum Op {
    /// A tree of `per_class` files in each of `classes` (indices into
    /// [`CLASSES`]), ingested with `--labels folder` into `into` (created or
    /// appended to), in shards of about `shard` bytes.
    Ingest {
        into: Local,
        classes: Vec<usize>,
        per_class: usize,
        shard: u64,
    },
    /// The same, killed at `kill`, then run again with `--on-duplicate skip`.
    KilledIngest {
        into: Local,
        classes: Vec<usize>,
        per_class: usize,
        kill: KillPoint,
    },
    /// `bcd merge part --into main`.
    MergePart,
    /// `bcd export main --into copy [--sample N]`, over a fresh `copy`.
    ExportInto { sample: Option<usize> },
    /// `bcd push main URI`.
    Push,
    /// `bcd pull URI pulled`.
    Pull,
    /// `bcd gc main --older-than 0s`.
    Gc,
}

fn local() -> impl Strategy<Value = Local> {
    prop_oneof![Just(Local::Main), Just(Local::Part)]
}

fn classes() -> impl Strategy<Value = Vec<usize>> {
    proptest::sample::subsequence((0..CLASSES.len()).collect::<Vec<_>>(), 1..=3)
}

fn kill_point() -> impl Strategy<Value = KillPoint> {
    (
        prop_oneof![
            Just("write,pwrite64"),
            Just("fsync,fdatasync"),
            Just("rename,renameat,renameat2"),
            Just("openat"),
        ],
        1u32..12,
    )
        .prop_map(|(syscalls, n)| KillPoint { syscalls, n })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (local(), classes(), 1usize..4, prop_oneof![Just(64u64), Just(1 << 20)])
            .prop_map(|(into, classes, per_class, shard)| Op::Ingest { into, classes, per_class, shard }),
        1 => (local(), classes(), 1usize..3, kill_point())
            .prop_map(|(into, classes, per_class, kill)| Op::KilledIngest { into, classes, per_class, kill }),
        2 => Just(Op::MergePart),
        2 => proptest::option::of(1usize..6).prop_map(|sample| Op::ExportInto { sample }),
        1 => Just(Op::Push),
        1 => Just(Op::Pull),
        1 => Just(Op::Gc),
    ]
}

/// Each case's own prefix in the bucket.
static CASE: AtomicUsize = AtomicUsize::new(0);

/// A case: its directory, the server, the models and the label indices seen.
struct Case<'a> {
    dir: tempfile::TempDir,
    server: &'a S3Server,
    uri: String,
    models: BTreeMap<Local, Model>,
    remote: Option<Model>,
    /// Each dataset's `label_index` of every key, as first seen: an append or a
    /// merge never changes it.
    indices: BTreeMap<Local, BTreeMap<String, i64>>,
    trees: usize,
}

impl<'a> Case<'a> {
    fn new(server: &'a S3Server) -> Case<'a> {
        let case = CASE.fetch_add(1, Ordering::Relaxed);
        Case {
            dir: tempfile::tempdir().unwrap(),
            server,
            uri: format!("s3://{BUCKET}/model/{}-{case}", std::process::id()),
            models: BTreeMap::new(),
            remote: None,
            indices: BTreeMap::new(),
            trees: 0,
        }
    }

    fn path(&self, local: Local) -> PathBuf {
        self.dir.path().join(local.name())
    }

    fn bcd(&self, args: &[&str]) -> Run {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bcd"));
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in self.server.env() {
            command.env(name, value);
        }
        finish(command.spawn().expect("run bcd"), &common::show(args))
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> Vec<u8> {
        let run = self.bcd(args);
        assert!(
            run.status.success(),
            "bcd {} failed: {}",
            common::show(args),
            run.stderr
        );
        run.stdout
    }

    /// A new tree of `per_class` files in each class; returns it and its records.
    fn tree(&mut self, classes: &[usize], per_class: usize) -> (PathBuf, Model) {
        self.trees += 1;
        let tree = self.dir.path().join(format!("tree{}", self.trees));
        let mut rng = Rng::new(self.trees as u64);
        let mut records = Model::new();
        for &class in classes {
            let folder = tree.join(CLASSES[class]);
            std::fs::create_dir_all(&folder).unwrap();
            for i in 0..per_class {
                let name = format!("t{}-{i}.bin", self.trees);
                let len = (rng.next_u64() % 300) as usize;
                let value: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                std::fs::write(folder.join(&name), &value).unwrap();
                let expected = Expected {
                    value,
                    label: CLASSES[class].to_owned(),
                };
                records.insert(format!("{}/{name}", CLASSES[class]), expected);
            }
        }
        (tree, records)
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Ingest {
                into,
                classes,
                per_class,
                shard,
            } => {
                let (tree, records) = self.tree(classes, *per_class);
                let target = self.path(*into);
                let shard = shard.to_string();
                let mut args = vec!["ingest", s(&tree), "--into", s(&target)];
                args.extend(["--labels", "folder", "--quiet"]);
                // The shard size is a dataset's setting, given when it is created.
                if !self.models.contains_key(into) {
                    args.extend(["--max-shard-size", &shard]);
                }
                self.ok(&args);
                self.models.entry(*into).or_default().extend(records);
            }
            Op::KilledIngest {
                into,
                classes,
                per_class,
                kill,
            } => {
                let Some(strace) = common::strace() else {
                    return;
                };
                let (tree, records) = self.tree(classes, *per_class);
                let target = self.path(*into);
                let inject = format!("inject={}:signal=KILL:when={}", kill.syscalls, kill.n);
                let status = Command::new(strace)
                    .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=none", "-e"])
                    .arg(&inject)
                    .arg(env!("CARGO_BIN_EXE_bcd"))
                    .args(["ingest", s(&tree), "--into", s(&target)])
                    .args(["--labels", "folder", "--quiet"])
                    .args(match self.models.contains_key(into) {
                        true => &[][..],
                        false => &["--max-shard-size", "64"][..],
                    })
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("run bcd under strace");
                // Killed, or done before the kill point: either way the dataset
                // is as it was or holds the tree, and running the ingest again
                // (skipping what a committed run wrote) completes it.
                let _ = status;
                self.ok(&[
                    "ingest",
                    s(&tree),
                    "--into",
                    s(&target),
                    "--labels",
                    "folder",
                    "--on-duplicate",
                    "skip",
                    "--quiet",
                ]);
                self.models.entry(*into).or_default().extend(records);
            }
            Op::MergePart => {
                if !self.models.contains_key(&Local::Part) {
                    return;
                }
                let (part, main) = (self.path(Local::Part), self.path(Local::Main));
                self.ok(&["merge", s(&part), "--into", s(&main)]);
                let part_model = self.models.remove(&Local::Part).unwrap();
                self.indices.remove(&Local::Part);
                self.models
                    .entry(Local::Main)
                    .or_default()
                    .extend(part_model);
                assert!(
                    !part.join("manifest.json").exists(),
                    "the merged part remains"
                );
            }
            Op::ExportInto { sample } => {
                let Some(main_model) = self.models.get(&Local::Main).cloned() else {
                    return;
                };
                let copy = self.path(Local::Copy);
                let _ = std::fs::remove_dir_all(&copy);
                self.models.remove(&Local::Copy);
                self.indices.remove(&Local::Copy);
                let main = self.path(Local::Main);
                let mut args = vec!["export", s(&main), "--into", s(&copy)];
                let count = sample.map(|n| n.to_string());
                if let Some(count) = &count {
                    args.extend(["--sample", count, "--seed", "7"]);
                }
                if sample.is_some_and(|n| n > main_model.len()) {
                    // More than there are: refused, and nothing is made.
                    let run = self.bcd(&args);
                    assert!(
                        !run.status.success() && run.stderr.contains("--sample"),
                        "{}",
                        run.stderr
                    );
                    assert!(!copy.exists(), "a refused export made {}", copy.display());
                    return;
                }
                self.ok(&args);
                let held = self.read(Local::Copy);
                match sample {
                    None => {
                        assert_eq!(held, main_model, "export --into copies every record");
                        // An exact copy keeps every index.
                        let main_indices = self.indices.get(&Local::Main).cloned();
                        if let Some(main_indices) = main_indices {
                            self.indices.insert(Local::Copy, main_indices);
                        }
                    }
                    Some(n) => {
                        assert_eq!(held.len(), *n);
                        for (key, record) in &held {
                            assert_eq!(main_model.get(key), Some(record), "{key}");
                        }
                    }
                }
                self.models.insert(Local::Copy, held);
            }
            Op::Push => {
                let Some(main_model) = self.models.get(&Local::Main).cloned() else {
                    return;
                };
                let main = self.path(Local::Main);
                self.ok(&["push", s(&main), &self.uri]);
                self.remote = Some(main_model);
            }
            Op::Pull => {
                let Some(remote) = self.remote.clone() else {
                    return;
                };
                let pulled = self.path(Local::Pulled);
                // A pulled copy that fell behind is brought up to date; one that
                // is not an older state of the remote is replaced.
                if let Some(old) = self.models.get(&Local::Pulled) {
                    if old.iter().any(|(k, r)| remote.get(k) != Some(r)) {
                        let _ = std::fs::remove_dir_all(&pulled);
                        self.indices.remove(&Local::Pulled);
                    }
                }
                self.ok(&["pull", &self.uri, s(&pulled)]);
                self.models.insert(Local::Pulled, remote);
            }
            Op::Gc => {
                if self.models.contains_key(&Local::Main) {
                    let main = self.path(Local::Main);
                    self.ok(&["gc", s(&main), "--older-than", "0s"]);
                }
            }
        }
    }

    /// The records `local` holds, by key, with their labels, checking that every
    /// `label_index` names its label through `class_names` and that indices
    /// seen before are unchanged.
    fn read(&mut self, local: Local) -> Model {
        let path = self.path(local);
        let dataset = bcd::Dataset::open(&path).unwrap();
        let values: BTreeMap<String, Vec<u8>> = read_all(&dataset)
            .into_iter()
            .map(|(key, value)| (String::from_utf8(key).unwrap(), value))
            .collect();
        assert_eq!(values.len(), dataset.len(), "{local:?}: keys are unique");
        let info: Value = serde_json::from_slice(&self.ok(&["info", s(&path), "--json"])).unwrap();
        let names: Vec<String> = info["metadata"]["class_names"]
            .as_array()
            .unwrap_or_else(|| panic!("{local:?}: no class_names in {info}"))
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect();
        let listing = self.ok(&["ls", s(&path), "--fields"]);
        let known = self.indices.entry(local).or_default();
        let mut model = Model::new();
        for line in String::from_utf8(listing).unwrap().lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            let key = row["key"].as_str().unwrap().to_owned();
            let label = row["label"].as_str().unwrap().to_owned();
            let index = row["label_index"].as_i64().unwrap();
            assert_eq!(
                names.get(index as usize),
                Some(&label),
                "{local:?}: {key}: label_index {index} of {names:?} does not name {label}"
            );
            let seen = *known.entry(key.clone()).or_insert(index);
            assert_eq!(seen, index, "{local:?}: {key}: its label_index changed");
            let value = values[&key].clone();
            model.insert(key, Expected { value, label });
        }
        assert_eq!(
            model.len(),
            values.len(),
            "{local:?}: a record without fields"
        );
        model
    }

    /// Every dataset holds what its model says, verifies, and the reference reads it.
    fn check(&mut self) {
        for local in Local::ALL {
            let Some(expected) = self.models.get(&local).cloned() else {
                continue;
            };
            let path = self.path(local);
            self.ok(&["verify", s(&path)]);
            assert_eq!(self.read(local), expected, "{local:?}");
        }
        if let Some(remote) = &self.remote {
            let listing = self.ok(&["ls", &self.uri]);
            let keys: Vec<&str> = std::str::from_utf8(&listing).unwrap().lines().collect();
            let mut expected: Vec<&str> = remote.keys().map(String::as_str).collect();
            let mut got = keys.clone();
            got.sort_unstable();
            expected.sort_unstable();
            assert_eq!(got, expected, "the remote's keys");
        }
    }

    /// The reference opens every dataset and reads the records bcd reads.
    fn check_reference(&self) {
        let locals: Vec<Local> = self.models.keys().copied().collect();
        let steps: Vec<Value> = locals
            .iter()
            .map(|&l| json!({"command": "dump", "path": s(&self.path(l))}))
            .collect();
        if steps.is_empty() {
            return;
        }
        for (local, dump) in locals.iter().zip(reference_batch("0.3.0", &steps)) {
            let dataset = bcd::Dataset::open(self.path(*local)).unwrap();
            let ours: Vec<Value> = read_all(&dataset)
                .into_iter()
                .map(|(k, v)| json!([hex(&k), hex(&v)]))
                .collect();
            assert_eq!(
                dump["records"],
                Value::Array(ours),
                "the reference reads {local:?}"
            );
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bcd_test_support::hex(bytes)
}

fn run_case(server: &S3Server, ops: &[Op]) {
    let mut case = Case::new(server);
    for (step, op) in ops.iter().enumerate() {
        eprintln!("step {step}: {op:?}");
        case.apply(op);
        case.check();
    }
    case.check_reference();
}

#[test]
fn datasets_hold_what_the_model_says_after_any_sequence_of_operations() {
    let server = S3Server::start();
    let config = Config {
        cases: proptest_cases(12),
        max_shrink_iters: 64,
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&proptest::collection::vec(op(), 1..9), |ops| {
        run_case(&server, &ops);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
