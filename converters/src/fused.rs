//! [`Fused`]: "an error ends the source", in one place. Every source of this
//! crate is returned wrapped in it by its constructor, so none keeps its own
//! flag, and a source that would go on after an error (the next file of a
//! directory, the next CSV file) cannot.

use crate::{Record, Skipped, Source, SourceError};

/// A source that yields nothing more after its first error or its end: once the
/// inner source has returned `Some(Err(_))` or `None`, [`Iterator::next`] returns
/// `None` forever without calling it again. [`Source::skipped`] and
/// [`Source::keyed`] still answer from the inner source.
///
/// ```
/// use bcd_converters::{Fused, Record, Skipped, Source, SourceError};
///
/// /// A source that goes on after an error.
/// struct Careless(Vec<Result<Record, SourceError>>, Skipped);
/// impl Iterator for Careless {
///     type Item = Result<Record, SourceError>;
///     fn next(&mut self) -> Option<Self::Item> {
///         (!self.0.is_empty()).then(|| self.0.remove(0))
///     }
/// }
/// impl Source for Careless {
///     fn keyed(&self) -> bool { false }
///     fn skipped(&self) -> &Skipped { &self.1 }
/// }
///
/// let error = || Err(SourceError::Usage("bad".into()));
/// let mut source = Fused::new(Careless(vec![error(), error()], Skipped::default()));
/// assert!(matches!(source.next(), Some(Err(_))));
/// assert!(source.next().is_none());
/// ```
pub struct Fused<S> {
    inner: S,
    ended: bool,
}

impl<S: Source> Fused<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Fused<S> {
        Fused {
            inner,
            ended: false,
        }
    }

    /// The wrapped source.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Source> Iterator for Fused<S> {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        let item = self.inner.next();
        self.ended = !matches!(item, Some(Ok(_)));
        item
    }
}

impl<S: Source> std::iter::FusedIterator for Fused<S> {}

impl<S: Source> Source for Fused<S> {
    fn keyed(&self) -> bool {
        self.inner.keyed()
    }

    fn skipped(&self) -> &Skipped {
        self.inner.skipped()
    }

    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        self.inner.metadata()
    }

    fn column_metadata(&self) -> crate::ColumnMetadata {
        self.inner.column_metadata()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Origin;
    use std::path::PathBuf;

    /// Yields its script in order, then `None`, then starts over: the worst a
    /// source could do.
    struct Script {
        items: Vec<Option<Result<Record, SourceError>>>,
        at: usize,
        calls: usize,
        skipped: Skipped,
    }

    impl Iterator for Script {
        type Item = Result<Record, SourceError>;

        fn next(&mut self) -> Option<Self::Item> {
            self.calls += 1;
            self.skipped.add("call");
            let item = match &self.items[self.at % self.items.len()] {
                Some(Ok(record)) => Some(Ok(record.clone())),
                Some(Err(_)) => Some(Err(SourceError::Usage("scripted".into()))),
                None => None,
            };
            self.at += 1;
            item
        }
    }

    impl Source for Script {
        fn keyed(&self) -> bool {
            true
        }

        fn skipped(&self) -> &Skipped {
            &self.skipped
        }
    }

    fn record(key: &str) -> Option<Result<Record, SourceError>> {
        Some(Ok(Record {
            key: key.into(),
            value: Vec::new(),
            origin: Origin::File(PathBuf::from(key)),
            fields: crate::Fields::new(),
        }))
    }

    fn error() -> Option<Result<Record, SourceError>> {
        Some(Err(SourceError::Usage("scripted".into())))
    }

    fn fused(items: Vec<Option<Result<Record, SourceError>>>) -> Fused<Script> {
        Fused::new(Script {
            items,
            at: 0,
            calls: 0,
            skipped: Skipped::default(),
        })
    }

    #[test]
    fn after_an_error_nothing_more_and_the_inner_source_is_not_called() {
        let mut source = fused(vec![record("a"), error(), record("b"), None]);
        assert_eq!(source.next().unwrap().unwrap().key, b"a");
        assert!(source.next().unwrap().is_err());
        for _ in 0..3 {
            assert!(source.next().is_none());
        }
        assert_eq!(source.get_ref().calls, 2);
        // What was counted before the error is still there.
        assert_eq!(source.skipped().0.get("call"), Some(&2));
        assert!(source.keyed());
    }

    #[test]
    fn after_the_end_nothing_more() {
        let mut source = fused(vec![record("a"), None, record("b")]);
        assert!(source.next().unwrap().is_ok());
        assert!(source.next().is_none());
        assert!(source.next().is_none());
        assert_eq!(source.get_ref().calls, 2);
    }

    #[test]
    fn records_pass_through_until_then() {
        let mut source = fused(vec![record("a"), record("b"), record("c"), None]);
        let keys: Vec<Vec<u8>> = source.by_ref().map(|r| r.unwrap().key).collect();
        assert_eq!(keys, [b"a", b"b", b"c"]);
        assert!(source.next().is_none());
    }
}
