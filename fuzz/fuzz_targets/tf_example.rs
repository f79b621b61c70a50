//! The `tf.train.Example` decoder: arbitrary bytes never panic, and a value found
//! is a slice of the message (never more bytes than it holds).
//!
//! Input: one byte `n`, then `n % 16` bytes of feature name, then the message.
#![no_main]

use bcd_converters::example::{bytes_feature, FeatureError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = (n as usize % 16).min(rest.len());
    let (name, message) = rest.split_at(n);
    let name = String::from_utf8_lossy(name);
    match bytes_feature(message, &name) {
        Ok(value) => {
            assert!(value.len() <= message.len());
            assert!(message
                .windows(value.len().max(1))
                .any(|w| w.starts_with(&value)));
        }
        Err(FeatureError::Missing(missing)) => assert_eq!(missing, name),
        Err(FeatureError::NotOneValue(_, count)) => assert_ne!(count, 1),
        Err(_) => {}
    }
});
