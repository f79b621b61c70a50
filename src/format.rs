//! Constants of the on-disk format, in one place. FORMAT.md is the contract;
//! every number here is stated there too.

use std::path::{Path, PathBuf};

/// Name of the manifest that commits shards.
pub const MANIFEST_NAME: &str = "manifest.json";
/// Temporary name the manifest is written under before the atomic rename.
pub const MANIFEST_TMP_NAME: &str = ".manifest.json.tmp";
/// Lock file taken by this project's writers for the duration of an extend.
/// The Python reference neither takes nor knows it.
pub const LOCK_NAME: &str = ".bcd.lock";
/// The persisted index beside the shards (see FORMAT.md): a cache this project
/// writes and reads, which the reference ignores.
pub const INDEX_FILE_NAME: &str = ".bcd-index";
/// Prefix of the temporary names an index file is written under before its rename.
pub const INDEX_FILE_TMP_PREFIX: &str = ".bcd-index.tmp-";
/// Directory inside a dataset where a writer spills the fingerprints of the keys
/// (and contents) it has written when they pass its memory budget: temporary
/// files, removed when the writer finishes, and by the next writer or `gc` when
/// it died first (FORMAT.md section 7). The reference ignores it.
pub const SPILL_DIR: &str = ".bcd-spill";
/// Datasets with at least this many records get a persisted index when opened or
/// extended (smaller ones index faster than they would map and check the file).
pub const DEFAULT_INDEX_FILE_MIN_RECORDS: u64 = 100_000;
/// ... or whose shards hold at least this many bytes, whose keys are slow to read
/// when not in the page cache.
pub const DEFAULT_INDEX_FILE_MIN_BYTES: u64 = 256 << 20;
/// An index file is rewritten once this many records were committed after it.
pub const DEFAULT_INDEX_FILE_MIN_TAIL: u64 = 65_536;
/// Extension of a shard's data file (records back to back).
pub const DATA_EXTENSION: &str = "bin";
/// Extension of a shard's index file (little-endian `u32` sizes).
pub const INDEX_EXTENSION: &str = "idx";
/// Width of one size in an `.idx` file, in bytes.
pub const INDEX_FIELD_SIZE: usize = 4;
/// Width of the uncompressed-size prefix of an LZ4-compressed value.
pub const LZ4_SIZE_PREFIX: usize = 4;
/// Largest input liblz4 accepts (`LZ4_MAX_INPUT_SIZE`), so the largest value
/// that can be stored compressed.
pub const LZ4_MAX_INPUT_SIZE: usize = 0x7E00_0000;
/// An LZ4 block never expands by more than this factor (one 255 length byte per
/// input byte), plus [`LZ4_EXPANSION_SLACK`] bytes. A declared size beyond that
/// bound is corrupt and is rejected before anything is allocated.
pub const LZ4_MAX_EXPANSION: u64 = 255;
/// See [`LZ4_MAX_EXPANSION`].
pub const LZ4_EXPANSION_SLACK: u64 = 64;
/// Largest key or stored value: sizes are `u32` in the index.
pub const MAX_FIELD_SIZE: u64 = u32::MAX as u64;
/// `max_shard_size` of datasets created without one, and of 0.2.0 manifests.
pub const DEFAULT_MAX_SHARD_SIZE: u64 = 1 << 30;
/// Manifests larger than this are rejected unread (a real one is under 100 bytes).
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// LZ4 high-compression level the reference uses (python-lz4's default, `LZ4HC_CLEVEL_DEFAULT`).
pub const DEFAULT_LZ4_HC_LEVEL: i32 = 9;

/// Number of `u32` sizes per record in the index: `(key_size, value_size)` when
/// keyed, `value_size` alone when keyless.
pub fn index_fields(keyed: bool) -> usize {
    if keyed {
        2
    } else {
        1
    }
}

/// Key and value size of record `local` of a shard whose `.idx` bytes are
/// `sizes` (zero past their end; the key size is 0 when keyless).
pub fn record_sizes(sizes: &[u8], keyed: bool, local: usize) -> (u64, u64) {
    let fields = index_fields(keyed);
    let entry = local * fields * INDEX_FIELD_SIZE;
    let size = |field: usize| -> u64 {
        let at = entry + field * INDEX_FIELD_SIZE;
        sizes
            .get(at..at + INDEX_FIELD_SIZE)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
    };
    (if keyed { size(0) } else { 0 }, size(fields - 1))
}

/// The number of records of an `.idx` file of `len` bytes, which must be a whole
/// number of entries (the first check of [`read_idx`], which can be made before
/// the file is read).
pub fn idx_records(len: u64, keyed: bool, index_path: &Path) -> crate::Result<u64> {
    let entry_size = (INDEX_FIELD_SIZE * index_fields(keyed)) as u64;
    if !len.is_multiple_of(entry_size) {
        return Err(crate::Error::CorruptShard {
            path: index_path.to_path_buf(),
            reason: format!(
                "{len} bytes is not a whole number of {entry_size}-byte index entries ({} dataset)",
                if keyed { "keyed" } else { "keyless" }
            ),
        });
    }
    Ok(len / entry_size)
}

/// Reads a shard's `.idx` bytes `sizes` against its data file's length
/// `data_len`, the one check every reader of an `.idx` makes (a local open, a
/// remote open, a pull before its commit): a whole number of entries, no record
/// past the end of the data file, and sizes adding up to exactly its length.
/// Calls `start` with each record's byte offset in the data file, in order, and
/// returns the number of records. The paths (or object URIs) name the files in
/// the error, a [`CorruptShard`](crate::Error::CorruptShard).
pub fn read_idx(
    sizes: &[u8],
    keyed: bool,
    data_len: u64,
    data_path: &Path,
    index_path: &Path,
    mut start: impl FnMut(u64),
) -> crate::Result<u64> {
    let corrupt = |path: &Path, reason: String| crate::Error::CorruptShard {
        path: path.to_path_buf(),
        reason,
    };
    let records = idx_records(sizes.len() as u64, keyed, index_path)?;
    let entry_size = INDEX_FIELD_SIZE * index_fields(keyed);
    let mut offset: u64 = 0;
    for (record, entry) in sizes.chunks_exact(entry_size).enumerate() {
        start(offset);
        let record_size: u64 = entry
            .chunks_exact(INDEX_FIELD_SIZE)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
            .sum();
        offset += record_size; // cannot overflow: at most 2^32 records x 2^33 bytes
        if offset > data_len {
            return Err(corrupt(
                index_path,
                format!(
                    "record {record} ends at byte {offset}, past the end of {} ({data_len} bytes)",
                    data_path.display()
                ),
            ));
        }
    }
    if offset != data_len {
        return Err(corrupt(
            data_path,
            format!(
                "{data_len} bytes, but its index {} accounts for {offset}",
                index_path.display()
            ),
        ));
    }
    Ok(records)
}

/// Paths of shard `id`'s data and index files: `{id:06}.bin`, `{id:06}.idx`.
pub fn shard_paths(dir: &Path, id: u64) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("{id:06}.{DATA_EXTENSION}")),
        dir.join(format!("{id:06}.{INDEX_EXTENSION}")),
    )
}

/// The shard number of a file named like a shard (`000042.bin`, `000042.idx`).
pub fn parse_shard_name(name: &str) -> Option<u64> {
    let (stem, extension) = name.split_once('.')?;
    let is_shard_extension = extension == DATA_EXTENSION || extension == INDEX_EXTENSION;
    if !is_shard_extension || stem.len() < 6 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Prefix of a commit file's name: `commit.{shards:06}.json` describes the
/// committed state with that many shards (schema, metadata and statistics of the
/// fields beside the records; FORMAT.md, "Fields"). The reference ignores it.
pub const COMMIT_FILE_PREFIX: &str = "commit.";
/// Extension of a commit file.
pub const COMMIT_FILE_EXTENSION: &str = "json";
/// Prefix of the temporary name a commit file is written under when it replaces
/// an existing one (a metadata-only commit).
pub const COMMIT_FILE_TMP_PREFIX: &str = ".commit.";
/// Directory inside a dataset where distributed writers stage their parts:
/// `_staging/<job id>/<task:06>-<attempt>/` is one part, a dataset of its own,
/// merged into the dataset when the job commits (FORMAT.md, "Staging"). The
/// reference ignores it.
pub const STAGING_DIR: &str = "_staging";
/// Lock file of a staging job (`_staging/<job id>/.bcd-job.lock`), held by the
/// job's driver from its start to its commit or abort, so that garbage
/// collection leaves a running job alone.
pub const JOB_LOCK_NAME: &str = ".bcd-job.lock";
/// Suffix of a part's claim (`_staging/<job id>/<part>.bcd-part.lock`), made by
/// the task attempt writing `<part>` before the part's directory and held
/// (flock) until its part is written, so that the driver's commit or abort, and
/// garbage collection, remove a part only once no attempt writes it.
pub const PART_CLAIM_SUFFIX: &str = ".bcd-part.lock";
/// Commit files larger than this are refused unread (one holds a schema,
/// metadata and statistics totals: kilobytes). The fields crate, which decodes
/// them, declares the same limit (`bcd_fields::MAX_COMMIT_BYTES`); neither
/// crate depends on the other, and the pipeline checks at compile time that they
/// agree.
pub const MAX_COMMIT_FILE_BYTES: u64 = 64 << 20;
/// Longest suffix of a sidecar file's name (`fields.arrow` in `000003.fields.arrow`).
pub const MAX_SIDECAR_SUFFIX: usize = 32;

/// Path of shard `id`'s sidecar with `suffix`: `{id:06}.{suffix}`. Sidecars are
/// files beside a shard that this project writes and the reference ignores.
pub fn sidecar_path(dir: &Path, id: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{id:06}.{suffix}"))
}

/// Whether `suffix` can name a sidecar: 1 to [`MAX_SIDECAR_SUFFIX`] characters of
/// `[a-z0-9._-]`, starting with a letter, and not a shard file's own extension.
pub fn is_sidecar_suffix(suffix: &str) -> bool {
    (1..=MAX_SIDECAR_SUFFIX).contains(&suffix.len())
        && suffix.as_bytes()[0].is_ascii_lowercase()
        && suffix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        && suffix != DATA_EXTENSION
        && suffix != INDEX_EXTENSION
}

/// The shard number and suffix of a file named like a sidecar (`000042.stats.json`).
pub fn parse_sidecar_name(name: &str) -> Option<(u64, &str)> {
    let (stem, suffix) = name.split_once('.')?;
    if stem.len() < 6 || !stem.bytes().all(|b| b.is_ascii_digit()) || !is_sidecar_suffix(suffix) {
        return None;
    }
    Some((stem.parse().ok()?, suffix))
}

/// Path of the commit file of the state with `shards` committed shards.
pub fn commit_file_path(dir: &Path, shards: u64) -> PathBuf {
    dir.join(format!(
        "{COMMIT_FILE_PREFIX}{shards:06}.{COMMIT_FILE_EXTENSION}"
    ))
}

/// The shard count of a file named like a commit file (`commit.000042.json`).
pub fn parse_commit_file_name(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(COMMIT_FILE_PREFIX)?;
    let stem = rest
        .strip_suffix(COMMIT_FILE_EXTENSION)?
        .strip_suffix('.')?;
    if stem.len() < 6 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Prefix of a merge record's name: `merged.{shards:06}.json` lists the parts a
/// merge that made the state of `shards` shards moved, so that a merge re-run
/// after a kill between its commit and the parts' removal recognises them
/// (FORMAT.md, "Merging datasets"). The reference ignores it.
pub const MERGE_RECORD_PREFIX: &str = "merged.";
/// Merge records larger than this are passed over unread (one holds six numbers
/// per part: kilobytes).
pub const MAX_MERGE_RECORD_BYTES: u64 = 64 << 20;

/// Path of the merge record of the state with `shards` committed shards.
pub fn merge_record_path(dir: &Path, shards: u64) -> PathBuf {
    dir.join(format!("{MERGE_RECORD_PREFIX}{shards:06}.json"))
}

/// The shard count of a file named like a merge record (`merged.000042.json`).
pub fn parse_merge_record_name(name: &str) -> Option<u64> {
    let stem = name
        .strip_prefix(MERGE_RECORD_PREFIX)?
        .strip_suffix(".json")?;
    if stem.len() < 6 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Suffix of a shard's content hashes (`000003.xxh128`): the XXH3-128 of each
/// record's value, uncompressed, [`CONTENT_HASH_SIZE`] bytes per record in
/// record order (FORMAT.md section 7). The reference ignores it.
pub const CONTENT_HASH_SUFFIX: &str = "xxh128";
/// Bytes of one content hash: the 128-bit digest in its canonical byte order
/// (big-endian, as `xxhash.xxh3_128(value).digest()` gives it).
pub const CONTENT_HASH_SIZE: usize = 16;
/// Prefix of the temporary name content hashes built for a committed shard
/// (`bcd dedup-index`) are written under before their rename.
pub const CONTENT_HASH_TMP_PREFIX: &str = ".bcd-content.tmp-";

/// Prefix of a view file's name: `view.NAME` holds the records of the view
/// `NAME` (FORMAT.md, "Views"). The reference ignores it.
pub const VIEW_FILE_PREFIX: &str = "view.";
/// Prefix of the temporary names a view file is written under before its
/// rename (`.view.NAME.tmp-<pid>-<n>`); a leftover after a crash is safe to delete.
pub const VIEW_FILE_TMP_PREFIX: &str = ".view.";
/// Longest view name, in bytes.
pub const MAX_VIEW_NAME: usize = 128;
/// Longest expression a view file records, in bytes.
pub const MAX_VIEW_EXPRESSION: usize = 64 << 10;
/// The first 8 bytes of a view file.
pub const VIEW_MAGIC: &[u8; 8] = b"BCDVIEW1";
/// The version a view file's header gives.
pub const VIEW_VERSION: u32 = 1;
/// Bytes of a view file's header, before the expression.
pub const VIEW_HEADER_LEN: usize = 96;
/// Views evaluated over more records than this store 8 bytes per selected
/// record; others 4.
pub const VIEW_NARROW_MAX_RECORDS: u64 = 1 << 32;

/// Whether `name` can name a view: 1 to [`MAX_VIEW_NAME`] bytes of
/// `[A-Za-z0-9._-]`, not starting with a dot.
pub fn is_view_name(name: &str) -> bool {
    (1..=MAX_VIEW_NAME).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Path of the file of the view `name`: `view.NAME`.
pub fn view_file_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{VIEW_FILE_PREFIX}{name}"))
}

/// The view name of a file named like a view file (`view.cats` is view `cats`).
pub fn parse_view_file_name(name: &str) -> Option<&str> {
    name.strip_prefix(VIEW_FILE_PREFIX)
        .filter(|n| is_view_name(n))
}

/// Bytes at each end of a shard's data file that its fingerprint hashes
/// (FORMAT.md section 9).
pub const FINGERPRINT_EDGE_BYTES: usize = crate::fingerprint::EDGE_BYTES;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_idx_checks_entries_and_the_data_length() {
        let (data, index) = shard_paths(Path::new("d"), 0);
        let idx: Vec<u8> = [1u32, 2, 3, 4]
            .iter()
            .flat_map(|n| n.to_le_bytes())
            .collect();
        let mut starts = Vec::new();
        let records = read_idx(&idx, true, 10, &data, &index, |s| starts.push(s)).unwrap();
        assert_eq!((records, starts), (2, vec![0, 3]));
        assert_eq!(record_sizes(&idx, true, 1), (3, 4));
        assert_eq!(record_sizes(&idx, false, 3), (0, 4));
        assert_eq!(record_sizes(&idx, true, 2), (0, 0));

        let message = |r: crate::Result<u64>| r.unwrap_err().to_string();
        let odd = message(read_idx(&idx[..12], true, 10, &data, &index, |_| {}));
        assert!(
            odd.contains("d/000000.idx")
                && odd.contains(
                    "12 bytes is not a whole number of 8-byte index entries (keyed dataset)"
                ),
            "{odd}"
        );
        let past = message(read_idx(&idx, true, 9, &data, &index, |_| {}));
        assert!(
            past.contains("d/000000.idx")
                && past
                    .contains("record 1 ends at byte 10, past the end of d/000000.bin (9 bytes)"),
            "{past}"
        );
        let short = message(read_idx(&idx, true, 11, &data, &index, |_| {}));
        assert!(
            short.contains("d/000000.bin")
                && short.contains("11 bytes, but its index d/000000.idx accounts for 10"),
            "{short}"
        );
    }

    #[test]
    fn sidecar_names() {
        let dir = Path::new("d");
        assert_eq!(
            sidecar_path(dir, 3, "fields.arrow"),
            Path::new("d/000003.fields.arrow")
        );
        assert_eq!(
            parse_sidecar_name("000003.fields.arrow"),
            Some((3, "fields.arrow"))
        );
        assert_eq!(
            parse_sidecar_name("1234567.stats.json"),
            Some((1_234_567, "stats.json"))
        );
        for not in [
            "000003.bin",
            "000003.idx",
            "00003.stats.json",
            "000003.",
            "000003.Stats",
            "x00003.a",
            "000003.9a",
        ] {
            assert_eq!(parse_sidecar_name(not), None, "{not}");
        }
        assert_eq!(view_file_path(dir, "cats"), Path::new("d/view.cats"));
        assert_eq!(parse_view_file_name("view.cats"), Some("cats"));
        assert_eq!(parse_view_file_name("view.a.b-c_9"), Some("a.b-c_9"));
        for not in [
            "view.",
            "view..x",
            "view.a b",
            "views.a",
            ".view.a.tmp-1-2",
            "view.caf\u{e9}",
        ] {
            assert_eq!(parse_view_file_name(not), None, "{not}");
        }
        assert!(is_view_name(&"v".repeat(MAX_VIEW_NAME)));
        assert!(!is_view_name(&"v".repeat(MAX_VIEW_NAME + 1)));
        assert_eq!(commit_file_path(dir, 7), Path::new("d/commit.000007.json"));
        assert_eq!(parse_commit_file_name("commit.000007.json"), Some(7));
        assert_eq!(
            parse_commit_file_name("commit.1000000.json"),
            Some(1_000_000)
        );
        for not in [
            "commit.7.json",
            "commit.000007.jsonx",
            "commit.000007",
            ".commit.000007.json",
        ] {
            assert_eq!(parse_commit_file_name(not), None, "{not}");
        }
    }
}
