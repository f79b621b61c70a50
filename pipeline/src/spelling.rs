//! Messages as the front ends show them. A library message names an option by
//! its field, in backquotes (`` `value_column` ``); each front end spells it its
//! own way with [`spell_options`] (`--value-column` in the CLI, `value_column=` in
//! Python). A library error prints its own message only and chains its cause;
//! [`error_chain`] joins them.

use std::sync::LazyLock;

pub use bcd::error_chain;

/// The option fields a message of this crate, of `bcd-converters` or of
/// `bcd-sampling` may name: `format`, the fields of
/// [`SourceOptions`](crate::SourceOptions) the registered formats take, those of
/// [`IngestOptions`](crate::IngestOptions) and the export options, and the
/// settings of an epoch (`bcd_sampling::Plan`, `bcd.partition`'s keywords).
pub(crate) static OPTION_FIELDS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let mut fields = vec!["format"];
    fields.extend(crate::formats::option_fields());
    fields.extend(RUN_OPTION_FIELDS);
    fields
});

/// The option fields of ingest, export and sampling runs, besides the sources'.
const RUN_OPTION_FIELDS: &[&str] = &[
    "keyless",
    "compression",
    "max_shard_size",
    "on_duplicate",
    "jobs",
    "rename_unsafe",
    "sample",
    "seed",
    "balance_by",
    "world_size",
    "rank",
    "block_size",
    "categories",
    "weights",
    "num_samples",
    "dtype",
    "resumed_from",
    "replace",
];

/// `message` with every `` `field` `` naming one of [`OPTION_FIELDS`] replaced by
/// `spell(field)`; other text, backquoted or not, is kept as it is.
///
/// ```
/// use bcd_pipeline::spell_options;
///
/// let message = "`delimiter` applies to csv sources only, not tar";
/// let flag = |field: &str| format!("--{}", field.replace('_', "-"));
/// assert_eq!(spell_options(message, flag), "--delimiter applies to csv sources only, not tar");
/// assert_eq!(spell_options("`bcd create`", flag), "`bcd create`");
/// ```
pub fn spell_options(message: &str, spell: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let named = after
            .find('`')
            .map(|end| &after[..end])
            .filter(|name| OPTION_FIELDS.contains(name));
        match named {
            Some(name) => {
                out.push_str(&rest[..start]);
                out.push_str(&spell(name));
                rest = &after[name.len() + 1..];
            }
            None => {
                out.push_str(&rest[..=start]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_fields_in_backquotes_are_respelled() {
        let python = |field: &str| format!("{field}=");
        assert_eq!(
            spell_options("pass `keyless` (not `key`), `max_shard_size`", python),
            "pass keyless= (not `key`), max_shard_size="
        );
        assert_eq!(spell_options("a ` lone `quote", python), "a ` lone `quote");
        assert_eq!(spell_options("keyless", python), "keyless");
    }

    #[test]
    fn the_option_fields_are_those_of_the_sources_and_the_runs() {
        let mut fields = OPTION_FIELDS.clone();
        fields.sort_unstable();
        let mut expected = vec![
            "format",
            "include",
            "exclude",
            "follow_links",
            "value_column",
            "key_column",
            "skip_nulls",
            "path_column",
            "root",
            "delimiter",
            "feature",
            "key_feature",
            "labels",
            "samples",
            "value_ext",
            "json_fields",
            "skip_bad_samples",
            "value_field",
            "value_base64",
            "key_field",
            "schema",
            "split",
            "lmdb_value",
            "lmdb_db",
            "fields",
            "field_type",
            "keyless",
            "compression",
            "max_shard_size",
            "on_duplicate",
            "jobs",
            "rename_unsafe",
            "sample",
            "seed",
            "balance_by",
            "world_size",
            "rank",
            "block_size",
            "categories",
            "weights",
            "num_samples",
            "dtype",
            "resumed_from",
            "replace",
        ];
        expected.sort_unstable();
        assert_eq!(fields, expected);
    }
}
