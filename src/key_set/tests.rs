//! The key set against a plain model (a map from hash to its records), with
//! budgets small enough that it spills and merges runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::storage::FileSystem;

fn set_in(dir: &Path, budget: u64) -> KeySet {
    KeySet::new(SpillDir::new(dir, Arc::new(FileSystem)), "keys", budget)
}

/// Checks every lookup and the sorted read against `model`.
fn check(set: &KeySet, model: &BTreeMap<u64, Vec<u64>>, absent: impl Iterator<Item = u64>) {
    let mut found = Vec::new();
    for (&hash, records) in model {
        found.clear();
        set.candidates(hash, &mut found).unwrap();
        found.sort_unstable();
        assert_eq!(&found, records, "hash {hash:#x}");
    }
    for hash in absent.filter(|h| !model.contains_key(h)) {
        found.clear();
        set.candidates(hash, &mut found).unwrap();
        assert!(found.is_empty(), "hash {hash:#x} is not in the set");
    }
    let expected: Vec<(u64, u64)> = model
        .iter()
        .flat_map(|(&h, records)| records.iter().map(move |&r| (h, r)))
        .collect();
    for _ in 0..2 {
        let sorted: Vec<(u64, u64)> = set.sorted().unwrap().map(Result::unwrap).collect();
        assert_eq!(sorted, expected);
    }
    assert_eq!(set.len(), expected.len() as u64);
}

#[test]
fn spills_under_a_small_budget_and_merges_runs_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let hash = |i: u64| crate::index_file::hash_key(&i.to_le_bytes());
    let budget = 256 << 10;
    let mut set = set_in(dir.path(), budget);
    let mut model: BTreeMap<u64, Vec<u64>> = BTreeMap::new();

    for record in 0..200_000u64 {
        // Every 97th record repeats an earlier hash (a collision to confirm).
        let h = if record % 97 == 96 {
            hash(record / 2)
        } else {
            hash(record)
        };
        set.insert(h, record).unwrap();
        model.entry(h).or_default().push(record);
        // The filter the next spill builds fits beside what is held.
        let next_spill = set.memory() + set.spill_filter_bytes();
        assert!(next_spill <= budget, "{next_spill} bytes");
    }
    // More runs were written than are left: they were merged.
    let written = set.spill.next.load(Ordering::Relaxed);
    assert!(written > MAX_RUNS as u64 + 1, "{written} runs written");
    assert!(set.runs() <= MAX_RUNS);
    check(&set, &model, (200_000..210_000).map(hash));
    let spill = dir.path().join(SPILL_DIR);
    assert_eq!(spill_leftovers(&spill).unwrap().len(), set.runs());
    // 16 bytes per entry on disk.
    let on_disk: u64 = spill_leftovers(&spill)
        .unwrap()
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let in_runs: u64 = set.runs.iter().map(Run::len).sum();
    assert_eq!(on_disk, 16 * in_runs);
    drop(set);
    assert!(
        !spill.exists(),
        "the spill directory is removed with the set"
    );
}

#[test]
fn leftovers_of_a_dead_writer_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut set = set_in(dir.path(), MIN_MEMORY_LIMIT);
    for record in 0..50_000u64 {
        set.insert(record.wrapping_mul(0x9E37_79B9_7F4A_7C15), record)
            .unwrap();
    }
    assert!(set.runs() > 0);
    // A writer that dies keeps its files.
    std::mem::forget(set);
    let spill = dir.path().join(SPILL_DIR);
    assert!(!spill_leftovers(&spill).unwrap().is_empty());
    remove_spill_leftovers(&FileSystem, dir.path()).unwrap();
    assert!(!spill.exists());
    // Nothing to remove is fine.
    remove_spill_leftovers(&FileSystem, dir.path()).unwrap();
}

#[test]
fn records_past_the_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut set = set_in(dir.path(), MIN_MEMORY_LIMIT);
    set.insert(1, MAX_RECORD).unwrap();
    let error = set.insert(2, MAX_RECORD + 1).unwrap_err();
    assert!(matches!(error, Error::TooLarge { .. }), "{error}");
    assert_eq!(set.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any sequence of inserts, hashes drawn from a small domain (many
    /// collisions) or the whole range, under budgets from "spill every few
    /// hundred entries" to "never": lookups and the sorted read agree with the
    /// model after every batch.
    #[test]
    fn agrees_with_a_map_model(
        batches in proptest::collection::vec(
            proptest::collection::vec((any::<bool>(), any::<u64>()), 1..3000),
            1..6,
        ),
        budget in prop_oneof![Just(0u64), Just(80_000), Just(1u64 << 30)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut set = set_in(dir.path(), budget);
        let mut model: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        let mut record = 0u64;
        for batch in &batches {
            for &(small, raw) in batch {
                let hash = if small { raw % 64 } else { raw };
                set.insert(hash, record).unwrap();
                model.entry(hash).or_default().push(record);
                record += 1;
            }
            check(&set, &model, batch.iter().map(|&(_, raw)| raw ^ 1).chain(0..70));
        }
    }
}
