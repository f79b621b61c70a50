"""Python code that a read runs (an iterable of indices, `__index__`, a garbage
collection's callbacks) may read or extend the same dataset, or wait for a thread
that does, without deadlocking; and length hints are never trusted (issue 15,
items 3 and 4). Each recipe runs in its own interpreter: before the fix they hung
or aborted it."""

from __future__ import annotations

import pytest

import bcd
from isolated import run

PRELUDE = """
import sys, threading
import bcd
path, compression = sys.argv[1], (None if sys.argv[2] == "none" else sys.argv[2])
ds = bcd.Dataset.create(path, keyed=True, compression=compression, max_shard_size=1 << 12)
ds.extend((b"k%d" % i, b"v%d" % i) for i in range(100))
"""


@pytest.fixture(params=["lz4", "none"])
def args(request, tmp_path):
    return tmp_path / "d", request.param


def test_get_batch_of_a_generator_that_extends(args):
    out = run(PRELUDE + """
values = ds.get_batch(ds.extend([(b"new%d" % i, b"x")]) or i for i in [0, -1])
print([bytes(v) for v in values], len(ds))
""", *args)
    assert out.split("\n")[0] == "[b'v0', b'x'] 102"


def test_at_and_key_at_with_an_index_that_extends(args):
    out = run(PRELUDE + """
class Extending:
    def __init__(self, key): self.key = key
    def __index__(self):
        ds.extend([(self.key, b"by __index__")])
        return -1
print(bytes(ds.at(Extending(b"a"))), bytes(ds.key_at(Extending(b"b"))), len(ds))
print([bytes(v) for v in ds.get_batch([Extending(b"c"), 0])])
""", *args)
    assert out.split("\n")[:2] == ["b'by __index__' b'b' 102", "[b'by __index__', b'v0']"]


def test_indices_that_read_the_dataset_while_another_thread_extends(args):
    # The generator waits until the other thread's extend is under way, then
    # reads: it must not hold the read lock that extend waits for.
    out = run(PRELUDE + """
inside, extended = threading.Event(), threading.Event()
def entries():
    yield (b"t0", b"from the thread")
    inside.set()
    yield (b"t1", b"from the thread")
def writer():
    ds.extend(entries())
    extended.set()
def indices():
    thread.start()
    inside.wait()
    yield len(ds) - 1
    yield 5
thread = threading.Thread(target=writer)
print([bytes(v) for v in ds.get_batch(indices())])
thread.join()
print(extended.is_set(), len(ds))
""", *args)
    assert out.split("\n")[:2] == ["[b'from the thread', b'v5']", "True 102"]


def test_reading_with_lengths_of_the_dataset_while_another_thread_extends(args):
    # The recipe, repeated: it used to hang within a few rounds.
    out = run(PRELUDE + """
import random
rng = random.Random(1)
def reader():
    for _ in range(300):
        idx = [rng.randrange(1000) for _ in range(20)]
        ds.get_batch(i % len(ds) for i in idx)
def writer():
    for round in range(30):
        ds.extend((b"w%d-%d" % (round, i), b"w") for i in range(5))
threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
for t in threads: t.start()
for t in threads: t.join()
print(len(ds))
""", *args)
    assert out.split("\n")[0] == "250"


def test_the_entries_of_an_extend_may_wait_for_a_thread_that_reads(args):
    # While the extend runs the caller's code, other threads read the committed
    # state instead of waiting for the extend's lock.
    out = run(PRELUDE + """
results = []
def reader():
    results.append((len(ds), bytes(ds.at(-1)), bytes(ds[b"k5"]), b"new0" in ds, bytes(ds.key_at(3)),
                    [bytes(v) for v in ds.get_batch(i % len(ds) for i in [1, 102])]))
def entries():
    for i in range(3000):  # several batches
        yield (b"new%d" % i, b"n")
        if i in (0, 1500, 2999):
            thread = threading.Thread(target=reader)
            thread.start()
            thread.join()
ds.extend(entries())
print(results == [(100, b"v99", b"v5", False, b"k3", [b"v1", b"v2"])] * 3, len(ds))
""", *args)
    assert out.split("\n")[0] == "True 3100"


def test_a_garbage_collection_during_a_read_may_read_but_not_extend(args):
    # Allocating under the read lock can run gc callbacks (and __del__) there:
    # their reads see the dataset, and their extends are refused instead of
    # waiting forever for the lock their own thread holds.
    out = run(PRELUDE + """
import gc
outcomes = []
def callback(phase, info):
    if phase != "start" or len(outcomes) >= 5:
        return
    reads = (bytes(ds.at(1)), b"k2" in ds, bytes(ds[b"k3"]), [bytes(v) for v in ds.get_batch([4])])
    assert reads == (b"v1", True, b"v3", [b"v4"]), reads
    try:
        ds.extend([(b"gc%d" % len(outcomes), b"x")])
        outcomes.append("extended")
    except RuntimeError as error:
        assert "same Dataset" in str(error), error
        outcomes.append("refused")
gc.callbacks.append(callback)
gc.set_threshold(1)
values = ds.get_batch(range(50))
gc.set_threshold(700)
gc.callbacks.remove(callback)
assert [bytes(v) for v in values] == [b"v%d" % i for i in range(50)]
print("refused" in outcomes, len(ds) == 100 + outcomes.count("extended"))
""", *args)
    assert out.split("\n")[0] == "True True"


def test_an_extend_from_a_generator_of_the_same_extend_is_refused_not_hung(tmp_path):
    out = run("""
import sys, bcd
ds = bcd.Dataset.create(sys.argv[1])
def entries():
    yield b"outer"
    ds.extend([b"inner"])
try:
    ds.extend(entries())
except RuntimeError as error:
    print("RuntimeError", len(ds))
""", tmp_path / "d")
    assert out.split("\n")[0] == "RuntimeError 0"


# Item 4: length hints.


def test_get_batch_of_a_huge_range_raises_index_error(args):
    out = run(PRELUDE + """
for indices in [range(2**58), range(-2**58, 0), range(10**19, 10**19 + 1)]:
    try:
        ds.get_batch(indices)
    except IndexError as error:
        print("IndexError", "100 records" in str(error))
""", *args)
    assert out.split("\n")[:3] == ["IndexError True"] * 3


def test_get_batch_ignores_a_length_hint_that_lies(args):
    out = run(PRELUDE + """
class Lying:
    def __init__(self, claimed, indices): self.claimed, self.indices = claimed, indices
    def __len__(self): return self.claimed
    def __iter__(self): return iter(self.indices)
for claimed, indices in [(2**62, [3, 1]), (2**63 - 1, [2]), (0, list(range(100)) * 3), (1, [7] * 5000)]:
    values = ds.get_batch(Lying(claimed, indices))
    assert [bytes(v) for v in values] == [b"v%d" % i for i in indices], claimed
print("ok")
""", *args)
    assert out.split("\n")[0] == "ok"


def test_hostile_arguments_raise_ordinary_exceptions(tmp_path):
    out = run("""
import sys, bcd
ds = bcd.Dataset.create(sys.argv[1])
ds.extend([b"a", b"b"])
class BadLen:
    def __len__(self): raise ValueError("bad len")
    def __iter__(self): return iter([0])
class HugeLen:
    def __len__(self): return 2**64
    def __iter__(self): return iter([0])
class BadIndex:
    def __index__(self): raise ZeroDivisionError
import os
source = sys.argv[1] + "-source"
os.mkdir(source)
with open(os.path.join(source, "a.txt"), "wb") as file:
    file.write(b"a")
calls = [
    lambda: ds.at(2**70), lambda: ds.at(-2**70), lambda: ds.at(BadIndex()),
    lambda: ds.get_batch([0, 2**64]), lambda: ds.get_batch([BadIndex()]),
    lambda: ds.get_batch(BadLen()), lambda: ds.get_batch(HugeLen()), lambda: ds.get_batch(5),
    lambda: ds.extend([b"x"], level=2**40), lambda: ds.extend([b"x"], level=-2**70),
    lambda: bcd.Dataset.create(sys.argv[1] + "2", max_shard_size=2**70),
    lambda: bcd.ingest([source], sys.argv[1] + "3", jobs=2**62),
    lambda: bcd.ingest([source], sys.argv[1] + "3", jobs=-1),
]
for call in calls:
    try:
        call()
        print("no error")
    except Exception as error:
        print(type(error).__name__)
print(len(ds))
""", tmp_path / "d")
    assert out.split("\n")[:-1] == [
        "IndexError", "IndexError", "ZeroDivisionError",
        "IndexError", "ZeroDivisionError",
        "no error", "no error", "TypeError",
        "ValueError", "ValueError",  # a level is parsed as text: out of range, not overflow
        "ValueError",
        "ValueError", "OverflowError",
        "2",
    ]


def test_get_batch_reads_what_at_reads(tmp_path):
    # The indices are collected before the lock is taken, then resolved under it.
    ds = bcd.Dataset.create(tmp_path / "d")
    ds.extend(b"%d" % i for i in range(10))
    assert [bytes(v) for v in ds.get_batch(iter([-1, 0, -10, 9]))] == [b"9", b"0", b"0", b"9"]
    with pytest.raises(IndexError, match="-11"):
        ds.get_batch([0, -11])
    with pytest.raises(IndexError):
        ds.get_batch(i for i in [0, 10])
