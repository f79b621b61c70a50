//! Pipeline errors name the source and leave an operating-system cause to
//! `source()`: a front end that joins the chain says the cause once.

use std::error::Error;

use bcd_pipeline::{open_sources, IngestError, SourceOptions, SourceSetupError};

/// The error's message and its causes, as a front end joins them.
fn chain(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut parts = vec![error.to_string()];
    let mut next = error.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    parts
}

fn assert_cause_once(error: &(dyn Error + 'static), name: &str) {
    let not_found = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
    let parts = chain(error);
    let joined = parts.join(": ");
    assert!(parts[0].contains(name), "{joined}");
    assert!(!parts[0].contains("os error"), "{joined}");
    assert_eq!(joined.matches(name).count(), 1, "{joined}");
    assert_eq!(joined.matches("os error 2").count(), 1, "{joined}");
    assert!(
        parts.last().unwrap().contains("os error 2") || parts.last() == Some(&not_found),
        "{joined}"
    );
}

#[test]
fn a_source_that_cannot_be_read_names_it_and_chains_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    // No extension: detecting the format reads its metadata.
    let missing = dir.path().join("missing").to_string_lossy().into_owned();
    let error = open_sources(&[&missing], &SourceOptions::default()).unwrap_err();
    assert!(
        matches!(error, SourceSetupError::Unreadable { .. }),
        "{error:?}"
    );
    assert_cause_once(&error, &missing);

    // A tar name: the format is told from the name, and opening it fails.
    let missing_tar = dir
        .path()
        .join("missing.tar")
        .to_string_lossy()
        .into_owned();
    let error = open_sources(&[&missing_tar], &SourceOptions::default()).unwrap_err();
    assert!(matches!(error, SourceSetupError::Open(_)), "{error:?}");
    assert_cause_once(&error, &missing_tar);

    // IngestError forwards its wrapped error's message and cause.
    let SourceSetupError::Open(inner) = error else {
        unreachable!()
    };
    let error = IngestError::from(inner);
    assert_cause_once(&error, &missing_tar);
}
