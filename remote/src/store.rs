//! [`Remote`]: a prefix in an object store, with a client configured from the
//! standard environment of its cloud, and the runtime that drives it.
//!
//! S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION` / `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL` (an S3-compatible store:
//! MinIO, R2, Ceph; requests then use path-style addressing), `AWS_ALLOW_HTTP=true`
//! for plain-HTTP endpoints, and `AWS_PROFILE` with `~/.aws/credentials` and
//! `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`) for what the
//! variables leave unset; instance and container credentials as `object_store`
//! finds them. GCS: `GOOGLE_SERVICE_ACCOUNT` / `GOOGLE_APPLICATION_CREDENTIALS`.
//! Azure: `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY` and the other
//! `AZURE_*` variables `object_store` reads.
//!
//! Requests are retried with exponential backoff on 5xx answers and connection
//! errors: at most `BCD_REMOTE_MAX_RETRIES` times (default 10) within
//! `BCD_REMOTE_RETRY_TIMEOUT` seconds (default 180).
//!
//! The client and its runtime belong to one process: a forked child (a DataLoader
//! worker) builds its own on first use, since the parent's connection tasks do
//! not exist in it.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::multipart::MultipartStore;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};

use crate::error::{RemoteError, Result};
use crate::per_process::PerProcess;
use crate::uri::{RemoteUri, Scheme};

/// The clients of one store.
#[derive(Clone)]
pub(crate) struct Clients {
    pub(crate) store: Arc<dyn ObjectStore>,
    /// The low-level multipart API, which names each upload so that an upload a
    /// kill interrupted can be aborted later (every cloud store has it).
    pub(crate) multipart: Option<Arc<dyn MultipartStore>>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("store", &self.store)
            .field("multipart", &self.multipart.is_some())
            .finish()
    }
}

/// A prefix in an object store and a client for it.
#[derive(Debug)]
pub struct Remote {
    uri: RemoteUri,
    /// Clients built from the environment, for the process that built them.
    built: PerProcess<Clients>,
    /// Clients given by the caller (tests): used in every process.
    given: Option<Clients>,
}

impl Remote {
    /// A remote for `uri`, its client configured from the environment (see the
    /// module documentation). Nothing is requested until it is used.
    pub fn new(uri: RemoteUri) -> Result<Remote> {
        let remote = Remote {
            uri,
            built: PerProcess::new(),
            given: None,
        };
        remote.clients()?;
        Ok(remote)
    }

    /// A remote using `store` (and its multipart API, when it has one) instead of
    /// a client built from the environment: for tests, with `object_store`'s
    /// in-memory store.
    pub fn with_store(
        uri: RemoteUri,
        store: Arc<dyn ObjectStore>,
        multipart: Option<Arc<dyn MultipartStore>>,
    ) -> Remote {
        Remote {
            uri,
            built: PerProcess::new(),
            given: Some(Clients { store, multipart }),
        }
    }

    /// The URI of the prefix.
    pub fn uri(&self) -> &RemoteUri {
        &self.uri
    }

    /// The URI of object `name` under the prefix, for messages.
    pub fn object_uri(&self, name: &str) -> String {
        self.uri.object(name)
    }

    /// The store path of object `name` under the prefix.
    pub(crate) fn path(&self, name: &str) -> ObjectPath {
        match self.uri.prefix.is_empty() {
            true => key(name),
            false => key(&format!("{}/{name}", self.uri.prefix)),
        }
    }

    /// The prefix as a store path (`None` for a bucket's root).
    pub(crate) fn prefix_path(&self) -> Option<ObjectPath> {
        (!self.uri.prefix.is_empty()).then(|| key(&self.uri.prefix))
    }

    /// The name of `path` relative to the prefix, if it is directly under it.
    pub(crate) fn name_of(&self, path: &ObjectPath) -> Option<String> {
        let full = path.as_ref();
        let name = match self.uri.prefix.is_empty() {
            true => full,
            false => full
                .strip_prefix(self.uri.prefix.as_str())?
                .strip_prefix('/')?,
        };
        (!name.is_empty() && !name.contains('/')).then(|| name.to_owned())
    }

    pub(crate) fn clients(&self) -> Result<Clients> {
        if let Some(given) = &self.given {
            return Ok(given.clone());
        }
        // Each process's own (a DataLoader worker forked while a prefetch task
        // of the parent was in here would otherwise wait for it forever).
        self.built.get_or_try_make(|| build(&self.uri))
    }

    pub(crate) fn store(&self) -> Result<Arc<dyn ObjectStore>> {
        Ok(self.clients()?.store)
    }
}

/// The store path whose key is `text` as written. `ObjectPath::from` would
/// percent-encode what AWS advises against in keys (`#`, `%`, non-ASCII, ...),
/// so that `s3://b/données` would name the key `donn%C3%A9es`, which no other
/// tool writes or reads; `parse` keeps the key as it is. It refuses only empty
/// parts, `.`/`..` and control characters, which [`crate::Location::parse`]
/// refuses already; such a text (a `RemoteUri` built by hand) falls back to the
/// encoded form rather than panicking.
fn key(text: &str) -> ObjectPath {
    ObjectPath::parse(text).unwrap_or_else(|_| ObjectPath::from(text))
}

/// Retry settings: `BCD_REMOTE_MAX_RETRIES`, `BCD_REMOTE_RETRY_TIMEOUT` (seconds).
fn retry_config() -> RetryConfig {
    let number = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let mut retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
            base: 2.0,
        },
        max_retries: 10,
        retry_timeout: Duration::from_secs(180),
    };
    if let Some(n) = number("BCD_REMOTE_MAX_RETRIES") {
        retry.max_retries = n.max(0.0) as usize;
    }
    if let Some(seconds) = number("BCD_REMOTE_RETRY_TIMEOUT") {
        retry.retry_timeout = Duration::from_secs_f64(seconds.max(0.0));
    }
    retry
}

fn build(uri: &RemoteUri) -> Result<Clients> {
    let config_error = |source| RemoteError::Config {
        uri: uri.to_string(),
        source,
    };
    Ok(match uri.scheme {
        Scheme::S3 => {
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(&uri.bucket)
                .with_retry(retry_config());
            let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            // AWS_ENDPOINT_URL is the variable the AWS CLI and SDKs read; object_store
            // reads AWS_ENDPOINT. An endpoint means an S3-compatible store: path-style.
            let profile = aws_profile();
            let endpoint = env("AWS_ENDPOINT_URL_S3")
                .or_else(|| env("AWS_ENDPOINT_URL"))
                .or_else(|| env("AWS_ENDPOINT"))
                .or_else(|| profile.get("endpoint_url").cloned());
            if let Some(endpoint) = &endpoint {
                // Plain http:// endpoints need AWS_ALLOW_HTTP=true (read by from_env).
                builder = builder
                    .with_endpoint(endpoint)
                    .with_virtual_hosted_style_request(false);
            } else if !uri.bucket.contains('.') {
                // AWS itself: virtual-hosted addressing (dotted bucket names stay
                // path-style, whose certificate matches).
                builder = builder.with_virtual_hosted_style_request(true);
            }
            if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
                if let Some(region) = profile.get("region") {
                    builder = builder.with_region(region);
                }
            }
            if env("AWS_ACCESS_KEY_ID").is_none() {
                for (key, config) in [
                    ("aws_access_key_id", AmazonS3ConfigKey::AccessKeyId),
                    ("aws_secret_access_key", AmazonS3ConfigKey::SecretAccessKey),
                    ("aws_session_token", AmazonS3ConfigKey::Token),
                ] {
                    if let Some(value) = profile.get(key) {
                        builder = builder.with_config(config, value);
                    }
                }
            }
            let s3 = Arc::new(builder.build().map_err(config_error)?);
            Clients {
                store: s3.clone(),
                multipart: Some(s3),
            }
        }
        Scheme::Gcs => {
            let gcs = Arc::new(
                GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(&uri.bucket)
                    .with_retry(retry_config())
                    .build()
                    .map_err(config_error)?,
            );
            Clients {
                store: gcs.clone(),
                multipart: Some(gcs),
            }
        }
        Scheme::Azure => {
            let azure = Arc::new(
                MicrosoftAzureBuilder::from_env()
                    .with_container_name(&uri.bucket)
                    .with_retry(retry_config())
                    .build()
                    .map_err(config_error)?,
            );
            Clients {
                store: azure.clone(),
                multipart: Some(azure),
            }
        }
    })
}

/// The settings of the AWS profile (`AWS_PROFILE`, else `default`) from the shared
/// credentials and config files, credentials file first. Missing files are no
/// profile.
fn aws_profile() -> HashMap<String, String> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let file = |variable: &str, default: &str| {
        std::env::var_os(variable)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
    };
    let profile = std::env::var("AWS_PROFILE")
        .or_else(|_| std::env::var("AWS_DEFAULT_PROFILE"))
        .unwrap_or_else(|_| "default".into());
    let mut settings = HashMap::new();
    // The config file names non-default profiles `[profile NAME]`.
    let sections = [
        (
            file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            profile.clone(),
        ),
        (
            file("AWS_CONFIG_FILE", "config"),
            match profile.as_str() {
                "default" => "default".to_owned(),
                name => format!("profile {name}"),
            },
        ),
    ];
    for (path, section) in sections {
        let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
            continue;
        };
        for (key, value) in ini_section(&text, &section) {
            settings.entry(key).or_insert(value);
        }
    }
    settings
}

/// The `key = value` lines of `[section]` of an INI text, keys lower-cased.
fn ini_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut found = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside {
            if let Some((key, value)) = line.split_once('=') {
                found.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
    }
    found
}

/// The runtime of this process (rebuilt in a forked child, whose copy of the
/// parent's has no threads).
fn runtime() -> Arc<tokio::runtime::Runtime> {
    static RUNTIME: PerProcess<Arc<tokio::runtime::Runtime>> = PerProcess::new();
    let built = RUNTIME.get_or_try_make(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .thread_name("bcd-remote")
            .enable_all()
            .build()
            .map(Arc::new)
    });
    built.expect("a tokio runtime can be built")
}

/// Runs `future` in the background on this process's runtime.
pub(crate) fn spawn(future: impl Future<Output = ()> + Send + 'static) {
    drop(runtime().spawn(future));
}

/// Runs `future` to completion on this process's runtime. Must not be called from
/// inside the runtime.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_sections_are_read_by_name() {
        let text = "[default]\naws_access_key_id = A\n# c\n[profile x]\nregion=eu-west-1\n";
        assert_eq!(
            ini_section(text, "default"),
            vec![("aws_access_key_id".into(), "A".into())]
        );
        assert_eq!(
            ini_section(text, "profile x"),
            vec![("region".into(), "eu-west-1".into())]
        );
    }

    #[test]
    fn names_are_relative_to_the_prefix() {
        let uri = RemoteUri {
            scheme: Scheme::S3,
            bucket: "b".into(),
            prefix: "p/q".into(),
        };
        let remote = Remote::with_store(uri, Arc::new(object_store::memory::InMemory::new()), None);
        assert_eq!(remote.path("manifest.json").as_ref(), "p/q/manifest.json");
        assert_eq!(
            remote.name_of(&ObjectPath::from("p/q/000000.bin")),
            Some("000000.bin".into())
        );
        assert_eq!(remote.name_of(&ObjectPath::from("p/q/x/y")), None);
        assert_eq!(remote.name_of(&ObjectPath::from("p/qq/y")), None);
    }

    /// Keys are the prefix as written: `#`, `%`, spaces and non-ASCII characters
    /// are legal in S3 keys, and other tools write them unencoded.
    #[test]
    fn keys_keep_the_characters_of_the_prefix() {
        let prefix = "données/a b#1%2F/数据";
        let uri = RemoteUri {
            scheme: Scheme::S3,
            bucket: "b".into(),
            prefix: prefix.into(),
        };
        let remote = Remote::with_store(uri, Arc::new(object_store::memory::InMemory::new()), None);
        let path = remote.path("manifest.json");
        assert_eq!(path.as_ref(), format!("{prefix}/manifest.json"));
        assert_eq!(remote.prefix_path().unwrap().as_ref(), prefix);
        assert_eq!(remote.name_of(&path), Some("manifest.json".into()));
    }
}
