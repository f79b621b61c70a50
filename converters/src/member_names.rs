//! Member names of exported archives: which keys are unsafe as tar member names,
//! how `rename_unsafe` cleans them, and how cleaned names are kept unique.

use std::collections::HashSet;

/// Why a name is unsafe as a tar member, or `None` if it is fine.
pub fn unsafe_reason(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() {
        return Some("empty");
    }
    if name.contains(&0) {
        return Some("contains a NUL byte");
    }
    if name.starts_with(b"/") {
        return Some("absolute path");
    }
    if name.ends_with(b"/") {
        return Some("ends with '/', which means a directory");
    }
    for component in name.split(|&b| b == b'/') {
        match component {
            b".." => return Some("contains a '..' component"),
            b"." | b"" => return Some("contains an empty or '.' component"),
            _ => {}
        }
    }
    None
}

/// A cleaned version of an unsafe name: empty, `.` and `..` components dropped,
/// NUL written as `%00`; `unnamed` if nothing is left.
pub fn clean_name(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for component in name.split(|&b| b == b'/') {
        if matches!(component, b"" | b"." | b"..") {
            continue;
        }
        if !out.is_empty() {
            out.push(b'/');
        }
        for &b in component {
            match b {
                0 => out.extend_from_slice(b"%00"),
                b => out.push(b),
            }
        }
    }
    if out.is_empty() {
        out.extend_from_slice(b"unnamed");
    }
    out
}

/// Chooses the names of renamed members: a cleaned name, made unique against every
/// name the export writes, earlier and later, with a `~N` suffix (`a~1`, `a~2`,
/// ...) where needed. Names are remembered by a 64-bit hash, so a huge export
/// costs 8 bytes per member; a hash collision can only add a suffix that was not
/// needed, never let two members share a name.
#[derive(Debug, Default)]
pub struct UniqueNames {
    taken: HashSet<u64>,
}

impl UniqueNames {
    /// Remembers `name` as written by the export (call it for every safe name
    /// before the first [`TarExporter::add`](crate::tar_export::TarExporter::add)).
    pub fn reserve(&mut self, name: &[u8]) {
        self.taken.insert(hash(name));
    }

    /// The name to write instead of the unsafe `name`, remembered as taken.
    pub fn rename(&mut self, name: &[u8]) -> Vec<u8> {
        let cleaned = clean_name(name);
        let mut candidate = cleaned.clone();
        let mut n = 0u64;
        while !self.taken.insert(hash(&candidate)) {
            n += 1;
            candidate.clone_from(&cleaned);
            candidate.extend_from_slice(format!("~{n}").as_bytes());
        }
        candidate
    }
}

fn hash(name: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    // DefaultHasher::new() has fixed keys: the same names give the same choices.
    let mut hasher = std::hash::DefaultHasher::new();
    name.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_names_are_recognised_and_cleaned() {
        for (name, cleaned) in [
            (&b"/etc/passwd"[..], &b"etc/passwd"[..]),
            (b"a/../../b", b"a/b"),
            (b"", b"unnamed"),
            (b"x\0y", b"x%00y"),
            (b"./a", b"a"),
            (b"d/", b"d"),
        ] {
            assert!(unsafe_reason(name).is_some(), "{name:?}");
            assert_eq!(clean_name(name), cleaned);
        }
        for fine in [
            &b"a"[..],
            b"train/cat/1.jpg",
            b"..hidden",
            b"a..b/c",
            b"\xff",
        ] {
            assert_eq!(unsafe_reason(fine), None, "{fine:?}");
        }
    }

    #[test]
    fn renamed_names_avoid_every_name_before_and_after() {
        let keys: [&[u8]; 5] = [b"/a", b"a", b"b", b"../b", b"b.3"];
        let mut names = UniqueNames::default();
        for key in keys {
            if unsafe_reason(key).is_none() {
                names.reserve(key);
            }
        }
        let written: Vec<Vec<u8>> = keys
            .iter()
            .map(|key| match unsafe_reason(key) {
                Some(_) => names.rename(key),
                None => key.to_vec(),
            })
            .collect();
        assert_eq!(written, [&b"a~1"[..], b"a", b"b", b"b~1", b"b.3"]);
        // A later key that looks like a chosen name pushes the choice further.
        let mut names = UniqueNames::default();
        names.reserve(b"x~1");
        names.reserve(b"x");
        assert_eq!(names.rename(b"/x"), b"x~2");
        assert_eq!(names.rename(b"./x"), b"x~3");
    }
}
