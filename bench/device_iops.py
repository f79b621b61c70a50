"""The device's random-read ceiling, as a cold view's epoch meets it.

A view's records are scattered over its dataset's files, so an epoch over a
small view reads one or two pages per record, each a random read of the disk,
where an epoch over the whole dataset reads every page in long runs. This
script measures how many random 4 KiB reads a second the disk under
``--dir`` serves at several queue depths (pages asked for with
``posix_fadvise(WILLNEED)`` a batch at a time, then read), from a file it
writes and evicts from the page cache (``POSIX_FADV_DONTNEED``) before each
depth, so nothing else's cache is dropped.

    python3 bench/device_iops.py --dir /tmp/iops --megabytes 512 --reads 8192 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

PAGE = 4096


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--megabytes", type=int, default=512)
    parser.add_argument("--reads", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depths", default="1,16,64,256,1024,4096")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / "iops.bin"
    size = args.megabytes << 20
    with open(path, "wb") as out:
        for _ in range(args.megabytes):
            out.write(os.urandom(1 << 20))
        out.flush()
        os.fsync(out.fileno())
    fd = os.open(path, os.O_RDONLY)
    pages = size // PAGE
    depths = [int(d) for d in args.depths.split(",")]
    results: dict[int, list[float]] = {depth: [] for depth in depths}
    try:
        for round_ in range(args.rounds):
            for depth in depths if round_ % 2 == 0 else depths[::-1]:
                os.posix_fadvise(fd, 0, size, os.POSIX_FADV_DONTNEED)
                rng = random.Random(round_ * 1000 + depth)
                offsets = [rng.randrange(pages) * PAGE for _ in range(args.reads)]
                start = time.perf_counter()
                for at in range(0, len(offsets), depth):
                    chunk = offsets[at : at + depth]
                    if depth > 1:
                        for offset in chunk:
                            os.posix_fadvise(fd, offset, PAGE, os.POSIX_FADV_WILLNEED)
                    for offset in chunk:
                        os.pread(fd, 1, offset)
                results[depth].append(len(offsets) / (time.perf_counter() - start))
    finally:
        os.close(fd)
        path.unlink()
    print(f"random {PAGE}-byte reads of a {args.megabytes} MB file, {args.reads} a run, medians of {args.rounds}\n")
    print("| queue depth | reads/s, median (min-max) |")
    print("|---|---|")
    for depth, rates in results.items():
        print(f"| {depth} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) |")


if __name__ == "__main__":
    main()
