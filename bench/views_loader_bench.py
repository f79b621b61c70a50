"""DataLoader epochs over a view (issue 22): the per-sample rate of an epoch over
a 1% view against that of an epoch over the whole dataset, page cache cold and
warm.

    cargo build --release -p bcd-cli
    .venv/bin/maturin build --release -m python/Cargo.toml -o /work/views-wheels
    .venv/bin/pip install --force-reinstall --no-deps /work/views-wheels/bcd_python-*.whl
    .venv/bin/pip install -r tests/python/requirements-torch.txt
    .venv/bin/python bench/views_loader_bench.py --data /work/bench-views-loader --runs 3

The dataset (made once in --data): --records keyless records of --value-bytes
random bytes (uncompressed), with a field `label` (0..99, uniform), and the view
`one_pct` (`label = 7`: 1% of the records, spread over every shard). An epoch:
`bcd.torch.MapDataset(output="tensor")` (with `view="one_pct"` or not), a
shuffled `bcd.torch.Sampler`, a DataLoader of 2 fork workers, batch 64,
`collate_fn=bcd.torch.collate`, every byte summed in the loop; wall time from
the loader's iterator to its last batch, worker start-up included. Cold: the
dataset's files dropped from the page cache (`posix_fadvise(DONTNEED)` on each,
no other file touched) before the epoch. Warm: after an untimed epoch. Also
"steady": persistent workers, the median of epochs 2..4 (start-up excluded).
Medians over --runs, contenders alternating within a run.
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


def make(path: Path, records: int, value_bytes: int):
    import bcd
    import pyarrow as pa

    if (path / "manifest.json").exists():
        return
    log(f"making {records} records of {value_bytes} bytes")
    dataset = bcd.Dataset.create(path, compression=None, max_shard_size=256 << 20)
    rng = np.random.default_rng(0)
    step = 20_000
    for start in range(0, records, step):
        n = min(step, records - start)
        blob = rng.integers(0, 256, size=n * value_bytes, dtype=np.uint8).tobytes()
        values = [blob[i * value_bytes:(i + 1) * value_bytes] for i in range(n)]
        labels = rng.integers(0, 100, size=n)
        dataset.extend_arrow(pa.table({"value": values, "label": labels}), value_column="value")
    dataset.create_view("one_pct", where="label = 7")


def evict(path: Path):
    for file in path.iterdir():
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def loader(path: Path, view, persistent=False):
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


def epoch(sampler, load, number=0):
    sampler.set_epoch(number)
    started = time.perf_counter()
    samples = 0
    total = 0
    for batch in load:
        total += int(batch.values.sum())
        samples += len(batch)
    return samples, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--value-bytes", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    path = args.data / "ds"
    args.data.mkdir(parents=True, exist_ok=True)
    make(path, args.records, args.value_bytes)
    rates = {(kind, view): [] for kind in ("cold", "warm", "steady") for view in ("whole", "view")}
    for run in range(args.runs):
        order = ("whole", "view") if run % 2 == 0 else ("view", "whole")
        for name in order:
            view = None if name == "whole" else "one_pct"
            sampler, load = loader(path, view)
            evict(path)
            samples, seconds = epoch(sampler, load)
            rates[("cold", name)].append(samples / seconds)
            samples, seconds = epoch(sampler, load, 1)
            rates[("warm", name)].append(samples / seconds)
            sampler, load = loader(path, view, persistent=True)
            steady = []
            for number in range(4):
                samples, seconds = epoch(sampler, load, number)
                if number:
                    steady.append(samples / seconds)
            rates[("steady", name)].append(statistics.median(steady))
            del load
            log(f"run {run} {name}: {samples} samples/epoch")
    print("| cache | whole dataset samples/s | 1% view samples/s | view / whole |")
    print("|---|---|---|---|")
    for kind in ("cold", "warm", "steady"):
        whole = statistics.median(rates[(kind, "whole")])
        view = statistics.median(rates[(kind, "view")])
        print(f"| {kind} | {whole:.0f} | {view:.0f} | {view / whole:.2f} |")


if __name__ == "__main__":
    main()
