//! The row model: what a source attaches to each record.

use std::sync::{Arc, OnceLock};

use arrow_array::{Array, ArrayRef};

/// One field's value for one record.
///
/// Sources that decode their own values (directory labels, tar members, CSV
/// cells, TFRecord features) use the typed variants; sources that already hold
/// Arrow columns (Parquet, JSON Lines) pass a row of the column with
/// [`FieldValue::Arrow`], which keeps any Arrow type exactly (nested, dates,
/// dictionaries) and copies nothing until the shard's column is built.
#[derive(Clone, Debug)]
pub enum FieldValue {
    /// No value: the column is null for this record.
    Null,
    /// Arrow `Boolean`.
    Bool(bool),
    /// Arrow `Int64`.
    Int64(i64),
    /// Arrow `Float32`.
    Float32(f32),
    /// Arrow `Float64`.
    Float64(f64),
    /// Arrow `Utf8`.
    String(String),
    /// Arrow `Binary`.
    Binary(Vec<u8>),
    /// Arrow `List` of the elements' common type.
    List(Vec<FieldValue>),
    /// Arrow `Struct` with these children, in order.
    Struct(Vec<(Arc<str>, FieldValue)>),
    /// Row `.1` of an Arrow array: the value keeps the array's type.
    Arrow(ArrayRef, usize),
}

impl FieldValue {
    /// About the memory this value holds: its bytes (a string's, a binary's,
    /// a list's or struct's values'), a fixed 8 for a number, and for a row of
    /// an Arrow array that row's share of the array's memory.
    pub fn memory(&self) -> usize {
        use FieldValue::*;
        match self {
            Null | Bool(_) | Int64(_) | Float32(_) | Float64(_) => 8,
            String(s) => s.len(),
            Binary(b) => b.len(),
            List(values) => values.iter().map(FieldValue::memory).sum(),
            Struct(children) => children.iter().map(|(_, v)| v.memory()).sum(),
            Arrow(array, _) => array.get_array_memory_size().div_ceil(array.len().max(1)),
        }
    }
}

impl PartialEq for FieldValue {
    fn eq(&self, other: &Self) -> bool {
        use FieldValue::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (Int64(a), Int64(b)) => a == b,
            (Float32(a), Float32(b)) => a.to_bits() == b.to_bits(),
            (Float64(a), Float64(b)) => a.to_bits() == b.to_bits(),
            (String(a), String(b)) => a == b,
            (Binary(a), Binary(b)) => a == b,
            (List(a), List(b)) => a == b,
            (Struct(a), Struct(b)) => a == b,
            (Arrow(a, i), Arrow(b, j)) => a.slice(*i, 1).to_data() == b.slice(*j, 1).to_data(),
            _ => false,
        }
    }
}

/// A record's fields, by name, in the order the source gives them (the order
/// of a new column in the dataset schema is the order of first appearance).
/// Names are unique within one record.
///
/// A source that decodes batches of rows into Arrow columns (Parquet, JSON
/// Lines) gives each record a row of its batch's [`SourceColumns`]
/// ([`Fields::row`]): one shared reference and a row number, no value per
/// field; [`crate::BatchBuilder`] takes consecutive rows of one batch as runs
/// of its arrays. Such fields read as the values [`FieldValue::Arrow`] of the
/// row, made on first use.
#[derive(Clone, Default)]
pub struct Fields {
    list: Vec<(Arc<str>, FieldValue)>,
    row: Option<SourceRow>,
}

/// A row of a [`SourceColumns`], with its values as a list once asked for.
#[derive(Clone, Debug)]
struct SourceRow {
    columns: Arc<SourceColumns>,
    row: usize,
    list: OnceLock<Vec<(Arc<str>, FieldValue)>>,
}

/// The field columns of a batch of source rows (their names, unique, and
/// arrays of one length), shared by the records made of its rows.
#[derive(Debug)]
pub struct SourceColumns {
    names: Vec<Arc<str>>,
    arrays: Vec<ArrayRef>,
    rows: usize,
    /// The arrays' memory over their rows, rounded up: a row's share.
    row_bytes: usize,
}

impl SourceColumns {
    /// Columns named `names` (unique), of `rows` rows each; `None` if the
    /// names and arrays differ in number or an array has another length.
    pub fn new(names: Vec<Arc<str>>, arrays: Vec<ArrayRef>, rows: usize) -> Option<SourceColumns> {
        let fits = names.len() == arrays.len() && arrays.iter().all(|a| a.len() == rows);
        fits.then(|| {
            let memory: usize = arrays.iter().map(|a| a.get_array_memory_size()).sum();
            SourceColumns {
                names,
                arrays,
                rows,
                row_bytes: memory.div_ceil(rows.max(1)),
            }
        })
    }

    /// The columns' names.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// The columns' arrays.
    pub fn arrays(&self) -> &[ArrayRef] {
        &self.arrays
    }

    /// Rows of each column.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

impl std::fmt::Debug for Fields {
    /// The fields as names and values (a row of a source's batch shows its
    /// row, not the batch).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Fields").field(&self.as_slice()).finish()
    }
}

impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<(Arc<str>, FieldValue)>> for Fields {
    fn from(list: Vec<(Arc<str>, FieldValue)>) -> Fields {
        Fields { list, row: None }
    }
}

impl Fields {
    /// No fields.
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Row `row` of `columns` (below their row count, else `None`): a field
    /// per column.
    pub fn row(columns: Arc<SourceColumns>, row: usize) -> Option<Fields> {
        (row < columns.rows).then(|| Fields {
            list: Vec::new(),
            row: Some(SourceRow {
                columns,
                row,
                list: OnceLock::new(),
            }),
        })
    }

    /// The columns and row these fields are, when a source gave them so.
    pub fn source_row(&self) -> Option<(&Arc<SourceColumns>, usize)> {
        self.row.as_ref().map(|r| (&r.columns, r.row))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        match &self.row {
            Some(r) => r.columns.names.len(),
            None => self.list.len(),
        }
    }

    /// About the memory these fields hold: a source row's share of its batch's
    /// arrays (all of their memory over their rows, rounded up), or the values'
    /// bytes. For bounds on what records in flight hold, not an exact count.
    pub fn memory(&self) -> usize {
        match &self.row {
            Some(r) => r.columns.row_bytes,
            None => self.list.iter().map(|(_, value)| value.memory()).sum(),
        }
    }

    /// The fields in order, as names and values.
    pub fn as_slice(&self) -> &[(Arc<str>, FieldValue)] {
        match &self.row {
            Some(r) => r.list.get_or_init(|| {
                let columns = &r.columns;
                columns
                    .names
                    .iter()
                    .zip(&columns.arrays)
                    .map(|(name, array)| (name.clone(), FieldValue::Arrow(array.clone(), r.row)))
                    .collect()
            }),
            None => &self.list,
        }
    }

    /// The fields in order, as names and values.
    pub fn iter(&self) -> std::slice::Iter<'_, (Arc<str>, FieldValue)> {
        self.as_slice().iter()
    }

    /// Adds a field. The caller keeps names unique.
    pub fn push(&mut self, name: impl Into<Arc<str>>, value: FieldValue) {
        if self.row.is_some() {
            self.list = self.as_slice().to_vec();
            self.row = None;
        }
        self.list.push((name.into(), value));
    }

    /// The value named `name`, if present.
    pub fn get(&self, name: &str) -> Option<&FieldValue> {
        self.iter().find(|(n, _)| &**n == name).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};

    #[test]
    fn a_source_row_holds_its_share_of_the_batch_and_a_list_its_values_bytes() {
        let rows = 1000;
        let captions: Vec<String> = (0..rows).map(|i| format!("{i:0>1000}")).collect();
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(captions)),
            Arc::new(Int64Array::from_iter_values(0..rows as i64)),
        ];
        let memory: usize = arrays.iter().map(|a| a.get_array_memory_size()).sum();
        let columns =
            Arc::new(SourceColumns::new(vec!["caption".into(), "n".into()], arrays, rows).unwrap());
        let row = Fields::row(Arc::clone(&columns), 7).unwrap();
        // A thousand-byte caption, its offset and a number: over 1,012 bytes.
        assert!(row.memory() >= 1012, "{}", row.memory());
        assert_eq!(row.memory(), memory.div_ceil(rows));
        // Read as values (a row of each array), the same share per column.
        let as_values = Fields::from(row.as_slice().to_vec());
        assert!(as_values.memory() >= 1012);

        let mut list = Fields::new();
        list.push("caption", FieldValue::String("x".repeat(5000)));
        list.push(
            "tags",
            FieldValue::List(vec![FieldValue::Binary(vec![0; 300]); 2]),
        );
        list.push("n", FieldValue::Int64(1));
        assert_eq!(list.memory(), 5000 + 600 + 8);
        assert_eq!(Fields::new().memory(), 0);
    }
}
