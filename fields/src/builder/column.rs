//! One column of a [`super::BatchBuilder`]: its pending rows held as runs
//! (issue 27). Rows that follow each other in one Arrow array (a Parquet or
//! JSON Lines batch read in order) are one run of that array, grown by a
//! compare per row and built as a slice of it; nulls are a count; values a
//! source built itself are kept as they came.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef};
use arrow_schema::DataType;

use crate::conform::conform;
use crate::error::{FieldsError, Result};
use crate::value::FieldValue;

/// Consecutive rows of a column.
#[derive(Debug)]
enum Piece {
    /// This many rows without the field.
    Nulls(usize),
    /// Rows given as values (none of them an Arrow row or a null at the top
    /// level; nested ones may be).
    Values(Vec<FieldValue>),
    /// Rows `offset..offset + len` of an Arrow array of `rows` rows.
    Rows {
        array: ArrayRef,
        offset: usize,
        len: usize,
        rows: usize,
    },
}

impl Piece {
    fn len(&self) -> usize {
        match self {
            Piece::Nulls(n) => *n,
            Piece::Values(values) => values.len(),
            Piece::Rows { len, .. } => *len,
        }
    }

    /// Drops its first `n` rows (fewer than it has).
    fn drop_front(&mut self, n: usize) {
        match self {
            Piece::Nulls(k) => *k -= n,
            Piece::Values(values) => {
                values.drain(..n);
            }
            Piece::Rows { offset, len, .. } => {
                *offset += n;
                *len -= n;
            }
        }
    }
}

/// The address of an array, to know it again.
fn address(array: &ArrayRef) -> *const () {
    Arc::as_ptr(array) as *const ()
}

/// A column being built: its name, type so far, and a value for every row
/// since it first appeared.
#[derive(Debug)]
pub(super) struct Column {
    pub(super) name: Arc<str>,
    pub(super) data_type: DataType,
    pub(super) metadata: HashMap<String, String>,
    /// The row (counted from the start of the pending rows) of its first
    /// value; `None` while no pending record has the field.
    pub(super) first_row: Option<usize>,
    /// Rows `first_row..first_row + len`, in order.
    pieces: VecDeque<Piece>,
    len: usize,
    /// The last push that gave this field (to find a field given twice).
    pub(super) stamp: u64,
    /// The Arrow array its last Arrow row came from (its address, to know it
    /// again), and the bytes a row of it holds on average (for
    /// [`super::BatchBuilder::bytes`]).
    pub(super) estimate: (usize, usize),
}

impl Column {
    pub(super) fn new(name: Arc<str>) -> Column {
        Column {
            name,
            data_type: DataType::Null,
            metadata: HashMap::new(),
            first_row: None,
            pieces: VecDeque::new(),
            len: 0,
            stamp: 0,
            estimate: (0, 0),
        }
    }

    /// Whether row `at` of `array` is the next row of its last run and would
    /// be pending row `row`: then [`Column::extend_run`] adds it, with its
    /// type already unified and its row known to exist.
    pub(super) fn continues(&self, row: usize, array: &ArrayRef, at: usize) -> bool {
        match (self.first_row, self.pieces.back()) {
            (
                Some(first),
                Some(Piece::Rows {
                    array: last,
                    offset,
                    len,
                    rows,
                }),
            ) => {
                first + self.len == row
                    && address(last) == address(array)
                    && offset + len == at
                    && at < *rows
            }
            _ => false,
        }
    }

    /// Adds the row [`Column::continues`] accepted and the `n - 1` rows after
    /// it (which its array holds).
    pub(super) fn extend_run(&mut self, n: usize) {
        if let Some(Piece::Rows { len, .. }) = self.pieces.back_mut() {
            *len += n;
            self.len += n;
        }
    }

    /// Sets the value of pending row `row` (after every row it has), the rows
    /// in between null.
    pub(super) fn append(&mut self, row: usize, value: &FieldValue) {
        let first = *self.first_row.get_or_insert(row);
        let have = first + self.len;
        if row > have {
            self.append_nulls(row - have);
        }
        self.len += 1;
        match value {
            FieldValue::Null => {
                self.len -= 1;
                self.append_nulls(1);
            }
            FieldValue::Arrow(array, at) => {
                if let Some(Piece::Rows {
                    array: last,
                    offset,
                    len,
                    ..
                }) = self.pieces.back_mut()
                {
                    if address(last) == address(array) && *offset + *len == *at {
                        *len += 1;
                        return;
                    }
                }
                self.pieces.push_back(Piece::Rows {
                    array: array.clone(),
                    offset: *at,
                    len: 1,
                    rows: array.len(),
                });
            }
            other => match self.pieces.back_mut() {
                Some(Piece::Values(values)) => values.push(other.clone()),
                _ => self.pieces.push_back(Piece::Values(vec![other.clone()])),
            },
        }
    }

    fn append_nulls(&mut self, n: usize) {
        self.len += n;
        match self.pieces.back_mut() {
            Some(Piece::Nulls(k)) => *k += n,
            _ => self.pieces.push_back(Piece::Nulls(n)),
        }
    }

    /// The column's array for the first `rows` pending rows (`first_row` is
    /// below `rows`), of its type; the column is unchanged.
    pub(super) fn build(&self, rows: usize) -> Result<ArrayRef> {
        let first = self.first_row.unwrap_or(rows).min(rows);
        let mut parts: Vec<Part<'_>> = Vec::new();
        if first > 0 {
            parts.push(Part::Nulls(first));
        }
        let mut left = (rows - first).min(self.len);
        for piece in &self.pieces {
            if left == 0 {
                break;
            }
            let n = piece.len().min(left);
            left -= n;
            parts.push(match piece {
                Piece::Nulls(_) => Part::Nulls(n),
                Piece::Values(values) => Part::Values(&values[..n]),
                Piece::Rows { array, offset, .. } => Part::Rows(array, *offset, n),
            });
        }
        let built = first + (rows - first).min(self.len);
        if rows > built {
            parts.push(Part::Nulls(rows - built));
        }
        let (target, path) = (&self.data_type, &*self.name);
        // Runs long enough are sliced and joined; rows scattered over
        // arrays are copied row by row.
        if parts.len() > 1 && parts.len() * SCATTERED > rows {
            return build_rows(&parts, target, path);
        }
        let arrays = parts
            .iter()
            .map(|part| part.build(target, path))
            .collect::<Result<Vec<ArrayRef>>>()?;
        match arrays.as_slice() {
            [] => Ok(new_null_array(target, 0)),
            [one] => Ok(one.clone()),
            _ => {
                let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
                arrow_select::concat::concat(&refs).map_err(|e| {
                    FieldsError::arrow(format!("field \"{path}\": joining its Arrow values"), e)
                })
            }
        }
    }

    /// Drops the first `rows` pending rows (those [`Column::build`] built).
    pub(super) fn drop_front(&mut self, rows: usize) {
        self.first_row = match self.first_row {
            Some(first) if first >= rows => Some(first - rows),
            Some(first) => {
                let mut built = (rows - first).min(self.len);
                self.len -= built;
                while built > 0 {
                    let Some(piece) = self.pieces.front_mut() else {
                        break;
                    };
                    let n = piece.len();
                    if n <= built {
                        self.pieces.pop_front();
                        built -= n;
                    } else {
                        piece.drop_front(built);
                        built = 0;
                    }
                }
                (self.len > 0).then_some(0)
            }
            None => None,
        };
    }
}

/// Runs shorter than this on average are copied row by row rather than
/// sliced and joined (an array per row would cost more than the rows).
const SCATTERED: usize = 16;

/// Part of the rows a batch takes of a column.
enum Part<'a> {
    Nulls(usize),
    Values(&'a [FieldValue]),
    Rows(&'a ArrayRef, usize, usize),
}

impl Part<'_> {
    fn build(&self, target: &DataType, path: &str) -> Result<ArrayRef> {
        match self {
            Part::Nulls(n) => Ok(new_null_array(target, *n)),
            Part::Values(values) => {
                let refs: Vec<&FieldValue> = values.iter().collect();
                super::build(&refs, target, path)
            }
            Part::Rows(array, offset, len) => conform(&array.slice(*offset, *len), target, path),
        }
    }
}

/// The rows of `parts` as one value each, built together (copied with
/// `interleave` from their arrays).
fn build_rows(parts: &[Part<'_>], target: &DataType, path: &str) -> Result<ArrayRef> {
    let mut values: Vec<FieldValue> = Vec::new();
    for part in parts {
        match part {
            Part::Nulls(n) => values.extend((0..*n).map(|_| FieldValue::Null)),
            Part::Values(vs) => values.extend(vs.iter().cloned()),
            Part::Rows(array, offset, len) => values
                .extend((*offset..offset + len).map(|r| FieldValue::Arrow(Arc::clone(array), r))),
        }
    }
    let refs: Vec<&FieldValue> = values.iter().collect();
    super::build(&refs, target, path)
}
