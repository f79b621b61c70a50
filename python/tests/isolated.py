"""Running a test's recipe in a fresh interpreter, for recipes that hung,
aborted or froze the interpreter before they were fixed: a hang fails the test
instead of the run. The timeout only detects a hang; nothing measures time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Generous: every recipe finishes in well under a second when nothing hangs.
HANG_TIMEOUT = float(os.environ.get("BCD_TEST_HANG_TIMEOUT", 120))

TESTS = Path(__file__).resolve().parent


def run(script: str, *args: object, timeout: float = HANG_TIMEOUT) -> str:
    """Runs `script` (dedented) with `args` as sys.argv[1:], in its own process
    group so that processes it forks are killed with it if it hangs. Fails the
    test on a hang or a non-zero exit; returns its standard output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        pytest.fail(f"hung (killed after {timeout} s)\nstdout:\n{out}\nstderr:\n{err}")
    # Forked children it left behind, if any, go too.
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    assert child.returncode == 0, f"exit status {child.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    return out
