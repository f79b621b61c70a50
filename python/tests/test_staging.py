"""The staging protocol of the Ray and Spark writers (bcd/_staging.py) when a
task attempt outlives its job: Spark kills the other tasks of a failed job
asynchronously, so an attempt may still be writing its part when the driver
aborts, or start after it. The abort waits for an attempt writing, an attempt
after it writes nothing, a killed attempt's part goes, and `bcd gc` leaves a
claimed part alone. No engine: attempts are processes of their own, stepped
through a pipe, so every interleaving here is made, not raced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

import bcd
from bcd import _bcd, _staging
from helpers import read_all

# One task attempt: writes the batches it is sent, pausing after the first
# until it reads a line, and prints its part's path when done.
ATTEMPT = textwrap.dedent(
    """
    import pickle, sys
    import pyarrow as pa
    from bcd import _staging

    settings = pickle.loads(bytes.fromhex(sys.argv[1]))

    def batches():
        yield pa.record_batch({"key": ["a/0", "a/1"], "value": [b"x" * 10, b"y" * 20]})
        print("writing", flush=True)
        sys.stdin.readline()
        yield pa.record_batch({"key": ["a/2"], "value": [b"z" * 30]})

    schema = pa.schema([("key", pa.string()), ("value", pa.binary())])
    description = settings.write_part(1, pa.RecordBatchReader.from_batches(schema, batches()))
    print("done", description["path"], flush=True)
    """
)


def settings_for(path):
    return _staging.settings_for(
        path,
        value_column="value",
        key_column="key",
        fields=None,
        compression="lz4",
        max_shard_size=None,
        on_duplicate="error",
    )


def start_attempt(settings):
    import pickle

    attempt = subprocess.Popen(
        [sys.executable, "-c", ATTEMPT, pickle.dumps(settings).hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert attempt.stdout.readline() == "writing\n"
    return attempt


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "d"
    bcd.Dataset.create(path, keyed=True).extend([(b"before", b"kept")])
    return path


def test_an_abort_waits_for_an_attempt_still_writing_then_leaves_nothing(target):
    settings = settings_for(target)
    _staging.Job(settings).start(lock=False)
    attempt = start_attempt(settings)
    claims = [n for n in os.listdir(settings.job_dir) if n.endswith(_bcd.PART_CLAIM_SUFFIX)]
    assert len(claims) == 1
    aborted = threading.Event()

    def abort():
        _staging.Job(settings).abort()
        aborted.set()

    driver = threading.Thread(target=abort)
    driver.start()
    # The abort cannot pass the claim while the attempt holds it.
    assert not aborted.is_set()
    out, _ = attempt.communicate("go\n")
    assert attempt.returncode == 0
    assert out.startswith("done ")
    driver.join()
    assert not (target / _bcd.STAGING_DIR).exists()
    assert read_all(bcd.Dataset(target)) == [(b"before", b"kept")]


def test_an_attempt_that_starts_after_the_abort_writes_nothing_and_says_so(target):
    settings = settings_for(target)
    job = _staging.Job(settings)
    job.start(lock=False)
    job.abort()
    table = pa.table({"key": ["a"], "value": [b"v"]})
    with pytest.raises(_staging.JobEnded, match="ended .*nothing was written"):
        settings.write_part(0, table)
    assert not (target / _bcd.STAGING_DIR).exists()
    assert read_all(bcd.Dataset(target)) == [(b"before", b"kept")]


def test_an_attempt_whose_claim_the_driver_took_first_writes_nothing(target, monkeypatch):
    """The interleaving in which the attempt has made its claim and the driver's
    removal locks and unlinks it before the attempt locks it."""
    settings = settings_for(target)
    _staging.Job(settings).start(lock=False)
    real_flock = _staging.fcntl.flock

    def driver_first(fd, operation):
        for name in os.listdir(settings.job_dir):
            if name.endswith(_bcd.PART_CLAIM_SUFFIX):
                os.unlink(settings.job_dir / name)
        return real_flock(fd, operation)

    monkeypatch.setattr(_staging.fcntl, "flock", driver_first)
    with pytest.raises(_staging.JobEnded):
        settings.write_part(0, pa.table({"key": ["a"], "value": [b"v"]}))
    monkeypatch.setattr(_staging.fcntl, "flock", real_flock)
    assert os.listdir(settings.job_dir) == []
    _staging.Job(settings).abort()
    assert not (target / _bcd.STAGING_DIR).exists()


def test_a_killed_attempts_part_goes_with_the_abort(target):
    settings = settings_for(target)
    _staging.Job(settings).start(lock=False)
    attempt = start_attempt(settings)
    attempt.send_signal(signal.SIGKILL)
    attempt.wait()
    assert any(p.is_dir() for p in settings.job_dir.iterdir())
    _staging.Job(settings).abort()
    assert not (target / _bcd.STAGING_DIR).exists()
    assert read_all(bcd.Dataset(target)) == [(b"before", b"kept")]


def test_a_failing_attempt_removes_its_own_part_and_claim(target):
    settings = settings_for(target)
    _staging.Job(settings).start(lock=False)

    def batches():
        yield pa.record_batch({"key": ["a"], "value": [b"v"]})
        raise RuntimeError("bad row")

    schema = pa.schema([("key", pa.string()), ("value", pa.binary())])
    with pytest.raises(ValueError, match="bad row"):
        settings.write_part(0, pa.RecordBatchReader.from_batches(schema, batches()))
    assert os.listdir(settings.job_dir) == []
    _staging.Job(settings).abort()
    assert not (target / _bcd.STAGING_DIR).exists()


def test_a_commit_merges_the_parts_and_waits_for_a_late_attempt(target):
    """A speculative attempt still writing when the driver commits the other
    attempt's part: the commit merges what it was given, and the late part is
    removed once written, never merged."""
    settings = settings_for(target)
    job = _staging.Job(settings)
    job.start(lock=False)
    first = settings.write_part(0, pa.table({"key": ["b/0"], "value": [b"first"]}))
    late = start_attempt(settings)
    done = threading.Event()

    def commit():
        _staging.Job(settings).commit([first])
        done.set()

    driver = threading.Thread(target=commit)
    driver.start()
    out, _ = late.communicate("go\n")
    assert late.returncode == 0 and out.startswith("done ")
    driver.join()
    assert done.is_set()
    assert read_all(bcd.Dataset(target)) == [(b"before", b"kept"), (b"b/0", b"first")]
    assert not (target / _bcd.STAGING_DIR).exists()


def test_gc_leaves_a_part_claimed_by_a_running_attempt(target):
    settings = settings_for(target)
    _staging.Job(settings).start(lock=False)
    attempt = start_attempt(settings)
    try:
        report = bcd.gc(target)
        assert report["files"] == []
        assert [os.fspath(p) for p in report["kept_jobs"]] == [os.fspath(settings.job_dir)]
        assert settings.job_dir.is_dir()
    finally:
        attempt.communicate("go\n")
    assert attempt.returncode == 0
    removed = bcd.gc(target)
    assert removed["files"]
    assert not (target / _bcd.STAGING_DIR).exists()
