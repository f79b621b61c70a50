//! The row model: what a source attaches to each record.

use std::sync::Arc;

use arrow_array::ArrayRef;

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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields(pub Vec<(Arc<str>, FieldValue)>);

impl Fields {
    /// No fields.
    pub fn new() -> Fields {
        Fields(Vec::new())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds a field. The caller keeps names unique.
    pub fn push(&mut self, name: impl Into<Arc<str>>, value: FieldValue) {
        self.0.push((name.into(), value));
    }

    /// The value named `name`, if present.
    pub fn get(&self, name: &str) -> Option<&FieldValue> {
        self.0.iter().find(|(n, _)| &**n == name).map(|(_, v)| v)
    }
}
