"""Runs the Python reference implementation (bitcask-dataset 0.2.0 / 0.3.0) on
Python 3.11, and exposes it to the Rust interop tests as a small command-line tool.

The releases declare Requires-Python >= 3.14 but only use four newer idioms:
`type X = ...` alias statements, `collections.abc.Buffer`, `os.process_cpu_count`
and `Executor.map(buffersize=...)`. `load()` shims exactly those (plus deferred
annotations, which the `-> BitcaskDataset` forward reference needs before 3.14)
and executes the unmodified source of the installed release.

Usage (datasets are described as JSON on stdin/stdout, bytes as hex strings):

    reference.py VERSION create PATH [--keyed] [--compression lz4|none] [--max-shard-size N]
    reference.py VERSION extend PATH [--max-shard-size N]   # stdin: [[key, value], ...] or [value, ...]
    reference.py VERSION dump PATH                         # stdout: {"keyed", "compression", "shards", "records"}
    reference.py VERSION compress HEX                       # stdout: the stored LZ4 block, hex
    reference.py VERSION decompress HEX                     # stdout: the value the reference reads from a stored LZ4 value, hex
    reference.py VERSION batch                              # stdin: [step, ...]; stdout: [result, ...]

A batch runs many commands in one process, as each start costs ~0.3 s. A step is
{"command", "path", "keyed", "compression", "max_shard_size", "input"}: the command
line's arguments (HEX goes in "path", options may be left out) plus, as "input", what
the command would read from stdin. Its result is what the command would print, or null.
"""

from __future__ import annotations

import abc
import argparse
import array
import collections
import collections.abc
import concurrent.futures
import itertools
import json
import mmap
import os
import re
import sys
import types
from pathlib import Path

VENV = Path(os.environ.get("BCD_TEST_VENV", Path(__file__).resolve().parents[2] / ".venv"))


class _Buffer(abc.ABC):
    """Stand-in for collections.abc.Buffer (3.12+): the builtin buffer types."""


for _kind in (bytes, bytearray, memoryview, mmap.mmap, array.array):
    _Buffer.register(_kind)


def _bounded_map(original):
    def map(self, fn, *iterables, timeout=None, chunksize=1, buffersize=None):
        if buffersize is None:
            return original(self, fn, *iterables, timeout=timeout, chunksize=chunksize)

        # 3.14 semantics: at most `buffersize` tasks are pending, so the input
        # iterator is consumed lazily, as results are taken.
        arguments = zip(*iterables)

        def results():
            pending = collections.deque(
                self.submit(fn, *args) for args in itertools.islice(arguments, buffersize)
            )
            while pending:
                result = pending.popleft().result(timeout)
                for args in itertools.islice(arguments, 1):
                    pending.append(self.submit(fn, *args))
                yield result

        return results()

    return map


def _install_shims() -> None:
    if not hasattr(collections.abc, "Buffer"):
        import numpy

        _Buffer.register(numpy.ndarray)
        collections.abc.Buffer = _Buffer
    if not hasattr(os, "process_cpu_count"):
        os.process_cpu_count = lambda: len(os.sched_getaffinity(0))
    executor = concurrent.futures.Executor
    if "buffersize" not in executor.map.__code__.co_varnames:
        executor.map = _bounded_map(executor.map)


def load(version: str) -> type:
    """Returns the BitcaskDataset class of the installed reference release."""
    root = VENV / "reference" / version
    path = root / "bitcask_dataset" / "dataset.py"
    if not path.exists():
        sys.exit(f"reference {version} is not installed under {root}: run tests/python/setup-env.sh")
    sys.path.insert(0, str(root))  # for its own dependencies' sake, not the package
    _install_shims()
    source = path.read_text()
    source = re.sub(r"^type (\w+) = ", r"\1 = ", source, flags=re.MULTILINE)
    name = f"bitcask_dataset_{version.replace('.', '_')}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    code = compile("from __future__ import annotations\n" + source, str(path), "exec")
    exec(code, module.__dict__)
    return module.BitcaskDataset


def _compression(text: str):
    return None if text == "none" else text


def run(
    dataset_class: type,
    command: str,
    path: str,
    *,
    keyed: bool = False,
    compression: str = "lz4",
    max_shard_size: int | None = None,
    input: object = None,
) -> object:
    """Runs one command; returns what it prints, as a JSON value (None if nothing)."""
    module = sys.modules[dataset_class.__module__]
    if command == "compress":
        stored = module._compress((b"", memoryview(bytes.fromhex(path))))[1]
        return bytes(stored).hex()
    if command == "decompress":
        # As the reference's `at` reads a non-empty LZ4 value: its module's
        # `lz4.block.decompress` of the stored bytes, size prefix included.
        return bytes(module.block.decompress(bytes.fromhex(path))).hex()
    if command == "create":
        options = {"keyed": keyed, "compression": _compression(compression)}
        if max_shard_size is not None:
            options["max_shard_size"] = max_shard_size
        dataset_class.create(path, **options)
        return None
    if command == "extend":
        dataset = dataset_class(path)
        if dataset.keyed:
            entries = [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in input]
        else:
            entries = [bytes.fromhex(v) for v in input]
        options = {}
        if max_shard_size is not None:
            options["max_shard_size"] = max_shard_size  # 0.2.0 takes it per extend
        # A generator, as users pass one: the reference must consume it lazily.
        dataset.extend((entry for entry in entries), **options)
        return None
    if command != "dump":
        raise ValueError(f"unknown command: {command!r}")
    dataset = dataset_class(path)
    records = []
    for index in range(len(dataset)):
        value = bytes(dataset.at(index)).hex()
        if dataset.keyed:
            key = bytes(dataset.key_at(index))
            assert bytes(dataset[key]).hex() == value and key in dataset
            records.append([key.hex(), value])
        else:
            records.append(value)
    return {
        "keyed": dataset.keyed,
        "compression": dataset.compression,
        "shards": len(dataset._shards),  # the shards it mapped: the manifest's count
        "records": records,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("version", choices=["0.2.0", "0.3.0"])
    parser.add_argument("command", choices=["create", "extend", "dump", "compress", "decompress", "batch"])
    parser.add_argument("path", nargs="?")
    parser.add_argument("--keyed", action="store_true")
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--max-shard-size", type=int)
    args = parser.parse_args()
    if (args.path is None) != (args.command == "batch"):
        parser.error("batch takes no PATH; every other command needs one")
    dataset_class = load(args.version)

    if args.command == "batch":
        steps = json.load(sys.stdin)
        results = [run(dataset_class, step.pop("command"), **step) for step in steps]
        json.dump(results, sys.stdout)
        return
    input = json.load(sys.stdin) if args.command == "extend" else None
    result = run(
        dataset_class,
        args.command,
        args.path,
        keyed=args.keyed,
        compression=args.compression,
        max_shard_size=args.max_shard_size,
        input=input,
    )
    if args.command in ("compress", "decompress"):
        print(result)
    elif result is not None:
        json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
