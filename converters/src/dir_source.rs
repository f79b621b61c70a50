//! Directory trees (ImageFolder and the like): every regular file is a record
//! keyed by its path relative to the root, `/`-separated.
//!
//! With [`DirOptions::labels`] = [`LabelMode::Folder`], each record also gets the
//! fields `label` (the name of its first folder under the root) and
//! `label_index` (that folder's position among the class folders), numbered as
//! torchvision's `ImageFolder` numbers them (`find_classes`, `class_to_idx`):
//!
//! - the class folders are the entries of the root that are directories,
//!   following symbolic links (Python's `DirEntry.is_dir()`): a link to a
//!   directory is a class, a dangling link is not; hidden folders (`.cache`)
//!   are classes too, as for torchvision;
//! - they are sorted as Python sorts their names: by Unicode code point, which
//!   for UTF-8 names is their byte order (a name that is not UTF-8 is an error:
//!   it could not be a label);
//! - a class folder that holds no file (or none that `include`/`exclude` keep)
//!   keeps its index, as with `ImageFolder(allow_empty=True)` (torchvision's
//!   default refuses such a tree), so indices do not depend on the filters;
//! - a file directly under the root is in no class: it is skipped and counted as
//!   "not in a class folder" (torchvision passes over it too);
//! - a directory of [`DirOptions::skip_dirs`] (the dataset being written) is not
//!   a class.
//!
//! The class names, in index order, are the source's metadata `"class_names"`.
//! These are the run's numbers: a writer appending to a dataset renumbers them
//! by name into the dataset's classes (`bcd_fields::merge_metadata`).
//! A class folder's files are read as any other's: without `follow_links`, a
//! class folder that is a symbolic link is in the list but its files are skipped
//! (counted as "symlink").

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::{FieldValue, Fields, Fused, Origin, Record, Skipped, Source, SourceError};

/// Which fields a [`DirSource`] derives from a file's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelMode {
    /// `label` (Utf8) and `label_index` (Int64) from the file's first folder under
    /// the root, numbered as torchvision's `ImageFolder` (see the module
    /// documentation).
    Folder,
}

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
    /// Fields derived from each file's path (default: none).
    pub labels: Option<LabelMode>,
}

/// The class folders of a root, as torchvision's `find_classes` lists them.
struct Classes {
    /// Names in index order.
    names: Vec<String>,
    /// Index by folder name.
    index: HashMap<OsString, i64>,
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
    classes: Option<Classes>,
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
        let mut skip_dirs = SkipDirs::new(&options.skip_dirs);
        let classes = match options.labels {
            None => None,
            Some(LabelMode::Folder) => Some(find_classes(root, &mut skip_dirs)?),
        };
        Ok(DirSource {
            root: root.to_owned(),
            walker,
            include,
            exclude: Patterns::new(&options.exclude)?,
            skip_dirs,
            skipped: Skipped::default(),
            classes,
        })
    }

    fn wanted(&self, relative: &Path) -> bool {
        self.include.as_ref().is_none_or(|p| p.matches(relative)) && !self.exclude.matches(relative)
    }
}

/// The class folders of `root` (see the module documentation), sorted by name.
fn find_classes(root: &Path, skip_dirs: &mut SkipDirs) -> Result<Classes, SourceError> {
    let io_error = |path: &Path| {
        let path = path.to_owned();
        move |source| SourceError::Io { path, source }
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root).map_err(io_error(root))? {
        let entry = entry.map_err(io_error(root))?;
        let path = entry.path();
        // DirEntry.is_dir() follows a symbolic link; a dangling one is no class.
        let is_dir = match entry.file_type().map_err(io_error(&path))? {
            t if t.is_symlink() => std::fs::metadata(&path).is_ok_and(|m| m.is_dir()),
            t => t.is_dir(),
        };
        if !is_dir || skip_dirs.contains(&path) {
            continue;
        }
        let name = entry.file_name();
        let Some(text) = name.to_str() else {
            return Err(SourceError::Invalid {
                file: root.display().to_string(),
                location: format!("class folder {:?}", name.to_string_lossy()),
                reason: "the folder's name is not valid UTF-8, so it cannot be a label; rename it"
                    .into(),
            });
        };
        names.push(text.to_owned());
    }
    if names.is_empty() {
        // torchvision refuses such a root too ("Couldn't find any class folder").
        return Err(SourceError::Invalid {
            file: root.display().to_string(),
            location: "labels by folder".into(),
            reason: "no class folder: files are labelled by the directory they are in under the root, and the root holds no directory".into(),
        });
    }
    // Python sorts str by code point, the byte order of UTF-8.
    names.sort_unstable();
    let index = names
        .iter()
        .enumerate()
        .map(|(i, name)| (OsString::from(name), i as i64))
        .collect();
    Ok(Classes { names, index })
}

/// A file found by the walk: key, path, and class index when labels are asked for.
type Found = (Vec<u8>, PathBuf, Option<usize>);

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
            let (_, path, _) = next?;
            total += std::fs::metadata(&path).map_or(0, |m| m.len());
        }
        Ok(total)
    }

    /// The next wanted regular file.
    fn next_file(&mut self) -> Option<Result<Found, SourceError>> {
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
            let class = match &self.classes {
                None => None,
                Some(_) if entry.depth() < 2 => {
                    self.skipped.add("not in a class folder");
                    continue;
                }
                Some(classes) => {
                    let folder = relative.components().next().expect("depth 2 or more");
                    match classes.index.get(folder.as_os_str()) {
                        Some(&i) => Some(i as usize),
                        None => {
                            return Some(Err(SourceError::Invalid {
                                file: self.root.display().to_string(),
                                location: relative.display().to_string(),
                                reason: format!(
                                    "its folder {:?} is not among the class folders found when the source was opened; the tree changed while it was read",
                                    folder.as_os_str().to_string_lossy()
                                ),
                            }))
                        }
                    }
                }
            };
            if !file_type.is_file() {
                self.skipped.add("special file");
                continue;
            }
            let key = key_of(relative);
            return Some(Ok((key, entry.into_path(), class)));
        }
    }
}

impl Iterator for DirSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (key, path, class) = match self.next_file()? {
            Ok(found) => found,
            Err(error) => return Some(Err(error)),
        };
        let mut fields = Fields::new();
        if let (Some(class), Some(classes)) = (class, &self.classes) {
            fields.push("label", FieldValue::String(classes.names[class].clone()));
            fields.push("label_index", FieldValue::Int64(class as i64));
        }
        Some(match std::fs::read(&path) {
            Ok(value) => Ok(Record {
                key,
                value,
                origin: Origin::File(path),
                fields,
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

    /// With labels, `"class_names"`: the class folders' names in index order.
    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut metadata = serde_json::Map::new();
        if let Some(classes) = &self.classes {
            metadata.insert("class_names".into(), classes.names.clone().into());
        }
        metadata
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
