//! The hashes an MDS index gives for a shard file, checked as the file is
//! read ([`Hashing`]), so a shard is hashed without a second read.

use std::io::{self, Read};

use sha2::digest::DynDigest;
use xxhash_rust::{xxh3::Xxh3, xxh32::Xxh32, xxh64::Xxh64};

/// A hash an index names for a file (`hashes` of an MDS `raw_data` or
/// `zip_data`): every algorithm `MDSWriter` accepts (hashlib's md5, sha1,
/// sha224, sha256, sha384, sha512, sha3_224, sha3_256, sha3_384, sha3_512,
/// blake2b, blake2s, and xxhash's xxh32, xxh64, xxh3_64, xxh128, xxh3_128),
/// compared as lower-case hex digests as Python's `hexdigest()` gives them.
pub(crate) struct HashCheck {
    algorithm: String,
    expected: String,
    state: HashState,
}

enum HashState {
    Digest(Box<dyn DynDigest + Send>),
    Xxh32(Xxh32),
    Xxh64(Xxh64),
    Xxh3(Xxh3),
    Xxh3_128(Xxh3),
}

impl HashCheck {
    /// A check of `algorithm` against `expected`; `None` for an algorithm no
    /// MDS writer produces.
    pub(crate) fn new(algorithm: &str, expected: &str) -> Option<HashCheck> {
        let digest = |d: Box<dyn DynDigest + Send>| HashState::Digest(d);
        let state = match algorithm {
            "md5" => digest(Box::<md5::Md5>::default()),
            "sha1" => digest(Box::<sha1::Sha1>::default()),
            "sha224" => digest(Box::<sha2::Sha224>::default()),
            "sha256" => digest(Box::<sha2::Sha256>::default()),
            "sha384" => digest(Box::<sha2::Sha384>::default()),
            "sha512" => digest(Box::<sha2::Sha512>::default()),
            "sha3_224" => digest(Box::<sha3::Sha3_224>::default()),
            "sha3_256" => digest(Box::<sha3::Sha3_256>::default()),
            "sha3_384" => digest(Box::<sha3::Sha3_384>::default()),
            "sha3_512" => digest(Box::<sha3::Sha3_512>::default()),
            "blake2b" => digest(Box::<blake2::Blake2b512>::default()),
            "blake2s" => digest(Box::<blake2::Blake2s256>::default()),
            "xxh32" => HashState::Xxh32(Xxh32::new(0)),
            "xxh64" => HashState::Xxh64(Xxh64::new(0)),
            "xxh3_64" => HashState::Xxh3(Xxh3::new()),
            "xxh128" | "xxh3_128" => HashState::Xxh3_128(Xxh3::new()),
            _ => return None,
        };
        Some(HashCheck {
            algorithm: algorithm.to_owned(),
            expected: expected.to_ascii_lowercase(),
            state,
        })
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        match &mut self.state {
            HashState::Digest(d) => d.update(bytes),
            HashState::Xxh32(h) => h.update(bytes),
            HashState::Xxh64(h) => h.update(bytes),
            HashState::Xxh3(h) | HashState::Xxh3_128(h) => h.update(bytes),
        }
    }

    /// The hex digest of everything seen.
    pub(crate) fn hex(&mut self) -> String {
        match &mut self.state {
            HashState::Digest(d) => d
                .finalize_reset()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
            HashState::Xxh32(h) => format!("{:08x}", h.digest()),
            HashState::Xxh64(h) => format!("{:016x}", h.digest()),
            HashState::Xxh3(h) => format!("{:016x}", h.digest()),
            HashState::Xxh3_128(h) => format!("{:032x}", h.digest128()),
        }
    }
}

/// A hash that did not match: the algorithm, what the index says, what the
/// bytes give.
#[derive(Debug)]
pub(crate) struct Mismatch {
    pub algorithm: String,
    pub expected: String,
    pub actual: String,
}

/// Passes bytes through, hashing them.
pub(crate) struct Hashing<R> {
    pub(crate) inner: R,
    checks: Vec<HashCheck>,
}

impl<R: Read> Hashing<R> {
    pub(crate) fn new(inner: R, checks: Vec<HashCheck>) -> Hashing<R> {
        Hashing { inner, checks }
    }

    /// The checks that failed, once every byte was read.
    pub(crate) fn mismatches(&mut self) -> Vec<Mismatch> {
        mismatches(&mut self.checks)
    }
}

/// The `checks` that failed, once every byte was given to them.
pub(crate) fn mismatches(checks: &mut [HashCheck]) -> Vec<Mismatch> {
    let mut failed = Vec::new();
    for check in checks {
        let actual = check.hex();
        if actual != check.expected {
            failed.push(Mismatch {
                algorithm: check.algorithm.clone(),
                expected: check.expected.clone(),
                actual,
            });
        }
    }
    failed
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for check in &mut self.checks {
            check.update(&buf[..n]);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_pythons_hex_digests() {
        // hashlib / xxhash of b"abc".
        let cases = [
            ("md5", "900150983cd24fb0d6963f7d28e17f72"),
            ("sha1", "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (
                "sha256",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            ("xxh32", "32d153ff"),
            ("xxh64", "44bc2cf5ad770999"),
            ("xxh3_64", "78af5f94892f3950"),
            ("xxh128", "06b05ab6733a618578af5f94892f3950"),
        ];
        for (algorithm, hex) in cases {
            let mut check = HashCheck::new(algorithm, hex).unwrap();
            check.update(b"ab");
            check.update(b"c");
            assert_eq!(check.hex(), hex, "{algorithm}");
        }
        assert!(HashCheck::new("crc32", "0").is_none());
    }
}
