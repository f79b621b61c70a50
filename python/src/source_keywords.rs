//! The keyword arguments of `bcd.ingest` that say how to read the sources, by
//! format, and how they become the library's [`SourceOptions`]: the Python
//! spelling of `bcd ingest`'s per-format flags (`cli/src/source_args.rs`). A
//! keyword not given stays `None` (or empty, or false), so that giving one to
//! another format is refused even with its default value; the library decides
//! which format takes which option.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use bcd_converters::FieldType;
use bcd_pipeline::{
    parse_delimiter, parse_field_type, parse_labels, parse_schema, parse_value_ext, read_schema,
    SourceFormat, SourceOptions,
};

use crate::args::{fields_arg, location};
use crate::errors::message;
use crate::options::invalid;

/// The source keywords of one `bcd.ingest` call, as given (`**source_keywords`),
/// grouped by the format that takes them: the one table of them. A keyword not
/// given stays `None` (or false), so that giving one to another format is
/// refused even with its default value; an unknown keyword is a `TypeError`, as
/// Python's own for a function that does not take it.
#[derive(Default)]
struct SourceKeywords<'py> {
    // dir
    include: Option<Bound<'py, PyAny>>,
    exclude: Option<Bound<'py, PyAny>>,
    follow_links: bool,
    labels: Option<String>,
    // tar
    samples: bool,
    value_ext: Option<Bound<'py, PyAny>>,
    json_fields: bool,
    skip_bad_samples: bool,
    // parquet, hf-disk, mds and litdata (key_column: and csv)
    value_column: Option<String>,
    key_column: Option<String>,
    skip_nulls: bool,
    // hf-disk
    split: Option<String>,
    // lmdb (value_column too, with lmdb_value="pickle")
    lmdb_value: Option<String>,
    lmdb_db: Option<String>,
    // csv
    path_column: Option<String>,
    root: Option<Bound<'py, PyAny>>,
    delimiter: Option<String>,
    // tfrecord
    feature: Option<String>,
    key_feature: Option<String>,
    // jsonl
    value_field: Option<String>,
    value_base64: bool,
    key_field: Option<String>,
    schema: Option<Bound<'py, PyAny>>,
    // fields (parquet, hf-disk, csv, tfrecord, mds, litdata)
    fields: Option<Bound<'py, PyAny>>,
    field_type: Option<Bound<'py, PyAny>>,
}

/// The [`SourceOptions`] that `keywords` (the `**source_keywords` of
/// `bcd.ingest`) give, with `format`; a value a keyword does not take is a
/// `ValueError` (or `TypeError`) naming it.
pub(crate) fn source_options(
    format: Option<SourceFormat>,
    keywords: Option<&Bound<'_, PyDict>>,
) -> PyResult<SourceOptions> {
    let mut given = SourceKeywords::default();
    for (name, value) in keywords.into_iter().flat_map(|dict| dict.iter()) {
        let name: String = name.extract()?;
        // `None` is the default of every keyword: given as None, it is not given.
        let value = Some(value).filter(|value| !value.is_none());
        let text = |value: Option<Bound<'_, PyAny>>| -> PyResult<Option<String>> {
            value
                .map(|value| {
                    value
                        .extract::<String>()
                        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str")))
                })
                .transpose()
        };
        let flag = |value: Option<Bound<'_, PyAny>>| -> PyResult<bool> {
            value.map_or(Ok(false), |value| {
                value
                    .extract::<bool>()
                    .map_err(|_| PyTypeError::new_err(format!("{name} must be a bool")))
            })
        };
        match name.as_str() {
            "include" => given.include = value,
            "exclude" => given.exclude = value,
            "follow_links" => given.follow_links = flag(value)?,
            "labels" => given.labels = text(value)?,
            "samples" => given.samples = flag(value)?,
            "value_ext" => given.value_ext = value,
            "json_fields" => given.json_fields = flag(value)?,
            "skip_bad_samples" => given.skip_bad_samples = flag(value)?,
            "value_column" => given.value_column = text(value)?,
            "key_column" => given.key_column = text(value)?,
            "skip_nulls" => given.skip_nulls = flag(value)?,
            "split" => given.split = text(value)?,
            "lmdb_value" => given.lmdb_value = text(value)?,
            "lmdb_db" => given.lmdb_db = text(value)?,
            "path_column" => given.path_column = text(value)?,
            "root" => given.root = value,
            "delimiter" => given.delimiter = text(value)?,
            "feature" => given.feature = text(value)?,
            "key_feature" => given.key_feature = text(value)?,
            "value_field" => given.value_field = text(value)?,
            "value_base64" => given.value_base64 = flag(value)?,
            "key_field" => given.key_field = text(value)?,
            "schema" => given.schema = value,
            "fields" => given.fields = value,
            "field_type" => given.field_type = value,
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "ingest() got an unexpected keyword argument '{name}'"
                )))
            }
        }
    }
    given.options(format)
}

impl SourceKeywords<'_> {
    fn options(self, format: Option<SourceFormat>) -> PyResult<SourceOptions> {
        let SourceKeywords {
            include,
            exclude,
            follow_links,
            labels,
            samples,
            value_ext,
            json_fields,
            skip_bad_samples,
            value_column,
            key_column,
            skip_nulls,
            split,
            lmdb_value,
            lmdb_db,
            path_column,
            root,
            delimiter,
            feature,
            key_feature,
            value_field,
            value_base64,
            key_field,
            schema,
            fields,
            field_type,
        } = self;
        let root = match root {
            Some(root) => match location(root.py(), &root)? {
                bcd_remote::Location::Local(path) => Some(path),
                bcd_remote::Location::Remote(uri) => {
                    return Err(PyValueError::new_err(format!(
                        "root: {uri}: CSV roots must be local directories"
                    )))
                }
            },
            None => None,
        };
        // In the order the keywords were always checked in.
        Ok(SourceOptions {
            format,
            include: strings(include.as_ref(), "include")?,
            exclude: strings(exclude.as_ref(), "exclude")?,
            follow_links,
            value_column,
            key_column,
            skip_nulls,
            split,
            lmdb_value: lmdb_value
                .map(|text| {
                    text.parse()
                        .map_err(|error| PyValueError::new_err(format!("lmdb_value: {error}")))
                })
                .transpose()?,
            lmdb_db,
            path_column,
            root,
            delimiter: delimiter
                .map(|text| parse_delimiter(&text).map_err(|error| invalid("delimiter", error)))
                .transpose()?,
            feature,
            key_feature,
            fields: fields_arg(fields.as_ref())?,
            field_type: field_type_arg(field_type.as_ref())?,
            labels: labels
                .map(|text| parse_labels(&text).map_err(|error| invalid("labels", error)))
                .transpose()?,
            samples,
            value_ext: value_ext_arg(value_ext.as_ref())?,
            json_fields,
            skip_bad_samples,
            value_field,
            value_base64,
            key_field,
            schema: schema_arg(schema.as_ref())?,
        })
    }
}

/// A list of strings from one str or path-like, or an iterable of them.
pub(crate) fn strings(value: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Vec<String>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(Vec::new());
    };
    let os = value.py().import("os")?;
    if value.is_instance_of::<PyString>() || value.hasattr("__fspath__")? {
        return Ok(vec![os
            .call_method1("fspath", (value,))?
            .extract()
            .map_err(|_| {
                PyTypeError::new_err(format!("{name} must be str or path-like"))
            })?]);
    }
    let mut items = Vec::new();
    for item in value
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str or a list of str")))?
    {
        let item = os.call_method1("fspath", (item?,))?;
        items.push(item.extract::<String>().map_err(|_| {
            PyTypeError::new_err(format!("{name} must hold str or path-like items"))
        })?);
    }
    Ok(items)
}

/// `field_type=`: a dict of column name to type (`{"label": "int64"}`), or an
/// iterable of `"NAME=TYPE"` strings, as `--field-type` takes them.
fn field_type_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, FieldType)>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(Vec::new());
    };
    let mut types = Vec::new();
    if let Ok(dict) = value.cast::<PyDict>() {
        for (name, type_name) in dict.iter() {
            let (name, type_name): (String, String) = (name.extract()?, type_name.extract()?);
            let field_type = type_name
                .parse::<FieldType>()
                .map_err(|e| PyValueError::new_err(format!("field_type: {name:?}: {e}")))?;
            types.push((name, field_type));
        }
        return Ok(types);
    }
    if value.is_instance_of::<PyString>() {
        let text: String = value.extract()?;
        return Ok(vec![
            parse_field_type(&text).map_err(|error| invalid("field_type", error))?
        ]);
    }
    for item in value.try_iter().map_err(|_| {
        PyTypeError::new_err(
            "field_type must be a dict of name to type, or a list of \"NAME=TYPE\" str",
        )
    })? {
        let text: String = item?
            .extract()
            .map_err(|_| PyTypeError::new_err("field_type must hold \"NAME=TYPE\" str items"))?;
        types.push(parse_field_type(&text).map_err(|error| invalid("field_type", error))?);
    }
    Ok(types)
}

/// `value_ext=`: `"jpg,png"`, or an iterable of extensions.
fn value_ext_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let mut exts = Vec::new();
    for text in strings(value, "value_ext")? {
        for ext in text.split(',') {
            exts.push(parse_value_ext(ext).map_err(|error| invalid("value_ext", error))?);
        }
    }
    Ok(exts)
}

/// `schema=`: a path to a schema file (as `--schema` takes it), or the schema
/// itself as a list of `{"name": ..., "type": ...}` dicts.
fn schema_arg(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<arrow_schema::SchemaRef>> {
    let Some(value) = value.filter(|value| !value.is_none()) else {
        return Ok(None);
    };
    if value.is_instance_of::<PyString>() || value.hasattr("__fspath__")? {
        let path: PathBuf = value.extract()?;
        return read_schema(&path)
            .map(Some)
            .map_err(|error| PyValueError::new_err(format!("schema: {}", message(&error))));
    }
    let text: String = value
        .py()
        .import("json")?
        .call_method1("dumps", (value,))
        .map_err(|_| {
            PyTypeError::new_err(
                "schema must be a path or a list of {\"name\": NAME, \"type\": TYPE} dicts",
            )
        })?
        .extract()?;
    parse_schema(&text)
        .map(Some)
        .map_err(|reason| PyValueError::new_err(format!("schema: {reason}")))
}
