//! Tar archives and WebDataset shards: `.tar`, `.tar.gz`/`.tgz`, `.tar.zst`, or `-`
//! for stdin, several in order, with brace ranges (`shards-{000000..000123}.tar`).
//! Compression is recognised by its magic bytes, not the name (`detect.rs`). ustar, GNU (long
//! names) and PAX headers are read by `tar_reader.rs`, which bounds every
//! length a header declares ([`MAX_NAME_BYTES`], [`MAX_PAX_HEADER_BYTES`],
//! [`MAX_MEMBER_SIZE`]) before allocating for it.
//!
//! Regular files become records keyed by member path (a leading `./` dropped);
//! directories are passed over; other member types (links, devices, FIFOs, sparse
//! files) are skipped and counted. With [`TarOptions::samples`], members are
//! grouped into WebDataset samples instead, one record each, with fields
//! (`samples.rs`).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::compression::{self, Compression};
use crate::samples::{self, Assembler, SampleOptions, Step};
use crate::tar_reader::{Kind, TarReader};
use crate::{brace, Fields, Fused, LazyInput, Origin, Record, Skipped, Source, SourceError};

/// How a [`TarSource`] reads its archives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TarOptions {
    /// Group members into WebDataset samples, one record per sample (see
    /// `samples.rs`). Default: one record per member.
    pub samples: Option<SampleOptions>,
}

/// An archive to read: a name (a file, or `-` for stdin) or an open stream.
enum Input {
    Named(String),
    Reader(String, Box<dyn Read + Send>),
    Lazy(LazyInput),
}

/// Largest member accepted: one value ([`crate::MAX_VALUE_SIZE`]).
pub const MAX_MEMBER_SIZE: u64 = crate::MAX_VALUE_SIZE;
pub use crate::tar_reader::{MAX_NAME_BYTES, MAX_PAX_HEADER_BYTES};
/// Memory reserved up front for a member's value; a larger member grows its buffer
/// as its data arrives, so a header claiming 4 GiB costs nothing until the data is
/// really there.
const INITIAL_VALUE_CAPACITY: u64 = 64 << 20;
/// Records read ahead of the consumer (bounds memory to this many members).
const READ_AHEAD: usize = 8;

enum Message {
    Record(Result<Record, SourceError>),
    Skipped(&'static str),
    /// A field name derived from JSON members, seen for the first time.
    Derived(String),
}

/// Streams the regular-file members (or WebDataset samples) of one or more
/// archives, reading on a background thread so decompression overlaps the
/// consumer's work.
pub struct TarSource {
    receiver: Receiver<Message>,
    reader: Option<JoinHandle<()>>,
    skipped: Skipped,
    /// Whether `"derived_fields"` is part of the metadata.
    json_fields: bool,
    /// The derived field names received so far, in order of first appearance.
    derived: Vec<String>,
}

impl TarSource {
    /// A source over `inputs` (paths, brace patterns, or `-` for stdin), in order.
    /// Every name is expanded and every file checked to exist before anything is read.
    pub fn new(inputs: &[String]) -> Result<Fused<TarSource>, SourceError> {
        TarSource::with_options(inputs, &TarOptions::default())
    }

    /// [`TarSource::new`] with options.
    pub fn with_options(
        inputs: &[String],
        options: &TarOptions,
    ) -> Result<Fused<TarSource>, SourceError> {
        let mut archives = VecDeque::new();
        for input in inputs {
            for name in brace::expand(input).map_err(SourceError::Usage)? {
                if name != "-" {
                    std::fs::metadata(&name).map_err(|source| SourceError::Io {
                        path: PathBuf::from(&name),
                        source,
                    })?;
                }
                archives.push_back(name);
            }
        }
        if archives.iter().filter(|a| *a == "-").count() > 1 {
            return Err(SourceError::Usage("stdin (-) can be read only once".into()));
        }
        TarSource::start(
            archives.into_iter().map(Input::Named).collect(),
            options.clone(),
        )
    }

    /// A source over one archive read from `reader` (plain, gzip or zstd, found by
    /// magic bytes), called `name` in records' origins and in messages.
    pub fn from_reader(
        name: &str,
        reader: Box<dyn Read + Send>,
    ) -> Result<Fused<TarSource>, SourceError> {
        TarSource::from_reader_with_options(name, reader, &TarOptions::default())
    }

    /// [`TarSource::from_reader`] with options.
    pub fn from_reader_with_options(
        name: &str,
        reader: Box<dyn Read + Send>,
        options: &TarOptions,
    ) -> Result<Fused<TarSource>, SourceError> {
        TarSource::start(
            VecDeque::from([Input::Reader(name.to_owned(), reader)]),
            options.clone(),
        )
    }

    /// A source over archives opened one after another as they are reached (objects
    /// in a store, streamed), in order.
    pub fn from_inputs(
        inputs: Vec<LazyInput>,
        options: &TarOptions,
    ) -> Result<Fused<TarSource>, SourceError> {
        TarSource::start(
            inputs.into_iter().map(Input::Lazy).collect(),
            options.clone(),
        )
    }

    fn start(
        archives: VecDeque<Input>,
        options: TarOptions,
    ) -> Result<Fused<TarSource>, SourceError> {
        let json_fields = options.samples.as_ref().is_some_and(|s| s.json_fields);
        let (sender, receiver) = sync_channel(READ_AHEAD);
        let reader = std::thread::Builder::new()
            .name("tar-reader".into())
            .spawn(move || read_archives(archives, options, &sender))
            .map_err(|source| SourceError::Io {
                path: PathBuf::from("tar-reader thread"),
                source,
            })?;
        Ok(Fused::new(TarSource {
            receiver,
            reader: Some(reader),
            skipped: Skipped::default(),
            json_fields,
            derived: Vec::new(),
        }))
    }
}

impl Iterator for TarSource {
    type Item = Result<Record, SourceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.receiver.recv() {
                Ok(Message::Skipped(kind)) => self.skipped.add(kind),
                Ok(Message::Derived(name)) => self.derived.push(name),
                Ok(Message::Record(record)) => {
                    if record.is_err() {
                        // The reader returns right after sending its error: wait for
                        // it, so that no thread outlives the source's last record.
                        if let Some(reader) = self.reader.take() {
                            let _ = reader.join();
                        }
                    }
                    return Some(record);
                }
                // The reader is gone (the channel stays disconnected, so every
                // later call ends here too).
                Err(_) => {
                    let panicked = self.reader.take().is_some_and(|r| r.join().is_err());
                    return panicked.then(|| {
                        Err(SourceError::Usage(
                            "internal error: the tar reader thread panicked".into(),
                        ))
                    });
                }
            }
        }
    }
}

impl Source for TarSource {
    fn keyed(&self) -> bool {
        true
    }

    fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    /// With `json_fields`, `"derived_fields"`: the names of the fields derived
    /// from JSON members, in order of first appearance. It grows as samples are
    /// read, and is complete once the source is exhausted.
    fn metadata(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut metadata = serde_json::Map::new();
        if self.json_fields {
            metadata.insert("derived_fields".into(), self.derived.clone().into());
        }
        metadata
    }
}

/// Reads each archive in turn; stops at the first error or when the consumer is gone.
fn read_archives(archives: VecDeque<Input>, options: TarOptions, sender: &SyncSender<Message>) {
    let mut assembler = options.samples.map(Assembler::new);
    for input in archives {
        let (name, raw) = match input {
            Input::Named(name) => match open_file(&name) {
                Ok(raw) => (name, raw),
                Err(error) => {
                    let _ = sender.send(Message::Record(Err(error)));
                    return;
                }
            },
            Input::Reader(name, raw) => (name, raw),
            Input::Lazy(input) => match (input.open)() {
                Ok(raw) => (input.name, raw),
                Err(source) => {
                    let _ = sender.send(Message::Record(Err(SourceError::Io {
                        path: PathBuf::from(input.name),
                        source,
                    })));
                    return;
                }
            },
        };
        if let Err(error) = read_archive(&name, raw, assembler.as_mut(), sender) {
            let _ = sender.send(Message::Record(Err(error)));
            return;
        }
    }
}

/// Opens `name` (or stdin).
fn open_file(name: &str) -> Result<Box<dyn Read + Send>, SourceError> {
    if name == "-" {
        return Ok(Box::new(io::stdin()));
    }
    File::open(name)
        .map(|file| Box::new(file) as Box<dyn Read + Send>)
        .map_err(|source| SourceError::Io {
            path: PathBuf::from(name),
            source,
        })
}

/// Undoes gzip or zstd compression, found by magic bytes, with the decoders'
/// memory bounds of [`Compression::decoder`]; refuses bzip2 and xz by name.
fn decompress(name: &str, raw: Box<dyn Read + Send>) -> Result<Box<dyn Read + Send>, SourceError> {
    let io_error = |source| SourceError::Io {
        path: PathBuf::from(name),
        source,
    };
    let mut reader = BufReader::with_capacity(1 << 20, raw);
    let prefix = reader.fill_buf().map_err(io_error)?;
    if let Some(compression) = compression::unsupported_compression(prefix) {
        return Err(SourceError::Usage(format!(
            "{name}: {compression} archives are not supported; decompress it first (or pipe it to `bcd ingest -`)"
        )));
    }
    Compression::sniff(prefix).decoder(reader).map_err(io_error)
}

/// Sends what the assembler produced; false when the consumer is gone.
fn send_events(assembler: &mut Assembler, sender: &SyncSender<Message>) -> bool {
    assembler.take_events().all(|event| {
        let message = match event {
            samples::Event::Record(record) => Message::Record(Ok(record)),
            samples::Event::Skipped(kind) => Message::Skipped(kind),
            samples::Event::Derived(name) => Message::Derived(name),
        };
        sender.send(message).is_ok()
    })
}

/// Reads one archive: its members as records, or with an assembler its samples.
fn read_archive(
    name: &str,
    raw: Box<dyn Read + Send>,
    mut samples: Option<&mut Assembler>,
    sender: &SyncSender<Message>,
) -> Result<(), SourceError> {
    let corrupt = |location: String, reason: String| SourceError::Corrupt {
        file: name.to_owned(),
        location,
        reason,
    };
    let read_data = |archive: &mut TarReader<_>, size: u64, location: &String| {
        // Never trust the header's size for the allocation: grow as data arrives.
        let mut data = Vec::with_capacity(size.min(INITIAL_VALUE_CAPACITY) as usize);
        let got = archive
            .read_member_data(&mut data)
            .map_err(|e| corrupt(location.clone(), e.to_string()))?;
        if got != size {
            return Err(corrupt(
                location.clone(),
                format!("member data ends early ({got} of {size} bytes)"),
            ));
        }
        Ok(data)
    };
    let mut archive = TarReader::new(decompress(name, raw)?);
    if let Some(assembler) = samples.as_deref_mut() {
        assembler.start_archive(name);
    }
    // The member before the next header, to point at when that header is bad.
    let mut last: Option<String> = None;
    for index in 0u64.. {
        let header = archive.next_member().map_err(|e| {
            let after = last
                .as_ref()
                .map_or_else(String::new, |m| format!(", after member {m:?}"));
            corrupt(
                format!("member {index} (header at byte {}{after})", e.offset),
                e.reason,
            )
        })?;
        let Some(member) = header else { break };
        let offset = member.offset;
        let mut path = member.name;
        while path.starts_with(b"./") {
            path.drain(..2);
        }
        let name_text = String::from_utf8_lossy(&path).into_owned();
        let location = format!("member {name_text:?} (header at byte {offset})");
        last = Some(name_text.clone());
        match member.kind {
            Kind::File => {}
            Kind::Directory => continue,
            Kind::Skipped(kind) => {
                if sender.send(Message::Skipped(kind)).is_err() {
                    return Ok(());
                }
                continue;
            }
        }
        if path.is_empty() || path == b"." {
            return Err(corrupt(
                format!("member {index} (header at byte {offset})"),
                "a regular file with an empty name".into(),
            ));
        }
        let size = member.size;
        if let Some(assembler) = samples.as_deref_mut() {
            let step = assembler.member(&path, &name_text, offset, size);
            // The sample finished by this member goes first, even before its error.
            if !send_events(assembler, sender) {
                return Ok(()); // the consumer stopped
            }
            if step? == Step::Read {
                // The assembler bounded the size (the sample's bytes together).
                assembler.data(read_data(&mut archive, size, &location)?);
            }
            if !send_events(assembler, sender) {
                return Ok(()); // the consumer stopped
            }
            continue;
        }
        if size > MAX_MEMBER_SIZE {
            return Err(corrupt(
                location,
                format!("{size} bytes is larger than a value can be (4 GiB)"),
            ));
        }
        let value = read_data(&mut archive, size, &location)?;
        let record = Record {
            key: path,
            value,
            origin: Origin::Member {
                archive: name.to_owned(),
                member: name_text,
                offset,
            },
            fields: Fields::new(),
        };
        if sender.send(Message::Record(Ok(record))).is_err() {
            return Ok(()); // the consumer stopped
        }
    }
    // Read on past the end-of-archive blocks to the end of the stream, so that a
    // gzip or zstd decoder reaches its trailer and checks the data's checksum: a
    // corrupt .tar.gz must fail, not be ingested (nor its last sample).
    let after = last.map_or_else(String::new, |m| format!(" (after member {m:?})"));
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(|e| {
        corrupt(
            format!("after the end of the archive{after}"),
            e.to_string(),
        )
    })?;
    if let Some(assembler) = samples {
        let ended = assembler.end_archive();
        send_events(assembler, sender);
        ended?;
    }
    Ok(())
}
