//! `Manifest::parse` on arbitrary bytes: never panics; an error is always an
//! `InvalidManifest` naming the file; whatever parses writes back (`to_bytes`) to
//! bytes that parse to the same state.
#![no_main]

use std::path::Path;

use bcd::{Error, Manifest};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/fuzz/dataset/manifest.json");
    match Manifest::parse(data, path) {
        Ok(m) => {
            assert!(m.max_shard_size > 0, "{m:?}");
            let again = Manifest::parse(&m.to_bytes(), path).expect("to_bytes output parses");
            assert_eq!(
                (
                    again.keyed,
                    again.compression,
                    again.max_shard_size,
                    again.shards
                ),
                (m.keyed, m.compression, m.max_shard_size, m.shards)
            );
        }
        Err(e) => {
            assert!(
                matches!(&e, Error::InvalidManifest { path: p, .. } if p == path),
                "{e:?}"
            );
            let message = e.to_string();
            assert!(
                message.starts_with("/fuzz/dataset/manifest.json: invalid manifest: "),
                "{message}"
            );
        }
    }
});
