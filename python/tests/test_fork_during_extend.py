"""Processes forked while an extend runs (issue 15, item 5): the child reads the
committed state instead of hanging on a lock a vanished thread held, does not
keep the writer lock held after the parent lets go of it, and its copy of an
extend in progress writes, commits and removes nothing. Each recipe runs in its
own interpreter (before the fix, some hung)."""

from __future__ import annotations

import pytest

from isolated import run

# A thread extends `ds` and stops inside its entries until `release` is set;
# `inside` is set once it is there (holding the dataset's locks).
PRELUDE = """
import os, sys, threading
import bcd
path, compression = sys.argv[1], (None if sys.argv[2] == "none" else sys.argv[2])
ds = bcd.Dataset.create(path, keyed=True, compression=compression, max_shard_size=1 << 12)
ds.extend((b"k%d" % i, b"v%d" % i) for i in range(50))
inside, release = threading.Event(), threading.Event()
def entries():
    yield (b"t0", b"from the thread")
    inside.set()
    release.wait()
    yield (b"t1", b"from the thread")
thread = threading.Thread(target=lambda: ds.extend(entries()))

def child_reads():
    # What a child sees: the committed state, by every read method.
    assert len(ds) == 50, len(ds)
    assert bytes(ds.at(-1)) == b"v49" and bytes(ds[b"k7"]) == b"v7"
    assert b"k3" in ds and b"t0" not in ds
    assert [bytes(v) for v in ds.get_batch([0, 49])] == [b"v0", b"v49"]
    assert bytes(ds.key_at(1)) == b"k1"

def fork(body):
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            body()
            status = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(status)
    return pid

def exit_status(pid):
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
"""


@pytest.fixture(params=["lz4", "none"])
def args(request, tmp_path):
    return tmp_path / "d", request.param


def test_a_child_forked_during_another_threads_extend_reads_the_committed_state(args):
    out = run(PRELUDE + """
thread.start()
inside.wait()
def child():
    child_reads()
    # The parent's writer still holds the dataset: the child is refused, at once.
    try:
        ds.extend([(b"c", b"child")])
        raise AssertionError("the child's extend was not refused")
    except BlockingIOError:
        pass
    child_reads()
status = exit_status(fork(child))
release.set()
thread.join()
print(status, len(ds), bytes(ds[b"t1"]))
""", *args)
    assert out.split("\n")[0] == "0 52 b'from the thread'"


def test_a_child_does_not_keep_the_writer_lock_after_the_parent_commits(args):
    # A persistent worker forked during an extend: the parent must be able to
    # extend again while it lives.
    out = run(PRELUDE + """
read_end, write_end = os.pipe()
thread.start()
inside.wait()
def worker():
    os.close(write_end)
    os.read(read_end, 1)  # until the parent is done
    assert len(bcd.Dataset(path)) == 53
status = None
pid = fork(worker)
os.close(read_end)
try:
    release.set()
    thread.join()
    ds.extend([(b"after", b"the first commit")])
    other = bcd.Dataset(path)
    print(len(ds), len(other), bytes(other[b"after"]))
finally:
    os.write(write_end, b"x")
    status = exit_status(pid)
print(status)
""", *args)
    assert out.split("\n")[:2] == ["53 53 b'the first commit'", "0"]


@pytest.mark.parametrize("parent", ["commits", "rolls back"])
def test_a_child_forked_by_the_entries_of_an_extend_commits_and_removes_nothing(args, parent):
    out = run(PRELUDE + """
import json
from pathlib import Path
parent_commits = sys.argv[3] == "commits"
forked_child = False
class Boom(Exception):
    pass
def files():
    return sorted(p.name for p in Path(path).iterdir() if p.name.endswith((".idx", ".bin")) or p.name == "manifest.json")
def entries():
    global forked_child
    for i in range(200):  # several shards before the fork
        yield (b"p%d" % i, b"before the fork %d" % i)
    if os.fork() == 0:
        forked_child = True
        # Reads in the child's copy of the generator see the committed state.
        child_reads()
        for i in range(300):
            yield (b"c%d" % i, b"child %d" % i)
        return
    # The parent waits for the child to finish, then goes on.
    global child_status
    _, status = os.waitpid(-1, 0)
    child_status = os.waitstatus_to_exitcode(status)
    if not parent_commits:
        raise Boom
    for i in range(200, 400):
        yield (b"p%d" % i, b"after the fork %d" % i)
before = files()
try:
    ds.extend(entries())
    outcome = "committed"
except Boom:
    outcome = "rolled back"
except RuntimeError as error:
    if not forked_child:
        raise
    # The child's copy of the extend: refused, with nothing written or removed.
    ok = "forked" in str(error) and len(ds) == 50 and len(bcd.Dataset(path)) == 50
    sys.stdout.flush()
    os._exit(0 if ok else 3)
assert not forked_child
reopened = bcd.Dataset(path)  # every shard the manifest counts is there
expected = [b"v%d" % i for i in range(50)]
if parent_commits:
    expected += [b"before the fork %d" % i for i in range(200)] + [b"after the fork %d" % i for i in range(200, 400)]
assert [bytes(v) for v in reopened.get_batch(range(len(reopened)))] == expected
assert [bytes(v) for v in ds.get_batch(range(len(ds)))] == expected
assert b"c0" not in reopened
if not parent_commits:
    assert files() == before, (files(), before)
print(child_status, outcome)
""", *args, parent)
    assert out.split("\n")[0] == f"0 {'committed' if parent == 'commits' else 'rolled back'}"


def test_a_child_forked_while_idle_keeps_the_parents_mappings_and_can_extend(args):
    out = run(PRELUDE + """
view = ds.at(3)
def child():
    child_reads()
    ds.extend([(b"child", b"c")])
    assert len(ds) == 51 and bytes(ds[b"child"]) == b"c"
status = exit_status(fork(child))
print(status, len(ds), len(bcd.Dataset(path)), bytes(view))
""", *args)
    assert out.split("\n")[0] == "0 50 51 b'v3'"


def test_a_child_forked_by_the_entries_while_another_thread_reads_does_not_wait_for_it(args):
    # A thread of the parent is inside a read of the state the extend shares when
    # the entries fork: the child's copy of the extend must not wait for that
    # reader, which the child does not have.
    out = run(PRELUDE + """
import gc
in_read, done_reading = threading.Event(), threading.Event()
forked_child = False
def stall(phase, info):
    # Runs in the reader's thread while it holds the shared read.
    if phase == "start" and threading.current_thread() is reader and not in_read.is_set():
        in_read.set()
        done_reading.wait()
def read():
    at = ds.at  # allocates now, so the first collection is inside the read
    gc.set_threshold(1)
    assert bytes(at(3)) == b"v3"
reader = threading.Thread(target=read)
def entries():
    global forked_child, child_status
    yield (b"p0", b"before the fork")
    gc.callbacks.append(stall)
    reader.start()
    in_read.wait()
    if os.fork() == 0:
        forked_child = True
        yield (b"c0", b"child")
        return
    _, status = os.waitpid(-1, 0)
    child_status = os.waitstatus_to_exitcode(status)
    done_reading.set()
    reader.join()
    gc.callbacks.remove(stall)
    gc.set_threshold(700)
    yield (b"p1", b"after the fork")
try:
    ds.extend(entries())
except RuntimeError as error:
    if not forked_child:
        raise
    sys.stdout.flush()
    os._exit(0 if "forked" in str(error) and len(ds) == 50 else 3)
assert not forked_child
print(child_status, len(ds), len(bcd.Dataset(path)), bytes(ds[b"p1"]))
""", *args)
    assert out.split("\n")[0] == "0 52 52 b'after the fork'"
