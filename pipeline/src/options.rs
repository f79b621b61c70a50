//! Option values as every front end spells them, parsed once: sizes (`64M`,
//! `1.5GiB`), LZ4 effort (`1..12`, `fast`, `reference`), the duplicate policy
//! (`error`, `skip`), CSV delimiters, field selections (`all`, `none`,
//! `label,caption`) and declared field types (`label=int64`). Errors say what was given and what is
//! accepted; each front end adds the option's own spelling (`--level`, `level=`).

use std::fmt;
use std::str::FromStr;

use bcd::Lz4Mode;
use bcd_converters::dir_source::LabelMode;
use bcd_converters::{FieldSelection, FieldType};

pub use crate::ingest::OnDuplicate;

/// A value an option does not accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidValue {
    /// What was given.
    pub value: String,
    /// What the option accepts.
    pub expected: String,
}

impl InvalidValue {
    fn new(value: &str, expected: impl Into<String>) -> InvalidValue {
        InvalidValue {
            value: value.to_owned(),
            expected: expected.into(),
        }
    }
}

impl fmt::Display for InvalidValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.value, self.expected)
    }
}

impl std::error::Error for InvalidValue {}

/// Parses an LZ4 effort: `1`..`12` is liblz4's high-compression level with
/// incompressible values stored as literal-only blocks (the ingest default, 5, is
/// [`crate::DEFAULT_INGEST_LEVEL`]); `fast` is liblz4's fast mode; `reference`
/// compresses every value at level 9, byte-identical to the Python reference.
pub fn parse_lz4_mode(text: &str) -> Result<Lz4Mode, InvalidValue> {
    match text {
        "fast" => Ok(Lz4Mode::Fast(1)),
        "reference" => Ok(Lz4Mode::High(bcd::format::DEFAULT_LZ4_HC_LEVEL)),
        _ => match text.parse::<i32>() {
            Ok(level @ 1..=12) => Ok(Lz4Mode::Adaptive(level)),
            _ => Err(InvalidValue::new(text, "expected 1..12, fast or reference")),
        },
    }
}

/// Parses a CSV delimiter: one ASCII character, or `\t` / `tab` for a tab.
pub fn parse_delimiter(text: &str) -> Result<u8, InvalidValue> {
    match text {
        "\\t" | "tab" | "\t" => Ok(b'\t'),
        _ if text.len() == 1 && text.is_ascii() => Ok(text.as_bytes()[0]),
        _ => Err(InvalidValue::new(
            text,
            "the delimiter must be one ASCII character (or \\t for a tab)",
        )),
    }
}

/// Parses the `labels` mode: `folder` (the file's class folder, as torchvision's
/// `ImageFolder`).
pub fn parse_labels(text: &str) -> Result<LabelMode, InvalidValue> {
    match text {
        "folder" => Ok(LabelMode::Folder),
        _ => Err(InvalidValue::new(text, "expected folder")),
    }
}

/// Parses one value extension of WebDataset samples: lower-cased, a leading `.`
/// dropped (`.JPG` is `jpg`); it may hold dots (`seg.png`) but not `/`.
pub fn parse_value_ext(text: &str) -> Result<String, InvalidValue> {
    let ext = text.trim().trim_start_matches('.').to_lowercase();
    if ext.is_empty() || ext.contains('/') {
        return Err(InvalidValue::new(
            text,
            "expected an extension such as jpg or seg.png",
        ));
    }
    Ok(ext)
}

/// Parses a comma-separated list of value extensions (`jpg,png`), each as
/// [`parse_value_ext`] does.
pub fn parse_value_exts(text: &str) -> Result<Vec<String>, InvalidValue> {
    text.split(',').map(parse_value_ext).collect()
}

/// Parses a field selection: `all`, `none`, or names separated by commas
/// (`label,caption`; each non-empty, none twice).
pub fn parse_fields(text: &str) -> Result<FieldSelection, InvalidValue> {
    match text {
        "all" => Ok(FieldSelection::All),
        "none" => Ok(FieldSelection::None),
        _ => fields_from_names(text.split(',').map(str::to_owned).collect())
            .map_err(|expected| InvalidValue::new(text, expected)),
    }
}

/// A selection of exactly `names` (each non-empty, none twice); the error says
/// what is expected.
pub fn fields_from_names(names: Vec<String>) -> Result<FieldSelection, String> {
    if names.is_empty() || names.iter().any(String::is_empty) {
        return Err("expected all, none, or field names separated by commas (none empty)".into());
    }
    if let Some(twice) = names
        .iter()
        .enumerate()
        .find(|(i, name)| names[..*i].contains(name))
    {
        return Err(format!("{:?} is named twice", twice.1));
    }
    Ok(FieldSelection::Only(names))
}

/// Parses a declared field type, `NAME=TYPE` with TYPE one of `int64`,
/// `float64`, `bool`, `string` (the name may itself hold `=`: the last one
/// separates).
pub fn parse_field_type(text: &str) -> Result<(String, FieldType), InvalidValue> {
    let expected = "expected NAME=TYPE with TYPE one of int64, float64, bool, string";
    let Some((name, type_name)) = text.rsplit_once('=') else {
        return Err(InvalidValue::new(text, expected));
    };
    if name.is_empty() {
        return Err(InvalidValue::new(text, expected));
    }
    let field_type = type_name
        .parse::<FieldType>()
        .map_err(|e| InvalidValue::new(text, e))?;
    Ok((name.to_owned(), field_type))
}

impl FromStr for OnDuplicate {
    type Err = InvalidValue;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "error" => Ok(OnDuplicate::Error),
            "skip" => Ok(OnDuplicate::Skip),
            _ => Err(InvalidValue::new(text, "expected error or skip")),
        }
    }
}

/// Parses which records are duplicates: `keys` (only keys, the default) or
/// `content` (also repeated values), as `--dedup` and `dedup=` take it.
pub fn parse_dedup(text: &str) -> Result<bcd::Dedup, InvalidValue> {
    match text {
        "keys" => Ok(bcd::Dedup::Keys),
        "content" => Ok(bcd::Dedup::Content),
        _ => Err(InvalidValue::new(text, "expected content (or keys)")),
    }
}

/// Parses a byte count: a number with an optional unit. `K`, `M`, `G`, `T` and
/// `KiB`, `MiB`, `GiB`, `TiB` are powers of 1024; `KB`, `MB`, `GB`, `TB` are powers
/// of 1000; `B` or nothing is bytes. Units are case-insensitive; a decimal number
/// is allowed with a unit (`1.5G`).
pub fn parse_size(text: &str) -> Result<u64, InvalidValue> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(InvalidValue::new(
                text,
                format!("unknown unit {other:?}: use bytes or K/M/G/T (KiB/MiB/GiB/TiB, powers of 1024) or KB/MB/GB/TB (powers of 1000)"),
            ))
        }
    };
    let bad = || {
        InvalidValue::new(
            text,
            "expected a number of bytes such as 1048576, 64M or 1.5GiB",
        )
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad());
    }
    let too_large = || InvalidValue::new(text, "too large");
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let mut bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
    if !fraction.is_empty() {
        // Exact arithmetic on at most 9 fractional digits; beyond a byte it is noise.
        let digits = &fraction[..fraction.len().min(9)];
        let numerator: u64 = digits.parse().map_err(|_| bad())?;
        let scaled = (numerator as u128 * multiplier as u128) / 10u128.pow(digits.len() as u32);
        bytes = bytes.checked_add(scaled as u64).ok_or_else(too_large)?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_bytes_and_both_unit_families() {
        for (text, bytes) in [
            ("0", 0),
            ("4096", 4096),
            ("64K", 64 << 10),
            ("64k", 64 << 10),
            ("64KiB", 64 << 10),
            ("1M", 1 << 20),
            ("1 MiB", 1 << 20),
            ("2G", 2 << 30),
            ("1.5G", 3 << 29),
            ("1T", 1 << 40),
            ("10MB", 10_000_000),
            ("1kb", 1000),
            ("7B", 7),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn rejects_garbage_with_a_hint() {
        for text in [
            "",
            "G",
            "1.2.3K",
            "12X",
            "-5",
            "99999999999999999999",
            "20000000T",
        ] {
            assert!(parse_size(text).is_err(), "{text}");
        }
        assert!(parse_size("3 parsecs")
            .unwrap_err()
            .to_string()
            .contains("KiB/MiB/GiB"));
    }

    #[test]
    fn lz4_modes_delimiters_and_duplicate_policies() {
        assert_eq!(parse_lz4_mode("5"), Ok(Lz4Mode::Adaptive(5)));
        assert_eq!(parse_lz4_mode("fast"), Ok(Lz4Mode::Fast(1)));
        assert_eq!(parse_lz4_mode("reference"), Ok(Lz4Mode::default()));
        for bad in ["0", "13", "", "Fast"] {
            assert!(parse_lz4_mode(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_delimiter(";"), Ok(b';'));
        for tab in ["\\t", "tab", "\t"] {
            assert_eq!(parse_delimiter(tab), Ok(b'\t'));
        }
        assert!(parse_delimiter(";;").is_err());
        assert!(parse_delimiter("é").is_err());
        assert_eq!("skip".parse(), Ok(OnDuplicate::Skip));
        assert_eq!("error".parse(), Ok(OnDuplicate::Error));
        let error = "Skip".parse::<OnDuplicate>().unwrap_err();
        assert_eq!(error.to_string(), "\"Skip\": expected error or skip");
    }

    #[test]
    fn labels_and_value_extensions() {
        assert_eq!(parse_labels("folder"), Ok(LabelMode::Folder));
        assert!(parse_labels("Folder").is_err());
        assert_eq!(
            parse_value_exts("jpg, .PNG,seg.png"),
            Ok(vec!["jpg".into(), "png".into(), "seg.png".into()])
        );
        for bad in ["", "jpg,", ".", "a/b"] {
            assert!(parse_value_exts(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selections_and_types() {
        assert_eq!(parse_fields("all"), Ok(FieldSelection::All));
        assert_eq!(parse_fields("none"), Ok(FieldSelection::None));
        assert_eq!(
            parse_fields("label,image.path"),
            Ok(FieldSelection::Only(vec![
                "label".into(),
                "image.path".into()
            ]))
        );
        assert_eq!(
            parse_fields("All"),
            Ok(FieldSelection::Only(vec!["All".into()]))
        );
        for bad in ["", "a,", ",a", "a,,b"] {
            assert!(parse_fields(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_fields("a,b,a").unwrap_err().to_string(),
            "\"a,b,a\": \"a\" is named twice"
        );
        assert_eq!(
            parse_field_type("label=int64"),
            Ok(("label".into(), FieldType::Int64))
        );
        assert_eq!(
            parse_field_type("a=b=bool"),
            Ok(("a=b".into(), FieldType::Bool))
        );
        for bad in ["label", "=int64", "label=int", "label="] {
            assert!(parse_field_type(bad).is_err(), "{bad}");
        }
        assert!(parse_field_type("x=int32")
            .unwrap_err()
            .to_string()
            .contains("int64, float64, bool, string"));
    }
}
