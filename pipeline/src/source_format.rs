//! [`SourceFormat`]: which registered format a source is read as, by its name.
//! The formats themselves (what each recognises, takes and opens) are their
//! descriptors in `formats/`.

use std::fmt;

/// The format of the inputs of one ingest: one of the formats registered in
/// `pipeline/src/formats/mod.rs`, named as `--format` and `format=` take it
/// ([`SourceFormat::name`]). Every value is a registered format: the constants
/// below and [`SourceFormat::all`] are the only ways to make one, besides parsing
/// a name ([`str::parse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceFormat(&'static str);

impl SourceFormat {
    /// The format called `name`; for the descriptors' constants only, which the
    /// registry's tests check are registered.
    pub(crate) const fn named(name: &'static str) -> SourceFormat {
        SourceFormat(name)
    }

    /// The lower-case name, as `--format` and [`FromStr`](std::str::FromStr) take it.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Format names as messages list them: `dir, tar`.
pub(crate) fn join(formats: &[SourceFormat], separator: &str) -> String {
    formats
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(separator)
}

/// Format names as a sentence lists them: `parquet`, `parquet and csv`,
/// `parquet, csv and tfrecord`.
pub(crate) fn and_list(formats: &[SourceFormat]) -> String {
    match formats {
        [] => String::new(),
        [one] => one.name().to_owned(),
        [rest @ .., last] => format!("{} and {last}", join(rest, ", ")),
    }
}
