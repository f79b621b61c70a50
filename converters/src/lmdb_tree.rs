//! A walk of one LMDB B-tree's pages, made before liblmdb walks it: liblmdb
//! trusts every page header, node offset, size and page number it reads, and
//! a damaged file made it read outside the file (1.5% of the mutants of
//! `fuzz/lmdb_mutations.py`). Every branch and leaf page of the tree is read
//! once, every overflow run's first page; nothing is allocated beyond one page
//! and the set of the pages read.
//!
//! The layout (liblmdb 0.9, 64-bit, little-endian; FORMAT.md, "LMDB sources"):
//!
//! ```text
//! page header: u64 page number, u16 pad, u16 flags (branch 0x01, leaf 0x02,
//!   overflow 0x04, leaf2 0x20, sub-page 0x40), u16 lower, u16 upper
//!   (an overflow page: u32 page count at 12)
//! node pointers: u16 offsets from the page's start, (lower - 16) / 2 of them
//! node: u16 lo, u16 hi, u16 flags, u16 key size, the key, then the data
//!   branch: the child's page number is lo | hi << 16 | flags << 32
//!   leaf: the data size is lo | hi << 16; flags 0x01 the data is a u64
//!   overflow page number, 0x02 it is a named database's 48-byte record,
//!   0x04 it holds duplicates
//! ```
//!
//! What is checked: each page's number in its header, flags, lower and upper
//! bounds, every node within its page, child pages within the pages in use and
//! each page reached once (no cycles, no shared subtrees), every leaf at the
//! tree's recorded depth, overflow runs within the pages in use and large
//! enough for their data, and the entry count the database records.

use std::fmt;

/// Bytes of a page header.
const HEADER: usize = 16;
/// Bytes of a node's header.
const NODE: usize = 8;
const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const P_OVERFLOW: u16 = 0x04;
const F_BIGDATA: u16 = 0x01;
const F_SUBDATA: u16 = 0x02;
const F_DUPDATA: u16 = 0x04;
/// Bytes of a named database's record (`MDB_db`).
pub const DB_RECORD: usize = 48;

/// Why a tree was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeError {
    /// The page where it was found.
    pub page: u64,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}: {}", self.page, self.reason)
    }
}

/// A named database's entry in the main database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    /// Its name (the entry's key).
    pub name: Vec<u8>,
    /// Its flags, depth, entry count and root page.
    pub flags: u16,
    /// Depth of its tree.
    pub depth: u16,
    /// Entries it records.
    pub entries: u64,
    /// Its root page ([`crate::lmdb_meta::NO_PAGE`] when empty).
    pub root: u64,
}

/// What the walk found.
#[derive(Debug, Default)]
pub struct Walked {
    /// Entries (leaf nodes).
    pub entries: u64,
    /// The entries that are named databases, in key order.
    pub named: Vec<Named>,
}

/// The tree to walk: its root, depth and entry count, as its record says.
#[derive(Clone, Copy, Debug)]
pub struct Tree {
    /// Root page, [`crate::lmdb_meta::NO_PAGE`] for an empty tree.
    pub root: u64,
    /// Depth (1: the root is a leaf).
    pub depth: u16,
    /// Entries recorded.
    pub entries: u64,
}

fn u16_at(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

/// Walks `tree`, whose pages are `page_size` bytes, numbered up to
/// `last_page`; `read(n, buf)` fills `buf` with page `n`'s first `buf.len()`
/// bytes (page numbers given to it are at most `last_page`).
pub fn walk(
    tree: Tree,
    page_size: usize,
    last_page: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
) -> Result<Walked, WalkError> {
    let mut walked = Walked::default();
    if tree.root == crate::lmdb_meta::NO_PAGE {
        if tree.entries != 0 {
            return Err(WalkError::Tree(TreeError {
                page: tree.root,
                reason: format!("an empty tree records {} entries", tree.entries),
            }));
        }
        return Ok(walked);
    }
    // The pages reached: as many as were read (a bitmap of every page in use
    // would be sized by what the meta page claims).
    let mut seen = std::collections::HashSet::new();
    let mut page = vec![0u8; page_size];
    let mut header = [0u8; HEADER];
    // (page, depth from the root, 1-based)
    let mut stack: Vec<(u64, u16)> = vec![(tree.root, 1)];
    while let Some((number, depth)) = stack.pop() {
        let fail = |reason: String| {
            WalkError::Tree(TreeError {
                page: number,
                reason,
            })
        };
        if number < 2 || number > last_page {
            return Err(fail(format!(
                "a page number past the pages in use (2 to {last_page})"
            )));
        }
        if !seen.insert(number) {
            return Err(fail(
                "reached twice: the tree's pages point back at each other".into(),
            ));
        }
        read(number, &mut page).map_err(WalkError::Io)?;
        let recorded = u64::from_le_bytes(page[..8].try_into().expect("8 bytes"));
        if recorded != number {
            return Err(fail(format!("its header says page {recorded}")));
        }
        let flags = u16_at(&page, 10);
        let (lower, upper) = (
            usize::from(u16_at(&page, 12)),
            usize::from(u16_at(&page, 14)),
        );
        if lower < HEADER
            || lower > upper
            || upper > page_size
            || !(lower - HEADER).is_multiple_of(2)
        {
            return Err(fail(format!(
                "bounds lower {lower}, upper {upper} do not fit a page of {page_size} bytes"
            )));
        }
        let keys = (lower - HEADER) / 2;
        let is_leaf = match flags & !0x10 {
            P_BRANCH => false,
            P_LEAF => true,
            other => return Err(fail(format!("flags {other:#x}: not a branch or leaf page"))),
        };
        if is_leaf != (depth == tree.depth) {
            return Err(fail(format!(
                "a {} at depth {depth} of a tree of depth {}",
                if is_leaf { "leaf" } else { "branch" },
                tree.depth
            )));
        }
        if keys == 0 {
            return Err(fail("a page without entries".into()));
        }
        for i in 0..keys {
            let offset = usize::from(u16_at(&page, HEADER + 2 * i));
            if offset < upper || offset + NODE > page_size {
                return Err(fail(format!(
                    "node {i} at byte {offset} lies outside the page's nodes"
                )));
            }
            let node = &page[offset..];
            let (lo, hi, node_flags) = (u16_at(node, 0), u16_at(node, 2), u16_at(node, 4));
            let key_size = usize::from(u16_at(node, 6));
            let end_of_key = offset + NODE + key_size;
            if end_of_key > page_size {
                return Err(fail(format!(
                    "node {i}'s key of {key_size} bytes runs past the page"
                )));
            }
            let low = u64::from(lo) | (u64::from(hi) << 16);
            if !is_leaf {
                if depth >= tree.depth {
                    return Err(fail("a branch below the tree's depth".into()));
                }
                stack.push((low | (u64::from(node_flags) << 32), depth + 1));
                continue;
            }
            walked.entries += 1;
            if node_flags & F_DUPDATA != 0 {
                return Err(fail(format!(
                    "node {i} holds duplicate values (MDB_DUPSORT); bcd keys are unique"
                )));
            }
            let data = &page[end_of_key..];
            if node_flags & F_BIGDATA != 0 {
                if data.len() < 8 {
                    return Err(fail(format!(
                        "node {i}'s overflow page number runs past the page"
                    )));
                }
                let first = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
                let needed = (HEADER as u64 - 1 + low) / page_size as u64 + 1;
                if first < 2 || first > last_page {
                    return Err(fail(format!(
                        "node {i}'s overflow page {first} is past the pages in use"
                    )));
                }
                read(first, &mut header).map_err(WalkError::Io)?;
                let count = u64::from(u32::from_le_bytes(
                    header[12..16].try_into().expect("4 bytes"),
                ));
                let ok = u64::from_le_bytes(header[..8].try_into().expect("8 bytes")) == first
                    && u16_at(&header, 10) & P_OVERFLOW != 0
                    && count >= needed
                    && first + count - 1 <= last_page;
                if !ok {
                    return Err(fail(format!("node {i}'s {low} bytes on overflow page {first} ({count} pages): not an overflow run within the pages in use that holds them")));
                }
                continue;
            }
            if low as usize > data.len() {
                return Err(fail(format!(
                    "node {i}'s {low} bytes of data run past the page"
                )));
            }
            if node_flags & F_SUBDATA != 0 {
                if low as usize != DB_RECORD {
                    return Err(fail(format!(
                        "node {i} names a database with a record of {low} bytes"
                    )));
                }
                let record = &data[..DB_RECORD];
                walked.named.push(Named {
                    name: page[offset + NODE..end_of_key].to_vec(),
                    flags: u16_at(record, 4),
                    depth: u16_at(record, 6),
                    entries: u64::from_le_bytes(record[32..40].try_into().expect("8 bytes")),
                    root: u64::from_le_bytes(record[40..48].try_into().expect("8 bytes")),
                });
            }
        }
    }
    if walked.entries != tree.entries {
        return Err(WalkError::Tree(TreeError {
            page: tree.root,
            reason: format!(
                "the tree holds {} entries and records {}",
                walked.entries, tree.entries
            ),
        }));
    }
    Ok(walked)
}

/// Why a walk stopped.
#[derive(Debug)]
pub enum WalkError {
    /// The tree is damaged.
    Tree(TreeError),
    /// A page could not be read.
    Io(std::io::Error),
}
