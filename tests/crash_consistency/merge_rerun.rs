//! A merge that dies after its commit and before it removed its parts (issue
//! 20): the parts are still whole datasets, but their shards are the target's
//! files now. Running the merge again must not add their records a second
//! time: it recognises them and only finishes the clean-up.

use bcd_test_support::sim_storage::Policy;

use crate::merge::{MergeFixture, MergeScenario, MOVE};

fn check_rerun_after_kill_past_the_commit(scenario: MergeScenario) {
    let fx = MergeFixture::new(scenario);
    let work = fx.copy();
    let root = work.path();
    // Operation `rename + 1` fsyncs the directory after the manifest's rename:
    // the commit is durable, and the process dies before anything else.
    let storage = fx.storage(root, Policy::CrashAfter(fx.rename_op() + 1), false);
    let killed = fx.merge(root, &storage);
    let context = format!("{scenario:?}");
    fx.check_target(root, true, &context);
    assert_eq!(
        fx.check_parts(root, true, &context),
        [true, true],
        "{context}: the parts are whole after the kill ({killed:?})"
    );

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
    check_rerun_after_kill_past_the_commit(MOVE);
    check_rerun_after_kill_past_the_commit(MergeScenario {
        keyed: false,
        ..MOVE
    });
}
