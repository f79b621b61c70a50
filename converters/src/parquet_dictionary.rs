//! The longest entry of a column chunk's dictionary page, which bounds what one
//! row of a binary or string column decoded as plain arrays (each row a copy of
//! its entry) adds to a batch. The page headers of the chunk are checked before
//! ([`crate::parquet_pages::check_chunk`]), so the page read here decodes to at
//! most [`crate::parquet_pages::MAX_PAGE_SIZE`] bytes, as it will for the decoder.

use std::sync::Arc;

use parquet::basic::Encoding;
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::serialized_reader::SerializedPageReader;

use crate::random_access::ParquetInput;

/// Bytes of the longest entry of the dictionary page that begins `column` (a
/// chunk of `file`, of `rows` rows) of a BYTE_ARRAY column; `None` if the chunk
/// does not begin with a PLAIN dictionary page whose entries fit in it (the
/// decoder reports what is wrong).
pub(crate) fn longest_entry(
    file: &ParquetInput,
    column: &ColumnChunkMetaData,
    rows: u64,
) -> Option<u64> {
    let rows = usize::try_from(rows).ok()?;
    let mut pages = SerializedPageReader::new(Arc::new(file.clone()), column, rows, None).ok()?;
    let Page::DictionaryPage {
        buf,
        num_values,
        encoding,
        ..
    } = pages.get_next_page().ok()??
    else {
        return None;
    };
    if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
        return None;
    }
    // PLAIN byte arrays: each a 4-byte little-endian length, then its bytes.
    let (mut longest, mut at) = (0u64, 0usize);
    for _ in 0..num_values {
        let prefix = buf.get(at..at.checked_add(4)?)?;
        let len = u32::from_le_bytes(prefix.try_into().ok()?);
        at = (at + 4).checked_add(usize::try_from(len).ok()?)?;
        if at > buf.len() {
            return None;
        }
        longest = longest.max(u64::from(len));
    }
    Some(longest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_pages::{batch_rows, check_chunk, Decoding};
    use crate::random_access::RandomAccess;
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    struct Memory(Vec<u8>);

    impl RandomAccess for Memory {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Bytes> {
            let start = offset as usize;
            Ok(Bytes::copy_from_slice(&self.0[start..start + len]))
        }
    }

    /// A one-column, one-row-group Parquet file of strings `rows`, dictionary
    /// encoded (one dictionary page), uncompressed.
    fn file(rows: &[String]) -> Vec<u8> {
        let column: ArrayRef = Arc::new(StringArray::from_iter_values(rows));
        let batch = RecordBatch::try_from_iter([("f", column)]).unwrap();
        let properties = WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_dictionary_page_size_limit(64 << 20)
            .build();
        let mut bytes = Vec::new();
        let mut writer =
            ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    /// `check_chunk`'s bytes a row of the file's column, decoded as copies of
    /// the dictionary's entries.
    fn per_row(bytes: Vec<u8>) -> u64 {
        let reader = SerializedFileReader::new(Bytes::from(bytes.clone())).unwrap();
        let group = reader.metadata().row_group(0);
        let decoding = Decoding {
            rows: group.num_rows() as u64,
            expands_dictionary: true,
            v2_always_compressed: false,
        };
        let input = ParquetInput(Arc::new(Memory(bytes)));
        check_chunk(&input, group.column(0), decoding)
            .unwrap()
            .per_row
    }

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("id{i:012}")).collect()
    }

    #[test]
    fn the_longest_entry_bounds_a_row_not_the_whole_dictionary() {
        // 100,000 distinct 14-byte strings: a 1.8 MB dictionary page, which
        // bounded every row before (36 rows a batch).
        let bytes = file(&ids(100_000));
        assert_eq!(per_row(bytes), 14 + 8);
        assert_eq!(batch_rows(14 + 8), 8192);
        // One entry longer than the others, anywhere in the dictionary.
        let mut rows = ids(1000);
        rows[500] = "x".repeat(3000);
        let bytes = file(&rows);
        let reader = SerializedFileReader::new(Bytes::from(bytes.clone())).unwrap();
        let column = reader.metadata().row_group(0).column(0).clone();
        let input = ParquetInput(Arc::new(Memory(bytes.clone())));
        assert_eq!(longest_entry(&input, &column, 1000), Some(3000));
        assert_eq!(per_row(bytes), 3000 + 8);
    }

    #[test]
    fn a_dictionary_whose_entries_overrun_its_page_bounds_a_row_by_the_page() {
        let mut bytes = file(&ids(100_000));
        // The first entry's length prefix (14) made to claim 4 GB.
        let first = b"\x0e\x00\x00\x00id000000000000";
        let at = (bytes.windows(first.len()))
            .position(|w| w == first)
            .unwrap();
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let reader = SerializedFileReader::new(Bytes::from(bytes.clone())).unwrap();
        let column = reader.metadata().row_group(0).column(0).clone();
        let input = ParquetInput(Arc::new(Memory(bytes.clone())));
        assert_eq!(longest_entry(&input, &column, 100_000), None);
        // The page's 18 bytes an entry.
        assert_eq!(per_row(bytes), 100_000 * 18);
    }

    #[test]
    fn small_rows_share_batches_of_up_to_8192_and_large_ones_stay_within_64_mib() {
        for (per_row, rows) in [
            (0, 8192),
            (22, 8192),
            (512, 8192),
            (1024, 4096),
            (16 << 10, 256),
            (200 << 10, 256),
            (1 << 20, 64),
            (64 << 20, 1),
            (1 << 30, 1),
        ] {
            assert_eq!(batch_rows(per_row), rows, "{per_row} bytes a row");
        }
    }
}
