//! The two meta pages of an LMDB `data.mdb`, read and checked before liblmdb
//! is given the file. liblmdb trusts its file: a page number past the end of
//! the file, or a page size that does not match, makes it read outside its
//! mapping. What can be checked cheaply is checked here, against the file's
//! real size (a sparse file may claim any size, so the meta page must agree
//! with the size, not the other way round).
//!
//! The layout (liblmdb 0.9, `MDB_DATA_VERSION` 1, a 64-bit build: every
//! integer little-endian on the machines bcd runs on, pointers and page
//! numbers 8 bytes):
//!
//! ```text
//! page 0 at byte 0, page 1 at byte `page_size` (page 0's `page_size`):
//!   0  u64 page number     8  u16 pad   10  u16 flags (P_META = 0x08)   12  u32 lower/upper
//!  16  u32 magic 0xBEEFC0DE   20  u32 version (1)   24  u64 fixed address   32  u64 map size
//!  40  MDB_db free-list: u32 page size, u16 env flags, u16 depth, u64 branch, leaf,
//!      overflow pages, u64 entries, u64 root
//!  88  MDB_db main (unnamed) database: the same 48 bytes
//! 136  u64 last page number   144  u64 transaction id
//! ```
//!
//! liblmdb reads page 0, takes its page size, reads page 1 at that offset and
//! uses the meta page of the larger transaction id (page 0 on a tie); so does
//! [`pick`].

use std::fmt;

/// Bytes of a page header.
pub const PAGE_HEADER: usize = 16;
/// Bytes of a meta page that are read: the header and `MDB_meta`.
pub const META_LEN: usize = PAGE_HEADER + 136;
/// `MDB_MAGIC`.
pub const MAGIC: u32 = 0xBEEF_C0DE;
/// `MDB_DATA_VERSION` of liblmdb 0.9.
pub const DATA_VERSION: u32 = 1;
/// The page flag of a meta page.
const P_META: u16 = 0x08;
/// The root of an empty tree.
pub const NO_PAGE: u64 = u64::MAX;
/// Smallest page size accepted (liblmdb writes the OS page size, 4 KiB on
/// the machines bcd runs on; 512 bytes leaves room for other systems).
pub const MIN_PAGE_SIZE: u32 = 512;
/// `MAX_PAGESIZE` of liblmdb 0.9 (32 KiB: a node offset is a u16).
pub const MAX_PAGE_SIZE: u32 = 0x8000;
/// `CURSOR_STACK`: the deepest tree liblmdb walks.
pub const MAX_DEPTH: u16 = 32;
/// `MDB_DUPSORT`: a database whose keys may have several values.
pub const DUPSORT: u16 = 0x04;
/// Offset of the magic in a meta page.
pub const MAGIC_OFFSET: usize = PAGE_HEADER;

/// One database's record in a meta page (`MDB_db`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DbRecord {
    /// `md_flags` (of the main database: its `MDB_DUPSORT` and others).
    pub flags: u16,
    /// Depth of the tree (0 when empty).
    pub depth: u16,
    /// Number of entries.
    pub entries: u64,
    /// Root page, [`NO_PAGE`] when empty.
    pub root: u64,
}

/// One meta page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The page size (page 0's is the environment's).
    pub page_size: u32,
    /// The main (unnamed) database.
    pub main: DbRecord,
    /// The free-page database.
    pub free: DbRecord,
    /// The last page number in use.
    pub last_page: u64,
    /// The transaction that wrote this meta page.
    pub txnid: u64,
}

/// Why a `data.mdb` was refused before liblmdb saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaError {
    /// The file is shorter than the pages it must hold.
    TooShort {
        /// Which page.
        page: u8,
        /// The file's size.
        size: u64,
    },
    /// A meta page lacks the page flag, the magic or the version.
    NotMeta {
        /// Which page.
        page: u8,
        /// What is wrong.
        what: String,
    },
    /// The page size is not a power of two in range.
    PageSize(u32),
    /// A number of the meta page in use is out of bounds.
    Bound {
        /// Which page.
        page: u8,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaError::TooShort { page, size } => write!(
                f,
                "the file ({size} bytes) is too short to hold meta page {page}"
            ),
            MetaError::NotMeta { page, what } => write!(f, "meta page {page}: {what}"),
            MetaError::PageSize(size) => write!(
                f,
                "meta page 0: page size {size} is not a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}"
            ),
            MetaError::Bound { page, what } => write!(f, "meta page {page}: {what}"),
        }
    }
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().expect("2 bytes"))
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn db_record(bytes: &[u8], at: usize) -> DbRecord {
    DbRecord {
        flags: u16_at(bytes, at + 4),
        depth: u16_at(bytes, at + 6),
        entries: u64_at(bytes, at + 32),
        root: u64_at(bytes, at + 40),
    }
}

/// Parses one meta page's first [`META_LEN`] bytes (shorter is refused).
pub fn parse(bytes: &[u8], page: u8) -> Result<Meta, MetaError> {
    let not_meta = |what: String| MetaError::NotMeta { page, what };
    if bytes.len() < META_LEN {
        return Err(not_meta(format!(
            "{} bytes, {META_LEN} needed",
            bytes.len()
        )));
    }
    if u16_at(bytes, 10) & P_META == 0 {
        return Err(not_meta(
            "not flagged as a meta page; not an LMDB data file".into(),
        ));
    }
    let magic = u32_at(bytes, MAGIC_OFFSET);
    if magic != MAGIC {
        return Err(not_meta(format!(
            "magic {magic:#010x}, not LMDB's {MAGIC:#010x}; not an LMDB data file"
        )));
    }
    let version = u32_at(bytes, 20);
    if version != DATA_VERSION {
        return Err(not_meta(format!(
            "data format version {version}; this reader knows LMDB 0.9's version {DATA_VERSION}"
        )));
    }
    Ok(Meta {
        page_size: u32_at(bytes, 40),
        free: db_record(bytes, 40),
        main: db_record(bytes, 88),
        last_page: u64_at(bytes, 136),
        txnid: u64_at(bytes, 144),
    })
}

/// Page 0's page size, checked.
pub fn page_size(page0: &Meta) -> Result<u32, MetaError> {
    let size = page0.page_size;
    if !size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size) {
        return Err(MetaError::PageSize(size));
    }
    Ok(size)
}

/// The meta page liblmdb uses (the larger transaction id, page 0 on a tie),
/// checked against the file's size: its last page and its trees' roots within
/// the file, trees no deeper than liblmdb walks. Returns it and its number.
pub fn pick(page0: Meta, page1: Meta, file_size: u64) -> Result<(Meta, u8), MetaError> {
    let psize = u64::from(page_size(&page0)?);
    let (meta, number) = if page0.txnid < page1.txnid {
        (page1, 1)
    } else {
        (page0, 0)
    };
    let bound = |what: String| MetaError::Bound { page: number, what };
    let pages_in_file = file_size / psize;
    if meta.last_page < 1 || meta.last_page >= pages_in_file {
        return Err(bound(format!(
            "last page {} is past the end of the file ({pages_in_file} pages of {psize} bytes)",
            meta.last_page
        )));
    }
    for (name, db) in [("main", meta.main), ("free-page", meta.free)] {
        if db.root == NO_PAGE {
            continue;
        }
        if db.root < 2 || db.root > meta.last_page {
            return Err(bound(format!(
                "the {name} database's root page {} is not a page in use (2 to {})",
                db.root, meta.last_page
            )));
        }
        if db.depth == 0 || db.depth > MAX_DEPTH {
            return Err(bound(format!(
                "the {name} database's depth {} is not 1 to {MAX_DEPTH}",
                db.depth
            )));
        }
    }
    Ok((meta, number))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(psize: u32, txnid: u64, last: u64, root: u64) -> Vec<u8> {
        let mut p = vec![0u8; META_LEN];
        p[10..12].copy_from_slice(&P_META.to_le_bytes());
        p[16..20].copy_from_slice(&MAGIC.to_le_bytes());
        p[20..24].copy_from_slice(&DATA_VERSION.to_le_bytes());
        p[40..44].copy_from_slice(&psize.to_le_bytes());
        p[80..88].copy_from_slice(&NO_PAGE.to_le_bytes());
        p[94..96].copy_from_slice(&1u16.to_le_bytes());
        p[128..136].copy_from_slice(&root.to_le_bytes());
        p[136..144].copy_from_slice(&last.to_le_bytes());
        p[144..152].copy_from_slice(&txnid.to_le_bytes());
        p
    }

    #[test]
    fn the_larger_transaction_wins_and_page_0_on_a_tie() {
        let a = parse(&page(4096, 7, 3, 3), 0).unwrap();
        let b = parse(&page(4096, 8, 4, 4), 1).unwrap();
        assert_eq!(pick(a, b, 5 * 4096).unwrap().1, 1);
        assert_eq!(pick(b, a, 5 * 4096).unwrap().1, 0);
        assert_eq!(pick(a, a, 5 * 4096).unwrap().1, 0);
    }

    #[test]
    fn numbers_past_the_file_are_refused() {
        let a = parse(&page(4096, 7, 9, 3), 0).unwrap();
        let b = parse(&page(4096, 1, 1, NO_PAGE), 1).unwrap();
        let error = pick(a, b, 5 * 4096).unwrap_err();
        assert!(
            error.to_string().contains("last page 9 is past the end"),
            "{error}"
        );
        let a = parse(&page(4096, 7, 4, 5), 0).unwrap();
        let error = pick(a, b, 5 * 4096).unwrap_err();
        assert!(error.to_string().contains("root page 5"), "{error}");
        let a = parse(&page(4095, 7, 4, 3), 0).unwrap();
        assert_eq!(pick(a, b, 5 * 4096).unwrap_err(), MetaError::PageSize(4095));
    }

    #[test]
    fn a_page_without_flag_magic_or_version_is_not_a_meta_page() {
        for (at, byte) in [(10, 0u8), (16, 0), (20, 2)] {
            let mut p = page(4096, 1, 1, NO_PAGE);
            p[at] = byte;
            assert!(
                matches!(parse(&p, 0), Err(MetaError::NotMeta { .. })),
                "{at}"
            );
        }
        assert!(parse(&page(4096, 1, 1, NO_PAGE)[..100], 0).is_err());
    }
}
