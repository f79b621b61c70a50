"""DataLoader epochs over a view (issue 22): the per-sample rate of an epoch over
a 1% view against that of an epoch over the whole dataset, page cache cold and
warm.

    cargo build --release -p bcd-cli
    .venv/bin/maturin build --release -m python/Cargo.toml -o /work/views-wheels
    .venv/bin/pip install --force-reinstall --no-deps /work/views-wheels/bcd_python-*.whl
    .venv/bin/pip install -r tests/python/requirements-torch.txt
    .venv/bin/python bench/views_loader_bench.py --data /work/bench-views-loader --runs 3
    .venv/bin/python bench/views_loader_bench.py --data /work/bench-views-loader --runs 5 --worker-exit
    .venv/bin/python bench/views_loader_bench.py --data /work/bench-views-loader --runs 7 --passes
    .venv/bin/python bench/views_loader_bench.py --data /work/bench-views-loader --runs 9 --read-ahead 0,0.3,1

The dataset (made once in --data): --records keyless records of --value-bytes
random bytes (uncompressed), with a field `label` (0..99, uniform), and the view
`one_pct` (`label = 7`: 1% of the records, spread over every shard). An epoch:
`bcd.torch.MapDataset(output="tensor")` (with `view="one_pct"` or not), a
shuffled `bcd.torch.Sampler`, a DataLoader of 2 fork workers, batch 64,
`collate_fn=bcd.torch.collate`, every byte summed in the loop; wall time from
the first batch's arrival to the last batch: the rate of the reading, not of
torch starting the workers (about 0.1 s an epoch whatever its length, where a
1% view of these records reads in 0.07 s warm); also from the loader's iterator
("start-up included"). Cold: the dataset's files dropped from the page cache
(`posix_fadvise(DONTNEED)` on each, no other file touched) before the epoch;
warm: the next epoch. Workers are not persistent: a mapped page stays cached.
An epoch of the view's length lasts a hundredth of the whole dataset's, so a
scheduler's pause on a shared machine moves it a hundred times more:
``--epochs K`` repeats the last kind of epoch (warm, or warm again) K times
for every contender but the whole dataset, its rate all their samples over
all their seconds.
Before each epoch (not timed) the bench reports the share of the records the
epoch will read whose pages are in the page cache (``resident``): this
machine's DAMON reclaims memory idle for about a minute, up to 128 MB a
second, so "warm" is measured, not assumed.
Medians over --runs; each run reads the whole dataset first, then the
contenders of the view's length in an order rotating from run to run (so
each follows the whole dataset in as many runs: until session 40 the view
always did, in two runs of three; a multiple of their number of runs is
fairest). A third contender reads
the view without the read-ahead a sparse view asks for (``bcd.views.SPARSE_VIEW``
set past any view's size), what a view read before it: the change it makes in
the same run. A fourth is the DataLoader's own floor for an epoch of the
view's length: an in-memory dataset whose batches are slices of one tensor
(``InMemory``), read from nowhere. A fifth is a dataset of the view's
length (made once in --data/small, the same kind of records), read as the
whole dataset is: an epoch of that many samples without a view.
``--persistent`` runs every loader with ``persistent_workers=True`` (the warm
epochs then reuse the cold one's workers), a third epoch ("warm again"), and
a sixth contender: the view read through the mappings from each worker's
second pass on (``MappedAfterFirstPass``, what ``bcd.views`` did until
session 39).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make(path: Path, records: int, value_bytes: int, step: int = 20_000):
    """The dataset, made once: each `step` records one extend (one shard,
    under the 256 MiB limit)."""
    import bcd
    import pyarrow as pa

    if (path / "manifest.json").exists():
        return
    log(f"making {records} records of {value_bytes} bytes")
    dataset = bcd.Dataset.create(path, compression=None, max_shard_size=256 << 20)
    rng = np.random.default_rng(0)
    for start in range(0, records, step):
        n = min(step, records - start)
        blob = rng.integers(0, 256, size=n * value_bytes, dtype=np.uint8).tobytes()
        values = [blob[i * value_bytes:(i + 1) * value_bytes] for i in range(n)]
        labels = rng.integers(0, 100, size=n)
        dataset.extend_arrow(pa.table({"value": values, "label": labels}), value_column="value")
    dataset.create_view("one_pct", where="label = 7")


class MappedAfterFirstPass:
    """What a sparse view read in DataLoader workers until session 39, for
    comparison (``--persistent``): each process reads its share of the view
    (the view's length over the workers) positionally, then through the
    mappings. Installed in the parent before the workers fork."""

    installed = None

    @classmethod
    def install(cls, on: bool):
        import bcd.views

        if cls.installed is None:
            cls.installed = bcd.views.View.get_batch_into
        if not on:
            bcd.views.View.get_batch_into = cls.installed
            return
        original, read = cls.installed, {}

        def get_batch_into(view, indices, allocate, *, positional=None):
            import torch

            info = torch.utils.data.get_worker_info()
            share = -(-len(view) // (info.num_workers if info else 1))
            done = read.get((os.getpid(), id(view)), 0)
            read[(os.getpid(), id(view))] = done + len(indices)
            return original(view, indices, allocate, positional=done < share)

        bcd.views.View.get_batch_into = get_batch_into


def evict(path: Path):
    drop_pages(file for file in path.iterdir() if file.is_file())


def drop_pages(files):
    """Drops `files` from the page cache (`posix_fadvise(DONTNEED)`)."""
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def in_child(measure, name, *args) -> str:
    """What `measure(*args, pipe)` writes to `pipe` in a forked child (a new
    reader, as a DataLoader worker is); the child never returns into the
    parent's code, whatever fails, and a child that wrote nothing is an error
    naming `name`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            measure(*args, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    text = os.read(read_end, 1000).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    if not text:
        raise SystemExit(f"the child reading {name} failed (its traceback is above)")
    return text


def resident(path: Path, records) -> float:
    """The share of `records` (record indices of the keyless, uncompressed
    dataset at `path`) whose value's first page is in the page cache (`mincore`
    on a mapping of each shard's data file; as root, or the files' owner, it
    reports the page cache, not this process's mappings). What says whether a
    "warm" epoch was warm: a machine that reclaims cold memory on its own
    (this one's DAMON pages out up to 128 MB a second of memory idle for a
    minute, at the granularity of large physical regions) drops pages of a
    sparse view between or even within epochs, with gigabytes free."""
    import ctypes
    import mmap

    import bcd

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    page = mmap.PAGESIZE
    records = np.sort(np.asarray(records, dtype=np.int64))
    found = 0
    for shard, (first, end, _) in enumerate(bcd.Dataset(path).shard_ranges()):
        mine = records[(records >= first) & (records < end)] - first
        if not len(mine):
            continue
        sizes = np.fromfile(path / f"{shard:06}.idx", dtype="<u4").astype(np.int64)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))[mine]
        with open(path / f"{shard:06}.bin", "rb") as file:
            length = os.fstat(file.fileno()).st_size
            mapped = mmap.mmap(file.fileno(), length, prot=mmap.PROT_READ)
            view = np.frombuffer(mapped, dtype=np.uint8)
            try:
                vector = np.zeros((length + page - 1) // page, dtype=np.uint8)
                if libc.mincore(view.ctypes.data, length, vector.ctypes.data) != 0:
                    raise OSError(ctypes.get_errno(), "mincore")
                found += int((vector[starts // page] & 1).sum())
            finally:
                del view
                mapped.close()
    return found / max(len(records), 1)


def loader(path: Path, view, persistent: bool = False):
    import torch
    import bcd.torch

    dataset = bcd.torch.MapDataset(path, view=view, output="tensor")
    sampler = bcd.torch.Sampler(dataset, seed=1)
    return sampler, torch.utils.data.DataLoader(
        dataset,
        batch_size=64,
        sampler=sampler,
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=bcd.torch.collate,
        persistent_workers=persistent,
    )


class InMemory:
    """The DataLoader's own floor for an epoch of `samples` values of
    `value_bytes`: a map-style dataset whose batch is a slice of one tensor
    already in memory (`__getitems__`), read nowhere, crossing to the main
    process as torch sends a worker's tensors. A store's epoch of that many
    samples cannot be faster than this one's."""

    def __init__(self, samples: int, value_bytes: int):
        self.samples, self.value_bytes, self.block = samples, value_bytes, None

    def __len__(self):
        return self.samples

    def __getitems__(self, indices):
        import torch

        if self.block is None:
            self.block = torch.zeros(64, self.value_bytes, dtype=torch.uint8)
        return self.block[: len(indices)].clone()


class Seeded:
    """A shuffled order of `n` positions with `set_epoch`, as bcd's Sampler."""

    def __init__(self, n: int):
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch: int):
        self.epoch = epoch

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(np.random.default_rng(self.epoch).permutation(self.n).tolist())


def floor_loader(samples: int, value_bytes: int, persistent: bool = False):
    import torch

    sampler = Seeded(samples)
    return sampler, torch.utils.data.DataLoader(
        InMemory(samples, value_bytes),
        batch_size=64,
        sampler=sampler,
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=_identity,
        persistent_workers=persistent,
    )


def _identity(batch):
    return batch


def epoch(sampler, load, number=0):
    """(samples, seconds) of the whole epoch, and of it after its first batch
    has arrived: the per-sample rate of the reading once the workers run,
    without torch starting them (about 0.1 s an epoch, whatever its length)."""
    import torch

    sampler.set_epoch(number)
    started = time.perf_counter()
    samples = 0
    total = 0
    first = None
    for batch in load:
        values = batch if isinstance(batch, torch.Tensor) else batch.values
        total += int(values.numpy().sum(dtype=np.uint64))
        samples += len(batch)
        if first is None:
            first = (samples, time.perf_counter())
    ended = time.perf_counter()
    return (samples, ended - started), (samples - first[0], ended - first[1])


def worker_exit(path: Path, rounds: int):
    """What reading a view's values leaves in a process: a forked child (as a
    DataLoader worker) reads half the view's values in shuffled batches of 64
    with ``get_batch_into``, through the shard mappings (``read_ahead=False``)
    or with positional reads (``read_ahead=True``, what a sparse view asks
    for), then reports its mapped file pages (``RssFile``) and CPU time; the
    parent times the child's exit (unmapping what it mapped). Page cache warm."""
    import resource

    import bcd

    view = bcd.Dataset(path).view("one_pct")
    half = len(view) // 2
    results = {}
    for round_ in range(rounds):
        for read_ahead in ((False, True) if round_ % 2 == 0 else (True, False)):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                dataset = bcd.Dataset(path)
                dataset.threads = 1
                child_view = dataset.view("one_pct")
                buffer = np.empty(64 * 4 * 4096, dtype=np.uint8)
                order = np.random.default_rng(round_).permutation(len(child_view))[:half]
                before = resource.getrusage(resource.RUSAGE_SELF)
                for start in range(0, half, 64):
                    child_view._dataset.get_batch_into(
                        child_view._records(order[start:start + 64]), lambda size: buffer, read_ahead=read_ahead
                    )
                after = resource.getrusage(resource.RUSAGE_SELF)
                with open("/proc/self/status") as status:
                    rss_file = next(int(line.split()[1]) for line in status if line.startswith("RssFile"))
                cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / half * 1e6
                os.write(write_end, f"{rss_file} {cpu}".encode())
                os._exit(0)
            os.close(write_end)
            rss_file, cpu = os.read(read_end, 100).decode().split()
            os.close(read_end)
            started = time.perf_counter()
            os.waitpid(pid, 0)
            results.setdefault(read_ahead, []).append((int(rss_file) / 1024, float(cpu), time.perf_counter() - started))
    print(f"| {half} values of the view read in a fresh process | mapped file pages MB | CPU us a value | exit ms |")
    print("|---|---|---|---|")
    for read_ahead, name in ((False, "through the mappings"), (True, "positional reads")):
        rows = results[read_ahead]
        print(
            f"| {name} | {statistics.median(r[0] for r in rows):.0f} | {statistics.median(r[1] for r in rows):.2f} "
            f"| {statistics.median(r[2] for r in rows) * 1000:.1f} ({min(r[2] for r in rows) * 1000:.1f}-{max(r[2] for r in rows) * 1000:.1f}) |"
        )


def passes(path: Path, rounds: int):
    """What a persistent worker's reading costs pass by pass: a forked child
    (as a DataLoader worker, one read thread) reads half the view (its share
    with two workers) three times in shuffled batches of 64 with
    ``get_batch_into``: positionally every pass (what a sparse view does), the
    first pass positionally and then through the mappings (what it did until
    session 39), or through the mappings from the first pass. Wall and CPU
    milliseconds a pass and the page faults it took (``ru_minflt``), medians
    over ``rounds`` (the three ways rotating). Page cache warm."""
    import resource

    import bcd

    half = len(bcd.Dataset(path).view("one_pct")) // 2
    ways = ("positional", "mapped after the first pass", "mapped")

    def measure(way, seed, pipe):
        dataset = bcd.Dataset(path)
        dataset.threads = 1
        view = dataset.view("one_pct")
        buffer = np.empty(64 * 4096, dtype=np.uint8)
        out = []
        for number in range(3):
            positional = {"positional": True, "mapped": False}.get(way, number == 0)
            order = np.random.default_rng(seed * 10 + number).permutation(len(view))[:half]
            before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for start in range(0, half, 64):
                view.get_batch_into(order[start:start + 64], lambda size: buffer, positional=positional)
            seconds, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            out.append(f"{seconds} {cpu} {after.ru_minflt - before.ru_minflt}")
        os.write(pipe, ",".join(out).encode())

    results = {way: [] for way in ways}
    for round_ in range(rounds):
        for way in ways[round_ % 3:] + ways[:round_ % 3]:
            text = in_child(measure, repr(way), way, round_)
            results[way].append([tuple(float(x) for x in p.split()) for p in text.split(",")])
    print(f"\n{half} values a pass, medians of {rounds}; ms wall / ms CPU / page faults\n")
    print("| way | pass 1 | pass 2 | pass 3 |")
    print("|---|---|---|---|")
    for way in ways:
        cells = []
        for number in range(3):
            wall, cpu, faults = (statistics.median(r[number][i] for r in results[way]) for i in range(3))
            cells.append(f"{wall * 1000:.1f} / {cpu * 1000:.1f} / {faults:.0f}")
        print(f"| {way} | " + " | ".join(cells) + " |")


def read_ahead_cost(path: Path, rounds: int, fractions):
    """What the read-ahead of a sparse view's batches costs or saves a new
    process (a DataLoader worker started for an epoch): a forked child opens
    the dataset and reads half the view (9,935 values of the default data)
    three times in shuffled batches of 64 with ``get_batch_into(...,
    positional=True)``, with ``read_ahead=True`` (what a sparse view asks
    for) or ``False``. Before each child the view's values are read (warm),
    then the shard files of a share ``fraction`` of the shards, drawn per
    round, are dropped from the page cache. Milliseconds a pass, medians over
    ``rounds``, the two ways alternating."""
    import bcd

    bins = sorted(path.glob("*.bin"))
    records = bcd.Dataset(path).view("one_pct").indices
    half = len(records) // 2
    buffer = np.empty(64 * 4096, dtype=np.uint8)

    def warm():
        dataset = bcd.Dataset(path)
        for start in range(0, len(records), 64):
            dataset.get_batch_into(records[start:start + 64], lambda size: buffer, read_ahead=True, positional=True)

    def measure(read_ahead, seed, pipe):
        dataset = bcd.Dataset(path)
        dataset.threads = 1
        out = []
        for number in range(3):
            order = records[np.random.default_rng(seed * 10 + number).permutation(len(records))[:half]]
            started = time.perf_counter()
            for start in range(0, half, 64):
                dataset.get_batch_into(order[start:start + 64], lambda size: buffer, read_ahead=read_ahead, positional=True)
            out.append(str(time.perf_counter() - started))
        os.write(pipe, ",".join(out).encode())

    print(f"\n{half} values a pass, medians of {rounds}; ms a pass (pass 1 includes the new process's first reads of every shard)\n")
    print("| shards dropped from the page cache | way | pass 1 | pass 2 | pass 3 |")
    print("|---|---|---|---|---|")
    for fraction in fractions:
        results = {True: [], False: []}
        for round_ in range(rounds):
            for read_ahead in ((True, False) if round_ % 2 == 0 else (False, True)):
                warm()
                dropped = np.random.default_rng(round_).permutation(len(bins))[: int(fraction * len(bins))]
                drop_pages(bins[i] for i in dropped)
                text = in_child(measure, f"with read_ahead={read_ahead}", read_ahead, round_)
                results[read_ahead].append([float(x) for x in text.split(",")])
        for read_ahead in (True, False):
            cells = [f"{statistics.median(r[i] for r in results[read_ahead]) * 1000:.1f}" for i in range(3)]
            print(f"| {fraction:.0%} | read_ahead={read_ahead} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--value-bytes", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--persistent", action="store_true", help="DataLoaders with persistent_workers=True")
    parser.add_argument("--epochs", type=int, default=1,
                        help="epochs of the last kind (warm, or warm again) for the contenders of the view's length")
    parser.add_argument("--worker-exit", action="store_true", help="only what reading a view leaves in a process (see worker_exit)")
    parser.add_argument("--passes", action="store_true", help="only what each pass of a persistent worker's reading costs (see passes)")
    parser.add_argument("--read-ahead", default=None, metavar="FRACTIONS",
                        help="only what the read-ahead costs or saves a new process, with these shares of the shards "
                             "dropped from the page cache, say 0,0.3,1 (see read_ahead_cost)")
    args = parser.parse_args()
    path = args.data / "ds"
    args.data.mkdir(parents=True, exist_ok=True)
    make(path, args.records, args.value_bytes)
    if args.worker_exit:
        worker_exit(path, args.runs)
        return
    if args.passes:
        passes(path, args.runs)
        return
    if args.read_ahead is not None:
        read_ahead_cost(path, args.runs, [float(x) for x in args.read_ahead.split(",")])
        return
    import bcd.views

    names = ("whole", "view", "view-no-read-ahead", "in-memory", "small")
    if args.persistent:
        names += ("view-mapped-after-first-pass",)
    sparse_view = bcd.views.SPARSE_VIEW
    view_samples = len(bcd.Dataset(path).view("one_pct"))
    # A whole dataset of the view's length (its first records' kind: the same
    # values and field), read as the whole dataset is: what an epoch of that
    # many samples costs bcd's reads and the DataLoader without the view.
    small = args.data / "small"
    make(small, view_samples, args.value_bytes)
    caches = ("cold", "warm", "warm again") if args.persistent else ("cold", "warm")
    kinds = caches + tuple(f"{cache}, start-up included" for cache in caches)
    rates = {(kind, view): [] for kind in kinds for view in names}
    # Before each epoch (not timed): the share of the records it will read
    # that are in the page cache (the whole dataset's: of 20,000 drawn).
    view_records = bcd.Dataset(path).view("one_pct").indices
    drawn = np.random.default_rng(0).choice(args.records, size=min(20_000, args.records), replace=False)
    cached = {(cache, name): [] for cache in caches for name in names}
    for run in range(args.runs):
        # The whole dataset first, then the contenders of the view's length
        # rotating: each follows the whole dataset's epochs (which leave the
        # most for the machine to clean up) in as many runs as the others.
        short = names[1:]
        order = ("whole",) + short[run % len(short):] + short[:run % len(short)]
        for name in order:
            view = None if name in ("whole", "small") else "one_pct"
            # The fork workers inherit the setting.
            bcd.views.SPARSE_VIEW = 1 << 62 if name == "view-no-read-ahead" else sparse_view
            MappedAfterFirstPass.install(name == "view-mapped-after-first-pass")
            if name == "in-memory":
                sampler, load = floor_loader(view_samples, args.value_bytes, args.persistent)
            else:
                sampler, load = loader(small if name == "small" else path, view, args.persistent)
            evict(small if name == "small" else path)
            number = 0
            for cache in caches:
                # The last kind of epoch is repeated --epochs times for the
                # contenders of the view's length: their rate is the samples
                # over the seconds of them all, so it averages over as much
                # of the machine's time as one epoch of the whole dataset.
                repeats = args.epochs if cache == caches[-1] and name != "whole" else 1
                totals = [0, 0.0, 0, 0.0]
                for _ in range(repeats):
                    if name != "in-memory":
                        records = {"whole": drawn, "small": np.arange(view_samples)}.get(name, view_records)
                        cached[(cache, name)].append(resident(small if name == "small" else path, records))
                    (samples, seconds), (after, after_seconds) = epoch(sampler, load, number)
                    number += 1
                    totals = [a + b for a, b in zip(totals, (samples, seconds, after, after_seconds))]
                rates[(f"{cache}, start-up included", name)].append(totals[0] / totals[1])
                rates[(cache, name)].append(totals[2] / totals[3])
            del load
            log(f"run {run} {name}: {samples} samples/epoch; "
                + ", ".join(f"{cache} {rates[(cache, name)][-1]:.0f}/s" for cache in caches))
    print("\nthe share of each epoch's records in the page cache as it started: median (least)\n")
    shown = [name for name in names if name != "in-memory"]
    print("| cache | " + " | ".join(shown) + " |")
    print("|---|" + "---|" * len(shown))
    for cache in caches:
        cells = (cached[(cache, name)] for name in shown)
        print(f"| {cache} | " + " | ".join(f"{statistics.median(c):.3f} ({min(c):.3f})" for c in cells) + " |")
    workers = "persistent workers" if args.persistent else "workers started each epoch"
    print(f"\n{workers}, medians of {args.runs}; samples/s\n")
    print(
        "| cache | whole dataset | 1% view | view / whole | view without read-ahead | its / whole "
        "| in memory, the view's size (the DataLoader's floor) | floor / whole | view / floor "
        "| a dataset of the view's size | its / whole | view / it |"
        + (" view mapped after its first pass | its / whole |" if args.persistent else "")
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if args.persistent else ""))
    for kind in kinds:
        whole = statistics.median(rates[(kind, "whole")])
        view = statistics.median(rates[(kind, "view")])
        plain = statistics.median(rates[(kind, "view-no-read-ahead")])
        floor = statistics.median(rates[(kind, "in-memory")])
        short = statistics.median(rates[(kind, "small")])
        switched = ""
        if args.persistent:
            before = statistics.median(rates[(kind, "view-mapped-after-first-pass")])
            switched = f" {before:.0f} | {before / whole:.2f} |"
        print(
            f"| {kind} | {whole:.0f} | {view:.0f} | {view / whole:.2f} | {plain:.0f} | {plain / whole:.2f} "
            f"| {floor:.0f} | {floor / whole:.2f} | {view / floor:.2f} "
            f"| {short:.0f} | {short / whole:.2f} | {view / short:.2f} |{switched}"
        )


if __name__ == "__main__":
    main()
