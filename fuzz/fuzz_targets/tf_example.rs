//! The `tf.train.Example` and `tf.train.SequenceExample` decoders: arbitrary
//! bytes never panic, a value found is a slice of the message (never more bytes
//! than it holds), and every feature list and step is a slice of it too.
//!
//! Input: one byte `n`, then `n % 16` bytes of feature name, then the message.
#![no_main]

use bcd_converters::example::{bytes_feature, shape, values, FeatureError, Values};
use bcd_converters::sequence_example::{feature_lists, has_feature_lists, steps};
use libfuzzer_sys::fuzz_target;

/// Whether `part` lies inside `whole`.
fn inside(part: &[u8], whole: &[u8]) -> bool {
    let range = whole.as_ptr_range();
    part.is_empty() || (range.contains(&part.as_ptr()) && part.len() <= whole.len())
}

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
    let lists = feature_lists(message);
    if let Ok(lists) = &lists {
        if !lists.is_empty() {
            assert_eq!(has_feature_lists(message), Ok(true));
        }
        for (list_name, list) in lists {
            assert!(inside(list_name, message) && inside(list, message));
            for step in steps(list) {
                let Ok(step) = step else { break };
                assert!(inside(step, message));
                // A step decodes as a Feature: its shape counts its values.
                if let (Ok(shape), Ok(decoded)) = (shape(step), values(step)) {
                    let n = match decoded {
                        Values::Empty => 0,
                        Values::Bytes(v) => v.len(),
                        Values::Float(v) => v.len(),
                        Values::Int64(v) => v.len(),
                    };
                    assert_eq!(shape.count, n as u64);
                }
            }
        }
    }
});
