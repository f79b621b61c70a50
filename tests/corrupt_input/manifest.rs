//! (a) `Manifest::parse` on arbitrary, structured and mutated bytes, and a
//! manifest file over the size limit.

use std::fs;
use std::path::Path;

use bcd::{Dataset, Error, Manifest};
use proptest::prelude::*;

use crate::edits::{apply_byte_op, byte_op, manifest_text};
use crate::{config, MANIFEST, MAX_MANIFEST_BYTES};

fn check_manifest_parse(bytes: &[u8]) {
    let path = Path::new("/some/dataset/manifest.json");
    match Manifest::parse(bytes, path) {
        Ok(m) => {
            assert!(m.max_shard_size > 0, "{m:?}");
            // What it parsed, it writes back in a form it parses to the same state.
            let again = Manifest::parse(&m.to_bytes(), path).expect("to_bytes output parses");
            assert_eq!(
                (again.keyed, again.compression, again.max_shard_size),
                (m.keyed, m.compression, m.max_shard_size)
            );
            assert_eq!(again.shards, m.shards);
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                matches!(&e, Error::InvalidManifest { path: p, .. } if p == path),
                "{e:?}"
            );
            assert!(
                message.starts_with("/some/dataset/manifest.json: invalid manifest: "),
                "{message}"
            );
        }
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn manifest_parse_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..160)) {
        check_manifest_parse(&bytes);
    }

    #[test]
    fn manifest_parse_structured(text in manifest_text()) {
        check_manifest_parse(text.as_bytes());
    }

    #[test]
    fn manifest_parse_mutated(
        text in manifest_text(),
        ops in prop::collection::vec(byte_op(), 1..4),
    ) {
        let mut bytes = text.into_bytes();
        for op in &ops {
            apply_byte_op(&mut bytes, op);
        }
        check_manifest_parse(&bytes);
    }
}

#[test]
fn manifest_parse_deep_nesting_and_odd_json() {
    let deep = "[".repeat(100_000);
    check_manifest_parse(deep.as_bytes());
    let deep_object = format!(
        "{{\"keyed\": {}, \"compression\": null, \"shards\": 0}}",
        "[".repeat(10_000)
    );
    check_manifest_parse(deep_object.as_bytes());
    for odd in [
        "\u{feff}{\"keyed\": true, \"compression\": null, \"shards\": 0}",
        "{\"keyed\": true, \"compression\": null, \"shards\": 0} trailing",
        "{\"keyed\": true, \"compression\": null, \"shards\": 0}\n",
        "{\"keyed\": true, \"keyed\": false, \"compression\": null, \"shards\": 0}",
        "{\"keyed\": true, \"compression\": \"lz\\u0034\", \"shards\": 0}",
        "{\"keyed\": true, \"compression\": null, \"shards\": 1e2}",
        "{\"keyed\": true, \"compression\": null, \"shards\": 100000000000000000000000000000}",
        "\"\\ud800\"",
        "nul",
    ] {
        check_manifest_parse(odd.as_bytes());
    }
}

#[test]
fn manifest_read_rejects_oversized_file_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"{\"keyed\": true, \"compression\": null, \"shards\": 0}".to_vec();
    text.resize(MAX_MANIFEST_BYTES + 1, b' ');
    fs::write(dir.path().join(MANIFEST), &text).unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::InvalidManifest { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&dir.path().join(MANIFEST).display().to_string()),
        "{err}"
    );
    // Exactly at the limit it is read (whitespace is valid JSON padding).
    text.truncate(MAX_MANIFEST_BYTES);
    fs::write(dir.path().join(MANIFEST), &text).unwrap();
    Dataset::open(dir.path()).unwrap();
}
