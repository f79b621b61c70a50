//! Helpers shared by the test binaries of the workspace, so that each is written
//! once: a deterministic random generator ([`Rng`]), hex text ([`hex`],
//! [`unhex`]), directory snapshots ([`snapshot`], [`tree_snapshot`]), reading a
//! whole dataset back ([`read_all`]), open options for the persisted index
//! ([`INDEX_FILE_ALWAYS`], [`INDEX_FILE_NEVER`]) and the Python test environment
//! with the reference releases ([`venv_python`], [`reference_batch`]), and a
//! simulated storage for fault injection and crash images ([`sim_storage`]), a
//! disk that tears writes ([`TornWrites`]), and
//! a local S3 server with a fault-injecting proxy ([`s3::S3Server`]).
//!
//! Everything here panics on failure: it runs inside tests, where a panic with a
//! clear message is the failure report.

mod bytes;
mod files;
mod index_file;
mod python;
mod rng;
pub mod s3;
pub mod sim_storage;
mod torn_storage;

pub use bytes::{hex, unhex, unhex_json};
pub use files::{read_all, snapshot, snapshot_names, tree_snapshot, Record};
pub use index_file::{INDEX_FILE, INDEX_FILE_ALWAYS, INDEX_FILE_NEVER};
pub use python::{reference_batch, reference_script, repo_root, venv_python};
pub use rng::Rng;
pub use sim_storage::SimStorage;
pub use torn_storage::TornWrites;

/// `default` cases for a property test, unless `PROPTEST_CASES` asks for another
/// number (`make soak`; `.cargo/config.toml` fixes the seed of ordinary runs).
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}
