"""Threads and forked processes reading one dataset while a writer extends it in
a loop (issue 15): every read returns a committed value, and everything
finishes. The run is bounded (a few seconds on two cores); its timeout only
detects a hang."""

from __future__ import annotations

import pytest

from isolated import run

SCRIPT = """
import os, random, sys, threading
import bcd

path, compression = sys.argv[1], (None if sys.argv[2] == "none" else sys.argv[2])
INITIAL, ROUNDS, PER_ROUND = 200, 40, 25
THREADS, FORKS, CHILD_READS = 3, 4, 150

def value(i):
    return (b"v%d-" % i) * (1 + i % 5)

ds = bcd.Dataset.create(path, keyed=True, compression=compression, max_shard_size=1 << 13)
ds.extend((b"k%d" % i, value(i)) for i in range(INITIAL))

def check(reader, rng, last_len):
    # One round of every read method, against the values a commit can have made.
    n = len(reader)
    assert n >= last_len and n >= INITIAL and (n - INITIAL) % PER_ROUND == 0, (n, last_len)
    i = rng.randrange(n)
    assert bytes(reader.at(i)) == value(i), i
    assert bytes(reader[b"k%d" % i]) == value(i), i
    assert bytes(reader.key_at(i)) == b"k%d" % i, i
    assert b"k%d" % i in reader and b"missing" not in reader
    wanted = [rng.randrange(n) for _ in range(rng.randrange(1, 12))]
    # A generator that reads the dataset itself while the writer waits or runs.
    got = reader.get_batch(j % len(reader) for j in wanted)
    assert [bytes(v) for v in got] == [value(j) for j in wanted], wanted
    return n

rounds_done = 0
progress = threading.Condition()
failures = []

def writer():
    global rounds_done
    try:
        for r in range(ROUNDS):
            start = INITIAL + r * PER_ROUND
            # The entries read the dataset too; meanwhile other threads read
            # the committed state the extend shares.
            ds.extend((b"k%d" % i, value(i)) for i in range(start, start + PER_ROUND) if len(ds) == start and b"k%d" % i not in ds)
            with progress:
                rounds_done += 1
                progress.notify_all()
    except BaseException as error:
        failures.append(repr(error))
        with progress:
            rounds_done = ROUNDS
            progress.notify_all()

def reader(seed):
    rng, last = random.Random(seed), 0
    try:
        while True:
            with progress:
                finished = rounds_done == ROUNDS
            last = check(ds, rng, last)
            if finished:
                return
    except BaseException as error:
        failures.append(repr(error))

def forked_reader(seed):
    # Runs in a child forked at some point of the writer's loop: its threads are
    # gone, maybe in the middle of an extend.
    rng, last = random.Random(seed), 0
    for _ in range(CHILD_READS):
        last = check(ds, rng, last)
    fresh = bcd.Dataset(path)  # sees whatever the parent has committed since
    for _ in range(CHILD_READS // 3):
        check(fresh, rng, last)

threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(s,)) for s in range(THREADS)]
for t in threads:
    t.start()
children = []
for f in range(FORKS):
    with progress:
        progress.wait_for(lambda: rounds_done >= (f + 1) * ROUNDS // (FORKS + 1))
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            forked_reader(100 + f)
            status = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(status)
    children.append(pid)
for t in threads:
    t.join()
statuses = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
final = bcd.Dataset(path)
assert len(final) == len(ds) == INITIAL + ROUNDS * PER_ROUND
assert [bytes(v) for v in final.get_batch(range(len(final)))] == [value(i) for i in range(len(final))]
print(failures, statuses)
"""


@pytest.mark.parametrize("compression", ["lz4", "none"])
def test_threads_and_forked_readers_against_a_writer(tmp_path, compression):
    out = run(SCRIPT, tmp_path / "d", compression)
    assert out.split("\n")[0] == "[] [0, 0, 0, 0]"
