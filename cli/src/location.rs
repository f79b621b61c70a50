//! Where a location argument points: a local path or a dataset in object
//! storage. Every command reads its dataset, source and target arguments through
//! these helpers, so that an unsupported `scheme://` is a usage error everywhere
//! and a URI never becomes a local folder named `s3:`.

use std::ffi::OsStr;
use std::path::PathBuf;

use anyhow::Result;
pub use bcd_remote::Location;
use bcd_remote::{Remote, RemoteUri};

use crate::output::UsageError;

/// A dataset or source argument: a local path or a supported URI (an unsupported
/// `scheme://` is a usage error, never a local path).
pub fn location(arg: &OsStr) -> Result<Location> {
    Ok(Location::parse(arg)?)
}

/// An argument that must be a local path: any URI is a usage error naming `what`.
pub fn local(arg: &OsStr, what: &str) -> Result<PathBuf> {
    Ok(Location::parse_local(arg, what)?)
}

/// An argument that must be a URI of a store, for `bcd command`.
pub fn remote_uri(arg: &OsStr, command: &str) -> Result<RemoteUri> {
    match location(arg)? {
        Location::Remote(uri) => Ok(uri),
        Location::Local(path) => Err(UsageError(format!(
            "{}: `bcd {command}` needs an s3://, gs:// or az:// URI here, not a local path",
            path.display()
        ))
        .into()),
    }
}

/// The client of a URI, configured from the environment.
pub fn remote(uri: RemoteUri) -> Result<Remote> {
    Ok(Remote::new(uri)?)
}
