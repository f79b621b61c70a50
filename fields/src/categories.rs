//! Category codes: each row of a column as a dense `u32` class number, the input
//! of the category-aware orders and balanced subsets (`bcd-sampling`). Every
//! front end gets its codes here: `bcd export --balance-by FIELD`,
//! `bcd.partition(categories=<pyarrow column>)` and `bcd.torch`'s
//! `balance_by="field"`, so they all number the classes alike.
//!
//! The numbering is pyarrow's `dictionary_encode` over the whole column, which
//! the Python package used before this module existed: values are numbered in
//! order of first appearance (a dictionary-encoded column keeps its dictionary's
//! order, and the dictionaries of later chunks append the values the earlier
//! ones lack), and nulls are one more class, numbered after every value.
//!
//! A category is a value compared for equality: text, bytes, integers,
//! booleans, dates, times, timestamps, durations, decimals, or a dictionary of
//! these. Floats are refused (equality of measured values makes no classes, and
//! NaN is not equal to itself), as are nested values (lists, structs, maps,
//! unions), which pyarrow cannot dictionary-encode either.

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use hashbrown::HashMap;

use crate::error::FieldsError;

/// Stands for a null until the number of values is known.
const NULL: u32 = u32::MAX;

/// Whether a column of `data_type` can give categories.
pub fn is_category_type(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(_, values) => {
            !matches!(**values, DataType::Dictionary(..)) && is_category_type(values)
        }
        DataType::Null
        | DataType::Boolean
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => true,
        other => fixed_width(other).is_some(),
    }
}

/// The byte width of the fixed-width types whose values are categories
/// (compared by their bytes, which for these types is equality of values).
fn fixed_width(data_type: &DataType) -> Option<usize> {
    (data_type.is_integer() || data_type.is_temporal() || data_type.is_decimal())
        .then(|| data_type.primitive_width())
        .flatten()
}

/// The category codes of one column, chunk by chunk in row order.
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{ArrayRef, StringArray};
/// use bcd_fields::CategoryCodes;
///
/// let chunks: Vec<ArrayRef> = vec![
///     Arc::new(StringArray::from(vec![Some("dog"), None, Some("cat")])),
///     Arc::new(StringArray::from(vec![Some("dog"), Some("owl")])),
/// ];
/// let mut codes = CategoryCodes::new("field \"label\"", chunks[0].data_type())?;
/// for chunk in &chunks {
///     codes.push(chunk.as_ref())?;
/// }
/// // First appearance order; the null is the class after the last value.
/// assert_eq!(codes.finish(), [0, 3, 1, 0, 2]);
/// # Ok::<(), bcd_fields::FieldsError>(())
/// ```
#[derive(Debug)]
pub struct CategoryCodes {
    /// The column, as messages name it (`field "label" of ds`, `categories=`).
    what: String,
    data_type: DataType,
    /// Each value's bytes and its code.
    classes: HashMap<Box<[u8]>, u32>,
    codes: Vec<u32>,
}

impl CategoryCodes {
    /// Codes for a column of `data_type`, named `what` in errors; a type that
    /// cannot give categories is refused here, before any row is read.
    pub fn new(what: impl Into<String>, data_type: &DataType) -> Result<Self, FieldsError> {
        let what = what.into();
        if !is_category_type(data_type) {
            return Err(FieldsError::NotCategories {
                what,
                data_type: data_type.to_string(),
            });
        }
        Ok(CategoryCodes {
            what,
            data_type: data_type.clone(),
            classes: HashMap::new(),
            codes: Vec::new(),
        })
    }

    /// Adds the rows of the next chunk (of the type given to [`CategoryCodes::new`]).
    pub fn push(&mut self, array: &dyn Array) -> Result<(), FieldsError> {
        if array.data_type() != &self.data_type {
            return Err(FieldsError::Unsupported(format!(
                "{}: a chunk of type {} in a column of {}",
                self.what,
                array.data_type(),
                self.data_type
            )));
        }
        self.codes.reserve(array.len());
        match array.data_type() {
            DataType::Dictionary(..) => {
                let dictionary = array.as_any_dictionary();
                // The dictionary's values in its order: the codes of its keys.
                let mut values = CategoryCodes {
                    what: self.what.clone(),
                    data_type: dictionary.values().data_type().clone(),
                    classes: std::mem::take(&mut self.classes),
                    codes: Vec::new(),
                };
                let pushed = values.push_values(dictionary.values().as_ref());
                self.classes = values.classes;
                pushed?;
                let keys = dictionary.normalized_keys();
                let nulls = dictionary.keys().logical_nulls();
                for (row, &key) in keys.iter().enumerate() {
                    let null = nulls.as_ref().is_some_and(|n| n.is_null(row));
                    self.codes.push(match values.codes.get(key) {
                        Some(&code) if !null => code,
                        _ => NULL,
                    });
                }
                Ok(())
            }
            _ => self.push_values(array),
        }
    }

    /// The codes of every row pushed.
    pub fn finish(mut self) -> Vec<u32> {
        let null = self.classes.len() as u32;
        for code in &mut self.codes {
            if *code == NULL {
                *code = null;
            }
        }
        self.codes
    }

    /// Adds the rows of a chunk that is not dictionary-encoded.
    fn push_values(&mut self, array: &dyn Array) -> Result<(), FieldsError> {
        let nulls = array.logical_nulls();
        let nulls = nulls.as_ref();
        let len = array.len();
        match array.data_type() {
            DataType::Null => {
                self.codes.extend(std::iter::repeat_n(NULL, len));
                Ok(())
            }
            DataType::Boolean => {
                let array = array.as_boolean();
                let (no, yes): (&[u8], &[u8]) = (&[0], &[1]);
                self.each(len, nulls, |row| if array.value(row) { yes } else { no })
            }
            DataType::Utf8 => {
                let array = array.as_string::<i32>();
                self.each(len, nulls, |row| array.value(row).as_bytes())
            }
            DataType::LargeUtf8 => {
                let array = array.as_string::<i64>();
                self.each(len, nulls, |row| array.value(row).as_bytes())
            }
            DataType::Utf8View => {
                let array = array.as_string_view();
                self.each(len, nulls, |row| array.value(row).as_bytes())
            }
            DataType::Binary => {
                let array = array.as_binary::<i32>();
                self.each(len, nulls, |row| array.value(row))
            }
            DataType::LargeBinary => {
                let array = array.as_binary::<i64>();
                self.each(len, nulls, |row| array.value(row))
            }
            DataType::BinaryView => {
                let array = array.as_binary_view();
                self.each(len, nulls, |row| array.value(row))
            }
            DataType::FixedSizeBinary(_) => {
                let array = array.as_fixed_size_binary();
                self.each(len, nulls, |row| array.value(row))
            }
            other => {
                let width = fixed_width(other).ok_or_else(|| FieldsError::NotCategories {
                    what: self.what.clone(),
                    data_type: other.to_string(),
                })?;
                // The values buffer of a primitive array, from its offset.
                let data = array.to_data();
                let start = data.offset() * width;
                let bytes = &data.buffers()[0].as_slice()[start..start + len * width];
                self.each(len, nulls, |row| &bytes[row * width..(row + 1) * width])
            }
        }
    }

    /// Adds `len` rows whose value bytes `value` gives (not called for nulls).
    fn each<'a>(
        &mut self,
        len: usize,
        nulls: Option<&NullBuffer>,
        value: impl Fn(usize) -> &'a [u8],
    ) -> Result<(), FieldsError> {
        for row in 0..len {
            if nulls.is_some_and(|n| n.is_null(row)) {
                self.codes.push(NULL);
                continue;
            }
            let bytes = value(row);
            let code = match self.classes.get(bytes) {
                Some(&code) => code,
                None => {
                    // `NULL` and the null class's own code must stay free.
                    let code = u32::try_from(self.classes.len())
                        .ok()
                        .filter(|&code| code < NULL)
                        .ok_or_else(|| {
                            FieldsError::Unsupported(format!(
                                "{}: more than {} distinct values, more classes than codes hold",
                                self.what,
                                NULL - 1
                            ))
                        })?;
                    self.classes.insert(bytes.into(), code);
                    code
                }
            };
            self.codes.push(code);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::{Int32Type, UInt8Type};
    use arrow_array::{
        ArrayRef, BooleanArray, Date32Array, DictionaryArray, Float64Array, Int64Array,
        LargeStringArray, ListArray, NullArray, StringArray,
    };

    use super::*;

    fn codes(chunks: &[ArrayRef]) -> Result<Vec<u32>, FieldsError> {
        let mut codes = CategoryCodes::new("field \"c\"", chunks[0].data_type())?;
        for chunk in chunks {
            codes.push(chunk.as_ref())?;
        }
        Ok(codes.finish())
    }

    fn one(array: impl Array + 'static) -> Vec<u32> {
        codes(&[Arc::new(array)]).unwrap()
    }

    #[test]
    fn values_are_numbered_by_first_appearance_and_nulls_come_last() {
        // As pyarrow's dictionary_encode of the chunked column (bcd.sampling's
        // test_pyarrow_columns_are_dictionary_encoded).
        let chunks: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("b"), None, Some("a")])),
            Arc::new(StringArray::from(vec![Some("b")])),
        ];
        assert_eq!(codes(&chunks).unwrap(), [0, 2, 1, 0]);
        assert_eq!(one(Int64Array::from(vec![7, -1, 7, 3])), [0, 1, 0, 2]);
        assert_eq!(
            one(BooleanArray::from(vec![Some(true), None, Some(false)])),
            [0, 2, 1]
        );
        assert_eq!(one(Date32Array::from(vec![5, 5, 6])), [0, 0, 1]);
        assert_eq!(one(LargeStringArray::from(vec![None, Some("x")])), [1, 0]);
        assert_eq!(one(NullArray::new(3)), [0, 0, 0]);
        assert!(one(StringArray::from(Vec::<&str>::new())).is_empty());
    }

    #[test]
    fn a_sliced_chunk_is_read_from_its_offset() {
        let array = Int64Array::from(vec![1, 2, 3, 2]).slice(1, 3);
        assert_eq!(codes(&[Arc::new(array)]).unwrap(), [0, 1, 0]);
    }

    #[test]
    fn a_dictionary_keeps_its_order_and_later_dictionaries_append() {
        let first: DictionaryArray<Int32Type> =
            vec![Some("b"), Some("a"), None].into_iter().collect();
        let second: DictionaryArray<Int32Type> = vec!["c", "a"].into_iter().collect();
        assert_eq!(
            codes(&[Arc::new(first), Arc::new(second)]).unwrap(),
            [0, 1, 3, 2, 1]
        );
        // Unused dictionary entries keep their code, as pyarrow's indices do.
        let keys = arrow_array::UInt8Array::from(vec![2, 2]);
        let values = Arc::new(StringArray::from(vec!["x", "y", "z"]));
        let sparse = DictionaryArray::<UInt8Type>::try_new(keys, values).unwrap();
        assert_eq!(one(sparse), [2, 2]);
    }

    #[test]
    fn floats_and_nested_values_are_refused_naming_the_column_and_its_type() {
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        let message = codes(&[floats]).unwrap_err().to_string();
        assert!(
            message.starts_with("field \"c\" has type Float64, which has no categories"),
            "{message}"
        );
        let lists: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1)]),
        ]));
        let message = codes(&[lists]).unwrap_err().to_string();
        assert!(message.contains("has type List("), "{message}");
        let float_dictionary =
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Float32));
        assert!(!is_category_type(&float_dictionary));
    }
}
