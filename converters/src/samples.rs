//! WebDataset samples: the members of a tar archive grouped into one record per
//! sample, as the `webdataset` package (1.0.2) groups them.
//!
//! A member's name splits into a sample key and an extension with webdataset's
//! `base_plus_ext` regular expression, `^((?:.*/|)[^.]+)[.]([^/]*)$`:
//! the extension starts at the first `.` of the file name (`a/b.seg.png` is key
//! `a/b`, extension `seg.png`; `x.d/y.jpg` is key `x.d/y`). Its corners, kept
//! exactly ([`split_sample_name`]): a name whose file name has no `.` (`a/b`) is
//! no sample member (skipped and counted, as webdataset drops it); a hidden file
//! name (`a/.b.c`) does not match at the file name, so the expression's other
//! branch makes the key `a/` and the extension `b.c`; a hidden name at the top
//! (`.b`) matches nothing. Extensions are lower-cased (webdataset's `lcase`), keys
//! are not. Members webdataset treats as metadata (a name starting `__X__/` or
//! equal to `__X__`, or a top-level name that starts and ends with `__`) are
//! skipped and counted too. Unlike webdataset, a leading `./` is dropped first,
//! as for every tar member this crate reads.
//!
//! Consecutive members with the same key form a sample. Its value is the member
//! whose extension comes first in [`SampleOptions::value_exts`] (compared whole:
//! `seg.png` is not `png`); every other member becomes a field named by its
//! extension, typed by the extension's last dot-separated part as webdataset's
//! decoders type it: `cls cls2 class count index inx id` are integers
//! ([`FieldValue::Int64`]; the text, trimmed of ASCII whitespace, must be a
//! decimal integer with an optional sign), `txt text transcript` text
//! ([`FieldValue::String`]; UTF-8 required), `json jsn` JSON kept as its text
//! (valid UTF-8 JSON required; with [`SampleOptions::json_fields`] also each
//! top-level scalar of an object as a typed field `<extension>.<key>`), anything
//! else bytes ([`FieldValue::Binary`]). The value's own extension is the field
//! [`VALUE_EXT_FIELD`], unless it is [`UNNAMED_VALUE_EXT`].
//!
//! A sample is refused (an error naming the archive, the sample and the member,
//! or with [`SampleOptions::skip_bad_samples`] skipped and counted as "bad
//! sample") when it has two members with the same extension, no value member, a
//! field that does not decode, more than [`MAX_SAMPLE_MEMBERS`] members or more
//! than [`MAX_SAMPLE_BYTES`] bytes, or when its key comes back after another
//! sample in the same archive, or continues the previous archive's last sample
//! (a sample may not span archives). A sample that comes back is refused on its
//! second appearance: the first was yielded already.
//!
//! Memory holds one sample: a member's declared size is checked against the
//! sample's bound before its data is read, and members of a refused sample are
//! passed over unread. The keys of the samples of the archive being read are
//! kept, to recognise one that comes back.

use std::collections::HashSet;

use crate::{FieldValue, Fields, Origin, Record, SourceError};

mod record;
use record::build_record;

/// The value extensions tried in order when none are given: the common image
/// and audio ones, then [`UNNAMED_VALUE_EXT`], so that a sample export of
/// records whose keys name no extension ingests back as it is.
pub const DEFAULT_VALUE_EXTS: [&str; 9] = [
    "jpg",
    "jpeg",
    "png",
    "webp",
    "flac",
    "wav",
    "mp3",
    "mp4",
    UNNAMED_VALUE_EXT,
];
/// The extension a sample export gives a value whose record has no
/// [`VALUE_EXT_FIELD`] and whose key names no extension. A sample whose value is
/// such a member gets no [`VALUE_EXT_FIELD`] either: the export names it `bin`
/// without one, so the record comes back as it went out.
pub const UNNAMED_VALUE_EXT: &str = "bin";
/// The field holding the extension of the member stored as the value (none for
/// [`UNNAMED_VALUE_EXT`]).
pub const VALUE_EXT_FIELD: &str = "bcd.value_ext";
/// Most members one sample may have; more is a refused sample.
pub const MAX_SAMPLE_MEMBERS: usize = 1024;
/// Most bytes the members of one sample may hold together, the limit of one
/// value ([`crate::MAX_VALUE_SIZE`]): the sample is held in memory.
pub(crate) const MAX_SAMPLE_BYTES: u64 = crate::MAX_VALUE_SIZE;

/// Extensions webdataset decodes as integers.
const INTEGER_EXTS: [&str; 7] = ["cls", "cls2", "class", "count", "index", "inx", "id"];
/// Extensions webdataset decodes as text.
const TEXT_EXTS: [&str; 3] = ["txt", "text", "transcript"];
/// Extensions webdataset decodes as JSON.
const JSON_EXTS: [&str; 2] = ["json", "jsn"];

/// How a tar source groups members into samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleOptions {
    /// Extensions of the member stored as the value, in order of preference,
    /// lower-case, without a leading dot. Default: [`DEFAULT_VALUE_EXTS`].
    pub value_exts: Vec<String>,
    /// Also store each top-level scalar of a JSON member's object as a typed field
    /// `<extension>.<key>` (bool, integer, other number as a float, string; null
    /// as null; arrays and objects are left out). The names are listed in the
    /// source's metadata as `"derived_fields"`.
    pub json_fields: bool,
    /// Skip (and count as "bad sample") samples that would be an error.
    pub skip_bad_samples: bool,
}

impl Default for SampleOptions {
    fn default() -> SampleOptions {
        SampleOptions {
            value_exts: DEFAULT_VALUE_EXTS.map(str::to_owned).to_vec(),
            json_fields: false,
            skip_bad_samples: false,
        }
    }
}

/// Splits a member name into sample key and extension as webdataset's
/// `base_plus_ext` does: the extension starts at the first `.` of the file name;
/// `None` when the expression does not match (no `.` in the file name, or only
/// a leading one at the top). See the module documentation for hidden files.
///
/// ```
/// use bcd_converters::samples::split_sample_name;
///
/// assert_eq!(split_sample_name(b"a/b.seg.png"), Some((&b"a/b"[..], &b"seg.png"[..])));
/// assert_eq!(split_sample_name(b"x.d/y.jpg"), Some((&b"x.d/y"[..], &b"jpg"[..])));
/// assert_eq!(split_sample_name(b"a/.b.c"), Some((&b"a/"[..], &b"b.c"[..])));
/// assert_eq!(split_sample_name(b"a/b"), None);
/// assert_eq!(split_sample_name(b".b"), None);
/// ```
pub fn split_sample_name(name: &[u8]) -> Option<(&[u8], &[u8])> {
    // The expression, `^((?:.*/|)[^.]+)[.]([^/]*)$`, read as Python's `re`
    // matches it: the group starts after some `/` (`.*/` tries the last one
    // first, and `.` does not match a newline, so only a `/` with no newline
    // before it) or, failing all of those, at 0. From there `[^.]+` runs to the
    // first `.`, at least one byte on, and the rest (`[^/]*$`) must hold no `/`.
    // Python's `$` also matches before a final newline, which `[^/]*` takes in
    // anyway. Working on bytes is the same as on Python's decoded text: `.`,
    // `/` and `\n` are ASCII and never part of a multi-byte sequence.
    let first_newline = name.iter().position(|&b| b == b'\n').unwrap_or(name.len());
    let slashes = name
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'/' && i < first_newline)
        .map(|(i, _)| i + 1);
    let starts: Vec<usize> = slashes.collect();
    for start in starts.into_iter().rev().chain([0]) {
        let Some(dot) = name[start..].iter().position(|&b| b == b'.') else {
            continue;
        };
        if dot == 0 {
            continue;
        }
        let dot = start + dot;
        let extension = &name[dot + 1..];
        if !extension.contains(&b'/') {
            return Some((&name[..dot], extension));
        }
    }
    None
}

/// Whether webdataset skips `name` as metadata: a top-level name that starts
/// and ends with `__`, or one matching `__[^/]*__($|/)` at its start.
pub(crate) fn is_webdataset_metadata(name: &[u8]) -> bool {
    if !name.contains(&b'/') && name.starts_with(b"__") && name.ends_with(b"__") {
        return true;
    }
    let Some(rest) = name.strip_prefix(b"__") else {
        return false;
    };
    let segment = &rest[..rest.iter().position(|&b| b == b'/').unwrap_or(rest.len())];
    // `[^/]*` is greedy: the last `__` of the segment, followed by its end.
    segment.len() >= 2 && segment.ends_with(b"__")
}

/// What the tar reader does with the member it announced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Read its data and pass it to [`Assembler::data`].
    Read,
    /// Pass over its data unread.
    Skip,
}

/// What the assembler produced, in order.
pub(crate) enum Event {
    Record(Record),
    Skipped(&'static str),
    /// A field name of [`SampleOptions::json_fields`] seen for the first time.
    Derived(String),
}

/// One member of the sample being assembled.
struct Part {
    extension: String,
    /// The member name as shown in messages and origins.
    name: String,
    offset: u64,
    data: Vec<u8>,
}

struct Sample {
    key: Vec<u8>,
    parts: Vec<Part>,
    bytes: u64,
    /// Refused under `skip_bad_samples`: its later members are passed over.
    bad: bool,
}

/// Groups the regular-file members of archives read one after another into
/// sample records.
pub(crate) struct Assembler {
    options: SampleOptions,
    archive: String,
    current: Option<Sample>,
    /// Keys of the finished samples of the current archive.
    seen: HashSet<Vec<u8>>,
    /// The last sample key of the previous archive, with that archive's name.
    previous_last: Option<(String, Vec<u8>)>,
    /// Whether a sample of the current archive was started.
    started_any: bool,
    derived: HashSet<String>,
    events: Vec<Event>,
}

/// Text of a key or name for messages.
fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Assembler {
    pub fn new(options: SampleOptions) -> Assembler {
        Assembler {
            options,
            archive: String::new(),
            current: None,
            seen: HashSet::new(),
            previous_last: None,
            started_any: false,
            derived: HashSet::new(),
            events: Vec::new(),
        }
    }

    /// What was produced since the last call.
    pub(crate) fn take_events(&mut self) -> std::vec::Drain<'_, Event> {
        self.events.drain(..)
    }

    /// Starts reading the archive `name`.
    pub(crate) fn start_archive(&mut self, name: &str) {
        self.archive = name.to_owned();
        self.seen.clear();
        self.started_any = false;
    }

    /// Ends the archive: its last sample is finished.
    pub(crate) fn end_archive(&mut self) -> Result<(), SourceError> {
        let last = self.current.as_ref().map(|s| s.key.clone());
        self.finish_current()?;
        if let Some(key) = last {
            self.previous_last = Some((self.archive.clone(), key));
        }
        self.seen.clear();
        Ok(())
    }

    /// A regular-file member named `name` (a leading `./` dropped; `shown` is its
    /// text for messages) whose header is at `offset` and declares `size` bytes.
    pub fn member(
        &mut self,
        name: &[u8],
        shown: &str,
        offset: u64,
        size: u64,
    ) -> Result<Step, SourceError> {
        if is_webdataset_metadata(name) {
            self.events
                .push(Event::Skipped("webdataset metadata member"));
            return Ok(Step::Skip);
        }
        let Some((key, extension)) = split_sample_name(name) else {
            self.events
                .push(Event::Skipped("member without an extension"));
            return Ok(Step::Skip);
        };
        if self.current.as_ref().is_none_or(|s| s.key != key) {
            self.finish_current()?;
            self.current = Some(Sample {
                key: key.to_vec(),
                parts: Vec::new(),
                bytes: 0,
                bad: false,
            });
            let first_of_archive = !std::mem::replace(&mut self.started_any, true);
            if self.seen.contains(key) {
                return self.refuse(
                    shown,
                    offset,
                    "its members are not contiguous: the sample came before, then other samples, then these members".into(),
                );
            }
            if first_of_archive {
                if let Some((archive, last)) = &self.previous_last {
                    if last == key {
                        let reason = format!("the sample continues the last sample of {archive}; a sample may not span archives");
                        return self.refuse(shown, offset, reason);
                    }
                }
            }
        }
        let sample = self.current.as_mut().expect("a sample was started");
        if sample.bad {
            return Ok(Step::Skip);
        }
        let Ok(extension) = std::str::from_utf8(extension) else {
            return self.refuse(shown, offset, "its extension is not valid UTF-8".into());
        };
        // webdataset lower-cases with Python's str.lower(), as this does.
        let extension = extension.to_lowercase();
        if let Some(other) = sample.parts.iter().find(|p| p.extension == extension) {
            let reason = format!(
                "a second member with the extension {extension:?} (the first is {:?})",
                other.name
            );
            return self.refuse(shown, offset, reason);
        }
        if sample.parts.len() >= MAX_SAMPLE_MEMBERS {
            let reason = format!("more than {MAX_SAMPLE_MEMBERS} members in one sample");
            return self.refuse(shown, offset, reason);
        }
        if size > MAX_SAMPLE_BYTES - sample.bytes {
            let reason = format!(
                "the member's {size} bytes bring the sample over the limit of {MAX_SAMPLE_BYTES} bytes"
            );
            return self.refuse(shown, offset, reason);
        }
        sample.bytes += size;
        sample.parts.push(Part {
            extension,
            name: shown.to_owned(),
            offset,
            data: Vec::new(),
        });
        Ok(Step::Read)
    }

    /// The data of the member [`Assembler::member`] asked to read.
    pub fn data(&mut self, data: Vec<u8>) {
        let sample = self.current.as_mut().expect("a member was announced");
        sample
            .parts
            .last_mut()
            .expect("a member was announced")
            .data = data;
    }

    /// The error for the current sample, at the member `shown` at `offset`, or
    /// with `skip_bad_samples` the sample marked bad.
    fn refuse(&mut self, shown: &str, offset: u64, reason: String) -> Result<Step, SourceError> {
        let sample = self.current.as_mut().expect("a sample was started");
        if self.options.skip_bad_samples {
            sample.bad = true;
            sample.parts = Vec::new();
            return Ok(Step::Skip);
        }
        Err(SourceError::Invalid {
            file: self.archive.clone(),
            location: format!(
                "sample {:?} (member {shown:?}, header at byte {offset})",
                show(&sample.key)
            ),
            reason,
        })
    }

    /// Finishes the current sample, if any: its record, or its refusal.
    fn finish_current(&mut self) -> Result<(), SourceError> {
        let Some(sample) = self.current.take() else {
            return Ok(());
        };
        self.seen.insert(sample.key.clone());
        if sample.bad {
            self.events.push(Event::Skipped("bad sample"));
            return Ok(());
        }
        match build_record(&self.archive, sample, &self.options) {
            Ok((record, derived)) => {
                for name in derived {
                    if self.derived.insert(name.clone()) {
                        self.events.push(Event::Derived(name));
                    }
                }
                self.events.push(Event::Record(record));
                Ok(())
            }
            Err(_) if self.options.skip_bad_samples => {
                self.events.push(Event::Skipped("bad sample"));
                Ok(())
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::record::{parse_integer, type_part};
    use super::*;

    #[test]
    fn names_split_as_webdataset_base_plus_ext() {
        for (name, expected) in [
            ("a/b.seg.png", Some(("a/b", "seg.png"))),
            ("b.jpg", Some(("b", "jpg"))),
            ("x.d/y.z/w.v", Some(("x.d/y.z/w", "v"))),
            ("a/.b.c", Some(("a/", "b.c"))),
            ("a/b/.c", Some(("a/b/", "c"))),
            ("a.b/.c", None),
            ("a/b", None),
            (".b", None),
            ("a.", Some(("a", ""))),
            ("dir.x/sub/file", None),
            ("a\nb/c.d", Some(("a\nb/c", "d"))),
        ] {
            let got = split_sample_name(name.as_bytes()).map(|(k, e)| (show(k), show(e)));
            let expected = expected.map(|(k, e)| (k.to_owned(), e.to_owned()));
            assert_eq!(got, expected, "{name:?}");
        }
    }

    #[test]
    fn metadata_names_as_webdataset_skips_them() {
        for (name, skipped) in [
            ("__meta__", true),
            ("__", true),
            ("___", true),
            ("__x__/a.jpg", true),
            ("__x__y/a.jpg", false),
            ("a/__x__", false),
            ("__x_", false),
        ] {
            assert_eq!(is_webdataset_metadata(name.as_bytes()), skipped, "{name}");
        }
    }

    #[test]
    fn integers_parse_trimmed_with_a_sign() {
        assert_eq!(parse_integer(b" 12\n"), Ok(12));
        assert_eq!(parse_integer(b"-7"), Ok(-7));
        assert_eq!(parse_integer(b"+7"), Ok(7));
        for bad in [
            &b""[..],
            b"1.5",
            b"0x10",
            b"--1",
            b"1 2",
            b"99999999999999999999",
        ] {
            assert!(parse_integer(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn types_follow_the_last_part_of_the_extension() {
        assert_eq!(type_part("seg.png"), "png");
        assert_eq!(type_part("cls"), "cls");
        assert_eq!(type_part("a.b.json"), "json");
    }
}
