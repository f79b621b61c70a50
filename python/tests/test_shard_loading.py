"""How uncompressed values reach Python: shards loaded in Rust on first read (mapped,
or read into memory when small), handed out as zero-copy memoryviews. Each recipe
of issue 15 (items 1, 2, 6, 7) runs in its own interpreter, with a generous timeout
that only detects a hang."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

# Only a hang detector: every recipe finishes in seconds.
HANG = 120


def run(code: str, *args: str) -> str:
    """Runs `code` in a fresh interpreter (argv[1:] = args) and returns its stdout;
    fails the test if it fails or hangs."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            timeout=HANG,
        )
    except subprocess.TimeoutExpired as hang:
        raise AssertionError(f"hung for {HANG} s: {hang.stderr!r}") from None
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stderr}"
    return done.stdout


def test_threads_reading_a_fresh_handle_of_tiny_shards_do_not_freeze(tmp_path):
    out = run(
        """
        import sys, threading, bcd
        p = sys.argv[1]
        ds = bcd.Dataset.create(p, compression=None, max_shard_size=1)
        ds.extend(b"v%d" % i for i in range(2000))
        ds = bcd.Dataset(p)
        results = [None] * 4
        def read(t):
            results[t] = [bytes(ds.at(i)) for i in range(len(ds))]
        threads = [threading.Thread(target=read, args=(t,)) for t in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        expected = [b"v%d" % i for i in range(2000)]
        assert all(r == expected for r in results), "wrong values"
        print("ok")
        """,
        str(tmp_path / "d"),
    )
    assert out == "ok\n"


def test_threads_batch_reading_fresh_handles_do_not_freeze(tmp_path):
    out = run(
        """
        import random, sys, threading, bcd
        p = sys.argv[1]
        ds = bcd.Dataset.create(p, compression=None, max_shard_size=64 << 10)
        values = [b"%06d" % i * 100 for i in range(16 * 100)]  # 600 B: 16 shards
        ds.extend(values)
        failures = []
        def read(ds, start, seed):
            rng = random.Random(seed)
            start.wait()  # all threads find the shards unloaded at once
            for _ in range(20):
                idx = [rng.randrange(len(values)) for _ in range(64)]
                if [bytes(v) for v in ds.get_batch(idx)] != [values[i] for i in idx]:
                    failures.append(seed)
        for round in range(20):
            ds = bcd.Dataset(p)
            start = threading.Barrier(8)
            threads = [threading.Thread(target=read, args=(ds, start, t)) for t in range(8)]
            for t in threads: t.start()
            for t in threads: t.join()
        assert not failures, failures
        print("ok")
        """,
        str(tmp_path / "d"),
    )
    assert out == "ok\n"


def test_uncompressed_reads_leave_memory_flat(tmp_path):
    # Each read used to leak ~64 bytes (two ints of a slice): 300k reads, 18 MiB.
    out = run(
        """
        import gc, sys, bcd
        p = sys.argv[1]
        ds = bcd.Dataset.create(p, keyed=True, compression=None)
        ds.extend((b"k%d" % i, b"value %d" % i) for i in range(1000))

        def rss_anon():
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("RssAnon:"):
                        return int(line.split()[1]) * 1024

        def reads(n):
            for i in range(n // 3):
                ds.at(i % 1000)
                ds[b"k%d" % (i % 1000)]
            for i in range(0, n // 3, 100):
                ds.get_batch(range(i % 900, i % 900 + 100))

        reads(30_000)  # warm-up: allocator pools, the shards loaded
        gc.collect()
        before = rss_anon()
        reads(300_000)
        gc.collect()
        grown = rss_anon() - before
        assert grown < 4 << 20, f"RssAnon grew by {grown} bytes over 300k reads"
        print("ok")
        """,
        str(tmp_path / "d"),
    )
    assert out == "ok\n"


def test_a_thousand_descriptors_read_thousands_of_shards(tmp_path):
    # Every mapped shard used to keep a descriptor until the handle was dropped.
    out = run(
        """
        import resource, sys, bcd
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        p = sys.argv[1]
        ds = bcd.Dataset.create(p, compression=None)
        # 1,200 one-record extends: a shard each, half small enough to be read
        # into memory, half mapped.
        values = [b"%d" % i * (3000 if i < 600 else 20000) for i in range(1200)]
        for value in values:
            ds.extend([value])
        views = [ds.at(i) for i in range(len(ds))]  # all held: every shard stays loaded
        assert [bytes(v) for v in views] == values
        fresh = bcd.Dataset(p)
        assert [bytes(fresh.at(i)) for i in range(len(fresh))] == values
        print("ok")
        """,
        str(tmp_path / "d"),
    )
    assert out == "ok\n"


def write_one_record_shards(path, count: int) -> None:
    """A keyless, uncompressed dataset of `count` one-record shards, written
    directly (FORMAT.md): what `create(max_shard_size=1)` and an extend of `count`
    records write, without the 2 fsyncs per shard that make that take minutes."""
    path.mkdir()
    for i in range(count):
        value = b"%d" % i
        (path / ("%06d.bin" % i)).write_bytes(value)
        (path / ("%06d.idx" % i)).write_bytes(len(value).to_bytes(4, "little"))
    manifest = '{"keyed": false, "compression": null, "max_shard_size": 1, "shards": %d}'
    (path / "manifest.json").write_text(manifest % count)


def test_34000_one_record_shards_open_read_and_extend(tmp_path):
    # Each shard used to cost two mappings on open and a third on read (against
    # the kernel's 65,530): an extend of 34,000 one-record shards raised ENOMEM
    # after committing, and no process could open the result. The extend itself is
    # tests/many_shards.rs (without fsync, which takes minutes here).
    path = tmp_path / "d"
    write_one_record_shards(path, 34_000)
    out = run(
        """
        import sys, bcd
        ds = bcd.Dataset(sys.argv[1])
        assert len(ds) == 34_000
        views = [ds.at(i) for i in range(len(ds))]
        assert [bytes(v) for v in views] == [b"%d" % i for i in range(34_000)]
        with open("/proc/self/maps") as maps:
            mappings = sum(1 for _ in maps)
        # A fresh interpreter has a few hundred; one per shard would be 34,000.
        assert mappings < 5_000, mappings
        ds.extend(b"%d" % i for i in range(34_000, 34_010))  # returns: committed
        assert len(ds) == 34_010 and bytes(ds.at(-1)) == b"34009"
        assert len(bcd.Dataset(sys.argv[1])) == 34_010
        print("ok")
        """,
        str(path),
    )
    assert out == "ok\n"
    # 68,000 files: do not leave them for pytest to delete in a later session.
    shutil.rmtree(path)


def test_a_fifo_in_place_of_a_shard_is_an_error_naming_it(tmp_path):
    # Opening a FIFO for reading waits for a writer: the open used to block forever.
    out = run(
        """
        import os, sys, bcd
        p = sys.argv[1]
        bcd.Dataset.create(p, compression=None).extend([b"value"])
        fifo = os.path.join(p, "000000.bin")
        os.remove(fifo)
        os.mkfifo(fifo)
        try:
            bcd.Dataset(p)
        except OSError as error:
            assert fifo in str(error) and "not a regular file" in str(error), error
            print("ok")
        """,
        str(tmp_path / "d"),
    )
    assert out == "ok\n"


def test_threads_read_views_while_another_thread_extends(tmp_path):
    # New shards are added to the handle while views of loaded ones are held and
    # other threads load more: every view keeps its bytes, every read is right.
    out = run(
        """
        import random, sys, threading, bcd
        p = sys.argv[1]
        def value(i):
            return b"%d;" % i * (1 + i % 50 * 200)  # up to 40 KiB: read and mapped shards
        ds = bcd.Dataset.create(p, compression=None, max_shard_size=32 << 10)
        ds.extend(value(i) for i in range(200))
        done = threading.Event()
        failures, held = [], []
        def write():
            for round in range(40):
                n = len(ds)
                ds.extend(value(i) for i in range(n, n + 25))
            done.set()
        def read(seed):
            rng = random.Random(seed)
            while not done.is_set():
                n = len(ds)
                idx = [rng.randrange(n) for _ in range(16)]
                views = [ds.at(i) for i in idx] + ds.get_batch(idx)
                if [bytes(v) for v in views] != [value(i) for i in idx * 2]:
                    failures.append(seed)
                held.append((idx[0], views[0]))
        threads = [threading.Thread(target=read, args=(t,)) for t in range(4)]
        threads.append(threading.Thread(target=write))
        for t in threads: t.start()
        for t in threads: t.join()
        assert not failures, failures
        assert len(ds) == 1200
        del ds
        assert all(bytes(v) == value(i) for i, v in held), "a held view changed"
        print("ok", len(held) > 0)
        """,
        str(tmp_path / "d"),
    )
    assert out == "ok True\n"
