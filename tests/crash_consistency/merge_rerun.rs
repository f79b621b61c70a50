//! A merge that dies after its commit and before it removed its parts (issue
//! 20): the parts are still whole datasets, but their shards are the target's
//! files now. Running the merge again must not add their records a second
//! time: it recognises them and only finishes the clean-up.

use bcd_test_support::sim_storage::{OpKind, Policy};

use crate::merge::{MergeFixture, MergeScenario, MOVE};

/// Where the merge dies: after its first `ops` storage operations.
#[derive(Clone, Copy, Debug)]
enum KillPoint {
    /// Right after the directory fsync that makes the commit durable: both
    /// parts whole.
    AfterCommit,
    /// Right after the first part's manifest was removed: that part is no
    /// longer a dataset but its shards are still there.
    AfterFirstPartsManifest,
}

fn check_rerun_after_kill_past_the_commit(scenario: MergeScenario, kill: KillPoint) {
    let fx = MergeFixture::new(scenario);
    let work = fx.copy();
    let root = work.path();
    let (ops, whole) = match kill {
        // Operation `rename + 1` fsyncs the directory after the manifest's rename.
        KillPoint::AfterCommit => (fx.rename_op() + 1, [true, true]),
        KillPoint::AfterFirstPartsManifest => {
            let at = fx
                .ops
                .iter()
                .position(|op| op.kind == OpKind::Remove && op.name == "a/manifest.json")
                .expect("the merge removes part a's manifest");
            (at + 1, [false, true])
        }
    };
    let storage = fx.storage(root, Policy::CrashAfter(ops), false);
    let killed = fx.merge(root, &storage);
    let context = format!("{scenario:?}, killed {kill:?}");
    fx.check_target(root, true, &context);
    assert_eq!(
        fx.check_parts(root, true, &context),
        whole,
        "{context}: the parts after the kill ({killed:?})"
    );
    if !whole[0] {
        assert!(root.join("a/000000.bin").is_file(), "{context}");
    }

    let rerun = fx.storage(root, Policy::Pass, false);
    let summary = fx
        .merge(root, &rerun)
        .unwrap_or_else(|e| panic!("{context}: the re-run fails: {e}"));
    fx.check_target(root, true, &format!("{context}, re-run"));
    assert_eq!(
        (summary.records, summary.shards),
        (0, 0),
        "{context}: {summary:?}"
    );
    assert!(
        summary.parts_not_removed.is_empty(),
        "{context}: {summary:?}"
    );
    assert_eq!(
        summary.already_merged,
        [root.join("a"), root.join("b")],
        "{context}: the summary says what the re-run found"
    );
    for name in ["a", "b"] {
        assert!(!root.join(name).exists(), "{context}: part {name} is left");
    }
}

#[test]
fn a_merge_rerun_after_a_kill_between_commit_and_part_removal_only_removes_the_parts() {
    let _guard = crate::no_child_processes();
    for kill in [KillPoint::AfterCommit, KillPoint::AfterFirstPartsManifest] {
        check_rerun_after_kill_past_the_commit(MOVE, kill);
        check_rerun_after_kill_past_the_commit(
            MergeScenario {
                keyed: false,
                ..MOVE
            },
            kill,
        );
    }
    // Across file systems the shards were copied, not linked: the merge record
    // the move committed names the parts.
    check_rerun_after_kill_past_the_commit(
        MergeScenario {
            keyed: false,
            no_hard_links: true,
            ..MOVE
        },
        KillPoint::AfterCommit,
    );
}
