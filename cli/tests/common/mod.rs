//! The harness shared by the `bcd` end-to-end tests: running the binary (with a
//! hang guard), success and clean-failure checks, Python snippets and tar
//! members. What every test binary of the workspace shares (random data, hex,
//! snapshots, reading a dataset back, the Python virtualenv with the reference)
//! is in `bcd-test-support`.

// Each test binary compiles its own copy and uses a different subset.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use bcd_test_support::venv_python;

/// A run of bcd that takes longer than this is a hang: the test kills it and fails.
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// (key, value) pairs; keys are empty for keyless datasets.
pub type Records = Vec<(Vec<u8>, Vec<u8>)>;

/// A finished run of bcd.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

pub fn s(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

/// Arguments as they appear in messages.
pub fn show<S: AsRef<OsStr>>(args: &[S]) -> String {
    let args: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    format!("{args:?}")
}

/// Starts bcd with piped stdout/stderr, stdin piped if `stdin` (else empty), in
/// `dir` if given.
pub fn spawn<S: AsRef<OsStr>>(args: &[S], stdin: bool, dir: Option<&Path>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bcd"));
    command
        .args(args)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    command.spawn().expect("run bcd")
}

/// Runs bcd with `args` (stdin empty) and the environment variables `env` (a
/// local S3 server's, say), to the end.
pub fn run_with_env<S: AsRef<OsStr>>(args: &[S], env: &[(&str, String)]) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bcd"));
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    finish(command.spawn().expect("run bcd"), &show(args))
}

/// Waits for `child`, at most `timeout`.
pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait for bcd") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// Collects a spawned bcd's output; kills it and fails the test if it hangs.
pub fn finish(mut child: Child, what: &str) -> Run {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout.read_to_end(&mut bytes).map(|_| bytes)
    });
    let err = thread::spawn(move || {
        let mut bytes = Vec::new();
        stderr.read_to_end(&mut bytes).map(|_| bytes)
    });
    let Some(status) = wait_timeout(&mut child, TIMEOUT) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("bcd {what}: still running after {TIMEOUT:?}; it hangs");
    };
    Run {
        status,
        stdout: out.join().unwrap().unwrap(),
        stderr: String::from_utf8_lossy(&err.join().unwrap().unwrap()).into_owned(),
    }
}

/// Asserts a clean failure: exit status 1 and a "bcd: " message, never a panic.
pub fn assert_clean_failure(run: &Run, what: &str) {
    assert_eq!(
        run.status.code(),
        Some(1),
        "bcd {what}: expected exit status 1; stderr: {}",
        run.stderr
    );
    assert!(
        run.stderr.starts_with("bcd: ")
            && !run.stderr.contains("panicked")
            && !run.stderr.contains("internal error"),
        "bcd {what}: not a clean error message: {}",
        run.stderr
    );
}

/// Runs bcd with `args` (stdin empty); asserts success; returns stdout.
pub fn ok<S: AsRef<OsStr>>(args: &[S]) -> Vec<u8> {
    let run = finish(spawn(args, false, None), &show(args));
    assert!(
        run.status.success(),
        "bcd {} failed ({:?}): {}",
        show(args),
        run.status,
        run.stderr
    );
    run.stdout
}

/// Runs bcd with `args` (stdin empty); asserts a clean failure (see
/// [`assert_clean_failure`]); returns stderr.
pub fn fails<S: AsRef<OsStr>>(args: &[S]) -> String {
    let run = finish(spawn(args, false, None), &show(args));
    assert_clean_failure(&run, &show(args));
    run.stderr
}

/// Runs bcd with `args` (stdin empty); asserts a usage error: exit status 2 and
/// a message, never a panic. Returns stderr.
pub fn usage_error<S: AsRef<OsStr>>(args: &[S]) -> String {
    let run = finish(spawn(args, false, None), &show(args));
    assert_eq!(
        run.status.code(),
        Some(2),
        "bcd {}: expected exit status 2 (usage); stderr: {}",
        show(args),
        run.stderr
    );
    assert!(
        !run.stderr.is_empty() && !run.stderr.contains("panicked"),
        "bcd {}: not a clean usage message: {}",
        show(args),
        run.stderr
    );
    run.stderr
}

/// Runs a Python snippet in the test virtualenv with `args`; returns stdout.
pub fn run_python(code: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(venv_python())
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A ustar header (`name` at most 100 bytes; `kind` the type flag).
pub fn ustar_header(name: &[u8], size: usize, kind: u8) -> [u8; 512] {
    assert!(name.len() <= 100, "ustar names are at most 100 bytes");
    let mut header = [0u8; 512];
    header[..name.len()].copy_from_slice(name);
    header[100..108].copy_from_slice(b"0000644\0");
    header[108..116].copy_from_slice(b"0000000\0");
    header[116..124].copy_from_slice(b"0000000\0");
    header[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    header[136..148].copy_from_slice(b"00000000000\0");
    header[156] = kind;
    header[257..265].copy_from_slice(b"ustar\x0000");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    header
}

/// Writes one regular-file member; a name over 100 bytes goes in a GNU long-name
/// member before it.
pub fn write_member(out: &mut impl Write, name: &[u8], data: &[u8]) -> std::io::Result<()> {
    let pad = |n: usize| vec![0u8; n.next_multiple_of(512) - n];
    if name.len() > 100 {
        out.write_all(&ustar_header(b"././@LongLink", name.len() + 1, b'L'))?;
        out.write_all(name)?;
        out.write_all(&[0])?;
        out.write_all(&pad(name.len() + 1))?;
    }
    out.write_all(&ustar_header(
        &name[..name.len().min(100)],
        data.len(),
        b'0',
    ))?;
    out.write_all(data)?;
    out.write_all(&pad(data.len()))
}

/// `unit` repeated to `len` bytes (quick even in the unoptimised test build).
pub fn repeat_to(unit: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + unit.len());
    while out.len() < len {
        out.extend_from_slice(unit);
    }
    out.truncate(len);
    out
}

/// The strace binary, or `None` when it is missing and the skip is asked for
/// (`BCD_TEST_NO_STRACE=1`). `make test` installs it when it runs as root.
pub fn strace() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("strace"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() && std::env::var_os("BCD_TEST_NO_STRACE").is_some() {
        eprintln!("strace is missing and BCD_TEST_NO_STRACE is set: this test is skipped");
        return None;
    }
    Some(found.expect(
        "strace is missing: install it (apt-get install strace), or set BCD_TEST_NO_STRACE=1 to skip",
    ))
}

/// Whether `name` is a file an interrupted extend may leave behind in a dataset of
/// `committed` shards (FORMAT.md sections 6 and 9): shards and their sidecars
/// numbered from `committed` on, the commit file of a commit that did not happen,
/// and temporary files.
pub fn is_leftover(name: &str, committed: u64) -> bool {
    if name == ".manifest.json.tmp" || name.starts_with(bcd::format::COMMIT_FILE_TMP_PREFIX) {
        return true;
    }
    if let Some((shard, _)) = bcd::format::parse_sidecar_name(name) {
        return shard >= committed;
    }
    if let Some(shards) = bcd::format::parse_commit_file_name(name) {
        return shards > committed;
    }
    let Some(stem) = name
        .strip_suffix(".bin")
        .or_else(|| name.strip_suffix(".idx"))
    else {
        return false;
    };
    stem.parse::<u64>().is_ok_and(|n| n >= committed)
}
