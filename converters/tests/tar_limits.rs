//! Tar archives that claim more than they hold, or more than a name may be: every
//! length a header declares is bounded before anything is allocated for it, and
//! breaking a bound is an error naming the archive and the member (issue 14).
//!
//! The archives are built here, header by header; the compressed ones as zstd
//! frames of RLE blocks, written by hand, so that a 1.5 GB long name costs 46 KB
//! and no time to make.

use std::path::Path;

use bcd_converters::tar_source::{TarSource, MAX_NAME_BYTES, MAX_PAX_HEADER_BYTES};
use bcd_converters::{Record, Source, SourceError};

/// A 512-byte header in GNU layout (`ustar  \0`), checksummed.
fn header(name: &[u8], type_flag: u8, size: u64) -> [u8; 512] {
    let mut size_field = [0u8; 12];
    size_field[..11].copy_from_slice(format!("{size:011o}").as_bytes());
    header_with_size(name, type_flag, size_field)
}

fn header_with_size(name: &[u8], type_flag: u8, size: [u8; 12]) -> [u8; 512] {
    let mut block = [0u8; 512];
    block[..name.len()].copy_from_slice(name);
    block[100..108].copy_from_slice(b"0000644\0");
    block[108..116].copy_from_slice(b"0000000\0");
    block[116..124].copy_from_slice(b"0000000\0");
    block[124..136].copy_from_slice(&size);
    block[136..148].copy_from_slice(b"00000000000\0");
    block[156] = type_flag;
    block[257..265].copy_from_slice(b"ustar  \0");
    checksum(&mut block);
    block
}

fn checksum(block: &mut [u8; 512]) {
    block[148..156].copy_from_slice(b"        ");
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// `data` padded with zeros to whole blocks.
fn padded(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    out.resize(data.len().next_multiple_of(512), 0);
    out
}

/// A whole member: header, data, padding.
fn member(name: &[u8], type_flag: u8, data: &[u8]) -> Vec<u8> {
    [
        &header(name, type_flag, data.len() as u64)[..],
        &padded(data),
    ]
    .concat()
}

const END: [u8; 1024] = [0; 1024];

/// What a zstd frame holds: bytes stored as they are, or one byte repeated.
enum Part {
    Raw(Vec<u8>),
    Repeat(u8, u64),
}

/// A zstd frame (no checksum, no content size) of raw and RLE blocks, with a
/// 128 KiB window unless `window_log` says otherwise.
fn zstd_frame(parts: &[Part], window_log: u8) -> Vec<u8> {
    const MAX_BLOCK: u64 = 128 << 10;
    let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, (window_log - 10) << 3];
    let mut blocks: Vec<(u32, u32, Vec<u8>)> = Vec::new(); // (type, size, content)
    for part in parts {
        match part {
            Part::Raw(bytes) => {
                for chunk in bytes.chunks(MAX_BLOCK as usize) {
                    blocks.push((0, chunk.len() as u32, chunk.to_vec()));
                }
            }
            Part::Repeat(byte, mut count) => {
                while count > 0 {
                    let n = count.min(MAX_BLOCK);
                    blocks.push((1, n as u32, vec![*byte]));
                    count -= n;
                }
            }
        }
    }
    let last = blocks.len() - 1;
    for (i, (kind, size, content)) in blocks.into_iter().enumerate() {
        let block_header = u32::from(i == last) | (kind << 1) | (size << 3);
        out.extend_from_slice(&block_header.to_le_bytes()[..3]);
        out.extend_from_slice(&content);
    }
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Reads every record; returns them, and the error that ended the source.
fn read_all(archive: &str) -> (Vec<Record>, Option<SourceError>) {
    let mut source = TarSource::new(&[archive.to_owned()]).unwrap();
    let mut records = Vec::new();
    for item in source.by_ref() {
        match item {
            Ok(record) => records.push(record),
            Err(error) => return (records, Some(error)),
        }
    }
    (records, None)
}

/// The error reading `archive` ends with; asserts it is a corrupt-archive error
/// naming the archive and containing each of `parts`.
fn error_of(archive: &str, parts: &[&str]) -> String {
    let (_, error) = read_all(archive);
    let error = error.unwrap_or_else(|| panic!("{archive}: read without an error"));
    assert!(
        matches!(error, SourceError::Corrupt { .. }),
        "{archive}: {error:?}"
    );
    let message = error.to_string();
    assert!(message.starts_with(archive), "{message}");
    for part in parts {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    message
}

#[test]
fn a_gnu_long_name_of_1_5_gb_in_a_46_kb_zstd_archive_is_refused_from_its_header() {
    // The recipe of issue 14.2: an `L` header of 1.5 GB of `a`, then one regular
    // member, compressed. Before the bound, reading it took 8 GB of memory.
    let dir = tempfile::tempdir().unwrap();
    let claimed = 1_500_000_000u64;
    let frame = zstd_frame(
        &[
            Part::Raw(header(b"././@LongLink", b'L', claimed).to_vec()),
            Part::Repeat(b'a', claimed),
            Part::Repeat(0, claimed.next_multiple_of(512) - claimed),
            Part::Raw([member(b"x", b'0', b"value"), END.to_vec()].concat()),
        ],
        17,
    );
    assert!(frame.len() < 60_000, "{} bytes", frame.len());
    let archive = write(dir.path(), "ln.tar.zst", &frame);
    error_of(
        &archive,
        &[
            "member 0 (header at byte 0)",
            &format!("GNU long name of {claimed} bytes"),
            &format!("limit of {MAX_NAME_BYTES} bytes"),
        ],
    );
}

#[test]
fn names_up_to_the_limit_are_read_and_longer_claims_of_every_kind_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A long name just under the limit (with its NUL) is a key like any other.
    let long = vec![b'n'; MAX_NAME_BYTES as usize - 1];
    let fits = [
        member(b"././@LongLink", b'L', &[&long[..], b"\0"].concat()),
        member(b"ignored", b'0', b"v"),
        END.to_vec(),
    ]
    .concat();
    let archive = write(dir.path(), "fits.tar", &fits);
    let (records, error) = read_all(&archive);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key, long);

    // One byte more is refused, and so are long link names, whole PAX headers and
    // single PAX path records, each from what the header claims (the data is not
    // there: the archive is a few blocks).
    let over = MAX_NAME_BYTES + 1;
    let first = member(b"first.txt", b'0', b"1");
    for (name, claim, wanted) in [
        (
            "name.tar",
            header(b"././@LongLink", b'L', over),
            "GNU long name",
        ),
        (
            "link.tar",
            header(b"././@LongLink", b'K', over),
            "GNU long link name",
        ),
        (
            "pax.tar",
            header(b"PaxHeader/x", b'x', 1 << 31),
            "PAX extended header of 2147483648 bytes",
        ),
    ] {
        let bytes = [&first[..], &claim[..], &[b'a'; 1024][..], &END[..]].concat();
        let archive = write(dir.path(), name, &bytes);
        let message = error_of(
            &archive,
            &["member 1 (header at byte 1024", "\"first.txt\"", wanted],
        );
        assert!(message.contains("limit of"), "{message}");
    }
    let record = {
        let value = vec![b'p'; over as usize];
        // "LENGTH path=VALUE\n", where LENGTH counts itself.
        let rest = " path=".len() + value.len() + 1;
        let mut length = rest + 1;
        while length != rest + length.to_string().len() {
            length = rest + length.to_string().len();
        }
        [
            format!("{length} path=").into_bytes(),
            value,
            b"\n".to_vec(),
        ]
        .concat()
    };
    assert!((record.len() as u64) < MAX_PAX_HEADER_BYTES);
    let bytes = [
        member(b"PaxHeader/x", b'x', &record),
        member(b"x", b'0', b"v"),
        END.to_vec(),
    ]
    .concat();
    let archive = write(dir.path(), "pax-path.tar", &bytes);
    error_of(
        &archive,
        &["member 0 (header at byte 0)", "a path of 65537 bytes"],
    );
}

#[test]
fn sizes_that_claim_more_than_the_archive_holds_are_errors_naming_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let first = member(b"first.txt", b'0', b"1");
    // Octal, just under the 4 GiB value limit, with 1 KiB of data.
    let octal = [
        &first[..],
        &header(b"big", b'0', u32::MAX as u64),
        &[7; 1024],
    ]
    .concat();
    let archive = write(dir.path(), "octal.tar", &octal);
    error_of(
        &archive,
        &["member \"big\" (header at byte 1024)", "ends early"],
    );

    // Base-256 sizes: over the value limit, and over 64 bits.
    let mut field = [0u8; 12];
    field[0] = 0x80;
    field[4..].copy_from_slice(&(1u64 << 40).to_be_bytes());
    let huge = [&first[..], &header_with_size(b"huge", b'0', field), &END].concat();
    let archive = write(dir.path(), "base256.tar", &huge);
    error_of(&archive, &["member \"huge\"", "larger than a value can be"]);
    field[3] = 1;
    let overflow = [&first[..], &header_with_size(b"over", b'0', field), &END].concat();
    let archive = write(dir.path(), "overflow.tar", &overflow);
    error_of(&archive, &["member 1 (header at byte 1024", "64 bits"]);
    field = [0xff; 12];
    let negative = [&first[..], &header_with_size(b"neg", b'0', field), &END].concat();
    let archive = write(dir.path(), "negative.tar", &negative);
    error_of(&archive, &["member 1 (header at byte 1024", "negative"]);

    // A PAX size overrides the header's, and is held to the same rules.
    let pax = member(b"PaxHeader/big", b'x', b"19 size=4000000000\n");
    let bytes = [&pax[..], &header(b"big", b'0', 3), &padded(b"abc"), &END].concat();
    let archive = write(dir.path(), "pax-size.tar", &bytes);
    error_of(
        &archive,
        &["member \"big\" (header at byte 1024)", "ends early"],
    );

    // A skipped member (a symlink) whose size runs past the end.
    let bytes = [&first[..], &header(b"link", b'2', 1 << 30), &[0; 512]].concat();
    let archive = write(dir.path(), "skip.tar", &bytes);
    error_of(&archive, &["member 2 (header at byte", "\"link\""]);

    // An extension header that describes a member that never comes.
    let bytes = [&first[..], &member(b"././@LongLink", b'L', b"name\0"), &END].concat();
    let archive = write(dir.path(), "dangling.tar", &bytes);
    error_of(&archive, &["member 1 (header at byte 2048", "never comes"]);
}

#[test]
fn gnu_sparse_members_with_extension_headers_are_skipped_whole() {
    // An old-GNU sparse member whose map continues in one extension block: the
    // block and the data are passed over and the next member is read intact.
    let dir = tempfile::tempdir().unwrap();
    let mut sparse = header(b"sparse.img", b'S', 512);
    sparse[482] = 1; // isextended
    checksum(&mut sparse);
    let mut extension = [0u8; 512];
    extension[..12].copy_from_slice(b"00000000000\0");
    extension[12..24].copy_from_slice(b"00000001000\0");
    let bytes = [
        &sparse[..],
        &extension,
        &[9; 512],
        &member(b"after.txt", b'0', b"after"),
        &END,
    ]
    .concat();
    let archive = write(dir.path(), "sparse.tar", &bytes);
    let mut source = TarSource::new(&[archive]).unwrap();
    let records: Vec<Record> = source.by_ref().map(Result::unwrap).collect();
    assert_eq!(records.len(), 1);
    assert_eq!(
        (&records[0].key[..], &records[0].value[..]),
        (&b"after.txt"[..], &b"after"[..])
    );
    assert_eq!(source.skipped().0.get("sparse file"), Some(&1));

    // A PAX sparse member (GNU.sparse.* records) is skipped too.
    let pax = member(b"PaxHeader/s", b'x', b"22 GNU.sparse.major=1\n");
    let bytes = [&pax[..], &member(b"s", b'0', b"map and data"), &END].concat();
    let archive = write(dir.path(), "pax-sparse.tar", &bytes);
    let mut source = TarSource::new(&[archive]).unwrap();
    assert_eq!(source.by_ref().count(), 0);
    assert_eq!(source.skipped().0.get("sparse file"), Some(&1));
}

#[test]
fn a_zstd_frame_asking_for_a_window_over_128_mib_is_refused_not_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let tar = [member(b"a", b'0', b"value"), END.to_vec()].concat();
    // The same archive with a 128 MiB window reads; with 256 MiB it is an error.
    let fine = write(
        dir.path(),
        "w27.tar.zst",
        &zstd_frame(&[Part::Raw(tar.clone())], 27),
    );
    let (records, error) = read_all(&fine);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(records.len(), 1);
    let wide = write(
        dir.path(),
        "w28.tar.zst",
        &zstd_frame(&[Part::Raw(tar)], 28),
    );
    let (records, error) = read_all(&wide);
    assert!(records.is_empty());
    let message = error.expect("an error").to_string();
    assert!(message.starts_with(&wide), "{message}");
    assert!(message.contains("memory"), "{message}");
}

#[test]
fn pax_global_headers_are_passed_over_unread_and_not_counted() {
    // `git archive` starts with a global header holding the commit id; a huge one
    // is skipped without being held.
    let dir = tempfile::tempdir().unwrap();
    let global = member(
        b"pax_global_header",
        b'g',
        b"52 comment=0123456789012345678901234567890123456789\n",
    );
    let huge = [
        &header(b"pax_global_header", b'g', 1 << 20)[..],
        &[b'c'; 1 << 20],
    ]
    .concat();
    let bytes = [
        &global[..],
        &member(b"a.txt", b'0', b"a"),
        &huge,
        &member(b"b.txt", b'0', b"b"),
        &END,
    ]
    .concat();
    let archive = write(dir.path(), "git.tar", &bytes);
    let mut source = TarSource::new(&[archive]).unwrap();
    let keys: Vec<Vec<u8>> = source.by_ref().map(|r| r.unwrap().key).collect();
    assert_eq!(keys, [b"a.txt".to_vec(), b"b.txt".to_vec()]);
    assert_eq!(source.skipped().total(), 0);
}

#[test]
fn bzip2_and_xz_archives_are_refused_by_name_of_their_compression() {
    let dir = tempfile::tempdir().unwrap();
    for (file, bytes, compression) in [
        ("a.tar.bz2", &b"BZh91AY&SY"[..], "bzip2"),
        ("a.tar.xz", &b"\xfd7zXZ\x00\x00\x04"[..], "xz"),
    ] {
        let archive = write(dir.path(), file, bytes);
        let error = TarSource::new(std::slice::from_ref(&archive))
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&archive)
                && error.contains(&format!("{compression} archives are not supported")),
            "{error}"
        );
    }
}

/// Regular files and their bytes as Python's `tarfile` reads `archive`.
fn tarfile_regular_files(archive: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let code = r#"
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as tar:
    print(json.dumps([[m.name.encode("utf-8", "surrogateescape").hex(), tar.extractfile(m).read().hex()]
                      for m in tar.getmembers() if m.isreg()]))
"#;
    let out = std::process::Command::new(bcd_test_support::venv_python())
        .args(["-c", code, archive])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pairs: Vec<(String, String)> = serde_json::from_slice(&out.stdout).unwrap();
    let unhex = |h: &str| {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    pairs.iter().map(|(n, d)| (unhex(n), unhex(d))).collect()
}

#[test]
fn old_v7_directories_and_directories_with_a_size_are_directories_as_tarfile_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    // An old (v7) header, no magic: a "regular file" whose name ends in `/` is a
    // directory (CPython's testtar.tar, misc/dirtype-old-v7/).
    let mut v7_dir = header(b"misc/dirtype-old-v7/", 0, 0);
    v7_dir[257..265].fill(0);
    checksum(&mut v7_dir);
    // A directory whose size field says 255 but which holds no data: the next
    // header follows at once (testtar.tar's ustar/dirtype-with-size).
    let sized_dir = header(b"ustar/dirtype-with-size/", b'5', 255);
    let bytes = [
        &member(b"misc/a.txt", b'0', b"first")[..],
        &v7_dir,
        &sized_dir,
        &member(b"ustar/regtype", b'0', b"right after the directory"),
        &member(b"misc/b.txt", b'0', b"last"),
        &END,
    ]
    .concat();
    let archive = write(dir.path(), "dirs.tar", &bytes);
    let (records, error) = read_all(&archive);
    assert!(error.is_none(), "{error:?}");
    let read: Vec<(Vec<u8>, Vec<u8>)> = records.into_iter().map(|r| (r.key, r.value)).collect();
    assert_eq!(read, tarfile_regular_files(&archive));
    assert_eq!(read.len(), 3, "{read:?}");
}
