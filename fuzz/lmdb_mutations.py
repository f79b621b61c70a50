#!/usr/bin/env python3
"""How often does a damaged LMDB data file that passes the source's checks
still crash liblmdb? Mutates the data files of fixtures/lmdb/ (random bytes,
16-bit and 64-bit numbers written over page headers and nodes, never the
meta pages' checked fields alone), runs `bcd ingest` on each mutant in a
subprocess, and counts the outcomes: read whole, refused with an error naming
the data file, or killed by a signal (a crash inside liblmdb).

    cargo build -p bcd-cli
    python3 fuzz/lmdb_mutations.py [--bcd target/debug/bcd] [--runs 2000] [--seed 1]

The numbers it prints are the README's (LMDB limits).
"""

import argparse
import collections
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lmdb"
SOURCES = [
    ("raw/data.mdb", []),
    ("pickle-dict/data.mdb", ["--lmdb-value", "pickle"]),
    ("caffe-datum/data.mdb", ["--lmdb-value", "caffe-datum"]),
    ("named/data.mdb", ["--lmdb-db", "train"]),
]
PAGE = 4096


def mutate(data: bytearray, rng: random.Random) -> None:
    """A few changes past the meta pages: what a torn write or a bit rot does,
    and what a crafted file does to page headers (flags, lower/upper bounds,
    overflow counts) and node offsets."""
    for _ in range(rng.choice([1, 1, 2, 4])):
        kind = rng.random()
        page = rng.randrange(2, max(3, len(data) // PAGE))
        base = page * PAGE
        if base + PAGE > len(data):
            return
        if kind < 0.4:
            at = base + rng.randrange(PAGE)
            data[at] ^= 1 << rng.randrange(8)
        elif kind < 0.7:
            # A page header field: flags (10), lower (12), upper (14), or a node
            # offset (16..).
            at = base + rng.choice([10, 12, 14, 16, 18, 20, 22])
            value = rng.choice([0, 1, 0xFFFF, rng.randrange(0x10000)])
            data[at:at + 2] = value.to_bytes(2, "little")
        elif kind < 0.85:
            # A page number (branch children, overflow pages) or a page count.
            at = base + rng.randrange(0, PAGE - 8)
            value = rng.choice([0, 1, 2**32 - 1, rng.randrange(2**20), 2**63])
            data[at:at + 8] = value.to_bytes(8, "little")
        else:
            at = base + rng.randrange(PAGE - 64)
            data[at:at + 64] = rng.randbytes(64)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bcd", default=str(ROOT / "target" / "debug" / "bcd"))
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    outcomes = collections.Counter()
    crashes = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for run in range(args.runs):
            name, flags = SOURCES[run % len(SOURCES)]
            data = bytearray((FIXTURES / name).read_bytes())
            mutate(data, rng)
            env = tmp / f"env-{run}"
            env.mkdir()
            (env / "data.mdb").write_bytes(data)
            into = tmp / f"ds-{run}"
            result = subprocess.run(
                [args.bcd, "ingest", str(env), "--format", "lmdb", "--into", str(into), *flags],
                capture_output=True,
                timeout=60,
            )
            if result.returncode < 0:
                outcome = f"killed by {signal.Signals(-result.returncode).name}"
                keep = ROOT / "fuzz" / "artifacts" / "lmdb_mutations" / f"crash-{args.seed}-{run}.mdb"
                keep.parent.mkdir(parents=True, exist_ok=True)
                keep.write_bytes(data)
                crashes.append(str(keep))
            elif result.returncode == 0:
                outcome = "read whole"
            elif b"data.mdb" in result.stderr and b"panicked" not in result.stderr:
                outcome = "refused naming the file"
            else:
                outcome = "other failure"
                print(result.stderr.decode(errors="replace"), file=sys.stderr)
            if into.exists() and result.returncode != 0:
                outcome += " (left a dataset)"
            outcomes[outcome] += 1
            shutil.rmtree(env)
            shutil.rmtree(into, ignore_errors=True)
    for outcome, n in outcomes.most_common():
        print(f"{outcome}: {n} of {args.runs} ({100 * n / args.runs:.1f}%)")
    for path in crashes[:10]:
        print("kept", path)


if __name__ == "__main__":
    main()
