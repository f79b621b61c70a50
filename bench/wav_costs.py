"""Where a WAV sample's time goes, per store: the cost of one value read the
way each store's DataLoader worker reads it, with and without the protocol's
preprocessing (issue 24's research protocol, `read_bench.py protocol`).

One process, the stores of `read_bench.py`'s protocol corpus (run that first:
`read_bench.py --data DIR --megabytes 450 protocol` makes them), shuffled
order, batches of 64 as a worker takes them, medians of `--passes` passes
(the first pass of each, in a fresh process's page tables, listed apart):

- bcd positional: `MapDataset(transform=..., positional=True)`, what a
  DataLoader worker reads by default;
- bcd mapped: the same with `positional=False`;
- LMDB: `txn.get` per index, as `read_bench.LmdbValues`;
- the preprocessing alone, over values already in memory;
- the copy out of the page cache alone: `os.preadv` of a value's size at
  random offsets of the shard file, into one reused buffer (the kernel's copy,
  what a positional read is made of).

    /work/venvs/read/bin/python bench/wav_costs.py --data /work/bench-data-read --passes 5
"""

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import read_bench  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--megabytes", type=int, default=450)
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()

    import bcd.torch

    base = args.data / f"protocol-{args.megabytes}MB" / "wav"
    n = len(bcd.Dataset(str(base / "bcd")))
    order = list(range(n))
    random.Random(1).shuffle(order)
    batches = [order[i:i + 64] for i in range(0, n, 64)]
    values = [(base / f"{i:06d}.wav").read_bytes() for i in order[:2000]]
    mean = sum(map(len, values)) // len(values)

    def bcd_pass(positional, preprocess):
        transform = read_bench.Preprocessed("wav") if preprocess else len
        dataset = bcd.torch.MapDataset(base / "bcd", transform=transform, positional=positional)
        return lambda: [dataset.__getitems__(b) for b in batches]

    def lmdb_pass(preprocess):
        dataset = read_bench.LmdbValues(str(base / "lmdb"), n, "wav", "preprocess" if preprocess else "read")
        if preprocess:
            return lambda: [[dataset[i] for i in b] for b in batches]
        # Each value let go before the next is read, as the transform does.
        return lambda: [[len(dataset[i]) for i in b] for b in batches]

    def preprocess_only():
        return lambda: [read_bench.preprocess("wav", v) for v in values]

    def kernel_copy():
        path = base / "bcd" / "000000.bin"
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        rnd = random.Random(2)
        offsets = [rnd.randrange(0, size - mean) for _ in range(n)]
        buffer = memoryview(bytearray(mean))
        return lambda: [os.preadv(fd, [buffer], o) for o in offsets]

    contenders = {
        "bcd positional, read (transform len)": lambda: bcd_pass(True, False),
        "bcd mapped, read (transform len)": lambda: bcd_pass(False, False),
        "LMDB, read": lambda: lmdb_pass(False),
        "bcd positional, read + preprocess": lambda: bcd_pass(True, True),
        "bcd mapped, read + preprocess": lambda: bcd_pass(False, True),
        "LMDB, read + preprocess": lambda: lmdb_pass(True),
        "preprocess alone": preprocess_only,
        f"pread of {mean:,} bytes at random offsets (kernel copy)": kernel_copy,
    }
    per_value = {"preprocess alone": len(values)}
    print(f"{n} WAV values, {mean:,} bytes on average; us per value, median of {args.passes} passes (first pass)")
    print("| what | us per value | first pass |")
    print("|---|---|---|")
    for name, make in contenders.items():
        run = make()
        times = []
        for _ in range(args.passes + 1):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        count = per_value.get(name, n)
        print(f"| {name} | {statistics.median(times[1:]) / count * 1e6:.1f} | {times[0] / count * 1e6:.1f} |")


if __name__ == "__main__":
    main()
