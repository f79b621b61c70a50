//! The cache against a real S3 server (moto): a dataset that boto3 uploaded
//! under a prefix with `#`, `%`, a space and non-ASCII characters, and one that
//! bcd pushed there, open through the cache with their keys as written.

mod common;

use std::sync::Arc;

use bcd::{Compression, Dataset};
use bcd_remote::cache::{open_cache, CacheOptions, RemoteCache};
use bcd_remote::{push, Remote, RemoteUri, Scheme, TransferOptions};
use bcd_test_support::s3::{S3Server, BUCKET};
use common::{dataset, files};

fn records(dataset: &Dataset) -> Vec<Vec<u8>> {
    (0..dataset.len())
        .map(|i| dataset.at(i).unwrap().into_owned())
        .collect()
}

fn uri(prefix: &str) -> RemoteUri {
    RemoteUri {
        scheme: Scheme::S3,
        bucket: BUCKET.into(),
        prefix: prefix.into(),
    }
}

#[test]
fn datasets_under_prefixes_of_any_legal_characters_open_through_the_cache() {
    let server = S3Server::start();
    // This binary's only test: the client reads the server from the environment.
    for (name, value) in server.env() {
        std::env::set_var(name, value);
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let local = dataset(&source, true, Compression::Lz4, 150, 2000);
    let prefix = "données/数据 #1/100%";
    for (name, bytes) in files(&source) {
        server.put_object(&format!("{prefix}/boto3/{name}"), &bytes);
    }
    push(
        &source,
        &Remote::new(uri(&format!("{prefix}/bcd"))).unwrap(),
        &TransferOptions::default(),
    )
    .unwrap();
    assert!(server
        .get_object(&format!("{prefix}/bcd/manifest.json"))
        .is_some());
    for (n, name) in ["boto3", "bcd"].into_iter().enumerate() {
        let options = CacheOptions::new(dir.path().join(format!("cache{n}")));
        let cache = RemoteCache::new(uri(&format!("{prefix}/{name}")), &options).unwrap();
        let (remote, _) = open_cache(Arc::new(cache)).unwrap();
        assert_eq!(records(&remote), records(&local), "{name}");
    }
}
