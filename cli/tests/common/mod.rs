//! The harness shared by the `bcd` end-to-end tests: running the binary (with a
//! hang guard), clean-failure checks, dataset contents and directory snapshots,
//! and the Python virtualenv with the reference (`bash tests/python/setup-env.sh`
//! makes `<repo>/.venv`; `$BCD_TEST_VENV` overrides it).

// Each test binary compiles its own copy and uses a different subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use bcd::Dataset;
use serde_json::Value;

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

/// Every record of a dataset, in order (keys empty when keyless), read by the library.
pub fn records(dataset: &Path) -> Records {
    let dataset = Dataset::open(dataset).unwrap();
    (0..dataset.len())
        .map(|i| {
            let key = match dataset.keyed() {
                true => dataset.key_at(i).unwrap().to_vec(),
                false => Vec::new(),
            };
            (key, dataset.at(i).unwrap().into_owned())
        })
        .collect()
}

/// Every file under `dir` (relative path -> bytes), or None if `dir` does not exist.
pub fn snapshot(dir: &Path) -> Option<BTreeMap<PathBuf, Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(path.strip_prefix(root).unwrap().to_owned(), bytes);
            }
        }
    }
    if !dir.exists() {
        return None;
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    Some(out)
}

/// Names of the files of a snapshot.
pub fn names(snapshot: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<String> {
    snapshot
        .keys()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

pub fn hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The test virtualenv's interpreter; fails (never skips) when it is missing.
pub fn python() -> PathBuf {
    let venv = match std::env::var_os("BCD_TEST_VENV") {
        Some(venv) => PathBuf::from(venv),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv"),
    };
    let python = venv.join("bin").join("python");
    assert!(
        python.exists(),
        "{} is missing: run `bash tests/python/setup-env.sh` (or set BCD_TEST_VENV)",
        python.display()
    );
    python
}

/// Runs a Python snippet in the test virtualenv with `args`; returns stdout.
pub fn run_python(code: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(python())
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

/// Runs `reference.py 0.3.0 batch` with `steps` in one process (each start costs
/// about 0.3 s); returns one result per step.
pub fn reference_batch(steps: &[Value]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/reference.py");
    let mut child = Command::new(python())
        .arg(script)
        .args(["0.3.0", "batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the reference");
    let input = serde_json::to_vec(steps).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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

/// A small, seeded generator (SplitMix64) for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(n);
        out
    }
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
