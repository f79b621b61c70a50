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
    reference.py VERSION dump PATH                         # stdout: {"keyed", "compression", "records"}
    reference.py VERSION compress HEX                       # stdout: the stored LZ4 block, hex
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("version", choices=["0.2.0", "0.3.0"])
    parser.add_argument("command", choices=["create", "extend", "dump", "compress"])
    parser.add_argument("path")
    parser.add_argument("--keyed", action="store_true")
    parser.add_argument("--compression", default="lz4")
    parser.add_argument("--max-shard-size", type=int)
    args = parser.parse_args()
    dataset_class = load(args.version)
    module = sys.modules[dataset_class.__module__]

    if args.command == "compress":
        stored = module._compress((b"", memoryview(bytes.fromhex(args.path))))[1]
        print(bytes(stored).hex())
    elif args.command == "create":
        options = {"keyed": args.keyed, "compression": _compression(args.compression)}
        if args.max_shard_size is not None:
            options["max_shard_size"] = args.max_shard_size
        dataset_class.create(args.path, **options)
    elif args.command == "extend":
        dataset = dataset_class(args.path)
        entries = json.load(sys.stdin)
        if dataset.keyed:
            entries = [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in entries]
        else:
            entries = [bytes.fromhex(v) for v in entries]
        options = {}
        if args.max_shard_size is not None:
            options["max_shard_size"] = args.max_shard_size  # 0.2.0 takes it per extend
        # A generator, as users pass one: the reference must consume it lazily.
        dataset.extend((entry for entry in entries), **options)
    else:
        dataset = dataset_class(args.path)
        records = []
        for index in range(len(dataset)):
            value = bytes(dataset.at(index)).hex()
            if dataset.keyed:
                key = bytes(dataset.key_at(index))
                assert bytes(dataset[key]).hex() == value and key in dataset
                records.append([key.hex(), value])
            else:
                records.append(value)
        json.dump(
            {"keyed": dataset.keyed, "compression": dataset.compression, "records": records},
            sys.stdout,
        )


if __name__ == "__main__":
    main()
