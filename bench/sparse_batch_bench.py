"""Sparse batches of a 1% view in one process, warm page cache: microseconds per
batch of 64 values read through the mappings (already mapped) and with
positional reads (``get_batch_into(positional=True)``, what a sparse view's
batches use in a DataLoader worker's first epoch), over a dataset of many
shards read in random order.

    .venv/bin/python bench/sparse_batch_bench.py --data /tmp/sparse-bench --shards 100 --runs 5

The dataset (made once in --data): --records keyless records of 2,048 random
bytes (uncompressed) in --shards shards, a field ``label`` (0..99) and the view
``one_pct`` (``label = 7``). Each run reads the view in a new random order, one
way after the other (alternating which goes first); medians over --runs.
Compare builds by running this with each on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def make(path: Path, records: int, shards: int) -> None:
    """views_loader_bench's dataset, each shard one extend of records / shards."""
    import views_loader_bench

    views_loader_bench.make(path, records, 2048, step=-(-records // shards))


def main() -> None:
    import bcd

    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--shards", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    path = args.data / f"ds-{args.records}-{args.shards}"
    make(path, args.records, args.shards)
    dataset = bcd.Dataset(path)
    records = dataset.view("one_pct").indices.astype(np.int64)
    out = bytearray(64 * 2048)
    rng = np.random.default_rng(1)

    def batch_us(positional: bool) -> float:
        order = records[rng.permutation(len(records))]
        batches = range(0, len(order) - 63, 64)
        started = time.perf_counter()
        for at in batches:
            dataset.get_batch_into(order[at:at + 64], lambda _: out, positional=positional)
        return (time.perf_counter() - started) / len(batches) * 1e6

    batch_us(False)  # everything mapped and cached
    batch_us(True)
    times = {False: [], True: []}
    for run in range(args.runs):
        for positional in ((False, True) if run % 2 == 0 else (True, False)):
            times[positional].append(batch_us(positional))
    mapped, positional = statistics.median(times[False]), statistics.median(times[True])
    print(f"{bcd.__file__}: {len(records)} values of a 1% view over {len(dataset.shard_ranges())} shards, batches of 64")
    print(f"| mapped us/batch | positional us/batch | positional / mapped |\n|---|---|---|")
    print(f"| {mapped:.1f} | {positional:.1f} | {positional / mapped:.2f}x |")


if __name__ == "__main__":
    main()
