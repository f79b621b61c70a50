//! Directory trees (ImageFolder and the like): every regular file is a record
//! keyed by its path relative to the root, `/`-separated.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::{Fields, Fused, Origin, Record, Skipped, Source, SourceError};

/// What a [`DirSource`] reads.
#[derive(Clone, Debug, Default)]
pub struct DirOptions {
    /// Only files matching one of these globs (all files when empty). A pattern
    /// without `/` matches the file name at any depth (`*.jpg`); one with `/`
    /// matches the whole relative path (`train/**/*.png`), where `*` stays
    /// within one directory and `**` crosses them.
    pub include: Vec<String>,
    /// Files matching any of these globs (same rules) are left out.
    pub exclude: Vec<String>,
    /// Follow symbolic links (default: they are skipped and counted).
    pub follow_links: bool,
    /// Directories never read, nor anything under them: typically the dataset an
    /// ingest writes, when it lies inside the tree. Compared by identity (device
    /// and inode on Unix, canonical path elsewhere), so a symbolic link or a
    /// `./` spelling is recognised; one that does not exist yet is checked again
    /// at each directory of the walk, as it may be created while the tree is read.
    pub skip_dirs: Vec<PathBuf>,
}

/// Streams the regular files under a root in a deterministic order: depth first,
/// the entries of each directory sorted by name (byte order).
pub struct DirSource {
    root: PathBuf,
    walker: walkdir::IntoIter,
    include: Option<Patterns>,
    exclude: Patterns,
    skip_dirs: SkipDirs,
    skipped: Skipped,
}

/// [`DirOptions::skip_dirs`], resolved to identities as they come into existence.
struct SkipDirs {
    unresolved: Vec<PathBuf>,
    ids: Vec<DirId>,
}

#[cfg(unix)]
type DirId = (u64, u64);
#[cfg(not(unix))]
type DirId = PathBuf;

#[cfg(unix)]
fn dir_id(path: &Path) -> Option<DirId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn dir_id(path: &Path) -> Option<DirId> {
    std::fs::canonicalize(path).ok()
}

impl SkipDirs {
    fn new(dirs: &[PathBuf]) -> SkipDirs {
        let mut skip = SkipDirs {
            unresolved: dirs.to_vec(),
            ids: Vec::new(),
        };
        skip.resolve();
        skip
    }

    fn resolve(&mut self) {
        self.unresolved.retain(|dir| match dir_id(dir) {
            Some(id) => {
                self.ids.push(id);
                false
            }
            None => true,
        });
    }

    /// Whether the directory at `path` is one to skip.
    fn contains(&mut self, path: &Path) -> bool {
        if self.unresolved.is_empty() && self.ids.is_empty() {
            return false;
        }
        self.resolve();
        dir_id(path).is_some_and(|id| self.ids.contains(&id))
    }
}

/// Globs split by what they match: the file name, or the relative path.
struct Patterns {
    names: GlobSet,
    paths: GlobSet,
}

impl Patterns {
    fn new(globs: &[String]) -> Result<Patterns, SourceError> {
        let mut names = GlobSetBuilder::new();
        let mut paths = GlobSetBuilder::new();
        for glob in globs {
            let compiled = GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .map_err(|e| SourceError::Usage(format!("bad glob {glob:?}: {e}")))?;
            if glob.contains('/') {
                paths.add(compiled);
            } else {
                names.add(compiled);
            }
        }
        let build = |b: GlobSetBuilder| b.build().map_err(|e| SourceError::Usage(e.to_string()));
        Ok(Patterns {
            names: build(names)?,
            paths: build(paths)?,
        })
    }

    fn matches(&self, relative: &Path) -> bool {
        relative
            .file_name()
            .is_some_and(|name| self.names.is_match(name))
            || self.paths.is_match(relative)
    }
}

impl DirSource {
    /// A source over the tree at `root`, which must be a directory. It ends at
    /// the first error (an unreadable file or directory).
    pub fn new(root: &Path, options: &DirOptions) -> Result<Fused<DirSource>, SourceError> {
        DirSource::open(root, options).map(Fused::new)
    }

    fn open(root: &Path, options: &DirOptions) -> Result<DirSource, SourceError> {
        let meta = std::fs::metadata(root).map_err(|source| SourceError::Io {
            path: root.to_owned(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(SourceError::Usage(format!(
                "{}: not a directory (for archives use `format` tar)",
                root.display()
            )));
        }
        let include = match options.include.is_empty() {
            true => None,
            false => Some(Patterns::new(&options.include)?),
        };
        let walker = walkdir::WalkDir::new(root)
            .follow_links(options.follow_links)
            .sort_by_file_name()
            .into_iter();
        Ok(DirSource {
            root: root.to_owned(),
            walker,
            include,
            exclude: Patterns::new(&options.exclude)?,
            skip_dirs: SkipDirs::new(&options.skip_dirs),
            skipped: Skipped::default(),
        })
    }

    fn wanted(&self, relative: &Path) -> bool {
        self.include.as_ref().is_none_or(|p| p.matches(relative)) && !self.exclude.matches(relative)
    }
}

/// The key of a file: its path relative to the root, components joined by `/`.
fn key_of(relative: &Path) -> Vec<u8> {
    let mut key = Vec::new();
    for (i, component) in relative.components().enumerate() {
        if i > 0 {
            key.push(b'/');
        }
        key.extend_from_slice(component.as_os_str().as_encoded_bytes());
    }
    key
}

impl DirSource {
    /// Total size of the files this source would yield, from metadata alone (for a
    /// progress bar's estimate; the tree may change before it is read).
    pub fn total_bytes(root: &Path, options: &DirOptions) -> Result<u64, SourceError> {
        let mut walk = DirSource::open(root, options)?;
        let mut total = 0;
        while let Some(next) = walk.next_file() {
            let (_, path) = next?;
            total += std::fs::metadata(&path).map_or(0, |m| m.len());
        }
        Ok(total)
    }

    /// The key and path of the next wanted regular file.
    fn next_file(&mut self) -> Option<Result<(Vec<u8>, PathBuf), SourceError>> {
        loop {
            let entry = match self.walker.next()? {
                Ok(entry) => entry,
                Err(e) => {
                    let path = e.path().unwrap_or(&self.root).to_owned();
                    let source = e.into_io_error().unwrap_or_else(|| {
                        std::io::Error::other(
                            "symbolic link loop (a link points to one of its own parents)",
                        )
                    });
                    return Some(Err(SourceError::Io { path, source }));
                }
            };
            let file_type = entry.file_type();
            if file_type.is_dir() {
                if self.skip_dirs.contains(entry.path()) {
                    self.walker.skip_current_dir();
                }
                continue;
            }
            let relative = entry
                .path()
                .strip_prefix(&self.root)
                .expect("walkdir yields paths under its root");
            if !self.wanted(relative) {
                continue;
            }
            if file_type.is_symlink() {
                self.skipped.add("symlink");
                continue;
            }
            if !file_type.is_file() {
                self.skipped.add("special file");
                continue;
            }
            let key = key_of(relative);
            return Some(Ok((key, entry.into_path())));
        }
    }
}

impl Iterator for DirSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (key, path) = match self.next_file()? {
            Ok(found) => found,
            Err(error) => return Some(Err(error)),
        };
        Some(match std::fs::read(&path) {
            Ok(value) => Ok(Record {
                key,
                value,
                origin: Origin::File(path),
                fields: Fields::new(),
            }),
            Err(source) => Err(SourceError::Io { path, source }),
        })
    }
}

impl Source for DirSource {
    fn keyed(&self) -> bool {
        true
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, body) in [
            ("b/2.jpg", "two"),
            ("a.txt", "text"),
            ("b/1.jpg", "one"),
            ("b/sub/3.png", "three"),
            ("empty.jpg", ""),
        ] {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, body).unwrap();
        }
        dir
    }

    fn keys(root: &Path, options: DirOptions) -> Vec<String> {
        DirSource::new(root, &options)
            .unwrap()
            .map(|r| String::from_utf8(r.unwrap().key).unwrap())
            .collect()
    }

    #[test]
    fn yields_every_file_sorted_with_slash_keys() {
        let dir = tree();
        let records: Vec<Record> = DirSource::new(dir.path(), &DirOptions::default())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let keys: Vec<&[u8]> = records.iter().map(|r| &r.key[..]).collect();
        assert_eq!(
            keys,
            [
                &b"a.txt"[..],
                b"b/1.jpg",
                b"b/2.jpg",
                b"b/sub/3.png",
                b"empty.jpg"
            ]
        );
        assert_eq!(records[4].value, b"");
        assert_eq!(records[1].value, b"one");
    }

    #[test]
    fn include_and_exclude_globs() {
        let dir = tree();
        let only = |include: &[&str], exclude: &[&str]| {
            keys(
                dir.path(),
                DirOptions {
                    include: include.iter().map(|s| s.to_string()).collect(),
                    exclude: exclude.iter().map(|s| s.to_string()).collect(),
                    ..Default::default()
                },
            )
        };
        assert_eq!(only(&["*.jpg"], &[]), ["b/1.jpg", "b/2.jpg", "empty.jpg"]);
        assert_eq!(only(&["b/*"], &[]), ["b/1.jpg", "b/2.jpg"]);
        assert_eq!(only(&["b/**"], &["2.*"]), ["b/1.jpg", "b/sub/3.png"]);
        assert!(DirSource::new(
            dir.path(),
            &DirOptions {
                include: vec!["[".into()],
                ..Default::default()
            }
        )
        .is_err());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_skipped_and_counted_unless_followed() {
        let dir = tree();
        std::os::unix::fs::symlink(dir.path().join("a.txt"), dir.path().join("link.txt")).unwrap();
        let mut source = DirSource::new(dir.path(), &DirOptions::default()).unwrap();
        assert_eq!(source.by_ref().count(), 5);
        assert_eq!(source.skipped().0.get("symlink"), Some(&1));
        let followed = keys(
            dir.path(),
            DirOptions {
                follow_links: true,
                ..Default::default()
            },
        );
        assert!(followed.contains(&"link.txt".to_string()));
    }

    #[cfg(unix)]
    #[test]
    fn unreadable_entry_is_an_error_naming_it() {
        // A dangling link that must be followed cannot be read (this works as root,
        // where permission bits would not stop a read).
        let dir = tree();
        std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("b/dangling.jpg"))
            .unwrap();
        let options = DirOptions {
            follow_links: true,
            ..Default::default()
        };
        let err = DirSource::new(dir.path(), &options)
            .unwrap()
            .find_map(Result::err)
            .expect("an error for the dangling link");
        assert!(err.to_string().contains("dangling.jpg"), "{err}");
    }

    #[test]
    fn skip_dirs_leave_out_a_directory_by_identity_even_one_made_after_opening() {
        let dir = tree();
        let options = DirOptions {
            // Spelled with `./` and `..`, and not there yet when the source opens.
            skip_dirs: vec![dir.path().join("b/../b/./sub"), dir.path().join("new")],
            ..Default::default()
        };
        let source = DirSource::new(dir.path(), &options).unwrap();
        fs::create_dir(dir.path().join("new")).unwrap();
        fs::write(dir.path().join("new/manifest.json"), "{}").unwrap();
        let keys: Vec<Vec<u8>> = source.map(|r| r.unwrap().key).collect();
        assert_eq!(
            keys,
            [&b"a.txt"[..], b"b/1.jpg", b"b/2.jpg", b"empty.jpg"],
            "{:?}",
            keys.iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>()
        );
        // The root itself: nothing is read.
        let options = DirOptions {
            skip_dirs: vec![dir.path().to_owned()],
            ..Default::default()
        };
        assert_eq!(DirSource::new(dir.path(), &options).unwrap().count(), 0);
    }

    #[test]
    fn a_file_root_is_a_usage_error() {
        let dir = tree();
        let err = DirSource::new(&dir.path().join("a.txt"), &DirOptions::default())
            .err()
            .unwrap();
        assert!(err.to_string().contains("not a directory"), "{err}");
    }
}
