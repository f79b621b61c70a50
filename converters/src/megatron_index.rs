//! The `.idx` file of a Megatron indexed dataset (the `MMIDIDX` layout of
//! `megatron/core/datasets/indexed_dataset.py` in NVIDIA/Megatron-LM, its
//! `_IndexWriter` and `_IndexReader`), parsed from bytes and checked against
//! itself and against the size of its `.bin`. All integers are little-endian:
//!
//! ```text
//! 0   9 bytes  b"MMIDIDX\x00\x00"
//! 9   u64      version, 1
//! 17  u8       dtype code (DType: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//!              6 float64, 7 float32, 8 uint16)
//! 18  u64      sequence count N
//! 26  u64      document count D
//! 34  N x i32  sequence lengths, in tokens
//!     N x i64  sequence pointers, byte offsets into the .bin
//!     D x i64  document indices: the first sequence of each document, then
//!              (as IndexedDatasetBuilder writes them) the sequence count
//!     N x i8   sequence modes, only in a multimodal dataset
//! ```
//!
//! Whether the modes are there is not written in the file (Megatron's reader is
//! told); here the file's size says it: exactly N bytes more than the rest.

use std::fmt;

/// The magic bytes an `.idx` file starts with (`_INDEX_HEADER`).
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The only version Megatron writes and reads.
pub const VERSION: u64 = 1;
/// Bytes before the sequence lengths.
pub const HEADER_LEN: usize = 34;

/// A token type of Megatron's `DType` enum, by its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dtype(u8);

/// Every dtype code and its NumPy name, as `DType` numbers them.
const DTYPES: [(u8, &str, usize); 8] = [
    (1, "uint8", 1),
    (2, "int8", 1),
    (3, "int16", 2),
    (4, "int32", 4),
    (5, "int64", 8),
    (6, "float64", 8),
    (7, "float32", 4),
    (8, "uint16", 2),
];

impl Dtype {
    /// The dtype of `code`, if `DType` has one.
    pub fn from_code(code: u8) -> Option<Dtype> {
        DTYPES.iter().any(|d| d.0 == code).then_some(Dtype(code))
    }
    /// The dtype NumPy calls `name` (`uint16`, ...).
    pub fn from_name(name: &str) -> Option<Dtype> {
        DTYPES.iter().find(|d| d.1 == name).map(|d| Dtype(d.0))
    }
    /// Its code in the `.idx` file.
    pub fn code(self) -> u8 {
        self.0
    }
    /// Its NumPy name.
    pub fn name(self) -> &'static str {
        self.entry().1
    }
    /// Bytes per token.
    pub fn size(self) -> usize {
        self.entry().2
    }
    /// The names of every dtype, in code order, for messages.
    pub fn names() -> Vec<&'static str> {
        DTYPES.iter().map(|d| d.1).collect()
    }
    fn entry(self) -> &'static (u8, &'static str, usize) {
        DTYPES
            .iter()
            .find(|d| d.0 == self.0)
            .expect("a Dtype is made only from a known code")
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an `.idx` file cannot be read; each names the byte offset or the entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// The file is shorter than its fixed header.
    #[error("the file holds {0} bytes, fewer than the {HEADER_LEN} of the header")]
    ShortHeader(usize),
    /// It does not start with [`MAGIC`].
    #[error("byte 0: not a Megatron index (no MMIDIDX header)")]
    BadMagic,
    /// Another version than 1.
    #[error("byte 9: version {0}, but only version 1 is known")]
    BadVersion(u64),
    /// A dtype code `DType` does not have.
    #[error("byte 17: dtype code {0} is not one of Megatron's (1 to 8)")]
    BadDtype(u8),
    /// The counts declare arrays that are not what the file holds.
    #[error(
        "bytes 18..34: {sequences} sequences and {documents} documents need {needed} bytes \
         (or that plus {sequences} for modes), but the file holds {actual}"
    )]
    SizeMismatch {
        /// Declared sequence count.
        sequences: u64,
        /// Declared document count.
        documents: u64,
        /// Bytes the counts need (saturated at `u64::MAX`).
        needed: u64,
        /// Bytes the file holds.
        actual: u64,
    },
    /// A document index out of order, past the sequences, or a first one not 0.
    #[error("document index {document}: sequence {value} {reason}")]
    BadDocument {
        /// Which document index.
        document: u64,
        /// Its value.
        value: i64,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A sequence whose length or pointer cannot be, or reaches beyond the `.bin`.
    #[error("sequence {sequence}: {reason}")]
    BadSequence {
        /// Which sequence.
        sequence: u64,
        /// What is wrong with it.
        reason: String,
    },
}

/// What the fixed header of an `.idx` says, checked against the file's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The token type.
    pub dtype: Dtype,
    /// Sequence count.
    pub sequences: u64,
    /// Document index count.
    pub documents: u64,
    /// Whether sequence modes follow the arrays.
    pub multimodal: bool,
}

/// Checks the first bytes of an `.idx` (at least [`HEADER_LEN`] of them, or
/// all of a shorter file) against `file_len`, the file's size: the magic, the
/// version, the dtype code and that the counts declare exactly the arrays the
/// file holds. Nothing the counts claim is allocated; a caller reads the rest
/// only after this.
pub fn check_header(head: &[u8], file_len: u64) -> Result<Header, IndexError> {
    if head.len() < HEADER_LEN {
        return Err(IndexError::ShortHeader(head.len()));
    }
    if &head[..9] != MAGIC {
        return Err(IndexError::BadMagic);
    }
    let version = u64_at(head, 9);
    if version != VERSION {
        return Err(IndexError::BadVersion(version));
    }
    let dtype = Dtype::from_code(head[17]).ok_or(IndexError::BadDtype(head[17]))?;
    let (n, d) = (u64_at(head, 18), u64_at(head, 26));
    let needed = n
        .checked_mul(12)
        .and_then(|s| d.checked_mul(8).and_then(|t| s.checked_add(t)))
        .and_then(|s| s.checked_add(HEADER_LEN as u64));
    let multimodal = match needed {
        Some(needed) if file_len == needed => false,
        Some(needed) if needed.checked_add(n) == Some(file_len) && n > 0 => true,
        _ => {
            return Err(IndexError::SizeMismatch {
                sequences: n,
                documents: d,
                needed: needed.unwrap_or(u64::MAX),
                actual: file_len,
            })
        }
    };
    Ok(Header {
        dtype,
        sequences: n,
        documents: d,
        multimodal,
    })
}

/// A parsed, checked `.idx` file. Its arrays stay in the bytes; accessors decode.
#[derive(Debug)]
pub struct MegatronIndex {
    bytes: Vec<u8>,
    dtype: Dtype,
    sequences: usize,
    documents: usize,
    multimodal: bool,
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

impl MegatronIndex {
    /// Parses `bytes`, a whole `.idx` file, and checks every sequence against
    /// `bin_len`, the size of its `.bin`. The counts are checked against the
    /// file's real size before anything depends on them.
    pub fn parse(bytes: Vec<u8>, bin_len: u64) -> Result<MegatronIndex, IndexError> {
        let header = check_header(&bytes, bytes.len() as u64)?;
        let (dtype, n, d, multimodal) = (
            header.dtype,
            header.sequences,
            header.documents,
            header.multimodal,
        );
        // Both counts fit in the file, so in usize.
        let index = MegatronIndex {
            bytes,
            dtype,
            sequences: n as usize,
            documents: d as usize,
            multimodal,
        };
        index.check_documents()?;
        for sequence in 0..index.sequences {
            index.check_sequence(sequence, bin_len)?;
        }
        Ok(index)
    }

    fn check_documents(&self) -> Result<(), IndexError> {
        if self.documents == 0 && self.sequences > 0 {
            return Err(IndexError::BadDocument {
                document: 0,
                value: 0,
                reason: "is missing: sequences without a document index",
            });
        }
        let mut previous = 0i64;
        for document in 0..self.documents {
            let value = self.document_start(document);
            let reason = if document == 0 && value != 0 {
                "is not 0, the first sequence"
            } else if value < previous {
                "comes before the previous document's"
            } else if value as u64 > self.sequences as u64 {
                "is past the last sequence"
            } else {
                previous = value;
                continue;
            };
            return Err(IndexError::BadDocument {
                document: document as u64,
                value,
                reason,
            });
        }
        Ok(())
    }

    fn check_sequence(&self, sequence: usize, bin_len: u64) -> Result<(), IndexError> {
        let bad = |reason: String| IndexError::BadSequence {
            sequence: sequence as u64,
            reason,
        };
        let length = self.raw_length(sequence);
        let pointer = self.raw_pointer(sequence);
        if length < 0 {
            return Err(bad(format!("negative length {length}")));
        }
        if pointer < 0 {
            return Err(bad(format!("negative pointer {pointer}")));
        }
        let bytes = length as u64 * self.dtype.size() as u64;
        match (pointer as u64).checked_add(bytes) {
            Some(end) if end <= bin_len => Ok(()),
            _ => Err(bad(format!(
                "{length} tokens of {} at byte {pointer} reach beyond the end of the .bin ({bin_len} bytes)",
                self.dtype
            ))),
        }
    }

    fn raw_length(&self, sequence: usize) -> i32 {
        let at = HEADER_LEN + 4 * sequence;
        i32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }

    fn raw_pointer(&self, sequence: usize) -> i64 {
        u64_at(&self.bytes, HEADER_LEN + 4 * self.sequences + 8 * sequence) as i64
    }

    /// The token type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// Number of sequences.
    pub fn sequences(&self) -> usize {
        self.sequences
    }
    /// Number of document indices (as the file counts them: one more than the
    /// documents when the last ends at the sequence count).
    pub fn documents(&self) -> usize {
        self.documents
    }
    /// Whether the file holds sequence modes.
    pub fn multimodal(&self) -> bool {
        self.multimodal
    }
    /// Tokens in `sequence` (checked non-negative by [`MegatronIndex::parse`]).
    pub fn length(&self, sequence: usize) -> u64 {
        self.raw_length(sequence) as u64
    }
    /// Byte offset of `sequence` in the `.bin` (checked in bounds).
    pub fn pointer(&self, sequence: usize) -> u64 {
        self.raw_pointer(sequence) as u64
    }
    /// The `document`-th document index (checked in order and in range).
    pub fn document_start(&self, document: usize) -> i64 {
        u64_at(&self.bytes, HEADER_LEN + 12 * self.sequences + 8 * document) as i64
    }
    /// The mode of `sequence`, in a multimodal dataset.
    pub fn mode(&self, sequence: usize) -> Option<i8> {
        self.multimodal.then(|| {
            self.bytes[HEADER_LEN + 12 * self.sequences + 8 * self.documents + sequence] as i8
        })
    }
}

/// Writes an `.idx` file as `_IndexWriter` does: pointers are the running sum
/// of the lengths times the dtype's size, from 0.
pub fn write_index(
    dtype: Dtype,
    lengths: &[i32],
    document_starts: &[i64],
    modes: Option<&[i8]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + 13 * lengths.len() + 8 * document_starts.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(dtype.code());
    out.extend_from_slice(&(lengths.len() as u64).to_le_bytes());
    out.extend_from_slice(&(document_starts.len() as u64).to_le_bytes());
    for length in lengths {
        out.extend_from_slice(&length.to_le_bytes());
    }
    let mut pointer = 0i64;
    for length in lengths {
        out.extend_from_slice(&pointer.to_le_bytes());
        pointer += i64::from(*length) * dtype.size() as i64;
    }
    for start in document_starts {
        out.extend_from_slice(&start.to_le_bytes());
    }
    if let Some(modes) = modes {
        out.extend(modes.iter().map(|m| *m as u8));
    }
    out
}
