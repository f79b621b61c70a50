//! The feature lists of a `tf.train.SequenceExample`:
//!
//! ```text
//! SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
//! FeatureLists    { map<string, FeatureList> feature_list = 1; }   // entries: { string key = 1; FeatureList value = 2; }
//! FeatureList     { repeated Feature feature = 1; }
//! ```
//!
//! `context` has the wire shape of `Example.features` (field 1 of both), so the
//! functions of [`crate::example`] read a SequenceExample's context features as
//! they read an Example's features. What an Example parser would silently drop is
//! field 2: this module reads it. Lengths are checked as in [`crate::example`];
//! of a feature list named twice the last wins, and repeated `feature_lists`
//! fields merge, as protobuf parses them.

use crate::example::{fields, map_entries, FeatureError, Field, NamedFeature};

/// Whether a serialized record is a SequenceExample with feature lists: it has a
/// top-level field 2 (an Example has only field 1).
pub fn has_feature_lists(record: &[u8]) -> Result<bool, FeatureError> {
    for field in fields(record) {
        if let (2, Field::Bytes(_)) = field? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The feature lists of a serialized SequenceExample as (name, serialized
/// `FeatureList`), in the order of first appearance; a name given again takes the
/// later list. An Example (no field 2) has none.
pub fn feature_lists(record: &[u8]) -> Result<Vec<NamedFeature<'_>>, FeatureError> {
    map_entries(record, 2)
}

/// Whether `record` is a SequenceExample with a feature list named `name` (for
/// messages: a value feature must be a context feature).
pub(crate) fn has_list(record: &[u8], name: &str) -> bool {
    feature_lists(record).is_ok_and(|lists| lists.iter().any(|(n, _)| *n == name.as_bytes()))
}

/// The steps of a serialized `FeatureList`: each a serialized `Feature`, in order.
pub fn steps(feature_list: &[u8]) -> impl Iterator<Item = Result<&[u8], FeatureError>> {
    fields(feature_list).filter_map(|field| match field {
        Ok((1, Field::Bytes(feature))) => Some(Ok(feature)),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::example::{features, values, Values};

    fn len_delimited(number: u64, payload: &[u8]) -> Vec<u8> {
        assert!(payload.len() < 128);
        let mut out = vec![(number << 3 | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    fn entry(name: &str, value: &[u8]) -> Vec<u8> {
        let mut entry = len_delimited(1, name.as_bytes());
        entry.extend(len_delimited(2, value));
        len_delimited(1, &entry)
    }

    /// An int64 Feature holding `values` (each < 128), unpacked.
    fn ints(values: &[u8]) -> Vec<u8> {
        let list: Vec<u8> = values.iter().flat_map(|&v| [0x08, v]).collect();
        len_delimited(3, &list)
    }

    #[test]
    fn reads_context_and_feature_lists_and_an_example_has_none() {
        let context = len_delimited(1, &entry("length", &ints(&[2])));
        let steps_of_x: Vec<u8> = [ints(&[1]), ints(&[2, 3]), vec![]]
            .iter()
            .flat_map(|f| len_delimited(1, f))
            .collect();
        let lists = len_delimited(2, &entry("x", &steps_of_x));
        let record = [context.clone(), lists].concat();

        assert!(has_feature_lists(&record).unwrap());
        assert!(!has_feature_lists(&context).unwrap());
        assert_eq!(feature_lists(&context).unwrap(), []);
        // The context reads as an Example's features.
        let found = features(&record).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(values(found[0].1), Ok(Values::Int64(vec![2])));

        let lists = feature_lists(&record).unwrap();
        assert_eq!(lists.len(), 1);
        assert_eq!(lists[0].0, b"x");
        let decoded: Vec<Values<'_>> = steps(lists[0].1)
            .map(|step| values(step.unwrap()).unwrap())
            .collect();
        assert_eq!(
            decoded,
            [
                Values::Int64(vec![1]),
                Values::Int64(vec![2, 3]),
                Values::Empty
            ]
        );
    }

    #[test]
    fn a_list_named_twice_keeps_the_last_and_malformed_input_is_an_error() {
        let first = len_delimited(1, &ints(&[1]));
        let second = len_delimited(1, &ints(&[9]));
        let record = [
            len_delimited(2, &entry("x", &first)),
            len_delimited(2, &entry("x", &second)),
        ]
        .concat();
        let lists = feature_lists(&record).unwrap();
        assert_eq!(lists, [(&b"x"[..], &second[..])]);
        for cut in 0..record.len() {
            let _ = feature_lists(&record[..cut]);
            let _ = has_feature_lists(&record[..cut]);
        }
        assert!(feature_lists(&[0x12, 0x05, 0x0a]).is_err());
        assert!(steps(&[0x0a, 0x09]).any(|s| s.is_err()));
    }
}
