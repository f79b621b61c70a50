//! Power loss: the extend stops after N operations, for every N, and each kind of
//! crash the durability model knows leaves an image that must open with exactly
//! the old or the old + new records, at the point the protocol promises.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::Path;

use bcd::storage::Storage;
use bcd::{Compression, Dataset};
use bcd_test_support::sim_storage::{Config, Policy, SimStorage, Survivors, ALL_SURVIVORS};
use bcd_test_support::snapshot;

use crate::fixture::{Fixture, Scenario, KEYED_LZ4};
use crate::{assert_files, assert_records, concat, extend, open, scratch_dir};

/// Stops the extend after N operations, for every N, and opens what each kind of
/// crash would leave.
fn check_crash_at_every_point(scenario: Scenario) {
    let fx = Fixture::new(scenario);
    let total = fx.total_ops();
    let rename = fx.rename_op();
    assert_eq!(rename + 1, total);
    // No extend on the images needs durability: a storage that skips fsyncs.
    let nosync = |dir: &Path| SimStorage::new(dir, Config::pass()).open(dir);
    // Many crash points and variants leave the same image: each distinct one is
    // checked once (with the outcome it must have).
    let mut checked: HashMap<u64, bool> = HashMap::new();
    for n in 0..=total {
        let work = fx.copy();
        let dir = work.path();
        let storage = fx.storage(dir, Policy::CrashAfter(n), false);
        let mut dataset = storage.open(dir);
        let result = extend(&mut dataset, &fx.new);
        assert_eq!(
            result.is_ok(),
            n == total,
            "crash after {n}/{total}: {result:?}"
        );
        drop(dataset);
        // The model agrees with the real directory (checks the model).
        assert_eq!(
            storage.files(Survivors::ProcessCrash),
            snapshot(dir),
            "crash after {n}: model and directory disagree"
        );

        for survivors in ALL_SURVIVORS {
            let after = if n == 0 {
                "before any operation".to_owned()
            } else {
                format!("after {n}/{total} ({})", fx.ops[n - 1])
            };
            let context = format!("{scenario:?}, {survivors:?} {after}");
            let context = context.as_str();
            let files = storage.files(survivors);

            // The new records appear exactly when the protocol says: once the rename
            // is done if it survives unsynced, else once the directory fsync after it
            // is done.
            let committed = if survivors.keeps_unsynced_rename() {
                n >= rename
            } else {
                n >= total
            };
            let mut hasher = DefaultHasher::new();
            files.hash(&mut hasher);
            if let Some(before) = checked.insert(hasher.finish(), committed) {
                assert_eq!(
                    before, committed,
                    "{context}: the same image, another outcome"
                );
                continue;
            }

            // The pre-extend directory with only the surviving effects applied.
            let image = fx.copy();
            for name in fx.base_files.keys() {
                if !files.contains_key(name) {
                    fs::remove_file(image.path().join(name)).unwrap();
                }
            }
            for (name, bytes) in &files {
                if fx.base_files.get(name) != Some(bytes) {
                    fs::write(image.path().join(name), bytes).unwrap();
                }
            }

            let dataset = Dataset::open(image.path())
                .unwrap_or_else(|e| panic!("{context}: the image does not open: {e}"));
            let (now, later, expected_after) = if committed {
                (
                    fx.old_and_new(),
                    &fx.more,
                    concat(&[&fx.old, &fx.new, &fx.more]),
                )
            } else {
                (fx.old.clone(), &fx.new, fx.old_and_new())
            };
            assert_records(&dataset, &now, context);
            drop(dataset);

            let mut dataset = nosync(image.path());
            extend(&mut dataset, later).unwrap_or_else(|e| panic!("{context}: later extend: {e}"));
            assert_records(&open(image.path(), context), &expected_after, context);
            assert_files(image.path(), dataset.shards(), |_| true, context);
        }
    }
    eprintln!("{scenario:?}: {} distinct crash images", checked.len());
}

#[test]
fn power_loss_at_any_point_of_an_extend_leaves_exactly_old_or_old_plus_new_records() {
    let _guard = crate::no_child_processes();
    check_crash_at_every_point(KEYED_LZ4);
}

#[test]
fn power_loss_with_short_writes_and_keyless_datasets_leaves_exactly_old_or_old_plus_new() {
    let _guard = crate::no_child_processes();
    check_crash_at_every_point(Scenario {
        max_write: 700,
        ..KEYED_LZ4
    });
    check_crash_at_every_point(Scenario {
        keyed: false,
        compression: Compression::None,
        ..KEYED_LZ4
    });
}

/// The durability model itself: what was not fsynced does not survive a power loss.
#[test]
fn durability_model_keeps_only_what_was_synced() {
    let _guard = crate::no_child_processes();
    let work = scratch_dir();
    let dir = work.path();
    fs::write(dir.join("old"), b"old bytes").unwrap();
    let storage = SimStorage::new(dir, Config::pass());

    let mut a = storage.create(&dir.join("a")).unwrap();
    a.write_all(b"synced").unwrap();
    a.sync().unwrap();
    a.write_all(b" unsynced").unwrap();
    storage.sync_dir(dir).unwrap();
    let mut b = storage.create(&dir.join("b")).unwrap();
    b.write_all(b"b").unwrap();
    b.sync().unwrap();
    storage.rename(&dir.join("a"), &dir.join("old")).unwrap();

    let files = |s| storage.files(s).into_iter().collect::<Vec<_>>();
    let entry = |name: &str, bytes: &[u8]| (name.to_owned(), bytes.to_vec());
    assert_eq!(
        files(Survivors::PowerLossUnsyncedLost),
        [entry("a", b"synced"), entry("old", b"old bytes")]
    );
    assert_eq!(
        files(Survivors::PowerLossUnsyncedTorn),
        [entry("a", b"synced uns"), entry("old", b"old bytes")]
    );
    assert_eq!(
        files(Survivors::PowerLossUnsyncedKept),
        [entry("a", b"synced unsynced"), entry("old", b"old bytes")]
    );
    assert_eq!(
        files(Survivors::ProcessCrash),
        [entry("b", b"b"), entry("old", b"synced unsynced")]
    );
    assert_eq!(
        files(Survivors::PowerLossMetadataKept),
        [entry("b", b"b"), entry("old", b"synced")]
    );
    assert_eq!(
        files(Survivors::PowerLossRenamesKept),
        [entry("old", b"synced")]
    );
    storage.remove(&dir.join("b")).unwrap();
    assert_eq!(
        files(Survivors::PowerLossRenamesKept),
        [entry("old", b"synced")]
    );
    assert_eq!(
        files(Survivors::PowerLossMetadataKept),
        [entry("old", b"synced")]
    );
    let mut b = storage.create(&dir.join("b")).unwrap();
    b.write_all(b"b").unwrap();
    b.sync().unwrap();
    storage.sync_dir(dir).unwrap();
    assert_eq!(
        files(Survivors::PowerLossUnsyncedLost),
        [entry("b", b"b"), entry("old", b"synced")]
    );
    assert_eq!(storage.files(Survivors::ProcessCrash), snapshot(dir));
}
