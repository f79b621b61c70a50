//! Which files make up a committed state of a dataset, by name: the one rule push,
//! pull and gc share.
//!
//! The files of the state a manifest with `shards = S` commits are `manifest.json`,
//! the shards `NNNNNN.bin` / `NNNNNN.idx` for `n < S`, every per-shard sidecar
//! `NNNNNN.<suffix>` with `n < S` (`000003.fields.arrow`, `000003.stats.json`),
//! every per-commit file `commit.M.json` with `M <= S`, the persisted index
//! `.bcd-index`, and every view `view.NAME` (each checks, when read, that the
//! dataset holds the state it was evaluated over). The names are read by the store's parsers (`bcd::format`), the
//! one rule of them. Sidecars are recognised by the pattern, whatever their suffix, so
//! files a later version adds beside the shards travel without a change here.

use bcd::format::{
    parse_commit_file_name, parse_merge_record_name, parse_shard_name, parse_sidecar_name,
    parse_view_file_name, CONTENT_HASH_SUFFIX, DATA_EXTENSION, INDEX_EXTENSION, INDEX_FILE_NAME,
    MANIFEST_NAME,
};

/// What a file name in a dataset's directory (or under its prefix) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// `manifest.json`: the commit.
    Manifest,
    /// `NNNNNN.bin` or `NNNNNN.idx` of shard `n`.
    Shard(u64),
    /// `NNNNNN.<suffix>` other than `.bin`/`.idx`: a file beside shard `n`
    /// (the suffix as `bcd::format::is_sidecar_suffix` allows).
    Sidecar(u64),
    /// `NNNNNN.xxh128`: the content hash of each record of shard `n`, a
    /// sidecar written once (with its shard, or later by `bcd dedup-index`),
    /// which travels like the others; the remote cache mirrors it too, so that
    /// reads checking values (`verify=True`) work on a cached dataset.
    ContentHashes(u64),
    /// `commit.M.json`: written by the commit that made the shard count `M`.
    Commit(u64),
    /// `merged.M.json`: the record of a local merge that made the shard count
    /// `M`. Bookkeeping of one machine's file systems: never pushed or pulled.
    MergeRecord(u64),
    /// `.bcd-index`, the persisted index (a cache, rewritten in place).
    IndexFile,
    /// `view.NAME`: a view (replaced whole when it is refreshed or replaced).
    View,
    /// Anything else (temporary files, the lock, foreign files).
    Other,
}

impl FileKind {
    /// The kind of the file called `name`, by the store's own parsers of its
    /// names (`bcd::format`), so that this rule and the store's cannot drift.
    pub fn of(name: &str) -> FileKind {
        if name == MANIFEST_NAME {
            FileKind::Manifest
        } else if name == INDEX_FILE_NAME {
            FileKind::IndexFile
        } else if parse_view_file_name(name).is_some() {
            FileKind::View
        } else if let Some(m) = parse_commit_file_name(name) {
            FileKind::Commit(m)
        } else if let Some(m) = parse_merge_record_name(name) {
            FileKind::MergeRecord(m)
        } else if let Some(n) = parse_shard_name(name) {
            FileKind::Shard(n)
        } else if let Some((n, suffix)) = parse_sidecar_name(name) {
            match suffix == CONTENT_HASH_SUFFIX {
                true => FileKind::ContentHashes(n),
                false => FileKind::Sidecar(n),
            }
        } else {
            FileKind::Other
        }
    }

    /// Whether a file of this kind belongs to the state a manifest with `shards`
    /// commits (the manifest itself included).
    pub fn committed(self, shards: u64) -> bool {
        match self {
            FileKind::Manifest | FileKind::IndexFile | FileKind::View => true,
            FileKind::Shard(n) | FileKind::Sidecar(n) | FileKind::ContentHashes(n) => n < shards,
            FileKind::Commit(m) => m <= shards,
            FileKind::MergeRecord(_) | FileKind::Other => false,
        }
    }

    /// Whether the file never changes once committed (everything but the
    /// manifest, the persisted index and views, which are replaced whole).
    pub fn immutable(self) -> bool {
        matches!(
            self,
            FileKind::Shard(_)
                | FileKind::Sidecar(_)
                | FileKind::ContentHashes(_)
                | FileKind::Commit(_)
        )
    }

    /// Whether a file of this kind could become part of a later commit: shards,
    /// sidecars and commit files numbered past `shards` (leftovers of an
    /// interrupted write, or a write in progress).
    pub fn pending(self, shards: u64) -> bool {
        match self {
            FileKind::Shard(n) | FileKind::Sidecar(n) | FileKind::ContentHashes(n) => n >= shards,
            FileKind::Commit(m) => m > shards,
            _ => false,
        }
    }
}

/// The files of `listing` (names in one directory or under one prefix) that belong
/// to the state a manifest with `num_shards` commits, without the manifest itself,
/// sorted by name. The manifest is written last by every copy, so it is left out
/// here.
pub fn committed_files<S: AsRef<str>>(listing: &[S], num_shards: u64) -> Vec<String> {
    let mut files: Vec<String> = listing
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| {
            let kind = FileKind::of(name);
            kind != FileKind::Manifest && kind.committed(num_shards)
        })
        .map(str::to_owned)
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The shard files a manifest with `num_shards` requires: `NNNNNN.bin` and
/// `NNNNNN.idx` for every `n < num_shards`.
pub fn required_shard_files(num_shards: u64) -> impl Iterator<Item = String> {
    (0..num_shards).flat_map(|n| {
        [
            format!("{n:06}.{DATA_EXTENSION}"),
            format!("{n:06}.{INDEX_EXTENSION}"),
        ]
    })
}

/// The data file of the shard whose index file is `name` (`000042.idx` gives
/// `000042.bin`); `None` for any other name.
pub fn data_of_index(name: &str) -> Option<String> {
    let stem = name.strip_suffix(INDEX_EXTENSION)?.strip_suffix('.')?;
    parse_shard_name(name).map(|_| format!("{stem}.{DATA_EXTENSION}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_file_names_its_shards_data_file() {
        assert_eq!(data_of_index("000042.idx").as_deref(), Some("000042.bin"));
        assert_eq!(data_of_index("1000000.idx").as_deref(), Some("1000000.bin"));
        for other in [
            "000042.bin",
            "000042.stats.json",
            "42.idx",
            "x00042.idx",
            ".bcd-index",
        ] {
            assert_eq!(data_of_index(other), None, "{other}");
        }
    }

    #[test]
    fn names_are_classified_by_pattern() {
        assert_eq!(FileKind::of("manifest.json"), FileKind::Manifest);
        assert_eq!(FileKind::of("000003.bin"), FileKind::Shard(3));
        assert_eq!(FileKind::of("1000000.idx"), FileKind::Shard(1_000_000));
        assert_eq!(FileKind::of("000003.fields.arrow"), FileKind::Sidecar(3));
        assert_eq!(FileKind::of("000003.stats.json"), FileKind::Sidecar(3));
        assert_eq!(FileKind::of("000003.xxh128"), FileKind::ContentHashes(3));
        assert!(FileKind::of("000003.xxh128").committed(4));
        assert!(FileKind::of("000003.xxh128").immutable());
        assert!(FileKind::of("000004.xxh128").pending(4));
        assert_eq!(FileKind::of("commit.000004.json"), FileKind::Commit(4));
        assert_eq!(FileKind::of(".bcd-index"), FileKind::IndexFile);
        assert_eq!(FileKind::of("view.cats"), FileKind::View);
        assert_eq!(FileKind::of("view.000001.bin"), FileKind::View);
        assert_eq!(FileKind::of("merged.000004.json"), FileKind::MergeRecord(4));
        // The store's rule of sidecar suffixes decides (`[a-z0-9._-]`, from a
        // letter): a suffix that merely contains "tmp" is one.
        assert_eq!(FileKind::of("000003.bin.tmp"), FileKind::Sidecar(3));
        for other in [
            ".bcd.lock",
            ".manifest.json.tmp",
            ".bcd-index.tmp-1-2",
            ".bcd-content.tmp-000003",
            ".bcd-spill",
            "00003.bin",
            "000003",
            "000003.",
            "000003.Bin",
            "000003.9x",
            "commit.4.json",
            "commit.000004.json.tmp",
            ".commit.000004.json.tmp",
            "merged.4.json",
            "view.",
            ".view.cats.tmp-1-2",
            "x000003.bin",
            "README",
        ] {
            assert_eq!(FileKind::of(other), FileKind::Other, "{other}");
        }
    }

    #[test]
    fn committed_files_follow_the_manifest_count() {
        let listing = [
            "manifest.json",
            "000000.bin",
            "000000.idx",
            "000000.fields.arrow",
            "000001.bin",
            "000001.idx",
            "000001.stats.json",
            "000002.bin",
            "000002.idx",
            "000002.fields.arrow",
            "commit.000001.json",
            "commit.000002.json",
            "commit.000003.json",
            ".bcd-index",
            ".bcd.lock",
            ".manifest.json.tmp",
            "merged.000002.json",
            "view.cats",
        ];
        assert_eq!(
            committed_files(&listing, 2),
            [
                ".bcd-index",
                "000000.bin",
                "000000.fields.arrow",
                "000000.idx",
                "000001.bin",
                "000001.idx",
                "000001.stats.json",
                "commit.000001.json",
                "commit.000002.json",
                "view.cats",
            ]
        );
        assert_eq!(committed_files(&listing, 0), [".bcd-index", "view.cats"]);
        assert!(FileKind::of("000002.bin").pending(2));
        assert!(FileKind::of("commit.000003.json").pending(2));
        assert!(!FileKind::of("commit.000002.json").pending(2));
        assert_eq!(
            required_shard_files(2).collect::<Vec<_>>(),
            ["000000.bin", "000000.idx", "000001.bin", "000001.idx"]
        );
    }
}
