"""Helpers of the PyTorch tests: datasets whose values name their record, and
loaders run to collect the records they yield (also from a fresh process)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

import bcd

HERE = Path(__file__).resolve().parent


def make_dataset(path: Path, n: int, *, compression="lz4", classes=(90, 9, 1), seed=0):
    """A keyless dataset of `n` records whose values start with their index
    (8 digits and `|`), each with a skewed label stored as its field `label`
    (the labels are returned too)."""
    rng = random.Random(seed)
    weights = np.array(classes, dtype=np.float64)
    labels = np.random.default_rng(seed).choice(len(classes), size=n, p=weights / weights.sum())
    labels = labels.astype(np.int64)
    dataset = bcd.Dataset.create(path, compression=compression, max_shard_size=1 << 16)
    dataset.extend(
        {"value": b"%08d|" % i + rng.randbytes(rng.randrange(0, 300)), "label": int(labels[i])} for i in range(n)
    )
    return labels


def index_of(value) -> int:
    return int(bytes(value[:8]))


def batch_indices(batch) -> list[int]:
    """The records of one loader batch, checking each value's bytes name it."""
    import torch

    import bcd.torch

    if isinstance(batch, bcd.torch.Batch):
        out = [index_of(batch.value_bytes(i)) for i in range(len(batch))]
        assert out == batch.indices.tolist()
        return out
    if isinstance(batch, (list, tuple)) and len(batch) == 2 and isinstance(batch[1], torch.Tensor):
        values, labels = batch
        return [index_of(v) for v in values]
    if isinstance(batch, list):
        return [index_of(v) for v in batch]
    raise TypeError(type(batch))


def in_shared_memory(tensor) -> bool:
    """Whether a batch's tensor crossed from a DataLoader worker without its
    bytes being pickled: a shared-memory segment of its own, or a part of one
    of the worker's reused slots."""
    return tensor.is_shared() or hasattr(tensor, "_bcd_slot")


def loader(dataset, sampler=None, *, workers=0, context="fork", batch_size=16, **options):
    """A torch DataLoader over `dataset` with `workers` worker processes
    started by `context`."""
    import torch.utils.data

    if workers:
        options.update(num_workers=workers, multiprocessing_context=context)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler, **options)


def run_in_new_process(function: str, **arguments):
    """Runs `resume_worker.<function>(**arguments)` in a fresh interpreter and
    returns what it prints as JSON."""
    script = (
        f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import resume_worker; "
        f"print(json.dumps(resume_worker.{function}(**json.loads(sys.argv[1]))))"
    )
    result = subprocess.run([sys.executable, "-c", script, json.dumps(arguments)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
