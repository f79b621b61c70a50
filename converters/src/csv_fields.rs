//! The columns of a CSV list of paths other than the path and key: their types,
//! inferred from the first rows or declared, and each cell as a field value.
//!
//! Inference, over the non-empty cells of the first [`INFER_ROWS`] rows of the
//! first file that has the column (fewer if those rows hold more than
//! [`INFER_BYTES`]): every cell an `i64` -> `int64`; else every cell a float
//! (Rust's `f64` syntax: `1.5`, `1e-3`, `inf`, `NaN`) -> `float64`; else every cell
//! `true` or `false` in any case -> `bool` (`0`/`1` are integers, as pandas reads
//! them); else `string`. A column with no non-empty cell there is `string`. Cells
//! are taken as written: no whitespace is trimmed. An empty cell is null, whatever
//! the type.

use std::sync::Arc;

use crate::field_options::FieldType;
use crate::FieldValue;

/// Rows read ahead to infer the types of a file's new columns.
pub(crate) const INFER_ROWS: usize = 1000;
/// Bytes of rows read ahead for inference, at most (a row is at most
/// [`MAX_ROW_BYTES`](crate::csv_source::MAX_ROW_BYTES)).
pub(crate) const INFER_BYTES: u64 = 16 << 20;

/// The types a column's cells seen so far all parse as.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inference {
    int: bool,
    float: bool,
    boolean: bool,
    /// Whether a non-empty cell was seen.
    seen: bool,
}

impl Inference {
    pub(crate) fn new() -> Inference {
        Inference {
            int: true,
            float: true,
            boolean: true,
            seen: false,
        }
    }

    pub(crate) fn observe(&mut self, cell: &[u8]) {
        if cell.is_empty() {
            return;
        }
        self.seen = true;
        let Ok(text) = std::str::from_utf8(cell) else {
            (self.int, self.float, self.boolean) = (false, false, false);
            return;
        };
        self.int &= text.parse::<i64>().is_ok();
        self.float &= text.parse::<f64>().is_ok();
        self.boolean &= parse_bool(text).is_some();
    }

    pub(crate) fn decide(&self) -> FieldType {
        match *self {
            Inference { seen: false, .. } => FieldType::String,
            Inference { int: true, .. } => FieldType::Int64,
            Inference { float: true, .. } => FieldType::Float64,
            Inference { boolean: true, .. } => FieldType::Bool,
            _ => FieldType::String,
        }
    }
}

fn parse_bool(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// One field column of an open CSV file.
#[derive(Clone, Debug)]
pub(crate) struct FieldColumn {
    /// Position in the header.
    pub index: usize,
    pub name: Arc<str>,
    pub field_type: FieldType,
    /// Where the type came from, for messages: "declared with `field_type`" or
    /// "inferred from the first rows of list.csv".
    pub why: Arc<str>,
}

impl FieldColumn {
    /// The value of `cell` (empty: null), or why it is not one of the column's type.
    pub(crate) fn value(&self, cell: &[u8]) -> Result<FieldValue, String> {
        if cell.is_empty() {
            return Ok(FieldValue::Null);
        }
        let text = std::str::from_utf8(cell);
        let parsed = match (self.field_type, text) {
            (_, Err(_)) => None,
            (FieldType::Int64, Ok(t)) => t.parse().ok().map(FieldValue::Int64),
            (FieldType::Float64, Ok(t)) => t.parse().ok().map(FieldValue::Float64),
            (FieldType::Bool, Ok(t)) => parse_bool(t).map(FieldValue::Bool),
            (FieldType::String, Ok(t)) => Some(FieldValue::String(t.to_owned())),
        };
        parsed.ok_or_else(|| {
            let shown = match text {
                Ok(t) => format!("{t:?}"),
                Err(_) => format!("{:?} (not UTF-8)", String::from_utf8_lossy(cell)),
            };
            let hint = match self.field_type {
                FieldType::String => {
                    "; only UTF-8 text can be stored (leave the column out with `fields`)"
                        .to_owned()
                }
                _ => format!(
                    "; declare its type with `field_type` {}=string (or another type)",
                    self.name
                ),
            };
            let kind = match self.field_type {
                FieldType::Int64 => "an int64",
                FieldType::Float64 => "a float64",
                FieldType::Bool => "a bool",
                FieldType::String => "a string",
            };
            format!(
                "column {:?}: {shown} is not {kind} value (the column's type, {}){hint}",
                self.name, self.why
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infer(cells: &[&str]) -> FieldType {
        let mut inference = Inference::new();
        for cell in cells {
            inference.observe(cell.as_bytes());
        }
        inference.decide()
    }

    #[test]
    fn inference_prefers_integers_then_floats_then_booleans_then_text() {
        assert_eq!(infer(&["1", "", "-7", "+3"]), FieldType::Int64);
        assert_eq!(
            infer(&["1", "2.5", "1e3", "NaN", "inf"]),
            FieldType::Float64
        );
        // Beyond i64: a float, as pandas reads it.
        assert_eq!(infer(&["99999999999999999999"]), FieldType::Float64);
        assert_eq!(infer(&["true", "FALSE", "True", ""]), FieldType::Bool);
        assert_eq!(infer(&["0", "1"]), FieldType::Int64);
        assert_eq!(infer(&["true", "1"]), FieldType::String);
        assert_eq!(infer(&[" 1"]), FieldType::String);
        assert_eq!(infer(&["", ""]), FieldType::String);
        assert_eq!(infer(&[]), FieldType::String);
        let mut inference = Inference::new();
        inference.observe(b"\xff");
        assert_eq!(inference.decide(), FieldType::String);
    }

    #[test]
    fn cells_parse_as_their_type_and_empty_is_null() {
        let column = |field_type| FieldColumn {
            index: 0,
            name: "x".into(),
            field_type,
            why: "declared".into(),
        };
        assert_eq!(
            column(FieldType::Int64).value(b"-5"),
            Ok(FieldValue::Int64(-5))
        );
        assert_eq!(column(FieldType::Int64).value(b""), Ok(FieldValue::Null));
        assert_eq!(
            column(FieldType::Float64).value(b"2"),
            Ok(FieldValue::Float64(2.0))
        );
        assert_eq!(
            column(FieldType::Bool).value(b"tRuE"),
            Ok(FieldValue::Bool(true))
        );
        assert_eq!(
            column(FieldType::String).value("é".as_bytes()),
            Ok(FieldValue::String("é".into()))
        );
        let error = column(FieldType::Int64).value(b"1.5").unwrap_err();
        assert!(error.contains("\"1.5\" is not an int64 value"), "{error}");
        assert!(error.contains("`field_type` x=string"), "{error}");
        let error = column(FieldType::String).value(b"\xff").unwrap_err();
        assert!(error.contains("not UTF-8"), "{error}");
    }
}
