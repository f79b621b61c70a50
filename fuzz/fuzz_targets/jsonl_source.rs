//! The JSON Lines source on arbitrary bytes: every record and the error that ends
//! the source, never a panic, a hang, or an allocation beyond its bounds (run with
//! `-malloc_limit_mb=512`).
//!
//! Input layout: one flag byte, then the file. Bit 0: key by the field `id`; bit 1:
//! values in base64; bit 2: a given schema (`id` int64, `a` float64, `b` list of
//! strings) instead of an inferred one; bit 3: zstd-compress the file; bit 4:
//! decode on two threads of their own instead of the reading one.
//!
//! What holds: every record's origin is a line of the file, its fields are rows of
//! Arrow columns, never the value or key field; an error names the file and, once
//! the file is opened, a line; after an error the source yields nothing more.
#![no_main]

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use bcd_converters::jsonl_source::{JsonlOptions, JsonlSource};
use bcd_converters::{FieldValue, Origin, RowAt};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("fuzz.jsonl");
    let bytes = match flags & 8 != 0 {
        true => zstd::encode_all(rest, 1).expect("zstd in memory"),
        false => rest.to_vec(),
    };
    std::fs::write(&path, bytes).expect("writing the input");
    let options = JsonlOptions {
        key_field: (flags & 1 != 0).then(|| "id".to_owned()),
        value_base64: flags & 2 != 0,
        schema: (flags & 4 != 0).then(|| {
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, true),
                Field::new("a", DataType::Float64, true),
                Field::new(
                    "b",
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                    true,
                ),
            ]))
        }),
        threads: usize::from(flags & 16 != 0) * 2,
        ..JsonlOptions::default()
    };
    let file = path.display().to_string();
    let mut source = match JsonlSource::new(std::slice::from_ref(&path), options) {
        Ok(source) => source,
        Err(error) => {
            assert!(error.to_string().contains(&file), "{error}");
            return;
        }
    };
    while let Some(item) = source.next() {
        match item {
            Ok(record) => {
                assert!(matches!(&record.origin, Origin::Row { file, row: RowAt::Line(_) }
                    if **file == *path));
                for (name, value) in record.fields.iter() {
                    assert_ne!(&**name, "text");
                    if flags & 1 != 0 {
                        assert_ne!(&**name, "id");
                    }
                    assert!(matches!(value, FieldValue::Arrow(..)));
                }
            }
            Err(error) => {
                let message = error.to_string();
                assert!(message.starts_with(&format!("{file}: line ")), "{message}");
                assert!(source.next().is_none(), "records after the error");
                break;
            }
        }
    }
});
