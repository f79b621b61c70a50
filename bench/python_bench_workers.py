"""The data sets and the measuring workers of `bench/python_bench.py` (see its
docstring): building the stores, and the code that runs in a fresh subprocess per
measured configuration (`python3 bench/python_bench_workers.py SPEC_JSON`), which
prints one JSON result.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve()  # this module: run as the worker process

SMALL_SIZES = (512, 1536)  # uniform value sizes of the small set, bytes
LARGE_VALUE = 100 * 1024
OPEN_VALUE = 100
BATCH = 256
SEED = 20261129
LOOKUPS = 1000
STEADY_LOOKUPS = 20_000


def key_of(i):
    return b"%012d" % i


# ---------------------------------------------------------------- data generation


def small_values(n):
    """~1 KiB slices of the standard library's Python source: realistic text."""
    import sysconfig

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    corpus = b"".join(p.read_bytes() for p in files)
    rng = random.Random(SEED)
    for _ in range(n):
        size = rng.randint(*SMALL_SIZES)
        start = rng.randrange(len(corpus) - size)
        yield corpus[start : start + size]


def large_values(n):
    import numpy as np

    rng = np.random.default_rng(SEED)
    for _ in range(n):
        yield rng.bytes(LARGE_VALUE)


def open_value(i):
    return (key_of(i) * 9)[:OPEN_VALUE]


def file_path(root, i, flat):
    name = "%012d" % i
    return os.path.join(root, name) if flat else os.path.join(root, name[:-3], name)


def build(marker, make):
    """Runs make() unless marker exists; the marker is written after success."""
    if marker.exists():
        return False
    target = marker.with_suffix("")
    shutil.rmtree(target, ignore_errors=True)
    started = time.perf_counter()
    make(target)
    os.sync()
    marker.write_text(f"{time.perf_counter() - started:.1f}\n")
    print(f"  built {target} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return True


def make_read_set(base, name, n):
    """The stores of one read data set, under base/name-n/. Returns their paths."""
    import bcd
    import lmdb

    values = small_values if name == "small" else large_values
    flat = name == "large"
    root = base / f"{name}-{n}"
    root.mkdir(parents=True, exist_ok=True)
    stores = {s: root / s for s in ("bcd-lz4", "bcd-none", "lmdb", "files")}

    def files(target):
        for i, v in enumerate(values(n)):
            path = file_path(target, i, flat)
            if i % 1000 == 0:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(v)

    build(root / "files.done", files)

    def bcd_none(target):
        ds = bcd.Dataset.create(target, keyed=True, compression=None)
        ds.extend((key_of(i), v) for i, v in enumerate(values(n)))

    def bcd_lz4(target):
        if flat:
            # As `bcd ingest` of a tree of JPEGs: incompressible values are stored
            # as literal-only LZ4 blocks (default level 5 with the probe). Keys are
            # the file names, so the same as everywhere else.
            bcd.ingest([str(stores["files"])], str(target), compression="lz4")
        else:
            # Level 9 on every value, as the reference writes it.
            ds = bcd.Dataset.create(target, keyed=True, compression="lz4")
            ds.extend((key_of(i), v) for i, v in enumerate(values(n)))

    build(root / "bcd-none.done", bcd_none)
    build(root / "bcd-lz4.done", bcd_lz4)

    def make_lmdb(target):
        total = 0
        env = None
        try:
            env = lmdb.open(str(target), map_size=1 << 40, subdir=True, sync=False, metasync=False)
            txn = env.begin(write=True)
            for i, v in enumerate(values(n)):
                txn.put(key_of(i), v, append=True)
                total += len(v)
                if i % 10000 == 9999:
                    txn.commit()
                    txn = env.begin(write=True)
            txn.commit()
            env.sync(True)
        finally:
            if env is not None:
                env.close()

    build(root / "lmdb.done", make_lmdb)
    return stores


def make_open_set(base, n):
    import bcd

    root = base / f"open-{n}"
    root.mkdir(parents=True, exist_ok=True)

    def make(target):
        ds = bcd.Dataset.create(target, keyed=True, compression=None)
        ds.extend((key_of(i), open_value(i)) for i in range(n))

    build(root / "bcd.done", make)
    return root / "bcd"


# ---------------------------------------------------------------- workers


def status():
    """Selected /proc/self/status fields, in KiB."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            field, _, rest = line.partition(":")
            if field in ("RssAnon", "RssFile", "VmHWM", "VmRSS"):
                out[field] = int(rest.split()[0])
    return out


def smaps_rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            field, _, rest = line.partition(":")
            if field in ("Rss", "Pss", "Pss_Anon", "Pss_File", "Anonymous"):
                out[field] = int(rest.split()[0])
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            field, _, rest = line.partition(":")
            if field == "RssAnon":
                out[field] = int(rest.split()[0])
    return out


def load_reference():
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    import reference

    return reference.load("0.3.0")


def open_store(store, path):
    """Returns (handle, read_all(order, keys) -> checksum, closer)."""
    crc = zlib.crc32
    if store.startswith("bcd"):
        import bcd

        ds = bcd.Dataset(path)

        if store == "bcd-at":

            def read_all(order, keys):
                at = ds.at
                total = 0
                for i in order:
                    total += crc(at(i))
                return total

        elif store == "bcd-batch":

            def read_all(order, keys):
                get_batch = ds.get_batch
                total = 0
                for start in range(0, len(order), BATCH):
                    for v in get_batch(order[start : start + BATCH]):
                        total += crc(v)
                return total

        elif store == "bcd-key":

            def read_all(order, keys):
                total = 0
                for i in order:
                    total += crc(ds[keys[i]])
                return total

        return ds, read_all, None
    if store == "ref-at":
        ds = load_reference()(path)

        def read_all(order, keys):
            at = ds.at
            total = 0
            for i in order:
                total += crc(at(i))
            return total

        return ds, read_all, None
    if store.startswith("lmdb"):
        import lmdb

        env = lmdb.open(
            str(path), readonly=True, lock=False, readahead=store != "lmdb-nora", meminit=False
        )

        def read_all(order, keys):
            total = 0
            with env.begin(buffers=True) as txn:
                get = txn.get
                for i in order:
                    total += crc(get(keys[i]))
            return total

        return env, read_all, env.close
    if store == "floor":
        # The values as a list of bytes, cut out of the uncompressed dataset's
        # shards with plain reads (keyed: .idx is u32 key size, u32 value size).
        import array

        values = []
        shard = 0
        while os.path.exists(os.path.join(path, "%06d.idx" % shard)):
            sizes = array.array("I")  # little-endian on the machines this runs on
            with open(os.path.join(path, "%06d.idx" % shard), "rb") as f:
                sizes.frombytes(f.read())
            with open(os.path.join(path, "%06d.bin" % shard), "rb") as f:
                data = f.read()
            offset = 0
            for key_size, value_size in zip(sizes[0::2], sizes[1::2]):
                offset += key_size
                values.append(data[offset : offset + value_size])
                offset += value_size
            shard += 1

        def read_all(order, keys):
            total = 0
            for i in order:
                total += crc(values[i])
            return total

        return None, read_all, None
    if store == "seq":
        # Not a reader of records: the whole data file front to back, the most the
        # disk gives when every byte is wanted (no checksum to compare).
        def read_all(order, keys):
            buffer = bytearray(1 << 20)
            with open(os.path.join(path, "000000.bin"), "rb", buffering=0) as f:
                while n := f.readinto(buffer):
                    crc(memoryview(buffer)[:n])
            return None

        return None, read_all, None
    if store == "files":

        def read_all(order, paths):
            total = 0
            for i in order:
                with open(paths[i], "rb") as f:
                    total += crc(f.read())
            return total

        return None, read_all, None
    raise ValueError(store)


def permutation(n):
    order = list(range(n))
    random.Random(SEED).shuffle(order)
    return order


def worker_read(spec):
    n, store, path = spec["n"], spec["store"], spec["path"]
    # Every reader takes the same permutation; a limited one reads its start.
    # (No NumPy here: only the reference, which needs it, imports it.)
    order = permutation(n)[: spec.get("limit") or n]
    if store == "files":
        keys = [file_path(path, i, spec["flat"]) for i in range(n)]
    else:
        keys = [key_of(i) for i in range(n)]
    started = time.perf_counter()
    _, read_all, close = open_store(store, path)
    opened = time.perf_counter() - started
    passes, checksums = [], []
    for _ in range(spec["passes"]):
        started = time.perf_counter()
        checksums.append(read_all(order, keys))
        passes.append(time.perf_counter() - started)
    if close:
        close()
    return {"open_s": opened, "pass_s": passes, "checksums": checksums, "records": len(order)}


def worker_open(spec):
    """Opens a dataset, looks keys up; reports times and memory. With hold, waits
    for a line on stdin before exiting, so the parent can read its smaps."""
    import resource

    n = spec["n"]
    if spec["store"] == "bcd":
        import bcd

        cls = bcd.Dataset
    else:
        cls = load_reference()
    rng = random.Random(spec.get("seed", SEED))
    lookups = [rng.randrange(n) for _ in range(LOOKUPS)]
    keys = [key_of(i) for i in lookups]
    before = status()
    started = time.perf_counter()
    ds = cls(spec["path"])
    opened = time.perf_counter() - started
    after_open = status()
    started = time.perf_counter()
    first = ds[keys[0]]
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    for k in keys:
        v = ds[k]
    lookup_s = time.perf_counter() - started
    assert bytes(first) == open_value(lookups[0]) and bytes(v) == open_value(lookups[-1])
    # Then more, once the pages the first ones faulted in are mapped.
    more = [key_of(rng.randrange(n)) for _ in range(STEADY_LOOKUPS)]
    started = time.perf_counter()
    for k in more:
        ds[k]
    steady_s = time.perf_counter() - started
    assert len(ds) == n
    end = status()
    result = {
        "open_s": opened,
        "first_lookup_us": first_s * 1e6,
        "lookup_us": lookup_s / LOOKUPS * 1e6,
        "steady_lookup_us": steady_s / STEADY_LOOKUPS * 1e6,
        "rss_anon_before_kib": before["RssAnon"],
        "rss_anon_added_kib": after_open["RssAnon"] - before["RssAnon"],
        "rss_anon_end_kib": end["RssAnon"],
        "rss_file_end_kib": end["RssFile"],
        "vm_hwm_kib": end["VmHWM"],
        "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "index_file": os.path.exists(os.path.join(spec["path"], ".bcd-index")),
    }
    if spec.get("hold"):
        print(json.dumps(result), flush=True)
        sys.stdin.readline()
        return None
    return result


def worker_main(spec_text):
    spec = json.loads(spec_text)
    result = {"read": worker_read, "open": worker_open}[spec["kind"]](spec)
    if result is not None:
        print(json.dumps(result), flush=True)


def run_worker(spec, timeout=1800):
    out = subprocess.run(
        [sys.executable, str(HERE), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(f"worker {spec} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    worker_main(sys.argv[1])
