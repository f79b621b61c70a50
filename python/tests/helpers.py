"""Helpers shared by the Python package's tests: the reference implementation,
the repository's fixtures, deterministic records, and directory snapshots."""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

sys.path.insert(0, str(ROOT / "tests" / "python"))
import reference  # noqa: E402  (tests/python/reference.py: runs bitcask-dataset on 3.11)

_reference_classes: dict[str, type] = {}


def reference_class(version: str) -> type:
    """The reference's BitcaskDataset class of release `version` (0.2.0 or 0.3.0)."""
    if version not in _reference_classes:
        _reference_classes[version] = reference.load(version)
    return _reference_classes[version]


def records(count: int, *, keyed: bool, seed: int = 0) -> list:
    """`count` deterministic records of every kind the format must carry: empty
    values, compressible text, incompressible bytes, a value larger than the small
    shard sizes the tests use; keys include the empty key and non-UTF-8 bytes."""
    rng = random.Random(seed)
    words = [b"cat", b"dog", b"jpeg", b"token", b"\n", b" ", b"\x00\xff"]
    out = []
    for i in range(count):
        kind = i % 5
        if kind == 0:
            value = b""
        elif kind == 1:
            value = b"".join(rng.choice(words) for _ in range(rng.randrange(1, 400)))
        elif kind == 2:
            value = rng.randbytes(rng.randrange(1, 300))
        elif kind == 3:
            value = bytes(rng.randrange(4)) * rng.randrange(1, 2000)
        else:
            value = rng.randbytes(3000)  # larger than a 2 KiB shard limit: a shard of its own
        if keyed:
            key = b"" if i == 0 else b"%d/\xfe%s.bin" % (i, rng.randbytes(2).hex().encode())
            out.append((key, value))
        else:
            out.append(value)
    return out


def read_all(dataset) -> list:
    """Every record of a bcd or reference dataset as bytes, (key, value) when keyed."""
    out = []
    for index in range(len(dataset)):
        value = bytes(dataset.at(index))
        if dataset.keyed:
            out.append((bytes(dataset.key_at(index)), value))
        else:
            out.append(value)
    return out


def snapshot(path: Path) -> dict[str, str]:
    """Every file under `path`, by relative name, with a digest of its bytes."""
    return {
        str(file.relative_to(path)): hashlib.sha256(file.read_bytes()).hexdigest()
        for file in sorted(path.rglob("*"))
        if file.is_file()
    }


def shard_files(path: Path) -> dict[str, bytes]:
    """The shard files (.bin/.idx) of a dataset directory, by name."""
    return {
        file.name: file.read_bytes()
        for file in sorted(path.iterdir())
        if file.suffix in (".bin", ".idx")
    }
