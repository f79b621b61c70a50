//! Where a dataset or a source is: a local path, or an object-store URI.
//!
//! `s3://bucket/prefix`, `gs://bucket/prefix` and `az://container/prefix` name a
//! prefix in object storage; `file:///abs/path` and plain paths are local. Any
//! other `scheme://` is refused with an error naming it, never taken as a local
//! path (`--into s3:/bucket/x` once made a folder `./s3:/bucket/x`).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

use crate::error::RemoteError;

/// The object stores this crate reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Amazon S3 and S3-compatible stores (MinIO, R2, Ceph): `s3://`.
    S3,
    /// Google Cloud Storage: `gs://`.
    Gcs,
    /// Azure Blob Storage: `az://`.
    Azure,
}

impl Scheme {
    /// The URI scheme, as written before `://`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Gcs => "gs",
            Scheme::Azure => "az",
        }
    }
}

/// A prefix in an object store: `s3://bucket/a/b` is bucket `bucket`, prefix `a/b`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RemoteUri {
    /// Which store.
    pub scheme: Scheme,
    /// The bucket (S3, GCS) or container (Azure).
    pub bucket: String,
    /// The key prefix inside the bucket, without leading or trailing `/`; empty for
    /// the bucket's root.
    pub prefix: String,
}

impl RemoteUri {
    /// The URI of the object `name` under this prefix.
    pub fn object(&self, name: &str) -> String {
        match self.prefix.is_empty() {
            true => format!("{}://{}/{name}", self.scheme.name(), self.bucket),
            false => format!(
                "{}://{}/{}/{name}",
                self.scheme.name(),
                self.bucket,
                self.prefix
            ),
        }
    }

    /// The URI of a prefix below this one.
    pub fn join(&self, name: &str) -> RemoteUri {
        let name = name.trim_matches('/');
        RemoteUri {
            scheme: self.scheme,
            bucket: self.bucket.clone(),
            prefix: match self.prefix.is_empty() {
                true => name.to_owned(),
                false => format!("{}/{name}", self.prefix),
            },
        }
    }
}

impl fmt::Display for RemoteUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix.is_empty() {
            true => write!(f, "{}://{}", self.scheme.name(), self.bucket),
            false => write!(
                f,
                "{}://{}/{}",
                self.scheme.name(),
                self.bucket,
                self.prefix
            ),
        }
    }
}

/// A dataset or source location as given on a command line or to Python.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A local path (plain, or from a `file://` URI).
    Local(PathBuf),
    /// A prefix in object storage.
    Remote(RemoteUri),
}

impl Location {
    /// Parses `text`: a supported URI, a `file://` URI or a plain path. An
    /// unsupported `scheme://` is an error naming the scheme.
    pub fn parse(text: &OsStr) -> Result<Location, RemoteError> {
        let Some((scheme, rest)) = split_scheme(text) else {
            return Ok(Location::Local(PathBuf::from(text)));
        };
        let uri = text.to_string_lossy().into_owned();
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => Scheme::S3,
            "gs" | "gcs" => Scheme::Gcs,
            "az" | "azure" | "abfs" => Scheme::Azure,
            "file" => return local_from_file_uri(&uri, rest),
            _ => {
                return Err(RemoteError::UnsupportedScheme {
                    uri,
                    scheme: scheme.to_owned(),
                })
            }
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(RemoteError::InvalidUri {
                uri,
                reason: "no bucket name after the scheme".into(),
            });
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|part| part == "." || part == "..")
            || prefix.contains("//")
            || prefix.contains(['*', '?', '['])
            || prefix.chars().any(|c| c.is_ascii_control())
        {
            return Err(RemoteError::InvalidUri {
                uri,
                reason: "the key prefix may not contain empty, `.` or `..` parts, `*`, `?`, `[` or control characters"
                    .into(),
            });
        }
        Ok(Location::Remote(RemoteUri {
            scheme,
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        }))
    }

    /// [`Location::parse`] for an argument that must be local: a URI of a supported
    /// store is an error too, naming `what` (`"the export target"`).
    pub fn parse_local(text: &OsStr, what: &str) -> Result<PathBuf, RemoteError> {
        match Location::parse(text)? {
            Location::Local(path) => Ok(path),
            Location::Remote(uri) => Err(RemoteError::RemoteNotSupported {
                uri: uri.to_string(),
                what: what.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(path) => write!(f, "{}", path.display()),
            Location::Remote(uri) => write!(f, "{uri}"),
        }
    }
}

/// Splits `scheme://rest` when `text` starts with an RFC 3986 scheme followed by
/// `://`; a plain path (even one containing `:`) is `None`.
pub fn split_scheme(text: &OsStr) -> Option<(&str, &str)> {
    // Schemes are ASCII; a non-UTF-8 name cannot be a URI this crate reads.
    let text = text.to_str()?;
    let (scheme, rest) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

fn local_from_file_uri(uri: &str, rest: &str) -> Result<Location, RemoteError> {
    // file:///abs/path, or file://localhost/abs/path.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(RemoteError::InvalidUri {
            uri: uri.to_owned(),
            reason: "a file:// URI names an absolute path: file:///dir/dataset".into(),
        });
    }
    let decoded = percent_decode(path).ok_or_else(|| RemoteError::InvalidUri {
        uri: uri.to_owned(),
        reason: "a malformed %-escape".into(),
    })?;
    Ok(Location::Local(PathBuf::from(decoded)))
}

/// Decodes `%XX` escapes into raw bytes (a path need not be UTF-8).
fn percent_decode(text: &str) -> Option<OsString> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(OsString::from_vec(out))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(out).ok().map(OsString::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Location, RemoteError> {
        Location::parse(OsStr::new(text))
    }

    fn remote(scheme: Scheme, bucket: &str, prefix: &str) -> Location {
        Location::Remote(RemoteUri {
            scheme,
            bucket: bucket.into(),
            prefix: prefix.into(),
        })
    }

    #[test]
    fn reads_each_supported_scheme() {
        assert_eq!(
            parse("s3://bucket/a/b.bcd").unwrap(),
            remote(Scheme::S3, "bucket", "a/b.bcd")
        );
        assert_eq!(
            parse("s3://bucket/a/").unwrap(),
            remote(Scheme::S3, "bucket", "a")
        );
        assert_eq!(parse("gs://b").unwrap(), remote(Scheme::Gcs, "b", ""));
        assert_eq!(
            parse("az://container/x").unwrap(),
            remote(Scheme::Azure, "container", "x")
        );
        assert_eq!(
            parse("file:///tmp/a%20b").unwrap(),
            Location::Local(PathBuf::from("/tmp/a b"))
        );
        assert_eq!(
            parse("dir/with:colon").unwrap(),
            Location::Local(PathBuf::from("dir/with:colon"))
        );
        assert_eq!(parse("s3://bucket/x").unwrap().to_string(), "s3://bucket/x");
    }

    #[test]
    fn refuses_unknown_schemes_and_bad_uris() {
        let error = parse("hdfs://nn/x").unwrap_err().to_string();
        assert!(error.contains("hdfs"), "{error}");
        assert!(parse("s3:///x").is_err());
        assert!(parse("s3://b/a/../c").is_err());
        assert!(parse("s3://b/a//c").is_err());
        assert!(parse("file://relative").is_err());
        assert!(parse("s3://b/a\tb").is_err());
        // `#`, `%`, spaces and non-ASCII characters are legal in keys, taken as
        // written (not %-decoded: `%41` is the three characters).
        assert_eq!(
            parse("s3://b/données/#1/%41 x").unwrap(),
            remote(Scheme::S3, "b", "données/#1/%41 x")
        );
        let local = Location::parse_local(OsStr::new("s3://b/x"), "the export target");
        assert!(local.unwrap_err().to_string().contains("the export target"));
    }

    #[test]
    fn objects_are_named_under_the_prefix() {
        let Location::Remote(uri) = parse("s3://b/p").unwrap() else {
            panic!()
        };
        assert_eq!(uri.object("manifest.json"), "s3://b/p/manifest.json");
        assert_eq!(uri.join("q/").to_string(), "s3://b/p/q");
        let Location::Remote(root) = parse("s3://b").unwrap() else {
            panic!()
        };
        assert_eq!(root.object("m"), "s3://b/m");
    }
}
