//! CSV files listing paths: each row names a file whose bytes become a value.
//! A header row names the columns; quoting follows RFC 4180.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::{Origin, Record, Skipped, Source, SourceError};

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
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions {
            path_column: "path".into(),
            key_column: None,
            root: None,
            delimiter: b',',
        }
    }
}

struct OpenCsv {
    path: PathBuf,
    reader: csv::Reader<File>,
    path_index: usize,
    key_index: Option<usize>,
    base: PathBuf,
    row: csv::ByteRecord,
}

/// Streams the files listed by one or more CSV files, in row order.
pub struct CsvSource {
    pending: VecDeque<PathBuf>,
    current: Option<OpenCsv>,
    options: CsvOptions,
    skipped: Skipped,
    failed: bool,
}

impl CsvSource {
    /// A source over the CSV files `paths`, read in order. Every file must exist.
    pub fn new(paths: &[PathBuf], options: CsvOptions) -> Result<CsvSource, SourceError> {
        for path in paths {
            std::fs::metadata(path).map_err(|source| SourceError::Io {
                path: path.clone(),
                source,
            })?;
        }
        Ok(CsvSource {
            pending: paths.iter().cloned().collect(),
            current: None,
            options,
            skipped: Skipped::default(),
            failed: false,
        })
    }

    fn open(&self, path: PathBuf) -> Result<OpenCsv, SourceError> {
        let file = File::open(&path).map_err(|source| SourceError::Io {
            path: path.clone(),
            source,
        })?;
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(self.options.delimiter)
            .has_headers(true)
            .from_reader(file);
        let bad = |reason: String| SourceError::Invalid {
            file: path.display().to_string(),
            location: "line 1 (header)".into(),
            reason,
        };
        let headers = reader
            .byte_headers()
            .map_err(|e| bad(e.to_string()))?
            .clone();
        let find = |name: &str| {
            headers.iter().position(|h| h == name.as_bytes()).ok_or_else(|| {
                let names: Vec<String> = headers.iter().map(|h| String::from_utf8_lossy(h).into_owned()).collect();
                bad(format!("no column {name:?}; the columns are {names:?} (choose with --path-column / --key-column, --delimiter)"))
            })
        };
        let path_index = find(&self.options.path_column)?;
        let key_index = self.options.key_column.as_deref().map(find).transpose()?;
        let base = match &self.options.root {
            Some(root) => root.clone(),
            None => path.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        Ok(OpenCsv {
            path,
            reader,
            path_index,
            key_index,
            base,
            row: csv::ByteRecord::new(),
        })
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
            let read = csv.reader.read_byte_record(&mut csv.row);
            let line = csv.row.position().map_or(0, |p| p.line());
            let corrupt = |reason: String| SourceError::Invalid {
                file: csv.path.display().to_string(),
                location: format!("line {line}"),
                reason,
            };
            match read {
                Ok(false) => {
                    self.current = None;
                    continue;
                }
                Ok(true) => {}
                Err(e) => return Some(Err(corrupt(e.to_string()))),
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
            let value = match std::fs::read(&file) {
                Ok(value) => value,
                Err(e) => {
                    return Some(Err(corrupt(format!(
                        "cannot read {:?} ({}): {e}",
                        String::from_utf8_lossy(written),
                        file.display()
                    ))))
                }
            };
            return Some(Ok(Record {
                key,
                value,
                origin: Origin::Row {
                    file: csv.path.clone(),
                    row: format!("line {line}"),
                },
            }));
        }
    }
}

impl Iterator for CsvSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.next_record();
        self.failed = matches!(item, Some(Err(_)));
        item
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
