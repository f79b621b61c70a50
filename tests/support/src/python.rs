//! The Python test environment: a virtualenv with the two reference releases of
//! bitcask-dataset, made by `bash tests/python/setup-env.sh` at `<repo>/.venv`
//! (`$BCD_TEST_VENV` names another). Tests that need it fail without it: they
//! never skip, so a missing environment cannot pass for a green run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The repository's root directory (this crate lives at `tests/support`).
pub fn repo_root() -> PathBuf {
    let support = Path::new(env!("CARGO_MANIFEST_DIR"));
    support
        .parent()
        .and_then(Path::parent)
        .expect("tests/support has two parents")
        .to_path_buf()
}

/// `tests/python/reference.py`, which runs one reference release.
pub fn reference_script() -> PathBuf {
    repo_root().join("tests/python/reference.py")
}

/// The virtualenv's interpreter; fails the test (never skips) when it is missing.
#[track_caller]
pub fn venv_python() -> PathBuf {
    let venv = match std::env::var_os("BCD_TEST_VENV") {
        Some(venv) => PathBuf::from(venv),
        None => repo_root().join(".venv"),
    };
    let python = venv.join("bin").join("python");
    assert!(
        python.is_file(),
        "the Python reference environment is missing ({} does not exist): \
         run `bash tests/python/setup-env.sh` (or set BCD_TEST_VENV to a virtualenv it made)",
        python.display()
    );
    python
}

/// Runs `steps` (see `reference.py batch`) in one process of reference `version`
/// ("0.2.0" or "0.3.0") and returns one result per step. Each Python process costs
/// about 0.3 s, so callers batch their work.
#[track_caller]
pub fn reference_batch(version: &str, steps: &[Value]) -> Vec<Value> {
    let mut child = Command::new(venv_python())
        .arg(reference_script())
        .args([version, "batch"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the Python reference: {e}"));
    let input = serde_json::to_vec(steps).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the reference may print much before it reads all.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().unwrap();
    let written = writer.join().unwrap();
    assert!(
        output.status.success(),
        "reference {version} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    written.expect("writing the reference's input");
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "reference {version} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_eq!(results.len(), steps.len(), "one result per step");
    results
}
