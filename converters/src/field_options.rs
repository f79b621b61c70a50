//! Which structured fields a source attaches to its records, and the types a
//! text cell may be declared to have: the options the Parquet, CSV and TFRecord
//! sources share.

use std::fmt;
use std::str::FromStr;

/// Which columns (Parquet, CSV) or features (TFRecord) become a record's fields,
/// besides the ones that give its value and key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FieldSelection {
    /// Every one (the default).
    #[default]
    All,
    /// None: records carry no fields.
    None,
    /// Exactly these, in this order; naming one the input does not have is an
    /// error that lists the ones it has.
    Only(Vec<String>),
}

impl FieldSelection {
    /// Whether `name` is selected.
    pub(crate) fn includes(&self, name: &str) -> bool {
        match self {
            FieldSelection::All => true,
            FieldSelection::None => false,
            FieldSelection::Only(names) => names.iter().any(|n| n == name),
        }
    }

    /// Whether no field is selected.
    pub fn is_none(&self) -> bool {
        matches!(self, FieldSelection::None)
            || matches!(self, FieldSelection::Only(names) if names.is_empty())
    }

    /// The names given with [`FieldSelection::Only`] that are also the value or key
    /// column (or feature) `taken`: those are stored as the value or key, so
    /// naming them as fields is an error of the options.
    pub(crate) fn refuse(&self, taken: &[(&str, &str)]) -> Result<(), crate::SourceError> {
        if let FieldSelection::Only(names) = self {
            for (name, role) in taken {
                if names.iter().any(|n| n == name) {
                    return Err(crate::SourceError::Usage(format!(
                        "`fields` names {name:?}, which is the {role}: it is stored as such, not as a field"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// A declared type of a text field (a CSV column), instead of the one inferred.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// A 64-bit signed integer (Arrow `Int64`).
    Int64,
    /// A 64-bit float (Arrow `Float64`).
    Float64,
    /// `true` or `false`, in any case (Arrow `Boolean`).
    Bool,
    /// UTF-8 text (Arrow `Utf8`).
    String,
}

impl FieldType {
    /// Every type, in the order messages list them.
    pub const ALL: [FieldType; 4] = [
        FieldType::Int64,
        FieldType::Float64,
        FieldType::Bool,
        FieldType::String,
    ];

    /// The name [`FromStr`] takes: `int64`, `float64`, `bool`, `string`.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::Int64 => "int64",
            FieldType::Float64 => "float64",
            FieldType::Bool => "bool",
            FieldType::String => "string",
        }
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FieldType {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FieldType::ALL
            .into_iter()
            .find(|t| t.name() == text)
            .ok_or_else(|| {
                format!(
                    "unknown field type {text:?}; expected one of {}",
                    FieldType::ALL.map(FieldType::name).join(", ")
                )
            })
    }
}
