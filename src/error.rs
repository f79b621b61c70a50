//! The store's error type. Every variant that comes from disk names the file,
//! and where it applies the shard, record or byte offset.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Result alias for the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes (its `source()` chain), joined by ": " as anyhow's
/// `{:#}` does: what the CLI prints, a Python exception's message carries and a
/// merge's summary keeps for a part it could not remove. Every crate's errors
/// follow that convention (a message says what failed where, its cause is its
/// source), so this is the one place the chain is joined.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

/// Everything that can go wrong opening, reading or extending a dataset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call on `path` failed.
    #[error("{op} {}", path.display())]
    Io {
        /// What was being done ("open", "write", "fsync", ...).
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The extend **was committed** (its records are visible) but the final fsync of
    /// the directory failed, so whether the commit survives a power loss is unknown.
    /// Do not retry the extend: its records are already there.
    #[error("{}: the extend was committed and its records are visible, but making the commit durable failed; do not retry it", path.display())]
    CommittedNotDurable {
        /// The dataset directory.
        path: PathBuf,
        /// The fsync error.
        #[source]
        source: io::Error,
    },
    /// The extend **was committed** (its records are on disk, and visible to
    /// every handle opened from now on) but this handle could not load the new
    /// shards, so it does not show them. Do not retry the extend: reopen the
    /// dataset.
    #[error("{}: the extend was committed, but this handle could not load its new shards; reopen the dataset to read them, and do not retry the extend", path.display())]
    CommittedNotLoaded {
        /// The dataset directory.
        path: PathBuf,
        /// Why the shards could not be loaded.
        #[source]
        source: Box<Error>,
    },
    /// The directory has no manifest.json.
    #[error("{}: not a dataset (no manifest.json); check the path, or create a dataset there first", path.display())]
    NotADataset {
        /// The directory.
        path: PathBuf,
    },
    /// A directory without a manifest holds a file no writer of this project
    /// makes, so it is not what a killed writer left: `create` and `gc` leave it
    /// alone.
    #[error("{}: directory is not empty and not a dataset: {} is not a file bcd writes; datasets are created in a new or empty directory, or one holding only what an interrupted bcd run left", dir.display(), file.display())]
    ForeignFile {
        /// The directory.
        dir: PathBuf,
        /// The first entry of it that is not a leftover of a writer.
        file: PathBuf,
    },
    /// `create` was pointed at a directory that already has files in it.
    #[error("{}: directory is not empty; datasets are created in a new or empty directory", path.display())]
    DirectoryNotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// manifest.json is not one of the two accepted forms.
    #[error("{}: invalid manifest: {reason}", path.display())]
    InvalidManifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A shard file named by the manifest does not exist.
    #[error("{}: missing shard file (the manifest counts {shards} shards)", path.display())]
    MissingShard {
        /// The missing file.
        path: PathBuf,
        /// How many shards the manifest commits.
        shards: u64,
    },
    /// A shard's index and data disagree, or the index is malformed.
    #[error("{}: corrupt shard: {reason}", path.display())]
    CorruptShard {
        /// The shard file found at fault.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The persisted index file (`.bcd-index`) does not describe the shards it
    /// claims to: it was damaged or written by someone else. It is a cache: deleting
    /// it loses nothing, and the next open rebuilds it.
    #[error("{}: the persisted index does not match the shards ({reason}); delete it, and the next open rebuilds it", path.display())]
    CorruptIndexFile {
        /// The index file.
        path: PathBuf,
        /// What disagrees.
        reason: String,
    },
    /// One stored value cannot be decoded.
    #[error("{}: record {record} (dataset index {index}, byte offset {offset}): {reason}", path.display())]
    CorruptValue {
        /// The shard's data file.
        path: PathBuf,
        /// Record number within the shard.
        record: u64,
        /// Record number within the dataset.
        index: u64,
        /// Byte offset of the stored value within the data file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A committed key occurs twice.
    #[error("{}: record {record}: duplicate key {key} in dataset", path.display())]
    DuplicateKeyInDataset {
        /// The shard's data file holding the second occurrence.
        path: PathBuf,
        /// Record number within that shard.
        record: u64,
        /// The key, escaped for display.
        key: DisplayKey,
    },
    /// An extend tried to add a key that is already committed or already
    /// added by the same extend; nothing was committed.
    #[error("duplicate key {key}: already in the dataset or earlier in this extend; nothing was committed")]
    DuplicateKey {
        /// The key, escaped for display.
        key: DisplayKey,
    },
    /// An index past either end.
    #[error("index {index} out of range for a dataset of {len} records")]
    IndexOutOfRange {
        /// The index asked for.
        index: i64,
        /// Number of records.
        len: u64,
    },
    /// A key operation on a keyless dataset, or a keyless one on a keyed dataset.
    #[error("{0}")]
    WrongKeying(&'static str),
    /// A key or value is too large for the format.
    #[error("{what} of {size} bytes exceeds the format's limit of {limit} bytes")]
    TooLarge {
        /// "key", "value" or "stored value".
        what: &'static str,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A setting passed to `create` is invalid.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// Another writer of this project holds the dataset's lock.
    #[error("{}: another writer is extending this dataset (lock {} is held); wait for it to finish and retry", dir.display(), lock.display())]
    Locked {
        /// The dataset directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The manifest on disk no longer matches the settings this handle opened with.
    #[error("{}: the dataset was changed by another writer ({reason}); reopen it", path.display())]
    ChangedOnDisk {
        /// The manifest file.
        path: PathBuf,
        /// What changed.
        reason: String,
    },
    /// [`Dataset::remove_empty`](crate::Dataset::remove_empty) found committed
    /// records (another writer added them): nothing was removed.
    #[error("{}: not removed: it holds {shards} committed shard(s)", path.display())]
    NotEmpty {
        /// The dataset directory.
        path: PathBuf,
        /// Shards the manifest commits.
        shards: u64,
    },
    /// This extend was begun by the process this one was forked from: only that
    /// process may write or commit it, so this copy writes, commits and removes
    /// nothing.
    #[error("this extend was begun by the process this one was forked from; a forked child's copy of an extend in progress writes, commits and removes nothing (extend again in the child, after the parent's extend has finished)")]
    ForkedExtend,
    /// A dataset named as a part of a merge cannot be merged into the target: its
    /// settings differ from the target's, it is the target, or it is named twice.
    /// Nothing was merged.
    #[error("{}: cannot merge it into {}: {reason}; nothing was merged", part.display(), target.display())]
    MergePart {
        /// The part's directory.
        part: PathBuf,
        /// The target's directory.
        target: PathBuf,
        /// Why not.
        reason: String,
    },
    /// A key is in two of the datasets of a merge (target or parts), and
    /// duplicates are errors. Nothing was merged.
    #[error("duplicate key {key}: in {} record {first_record} and again in {} record {second_record}; nothing was merged", first.display(), second.display())]
    DuplicateKeyInMerge {
        /// The key, escaped for display.
        key: DisplayKey,
        /// The shard data file of the first copy (the target's, or an earlier part's).
        first: PathBuf,
        /// Record number of the first copy within that shard.
        first_record: u64,
        /// The shard data file of the second copy (in a part).
        second: PathBuf,
        /// Record number of the second copy within that shard.
        second_record: u64,
    },
    /// A caller's hook (rewriting a sidecar, making a commit file) failed.
    #[error("{what}")]
    Hook {
        /// What the hook was doing.
        what: String,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A view file does not decode (FORMAT.md, "Views").
    #[error("{}: corrupt view file: {reason}; drop the view and create it again", path.display())]
    CorruptView {
        /// The view file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A view was evaluated over a state this dataset does not hold (it has fewer
    /// records, or other ones: another dataset, or this one rewritten): its
    /// indices would name other records, so it is refused.
    #[error("{}: view {name:?} does not belong to this dataset: {reason}; create it again (with `replace`)", path.display())]
    StaleView {
        /// The view file.
        path: PathBuf,
        /// The view.
        name: String,
        /// What differs.
        reason: String,
    },
    /// No view of that name.
    #[error("{}: no view named {name:?} (its views: {available})", dir.display())]
    NoSuchView {
        /// The dataset directory.
        dir: PathBuf,
        /// The name asked for.
        name: String,
        /// The views there are, or "none".
        available: String,
    },
    /// A view of that name exists, and replacing it was not asked for.
    #[error("{}: a view named {name:?} exists already; pass `replace` to replace it", path.display())]
    ViewExists {
        /// The view file.
        path: PathBuf,
        /// The view.
        name: String,
    },
    /// Not a view name.
    #[error("invalid view name {name:?}: 1 to {} characters of A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'", crate::format::MAX_VIEW_NAME)]
    InvalidViewName {
        /// The name given.
        name: String,
    },
    /// An earlier error in this extend left it unusable; it must be dropped.
    #[error("this extend already failed and was rolled back; start a new one")]
    Poisoned,
    /// A committed shard without content hashes, where they are needed (an
    /// extend or merge dropping duplicate values, a read checking them).
    #[error("{}: shard {shard} has no content hashes ({} is missing): build them first for every shard of {} (`dedup-index`)", dataset.display(), path.display(), dataset.display())]
    NoContentHashes {
        /// The missing file.
        path: PathBuf,
        /// Its shard.
        shard: u64,
        /// The dataset.
        dataset: PathBuf,
    },
    /// A content hashes file that does not fit its shard.
    #[error("{}: corrupt content hashes: {reason}; remove it and build it again (`dedup-index`)", path.display())]
    CorruptContentHashes {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A value that does not match the content hash written with it: the shard's
    /// bytes changed after they were written (a flipped bit on disk, say).
    #[error("{}: record {record} (dataset index {index}): the value does not match its content hash in {}: the shard's bytes changed after they were written", path.display(), hashes.display())]
    ContentMismatch {
        /// The shard's data file.
        path: PathBuf,
        /// The record's position in its shard.
        record: u64,
        /// The record's dataset index.
        index: u64,
        /// The content hashes file.
        hashes: PathBuf,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// A key as it appears in messages: printable ASCII kept, everything else
/// escaped, long keys shortened.
#[derive(Clone, PartialEq, Eq)]
pub struct DisplayKey(pub Vec<u8>);

impl DisplayKey {
    const SHOWN: usize = 200;
}

impl fmt::Display for DisplayKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = &self.0[..self.0.len().min(Self::SHOWN)];
        write!(f, "\"{}\"", shown.escape_ascii())?;
        if self.0.len() > Self::SHOWN {
            write!(f, "... ({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

impl fmt::Debug for DisplayKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// Every variant that chains an operating-system error: its message names
    /// the file and leaves the cause to `source()`, so a front end joining the
    /// chain says the cause once.
    #[test]
    fn messages_leave_their_cause_to_source() {
        let cause = || io::Error::from_raw_os_error(5);
        let shown = cause().to_string();
        let errors = [
            Error::io("open", "/d/manifest.json", cause()),
            Error::CommittedNotDurable {
                path: "/d".into(),
                source: cause(),
            },
            Error::CommittedNotLoaded {
                path: "/d".into(),
                source: Box::new(Error::io("open", "/d/shard-1.data", cause())),
            },
        ];
        for error in errors {
            let message = error.to_string();
            assert!(!message.contains(&shown), "{message}");
            assert!(message.contains("/d"), "{message}");
            // The cause is in the chain, once.
            let mut chain = Vec::new();
            let mut next = error.source();
            while let Some(cause) = next {
                chain.push(cause.to_string());
                next = cause.source();
            }
            assert_eq!(chain.last(), Some(&shown), "{message}");
            assert_eq!(chain.iter().filter(|c| c.contains(&shown)).count(), 1);
        }
    }
}
