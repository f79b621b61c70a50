//! A LitData `optimize` output's `index.json` and the leaves of its items, as
//! `litdata/streaming/{writer,item_loader,serializers}.py` and
//! `litdata/utilities/_pytree.py` define them (litdata 0.2.76; FORMAT.md,
//! section 15): the `config` checked (the pytree item loader, no encryption,
//! zstd or no compression, zstd or lz4 IPC compression of Arrow footers),
//! the `data_spec` pytree parsed for the leaves' names, the `types` for
//! whether the rows are Arrow footers ([`crate::litdata_footer`]), and one
//! item split into its leaves and each decoded by its `data_format` into a
//! [`Cell`].

use serde_json::Value;

use crate::litdata_footer::{footer_leaves, FooterLeaf};
use crate::sample_columns::{array_bytes, Cell, Kind};
use crate::sample_shards::Codec;

/// Deepest pytree read (nesting of dicts, lists and tuples; serde_json's own
/// limit of 128 levels of JSON is about 64 of pytree).
pub(crate) const MAX_SPEC_DEPTH: usize = 32;

/// How a chunk's items are compressed (`compression` with
/// `compression_level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wrap {
    /// Not compressed.
    None,
    /// The whole file is one zstd stream (`chunk`, or no level: `.zstd.bin`).
    Chunk,
    /// zstd frames of consecutive items inside `.bin` (`batch`, the default of
    /// `compression="zstd"` since litdata 0.2.7x), behind an `LDFZ01` header.
    Batch,
    /// Each item is a zstd frame (`sample`).
    Sample,
}

/// A NumPy or torch dtype a leaf's array holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArrayDtype {
    pub name: &'static str,
    pub size: usize,
}

const fn dt(name: &'static str, size: usize) -> Option<ArrayDtype> {
    Some(ArrayDtype { name, size })
}

/// `_NUMPY_DTYPES_MAPPING` (litdata/constants.py): the index of a NumPy dtype
/// in its scalar types; object, bytes, str and void arrays have no bytes of
/// their own to store and are refused.
fn numpy_dtype(index: u32) -> Option<ArrayDtype> {
    match index {
        0 => dt("int8", 1),
        1 => dt("int16", 2),
        2 => dt("int32", 4),
        3 => dt("int64", 8),
        4 => dt("uint8", 1),
        5 => dt("uint16", 2),
        6 => dt("uint32", 4),
        7 => dt("uint64", 8),
        8 => dt("float16", 2),
        9 => dt("float32", 4),
        10 => dt("float64", 8),
        11 => dt("complex64", 8),
        12 => dt("complex128", 16),
        13 => dt("bool", 1),
        _ => None,
    }
}

/// `_TORCH_DTYPES_MAPPING`: a torch dtype's index, named as NumPy names the
/// same elements (bfloat16 by torch's name).
fn torch_dtype(index: u32) -> Option<ArrayDtype> {
    match index {
        0 | 1 => dt("float32", 4),
        2 | 3 => dt("float64", 8),
        4 | 5 => dt("complex64", 8),
        6 | 7 => dt("complex128", 16),
        8 | 9 => dt("float16", 2),
        10 => dt("bfloat16", 2),
        11 => dt("uint8", 1),
        12 => dt("int8", 1),
        13 | 14 => dt("int16", 2),
        15 | 16 => dt("int32", 4),
        17 | 18 => dt("int64", 8),
        19 => dt("bool", 1),
        20 => dt("uint16", 2),
        _ => None,
    }
}

/// A leaf's `data_format`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LeafFormat {
    /// Bytes kept as they are: `bytes`, `jpeg`, `pil`, `jpeg_array`,
    /// `image:EXT`, `file`, `file:EXT`, `video*`, `audio*`, `pdf`, `tiff`,
    /// `tifffile`, `nifti*`, `mesh*`, and `json` (LitData's own compact
    /// binary of a list or dict).
    Bytes,
    /// `str`, `text`: UTF-8.
    Text,
    /// `int`: an int64.
    Int,
    /// `float`: a float64.
    Float,
    /// `bool`: one byte, true unless 0.
    Bool,
    /// `numpy`: `[dtype index: u32] [ndim: u32] [dims: u32 each]` (native
    /// order, little-endian), then the elements.
    Numpy,
    /// `tensor`: `[dtype index: u32] [rank: u32] [dims: u32 each]` big-endian,
    /// then the elements.
    Tensor,
    /// `no_header_numpy:N` / `no_header_tensor:N`: a 1-D array of the dtype
    /// the name gives, elements only.
    Flat(ArrayDtype),
    /// `pickle` (or a graph LitData pickles): never unpickled.
    Pickle,
}

impl LeafFormat {
    /// The format `name` names, or `None` for one bcd does not know.
    pub(crate) fn parse(name: &str) -> Option<LeafFormat> {
        let (family, arg) = match name.split_once(':') {
            Some((family, arg)) => (family, Some(arg)),
            None => (name, None),
        };
        let index = || arg.and_then(|a| a.parse::<u32>().ok());
        Some(match (family, arg) {
            ("str" | "text", None) => LeafFormat::Text,
            ("int", None) => LeafFormat::Int,
            ("float", None) => LeafFormat::Float,
            ("bool", None) => LeafFormat::Bool,
            ("numpy", None) => LeafFormat::Numpy,
            ("tensor", None) => LeafFormat::Tensor,
            ("no_header_numpy", Some(_)) => LeafFormat::Flat(numpy_dtype(index()?)?),
            ("no_header_tensor", Some(_)) => LeafFormat::Flat(torch_dtype(index()?)?),
            ("pickle", None) => LeafFormat::Pickle,
            ("graph", Some("pickle")) => LeafFormat::Pickle,
            (
                "bytes" | "jpeg" | "pil" | "jpeg_array" | "json" | "pdf" | "tiff" | "tifffile",
                None,
            ) => LeafFormat::Bytes,
            ("image" | "file" | "video" | "audio" | "nifti" | "mesh", _) => LeafFormat::Bytes,
            _ => return None,
        })
    }

    /// The Arrow kind of its field; `None` for a pickle.
    pub(crate) fn kind(&self) -> Option<Kind> {
        Some(match self {
            LeafFormat::Bytes => Kind::Binary,
            LeafFormat::Text => Kind::Utf8,
            LeafFormat::Int => Kind::Int64,
            LeafFormat::Float => Kind::Float64,
            LeafFormat::Bool => Kind::Bool,
            LeafFormat::Numpy | LeafFormat::Tensor | LeafFormat::Flat(_) => Kind::Array,
            LeafFormat::Pickle => return None,
        })
    }

    /// Decodes one leaf.
    pub(crate) fn cell<'a>(&self, bytes: &'a [u8]) -> Result<Cell<'a>, String> {
        let fixed = |n: usize| -> Result<(), String> {
            match bytes.len() == n {
                true => Ok(()),
                false => Err(format!("{} bytes, not {n}", bytes.len())),
            }
        };
        Ok(match self {
            LeafFormat::Bytes | LeafFormat::Pickle => Cell::Bytes(bytes),
            LeafFormat::Text => Cell::Text(
                std::str::from_utf8(bytes).map_err(|e| format!("the text is not UTF-8 ({e})"))?,
            ),
            LeafFormat::Int => {
                fixed(8)?;
                Cell::Int(i64::from_le_bytes(bytes.try_into().expect("8 bytes")))
            }
            LeafFormat::Float => {
                fixed(8)?;
                Cell::Float(f64::from_le_bytes(bytes.try_into().expect("8 bytes")))
            }
            LeafFormat::Bool => {
                fixed(1)?;
                Cell::Bool(bytes[0] != 0)
            }
            LeafFormat::Numpy => headed_array(bytes, false)?,
            LeafFormat::Tensor => headed_array(bytes, true)?,
            LeafFormat::Flat(dtype) => {
                if !bytes.len().is_multiple_of(dtype.size) {
                    return Err(format!(
                        "{} bytes are not whole {} elements",
                        bytes.len(),
                        dtype.name
                    ));
                }
                Cell::Array {
                    dtype: dtype.name,
                    shape: vec![(bytes.len() / dtype.size) as u64],
                    data: bytes,
                }
            }
        })
    }

    /// Whether its values are bytes a record's value is made of.
    pub(crate) fn is_binary(&self) -> bool {
        matches!(
            self,
            LeafFormat::Bytes | LeafFormat::Numpy | LeafFormat::Tensor | LeafFormat::Flat(_)
        )
    }
}

/// A `numpy` or `tensor` leaf: its header, then exactly the elements its
/// shape holds.
fn headed_array(bytes: &[u8], tensor: bool) -> Result<Cell<'_>, String> {
    let word = |i: usize| -> Result<u32, String> {
        let b: [u8; 4] = (bytes.get(4 * i..4 * i + 4))
            .ok_or("the array ends inside its header")?
            .try_into()
            .expect("4 bytes");
        Ok(if tensor {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    let index = word(0)?;
    let dtype = if tensor {
        torch_dtype(index)
    } else {
        numpy_dtype(index)
    }
    .ok_or_else(|| format!("dtype index {index} is not one bcd can store"))?;
    let ndim = word(1)? as usize;
    // Each dimension is a word of the header: more than the leaf holds is
    // refused before anything is set aside for them.
    if ndim > bytes.len() / 4 {
        return Err(format!(
            "{ndim} dimensions do not fit in {} bytes",
            bytes.len()
        ));
    }
    let shape = (0..ndim)
        .map(|i| word(2 + i).map(u64::from))
        .collect::<Result<Vec<_>, _>>()?;
    let data = &bytes[4 * (2 + ndim)..];
    let expected =
        array_bytes(&shape, dtype.size).ok_or_else(|| format!("the shape {shape:?} overflows"))?;
    if data.len() as u64 != expected {
        return Err(format!(
            "a {} array of shape {shape:?} holds {expected} bytes, not {}",
            dtype.name,
            data.len()
        ));
    }
    Ok(Cell::Array {
        dtype: dtype.name,
        shape,
        data,
    })
}

/// The flattened names of a `data_spec`'s leaves, in order: dict keys and
/// sequence positions joined by `.`, a lone leaf `item`.
pub(crate) fn leaf_names(data_spec: &str) -> Result<Vec<String>, String> {
    let spec: Value =
        serde_json::from_str(data_spec).map_err(|e| format!("not valid JSON ({e})"))?;
    let tree = match spec.as_array().map(Vec::as_slice) {
        Some([protocol, tree]) if protocol.as_u64() == Some(1) => tree,
        _ => return Err("not a protocol-1 treespec ([1, {...}])".into()),
    };
    let mut names = Vec::new();
    walk(tree, &mut Vec::new(), &mut names)?;
    Ok(names)
}

fn walk(node: &Value, path: &mut Vec<String>, names: &mut Vec<String>) -> Result<(), String> {
    if path.len() > MAX_SPEC_DEPTH {
        return Err(format!("nested deeper than {MAX_SPEC_DEPTH} levels"));
    }
    let children = (node.get("children_spec").and_then(Value::as_array))
        .ok_or("a node without \"children_spec\"")?;
    let context = node.get("context").unwrap_or(&Value::Null);
    let kind = match node.get("type") {
        None | Some(Value::Null) => {
            if !children.is_empty() {
                return Err("a leaf with children".into());
            }
            names.push(match path.is_empty() {
                true => "item".to_owned(),
                false => path.join("."),
            });
            return Ok(());
        }
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => return Err(format!("a node of type {other}")),
    };
    let keys: Vec<String> = match kind {
        "builtins.dict" | "collections.OrderedDict" => dict_keys(context)?,
        "collections.defaultdict" => dict_keys(
            context
                .get("dict_context")
                .ok_or("a defaultdict without \"dict_context\"")?,
        )?,
        "builtins.list" | "builtins.tuple" | "collections.namedtuple" | "collections.deque" => {
            (0..children.len()).map(|i| i.to_string()).collect()
        }
        other => return Err(format!("a node of type {other:?}, which bcd does not know")),
    };
    if keys.len() != children.len() {
        return Err(format!(
            "{} keys for {} children",
            keys.len(),
            children.len()
        ));
    }
    for (key, child) in keys.into_iter().zip(children) {
        path.push(key);
        walk(child, path, names)?;
        path.pop();
    }
    Ok(())
}

/// A dict's keys: the context is their list as JSON text (or, for a
/// defaultdict, the list itself); each key a string or a number.
fn dict_keys(context: &Value) -> Result<Vec<String>, String> {
    let parsed;
    let list = match context {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("a dict context that is not JSON ({e})"))?;
            &parsed
        }
        other => other,
    };
    (list.as_array().ok_or("a dict context that is not a list")?)
        .iter()
        .map(|key| match key {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(format!("a dict key {other}")),
        })
        .collect()
}

/// What bcd reads of an index's `config`.
#[derive(Debug)]
pub(crate) struct Config {
    pub formats: Vec<(String, LeafFormat)>,
    pub names: Vec<String>,
    pub wrap: Wrap,
    /// For a dataset whose rows are Arrow footers, their leaves.
    pub footer: Option<Vec<FooterLeaf>>,
}

/// Checks an index's `config`; an error names the key.
pub(crate) fn parse_config(config: &Value) -> Result<Config, (String, String)> {
    let err = |key: &str, reason: String| (format!("\"config\".{key:?}"), reason);
    let get = |key: &str| config.get(key).unwrap_or(&Value::Null);
    match get("item_loader") {
        Value::Null => {}
        Value::String(loader) if loader == "PyTreeLoader" => {}
        other => {
            return Err(err(
                "item_loader",
                format!(
                    "{other}: bcd reads the items of PyTreeLoader (the default), not this loader's"
                ),
            ))
        }
    }
    if !get("encryption").is_null() {
        return Err(err(
            "encryption",
            "the chunks are encrypted; bcd reads only plain ones".into(),
        ));
    }
    match get("ipc_compression") {
        Value::Null => {}
        Value::String(codec) if codec == "zstd" || codec == "lz4" => {}
        other => {
            return Err(err(
                "ipc_compression",
                format!("{other}: Arrow IPC compresses with zstd or lz4"),
            ))
        }
    }
    let codec = match get("compression") {
        Value::Null => None,
        Value::String(name) if name.starts_with("zstd") => Some(
            Codec::from_name(name)
                .ok_or_else(|| err("compression", format!("{name:?} is not a zstd level")))?,
        ),
        other => {
            return Err(err(
                "compression",
                format!("{other}, which bcd does not read (LitData compresses with zstd)"),
            ))
        }
    };
    let wrap = match (codec, get("compression_level")) {
        (None, _) => Wrap::None,
        (Some(_), Value::Null) => Wrap::Chunk,
        (Some(_), Value::String(level)) => match level.as_str() {
            "chunk" => Wrap::Chunk,
            "batch" => Wrap::Batch,
            "sample" => Wrap::Sample,
            other => {
                return Err(err(
                    "compression_level",
                    format!("{other:?} is not a level LitData writes"),
                ))
            }
        },
        (Some(_), other) => return Err(err("compression_level", format!("{other}, not a string"))),
    };
    let formats = (get("data_format").as_array())
        .ok_or_else(|| err("data_format", "missing or not a list".into()))?
        .iter()
        .map(|f| {
            let name = f
                .as_str()
                .ok_or_else(|| err("data_format", format!("{f}, not a string")))?;
            let parsed = LeafFormat::parse(name).ok_or_else(|| {
                err(
                    "data_format",
                    format!("{name:?}, a format bcd does not know"),
                )
            })?;
            Ok::<_, (String, String)>((name.to_owned(), parsed))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let names = match get("data_spec") {
        Value::String(spec) => leaf_names(spec).map_err(|e| err("data_spec", e))?,
        other => return Err(err("data_spec", format!("{other}, not a string"))),
    };
    if names.len() != formats.len() {
        return Err(err(
            "data_spec",
            format!(
                "{} leaves, but \"data_format\" has {}",
                names.len(),
                formats.len()
            ),
        ));
    }
    let footer = footer_leaves(get("types"), &formats, &names).map_err(|e| err("types", e))?;
    if footer.is_none() && !get("ipc_compression").is_null() {
        return Err(err(
            "ipc_compression",
            "set, but \"types\" and \"data_format\" are not those of rows LitData keeps as Arrow footers".into(),
        ));
    }
    Ok(Config {
        formats,
        names,
        wrap,
        footer,
    })
}

/// Splits one item into its leaves: a `u32` size per leaf, then the leaves
/// in order, which must fill the item exactly.
pub(crate) fn split_item(leaves: usize, item: &[u8]) -> Result<Vec<&[u8]>, String> {
    let head = (item.get(..4 * leaves)).ok_or_else(|| {
        format!(
            "{} bytes cannot hold the sizes of {leaves} leaves",
            item.len()
        )
    })?;
    let mut at = 4 * leaves;
    let mut parts = Vec::with_capacity(leaves);
    for (i, size) in head.chunks_exact(4).enumerate() {
        let size = u32::from_le_bytes(size.try_into().expect("4 bytes")) as usize;
        let part = item.get(at..at + size).ok_or_else(|| {
            format!(
                "leaf {i} of {size} bytes at byte {at} passes the item's end ({} bytes)",
                item.len()
            )
        })?;
        parts.push(part);
        at += size;
    }
    if at != item.len() {
        return Err(format!(
            "the leaves end at byte {at}, but the item holds {} bytes",
            item.len()
        ));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_names_follow_the_pytree_spec() {
        let leaf = r#"{"type": null, "context": null, "children_spec": []}"#;
        let dict = format!(
            r#"[1, {{"type": "builtins.dict", "context": "[\"image\", \"meta\"]", "children_spec": [{leaf}, {{"type": "builtins.tuple", "context": "null", "children_spec": [{leaf}, {leaf}]}}]}}]"#
        );
        assert_eq!(leaf_names(&dict).unwrap(), ["image", "meta.0", "meta.1"]);
        assert_eq!(leaf_names(&format!("[1, {leaf}]")).unwrap(), ["item"]);
        for bad in [
            "[2, {}]".to_owned(),
            format!(r#"[1, {{"type": "my.Class", "context": null, "children_spec": [{leaf}]}}]"#),
            format!(
                r#"[1, {{"type": "builtins.dict", "context": "[\"a\"]", "children_spec": [{leaf}, {leaf}]}}]"#
            ),
        ] {
            assert!(leaf_names(&bad).is_err(), "{bad}");
        }
        // Nesting past the bound is refused, not recursed into.
        let mut deep = leaf.to_owned();
        for _ in 0..40 {
            deep = format!(
                r#"{{"type": "builtins.list", "context": "null", "children_spec": [{deep}]}}"#
            );
        }
        assert!(leaf_names(&format!("[1, {deep}]"))
            .unwrap_err()
            .contains("deeper"));
    }

    #[test]
    fn leaves_decode_as_litdatas_serializers_write_them() {
        let f = |name: &str| LeafFormat::parse(name).unwrap();
        assert_eq!(
            f("int").cell(&(-5i64).to_le_bytes()).unwrap(),
            Cell::Int(-5)
        );
        assert_eq!(f("bool").cell(&[2]).unwrap(), Cell::Bool(true));
        // numpy int16 (index 1), 2 x 1, little-endian header.
        let mut numpy = vec![1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0];
        numpy.extend([7, 0, 8, 0]);
        assert_eq!(
            f("numpy").cell(&numpy).unwrap(),
            Cell::Array {
                dtype: "int16",
                shape: vec![2, 1],
                data: &[7, 0, 8, 0]
            }
        );
        // tensor int64 (index 18), rank 1 of 1, big-endian header.
        let mut tensor = vec![0, 0, 0, 18, 0, 0, 0, 1, 0, 0, 0, 1];
        tensor.extend(9i64.to_le_bytes());
        assert!(matches!(
            f("tensor").cell(&tensor).unwrap(),
            Cell::Array { dtype: "int64", .. }
        ));
        assert!(f("tensor").cell(&tensor[..15]).is_err());
        // A rank no header could hold is refused before it is read.
        assert!(f("numpy")
            .cell(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])
            .is_err());
        assert_eq!(
            f("no_header_numpy:9").cell(&[0; 8]).unwrap(),
            Cell::Array {
                dtype: "float32",
                shape: vec![2],
                data: &[0; 8]
            }
        );
        assert!(f("no_header_tensor:18").cell(&[0; 7]).is_err());
        assert_eq!(LeafFormat::parse("no_header_numpy:14"), None);
        assert_eq!(LeafFormat::parse("mystery"), None);
        assert_eq!(f("image:png"), LeafFormat::Bytes);
        assert_eq!(f("pickle").kind(), None);
    }

    #[test]
    fn an_item_splits_into_its_leaves_exactly() {
        let item = [1, 0, 0, 0, 2, 0, 0, 0, b'a', b'b', b'c'];
        assert_eq!(split_item(2, &item).unwrap(), vec![&b"a"[..], &b"bc"[..]]);
        assert!(split_item(2, &item[..10]).is_err());
        assert!(split_item(3, &item).is_err());
        assert!(split_item(1, &[0xff, 0xff, 0xff, 0xff]).is_err());
    }
}
