//! CSV files listing paths: each row names a file whose bytes become a value,
//! and its other cells the record's fields (typed as [`crate::csv_fields`]
//! says). A header row names the columns; quoting follows RFC 4180.
//!
//! Limits: a row (with its line break and quoting) is at most [`MAX_ROW_BYTES`];
//! a listed path must name a regular file (or a symbolic link to one) of at most
//! [`MAX_VALUE_SIZE`](crate::MAX_VALUE_SIZE) bytes. A FIFO, device, socket or
//! directory is refused before it is opened for reading.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::csv_fields::{FieldColumn, Inference, INFER_BYTES, INFER_ROWS};
use crate::field_options::{FieldSelection, FieldType};
use crate::regular_file::{read_regular, ReadRegularError};
use crate::{Fields, Fused, Origin, Record, RowAt, Skipped, Source, SourceError, MAX_VALUE_SIZE};

/// Longest row read: a row names one path (and a key), so anything longer is not
/// a list of paths, and the CSV parser would hold all of it in memory.
pub const MAX_ROW_BYTES: u64 = 1 << 20;
/// The CSV parser's read-ahead, which [`RowGuard`] allows beyond a row's end.
const PARSER_BUFFER: u64 = 64 << 10;

/// Which columns a [`CsvSource`] uses.
#[derive(Clone, Debug)]
pub struct CsvOptions {
    /// Column holding the file paths. Default: `path`.
    pub path_column: String,
    /// Column holding the keys. Default: the path as written in the CSV.
    pub key_column: Option<String>,
    /// Directory relative paths are resolved against. Default: the CSV file's own
    /// directory. Absolute paths are used as they are.
    pub root: Option<PathBuf>,
    /// Field delimiter. Default: `,`.
    pub delimiter: u8,
    /// Which other columns become fields. Default: all of them.
    pub fields: FieldSelection,
    /// Declared types of field columns (`label` = int64), instead of the types
    /// inferred from the first rows.
    pub field_type: Vec<(String, FieldType)>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            path_column: "path".into(),
            key_column: None,
            root: None,
            delimiter: b',',
            fields: FieldSelection::All,
            field_type: Vec::new(),
        }
    }
}

/// A reader that fails once the CSV parser has pulled more than
/// [`MAX_ROW_BYTES`] past the end of the last complete row, so a single giant row
/// (or a CSV file that is `/dev/zero`) cannot grow the parser's row buffer without
/// bound.
struct RowGuard {
    inner: File,
    /// Bytes handed to the parser so far.
    delivered: u64,
    /// Bytes it may have in total: updated after every row.
    allowed: Arc<AtomicU64>,
}

/// The message [`RowGuard`] fails with, recognised by [`CsvSource`].
const ROW_TOO_LONG: &str = "row too long";

impl Read for RowGuard {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let allowed = self.allowed.load(Ordering::Relaxed);
        let room = allowed.saturating_sub(self.delivered);
        if room == 0 {
            return Err(io::Error::other(ROW_TOO_LONG));
        }
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.delivered += n as u64;
        Ok(n)
    }
}

struct OpenCsv {
    /// Shared with its records' origins.
    path: Arc<Path>,
    reader: csv::Reader<RowGuard>,
    /// Where [`RowGuard`] stops: the end of the last row plus [`MAX_ROW_BYTES`].
    allowed: Arc<AtomicU64>,
    path_index: usize,
    key_index: Option<usize>,
    base: PathBuf,
    row: csv::ByteRecord,
    /// The columns that become fields, in the order records carry them.
    fields: Vec<FieldColumn>,
    /// Rows read ahead to infer types, to be yielded before any other.
    buffered: VecDeque<csv::ByteRecord>,
}

/// Streams the files listed by one or more CSV files, in row order.
pub struct CsvSource {
    pending: VecDeque<PathBuf>,
    current: Option<OpenCsv>,
    options: CsvOptions,
    skipped: Skipped,
    /// The type of each field column so far: declared, or inferred in the first
    /// file that has it and kept for the files after it.
    types: HashMap<String, (FieldType, Arc<str>)>,
}

impl CsvSource {
    /// A source over the CSV files `paths`, read in order. Every file must exist.
    /// Options that contradict each other (a declared type for a column that is not
    /// a field) are refused here; columns are checked as each file is reached.
    pub fn new(paths: &[PathBuf], options: CsvOptions) -> Result<Fused<CsvSource>, SourceError> {
        let path_role = ("path column", options.path_column.as_str());
        let mut taken = vec![(path_role.1, path_role.0)];
        if let Some(key) = &options.key_column {
            taken.push((key.as_str(), "key column"));
        }
        options.fields.refuse(&taken)?;
        let mut types = HashMap::new();
        for (name, field_type) in &options.field_type {
            if !options.fields.includes(name) || taken.iter().any(|(n, _)| n == name) {
                return Err(SourceError::Usage(format!(
                    "`field_type` declares column {name:?}, which is not a field (see `fields`)"
                )));
            }
            let declared: Arc<str> = "declared with `field_type`".into();
            if types
                .insert(name.clone(), (*field_type, declared))
                .is_some()
            {
                return Err(SourceError::Usage(format!(
                    "`field_type` declares column {name:?} twice"
                )));
            }
        }
        for path in paths {
            std::fs::metadata(path).map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
        }
        Ok(Fused::new(CsvSource {
            pending: paths.iter().cloned().collect(),
            current: None,
            options,
            skipped: Skipped::default(),
            types,
        }))
    }

    fn open(&mut self, path: PathBuf) -> Result<OpenCsv, SourceError> {
        let file = File::open(&path).map_err(|source| SourceError::Io {
            path: path.clone(),
            source,
        })?;
        let allowed = Arc::new(AtomicU64::new(MAX_ROW_BYTES + PARSER_BUFFER));
        let guard = RowGuard {
            inner: file,
            delivered: 0,
            allowed: allowed.clone(),
        };
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(self.options.delimiter)
            .has_headers(true)
            .buffer_capacity(PARSER_BUFFER as usize)
            .from_reader(guard);
        let bad = |reason: String| SourceError::Invalid {
            file: path.display().to_string(),
            location: "line 1 (header)".into(),
            reason,
        };
        let headers = match reader.byte_headers() {
            Ok(headers) => headers.clone(),
            Err(e) if is_row_too_long(&e) => {
                return Err(row_too_long(&path, "line 1 (header)".into()))
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        let find = |name: &str| {
            headers.iter().position(|h| h == name.as_bytes()).ok_or_else(|| {
                let names: Vec<String> = headers.iter().map(|h| String::from_utf8_lossy(h).into_owned()).collect();
                bad(format!("no column {name:?}; the columns are {names:?} (choose with `path_column` / `key_column`, `delimiter`)"))
            })
        };
        let path_index = find(&self.options.path_column)?;
        let key_index = self.options.key_column.as_deref().map(find).transpose()?;
        let field_indexes = self.field_indexes(&headers, path_index, key_index, &bad)?;
        let base = match &self.options.root {
            Some(root) => root.clone(),
            None => path.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        let mut csv = OpenCsv {
            path: Arc::from(path),
            reader,
            allowed,
            path_index,
            key_index,
            base,
            row: csv::ByteRecord::new(),
            fields: Vec::new(),
            buffered: VecDeque::new(),
        };
        let name = |i: usize| String::from_utf8_lossy(&headers[i]).into_owned();
        let new: Vec<usize> = field_indexes
            .iter()
            .copied()
            .filter(|&i| !self.types.contains_key(&name(i)))
            .collect();
        if !new.is_empty() {
            // Read ahead, bounded in rows and bytes, and infer the new columns' types.
            let mut inferences = vec![Inference::new(); new.len()];
            let mut bytes = 0u64;
            while csv.buffered.len() < INFER_ROWS && bytes < INFER_BYTES {
                let mut row = csv::ByteRecord::new();
                if !read_row(&mut csv.reader, &csv.allowed, &csv.path, &mut row)? {
                    break;
                }
                for (inference, &i) in inferences.iter_mut().zip(&new) {
                    inference.observe(row.get(i).unwrap_or_default());
                }
                bytes += row.as_slice().len() as u64 + row.len() as u64;
                csv.buffered.push_back(row);
            }
            let why: Arc<str> = format!(
                "inferred from the first {} rows of {}",
                csv.buffered.len(),
                csv.path.display()
            )
            .into();
            for (inference, &i) in inferences.iter().zip(&new) {
                self.types
                    .insert(name(i), (inference.decide(), why.clone()));
            }
        }
        csv.fields = field_indexes
            .into_iter()
            .map(|i| {
                let (field_type, why) = self.types[&name(i)].clone();
                FieldColumn {
                    index: i,
                    name: name(i).into(),
                    field_type,
                    why,
                }
            })
            .collect();
        Ok(csv)
    }

    /// The positions of the columns that become fields, in the order records carry
    /// them: the header's for every column, the option's for chosen ones. Refuses
    /// a header whose field columns cannot be told apart (an empty or repeated
    /// name), a chosen or typed column it does not have.
    fn field_indexes(
        &self,
        headers: &csv::ByteRecord,
        path_index: usize,
        key_index: Option<usize>,
        bad: &dyn Fn(String) -> SourceError,
    ) -> Result<Vec<usize>, SourceError> {
        let fields = &self.options.fields;
        if fields.is_none() {
            return Ok(Vec::new());
        }
        let names: Vec<String> = headers
            .iter()
            .map(|h| String::from_utf8_lossy(h).into_owned())
            .collect();
        let listed = || format!("the columns are {names:?}");
        let candidates: Vec<usize> = (0..names.len())
            .filter(|&i| i != path_index && Some(i) != key_index)
            .collect();
        for (declared, _) in &self.options.field_type {
            if !names.contains(declared) {
                return Err(bad(format!(
                    "`field_type` declares column {declared:?}, which this file does not have; {}",
                    listed()
                )));
            }
        }
        let chosen: Vec<usize> = match fields {
            FieldSelection::Only(wanted) => wanted
                .iter()
                .map(|w| {
                    candidates
                        .iter()
                        .copied()
                        .find(|&i| &names[i] == w)
                        .ok_or_else(|| {
                            bad(format!(
                                "no column {w:?} (asked for by `fields`); {}",
                                listed()
                            ))
                        })
                })
                .collect::<Result<_, _>>()?,
            _ => candidates,
        };
        for &i in &chosen {
            if headers[i].is_empty() {
                return Err(bad(format!(
                    "column {} has an empty name, so it cannot be a field; name it in the header, or choose the fields with `fields`",
                    i + 1
                )));
            }
            if std::str::from_utf8(&headers[i]).is_err() {
                return Err(bad(format!(
                    "column {} is named {:?}, which is not UTF-8, so it cannot be a field; rename it, or choose the fields with `fields`",
                    i + 1,
                    names[i]
                )));
            }
            if let Some(other) = (0..names.len()).find(|&j| j != i && headers[j] == headers[i]) {
                let (first, second) = (i.min(other) + 1, i.max(other) + 1);
                return Err(bad(format!(
                    "columns {first} and {second} are both named {:?}, so they cannot be fields; rename one, or choose the fields with `fields`",
                    names[i]
                )));
            }
        }
        Ok(chosen)
    }

    fn next_record(&mut self) -> Option<Result<Record, SourceError>> {
        loop {
            if self.current.is_none() {
                let path = self.pending.pop_front()?;
                match self.open(path) {
                    Ok(open) => self.current = Some(open),
                    Err(error) => return Some(Err(error)),
                }
            }
            let csv = self.current.as_mut().expect("opened above");
            match csv.buffered.pop_front() {
                Some(row) => csv.row = row,
                None => match read_row(&mut csv.reader, &csv.allowed, &csv.path, &mut csv.row) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.current = None;
                        continue;
                    }
                    Err(error) => return Some(Err(error)),
                },
            }
            let line = csv.row.position().map_or(0, |p| p.line());
            let corrupt = |reason: String| SourceError::Invalid {
                file: csv.path.display().to_string(),
                location: format!("line {line}"),
                reason,
            };
            let mut fields = Fields::new();
            for column in &csv.fields {
                match column.value(csv.row.get(column.index).unwrap_or_default()) {
                    Ok(value) => fields.push(column.name.clone(), value),
                    Err(reason) => return Some(Err(corrupt(reason))),
                }
            }
            let Some(written) = csv.row.get(csv.path_index) else {
                return Some(Err(corrupt("the row has no path field".into())));
            };
            if written.is_empty() {
                return Some(Err(corrupt("empty path".into())));
            }
            let relative = crate::bytes_to_path(written);
            let file = if relative.is_absolute() {
                relative
            } else {
                csv.base.join(relative)
            };
            let key = match csv.key_index {
                Some(i) => match csv.row.get(i) {
                    Some(key) => key.to_vec(),
                    None => return Some(Err(corrupt("the row has no key field".into()))),
                },
                None => written.to_vec(),
            };
            let value = match read_regular(&file) {
                Ok(value) => value,
                Err(ReadRegularError::Io(e)) => {
                    return Some(Err(corrupt(format!(
                        "cannot read {:?} ({}): {e}",
                        String::from_utf8_lossy(written),
                        file.display()
                    ))))
                }
                Err(ReadRegularError::NotRegular(kind)) => {
                    return Some(Err(SourceError::NotRegularFile {
                        file: csv.path.display().to_string(),
                        location: format!("line {line}"),
                        path: file,
                        kind,
                    }))
                }
                Err(ReadRegularError::TooLarge(size)) => {
                    return Some(Err(SourceError::TooLarge {
                        file: csv.path.display().to_string(),
                        location: format!("line {line}"),
                        what: format!("the file {}", file.display()),
                        size,
                        limit: MAX_VALUE_SIZE,
                    }))
                }
            };
            return Some(Ok(Record {
                key,
                value,
                origin: Origin::Row {
                    file: Arc::clone(&csv.path),
                    row: RowAt::Line(line),
                },
                fields,
            }));
        }
    }
}

/// Reads the next row into `row`; false at the end of the file. Once the parser
/// has consumed a row, the guard allows the next one.
fn read_row(
    reader: &mut csv::Reader<RowGuard>,
    allowed: &AtomicU64,
    path: &Path,
    row: &mut csv::ByteRecord,
) -> Result<bool, SourceError> {
    match reader.read_byte_record(row) {
        Ok(false) => return Ok(false),
        Ok(true) => {}
        Err(e) if is_row_too_long(&e) => {
            // The row that did not end starts where the parser stands.
            let line = reader.position().line();
            return Err(row_too_long(path, format!("line {line}")));
        }
        Err(e) => {
            let line = row.position().map_or(0, |p| p.line());
            return Err(SourceError::Invalid {
                file: path.display().to_string(),
                location: format!("line {line}"),
                reason: e.to_string(),
            });
        }
    }
    let end = reader.position().byte();
    allowed.store(end + MAX_ROW_BYTES + PARSER_BUFFER, Ordering::Relaxed);
    Ok(true)
}

fn is_row_too_long(error: &csv::Error) -> bool {
    matches!(error.kind(), csv::ErrorKind::Io(e) if e.to_string() == ROW_TOO_LONG)
}

fn row_too_long(path: &Path, location: String) -> SourceError {
    SourceError::TooLarge {
        file: path.display().to_string(),
        location,
        what: "a row".into(),
        size: MAX_ROW_BYTES + 1,
        limit: MAX_ROW_BYTES,
    }
}

impl Iterator for CsvSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}

impl Source for CsvSource {
    fn keyed(&self) -> bool {
        true
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn reads_quoted_relative_and_absolute_paths() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("img")).unwrap();
        fs::write(dir.path().join("img/a, b.jpg"), b"A").unwrap();
        fs::write(dir.path().join("img/c d.jpg"), b"C").unwrap();
        let absolute = dir.path().join("abs.bin");
        fs::write(&absolute, b"ABS").unwrap();
        let csv = dir.path().join("list.csv");
        fs::write(
            &csv,
            format!(
                "id,path\n1,\"img/a, b.jpg\"\n2,img/c d.jpg\n3,\"{}\"\n",
                absolute.display()
            ),
        )
        .unwrap();
        let records: Vec<Record> =
            CsvSource::new(std::slice::from_ref(&csv), CsvOptions::default())
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let got: Vec<(&[u8], &[u8])> = records.iter().map(|r| (&r.key[..], &r.value[..])).collect();
        assert_eq!(got[0], (&b"img/a, b.jpg"[..], &b"A"[..]));
        assert_eq!(got[1], (&b"img/c d.jpg"[..], &b"C"[..]));
        assert_eq!(got[2].1, b"ABS");

        let keyed = CsvOptions {
            key_column: Some("id".into()),
            ..Default::default()
        };
        let keys: Vec<Vec<u8>> = CsvSource::new(&[csv], keyed)
            .unwrap()
            .map(|r| r.unwrap().key)
            .collect();
        assert_eq!(keys, [b"1", b"2", b"3"]);
    }

    #[test]
    fn a_missing_file_names_the_line_and_path() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("ok.txt"), b"x").unwrap();
        let csv = dir.path().join("list.csv");
        fs::write(&csv, "path\nok.txt\nmissing.txt\n").unwrap();
        let err = CsvSource::new(&[csv], CsvOptions::default())
            .unwrap()
            .find_map(Result::err)
            .unwrap()
            .to_string();
        assert!(
            err.contains("list.csv: line 3") && err.contains("missing.txt"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_column_lists_the_columns() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("list.tsv");
        fs::write(&csv, "file\tlabel\nx\t1\n").unwrap();
        let err = CsvSource::new(std::slice::from_ref(&csv), CsvOptions::default())
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no column \"path\"") && err.contains("file\\tlabel"),
            "{err}"
        );
        let tsv = CsvOptions {
            delimiter: b'\t',
            path_column: "file".into(),
            ..Default::default()
        };
        let err = CsvSource::new(&[csv], tsv)
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
