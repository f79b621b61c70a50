//! The fields of decoded samples (MDS columns, LitData leaves) built a batch at
//! a time as Arrow arrays, so that each record's fields are rows of them
//! ([`FieldValue::Arrow`]) with their exact types: an `int8` column is Arrow
//! `Int8`, a `uint64` one `UInt64`, a `float16` one `Float16`.
//!
//! An array (an MDS `ndarray`, a LitData NumPy array or tensor) is three
//! columns: `NAME` its element bytes (`Binary`, C order, little-endian),
//! `NAME.dtype` the NumPy name of its dtype (`Utf8`) and `NAME.shape` its
//! dimensions (`List<Int64>`); when the array is the record's value, only the
//! last two.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Float16Builder, Float32Builder, Float64Builder, Int16Builder,
    Int32Builder, Int64Builder, Int8Builder, ListBuilder, StringBuilder, UInt16Builder,
    UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::ArrayRef;

use crate::FieldValue;

/// Largest bytes or text of one field of one record: Arrow's `Binary` and
/// `Utf8` offsets are `i32`.
pub(crate) const MAX_FIELD_BYTES: usize = i32::MAX as usize / 2;

/// The Arrow type a column's cells take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Binary,
    Utf8,
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    Float32,
    Float64,
    /// An array's bytes, dtype and shape.
    Array,
    /// A list (or a column only ever null) of a LitData Arrow footer: its
    /// column is read whole as Arrow, never built from cells.
    Nested,
}

/// One decoded value of one column.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell<'a> {
    Bytes(&'a [u8]),
    Text(&'a str),
    Bool(bool),
    Int(i64),
    UInt(u64),
    /// The bits of an IEEE half.
    Half(u16),
    Float(f64),
    Array {
        dtype: &'static str,
        shape: Vec<u64>,
        data: &'a [u8],
    },
}

impl Cell<'_> {
    /// The cell as a record's key: bytes and text as they are, integers as
    /// decimal text; `None` for other kinds.
    pub(crate) fn key_bytes(&self) -> Option<Vec<u8>> {
        match self {
            Cell::Bytes(b) => Some(b.to_vec()),
            Cell::Text(t) => Some(t.as_bytes().to_vec()),
            Cell::Int(i) => Some(i.to_string().into_bytes()),
            Cell::UInt(u) => Some(u.to_string().into_bytes()),
            _ => None,
        }
    }

    /// The size this cell adds to a field column, checked against
    /// [`MAX_FIELD_BYTES`].
    pub(crate) fn byte_len(&self) -> usize {
        match self {
            Cell::Bytes(b) => b.len(),
            Cell::Text(t) => t.len(),
            Cell::Array { data, .. } => data.len(),
            _ => 8,
        }
    }
}

enum Builder {
    Binary(BinaryBuilder),
    Utf8(StringBuilder),
    Bool(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    UInt8(UInt8Builder),
    UInt16(UInt16Builder),
    UInt32(UInt32Builder),
    UInt64(UInt64Builder),
    Float16(Float16Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    /// Boxed: three builders, the others hold one.
    Array(Box<ArrayBuilders>),
    /// [`Kind::Nested`]: no cell is of its kind.
    Nested,
}

/// An `ndarray` column's builders: its elements (unless the value), dtype and
/// shape.
struct ArrayBuilders {
    data: Option<BinaryBuilder>,
    dtype: StringBuilder,
    shape: ListBuilder<Int64Builder>,
}

/// One column's cells of the batch being read.
pub(crate) struct ColumnBuilder {
    name: Arc<str>,
    builder: Builder,
}

impl ColumnBuilder {
    /// A column named `name` of `kind`; for an array, `with_data: false` builds
    /// only its dtype and shape (the array is the value).
    pub(crate) fn new(name: &str, kind: Kind, with_data: bool) -> ColumnBuilder {
        let builder = match kind {
            Kind::Binary => Builder::Binary(BinaryBuilder::new()),
            Kind::Utf8 => Builder::Utf8(StringBuilder::new()),
            Kind::Bool => Builder::Bool(BooleanBuilder::new()),
            Kind::Int8 => Builder::Int8(Int8Builder::new()),
            Kind::Int16 => Builder::Int16(Int16Builder::new()),
            Kind::Int32 => Builder::Int32(Int32Builder::new()),
            Kind::Int64 => Builder::Int64(Int64Builder::new()),
            Kind::UInt8 => Builder::UInt8(UInt8Builder::new()),
            Kind::UInt16 => Builder::UInt16(UInt16Builder::new()),
            Kind::UInt32 => Builder::UInt32(UInt32Builder::new()),
            Kind::UInt64 => Builder::UInt64(UInt64Builder::new()),
            Kind::Float16 => Builder::Float16(Float16Builder::new()),
            Kind::Float32 => Builder::Float32(Float32Builder::new()),
            Kind::Float64 => Builder::Float64(Float64Builder::new()),
            Kind::Array => Builder::Array(Box::new(ArrayBuilders {
                data: with_data.then(BinaryBuilder::new),
                dtype: StringBuilder::new(),
                shape: ListBuilder::new(Int64Builder::new()),
            })),
            Kind::Nested => Builder::Nested,
        };
        ColumnBuilder {
            name: Arc::from(name),
            builder,
        }
    }

    /// The names of the field columns this column makes, in order.
    pub(crate) fn field_names(name: &str, kind: Kind, with_data: bool) -> Vec<String> {
        match kind {
            Kind::Array => {
                let mut names = Vec::new();
                if with_data {
                    names.push(name.to_owned());
                }
                names.push(format!("{name}.dtype"));
                names.push(format!("{name}.shape"));
                names
            }
            _ => vec![name.to_owned()],
        }
    }

    /// Appends `cell`, which the caller decoded for this column's kind. A cell
    /// of another kind is a bug of the caller; it is refused, not appended.
    pub(crate) fn push(&mut self, cell: &Cell<'_>) -> Result<(), String> {
        match (&mut self.builder, cell) {
            (Builder::Binary(b), Cell::Bytes(v)) => b.append_value(v),
            (Builder::Utf8(b), Cell::Text(v)) => b.append_value(v),
            (Builder::Bool(b), Cell::Bool(v)) => b.append_value(*v),
            (Builder::Int8(b), Cell::Int(v)) => b.append_value(narrow(*v)?),
            (Builder::Int16(b), Cell::Int(v)) => b.append_value(narrow(*v)?),
            (Builder::Int32(b), Cell::Int(v)) => b.append_value(narrow(*v)?),
            (Builder::Int64(b), Cell::Int(v)) => b.append_value(*v),
            (Builder::UInt8(b), Cell::UInt(v)) => b.append_value(narrow(*v)?),
            (Builder::UInt16(b), Cell::UInt(v)) => b.append_value(narrow(*v)?),
            (Builder::UInt32(b), Cell::UInt(v)) => b.append_value(narrow(*v)?),
            (Builder::UInt64(b), Cell::UInt(v)) => b.append_value(*v),
            (Builder::Float16(b), Cell::Half(bits)) => b.append_value(half::f16::from_bits(*bits)),
            (Builder::Float32(b), Cell::Float(v)) => b.append_value(*v as f32),
            (Builder::Float64(b), Cell::Float(v)) => b.append_value(*v),
            (
                Builder::Array(array),
                Cell::Array {
                    dtype: name,
                    shape: dims,
                    data: bytes,
                },
            ) => {
                let dims = (dims.iter())
                    .map(|&d| i64::try_from(d).map_err(|_| format!("dimension {d} is too large")))
                    .collect::<Result<Vec<_>, _>>()?;
                let ArrayBuilders { data, dtype, shape } = &mut **array;
                if let Some(data) = data {
                    data.append_value(bytes);
                }
                dtype.append_value(name);
                shape.values().append_slice(&dims);
                shape.append(true);
            }
            (Builder::Nested, _) => {
                return Err("a list is read only from the rows of an Arrow footer".into())
            }
            (_, cell) => return Err(format!("a {cell:?} is not of the column's type")),
        }
        Ok(())
    }

    /// The arrays of the batch's cells, with their field names.
    pub(crate) fn finish(&mut self) -> Vec<(Arc<str>, ArrayRef)> {
        let one = |array: ArrayRef| vec![(self.name.clone(), array)];
        match &mut self.builder {
            Builder::Binary(b) => one(Arc::new(b.finish())),
            Builder::Utf8(b) => one(Arc::new(b.finish())),
            Builder::Bool(b) => one(Arc::new(b.finish())),
            Builder::Int8(b) => one(Arc::new(b.finish())),
            Builder::Int16(b) => one(Arc::new(b.finish())),
            Builder::Int32(b) => one(Arc::new(b.finish())),
            Builder::Int64(b) => one(Arc::new(b.finish())),
            Builder::UInt8(b) => one(Arc::new(b.finish())),
            Builder::UInt16(b) => one(Arc::new(b.finish())),
            Builder::UInt32(b) => one(Arc::new(b.finish())),
            Builder::UInt64(b) => one(Arc::new(b.finish())),
            Builder::Float16(b) => one(Arc::new(b.finish())),
            Builder::Float32(b) => one(Arc::new(b.finish())),
            Builder::Float64(b) => one(Arc::new(b.finish())),
            Builder::Array(array) => {
                let ArrayBuilders { data, dtype, shape } = &mut **array;
                let mut columns = Vec::new();
                if let Some(data) = data {
                    columns.push((self.name.clone(), Arc::new(data.finish()) as ArrayRef));
                }
                columns.push((
                    Arc::from(format!("{}.dtype", self.name)),
                    Arc::new(dtype.finish()) as ArrayRef,
                ));
                columns.push((
                    Arc::from(format!("{}.shape", self.name)),
                    Arc::new(shape.finish()) as ArrayRef,
                ));
                columns
            }
            Builder::Nested => Vec::new(),
        }
    }
}

fn narrow<T: TryFrom<U>, U: std::fmt::Display + Copy>(value: U) -> Result<T, String> {
    T::try_from(value).map_err(|_| format!("{value} is out of the column's range"))
}

/// Rows of a finished batch as records' fields: row `i` of every column.
pub(crate) fn row_fields(columns: &[(Arc<str>, ArrayRef)], row: usize) -> crate::Fields {
    let mut fields = crate::Fields::new();
    for (name, array) in columns {
        fields.push(name.clone(), FieldValue::Arrow(array.clone(), row));
    }
    fields
}

/// `count` elements of `size` bytes each, checked: the bytes an array of that
/// shape holds, or `None` on overflow.
pub(crate) fn array_bytes(shape: &[u64], size: usize) -> Option<u64> {
    shape
        .iter()
        .try_fold(size as u64, |total, &dim| total.checked_mul(dim))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt64Type};
    use arrow_array::Array;
    use arrow_schema::DataType;

    #[test]
    fn cells_become_arrays_of_their_exact_types() {
        let mut u64s = ColumnBuilder::new("u", Kind::UInt64, true);
        u64s.push(&Cell::UInt(u64::MAX)).unwrap();
        u64s.push(&Cell::UInt(1)).unwrap();
        let built = u64s.finish();
        assert_eq!(built[0].1.as_primitive::<UInt64Type>().value(0), u64::MAX);

        let mut i8s = ColumnBuilder::new("i", Kind::Int8, true);
        assert!(i8s.push(&Cell::Int(128)).is_err());
        assert!(i8s.push(&Cell::Text("x")).is_err());
        i8s.push(&Cell::Int(-128)).unwrap();
        assert_eq!(i8s.finish()[0].1.len(), 1);

        let mut halves = ColumnBuilder::new("h", Kind::Float16, true);
        halves.push(&Cell::Half(0x3c00)).unwrap();
        assert_eq!(halves.finish()[0].1.data_type(), &DataType::Float16);
    }

    #[test]
    fn an_array_is_three_columns_or_two_beside_the_value() {
        let cell = Cell::Array {
            dtype: "int16",
            shape: vec![2, 1],
            data: &[1, 0, 2, 0],
        };
        for with_data in [true, false] {
            let mut column = ColumnBuilder::new("a", Kind::Array, with_data);
            column.push(&cell).unwrap();
            let built = column.finish();
            let names: Vec<&str> = built.iter().map(|(n, _)| &**n).collect();
            assert_eq!(
                names,
                ColumnBuilder::field_names("a", Kind::Array, with_data)
            );
            let shape = built.last().unwrap().1.as_list::<i32>().value(0);
            assert_eq!(shape.as_primitive::<Int64Type>().values(), &[2, 1]);
        }
        assert_eq!(array_bytes(&[2, 3], 4), Some(24));
        assert_eq!(array_bytes(&[u64::MAX, 2], 1), None);
    }
}
