"""The resumed halves of the resume tests, run in a new process: each loads a
saved state (JSON) and returns the records the rest of the epoch yields."""

from __future__ import annotations

import json
import pickle

import torch.utils.data

import bcd.torch
from loaders import batch_indices


def map_rest(path, state_path, n, world_size, rank, workers, batch_size, drop_last, seed, epoch, stateful, context):
    with open(state_path, "rb") as file:
        state = pickle.load(file)
    dataset = bcd.torch.MapDataset(path, output="tensor")
    sampler = bcd.torch.Sampler(dataset, seed=seed, rank=rank, world_size=world_size, drop_last=drop_last)
    options = dict(batch_size=batch_size, sampler=sampler, num_workers=workers, collate_fn=bcd.torch.collate)
    if workers:
        options["multiprocessing_context"] = context
    if stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader

        loader = StatefulDataLoader(dataset, **options)
        loader.load_state_dict(state)
    else:
        loader = torch.utils.data.DataLoader(dataset, **options)
        sampler.load_state_dict(state)
    sampler.set_epoch(epoch)  # the loop's call: keeps the loaded position
    return [i for batch in loader for i in batch_indices(batch)]


def iterable_rest(path, state_path, world_size, rank, workers, batch_size, seed, epoch, stateful, context):
    with open(state_path, "rb") as file:
        state = pickle.load(file)
    dataset = bcd.torch.IterableDataset(
        path, seed=seed, rank=rank, world_size=world_size, batch_size=batch_size, output="tensor"
    )
    options = dict(batch_size=None, num_workers=workers, collate_fn=bcd.torch.collate)
    if workers:
        options["multiprocessing_context"] = context
    if stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader

        loader = StatefulDataLoader(dataset, **options)
        dataset.set_epoch(epoch)
        loader.load_state_dict(state)
    else:
        dataset.load_state_dict(state)
        dataset.set_epoch(epoch)
        loader = torch.utils.data.DataLoader(dataset, **options)
    return [i for batch in loader for i in batch_indices(batch)]


def mix_rest(root, state_path, sizes, weights, seed, rank, world_size, epoch, workers, stateful):
    """The rest of a mix's epoch, as (source, record) pairs."""
    from pathlib import Path

    with open(state_path, "rb") as file:
        state = pickle.load(file)
    sources = [bcd.torch.MapDataset(Path(root) / f"s{k}", output="tensor") for k in range(len(sizes))]
    mix = bcd.torch.Mix(sources, weights, seed=seed)
    sampler = bcd.torch.Sampler(mix, rank=rank, world_size=world_size)
    options = dict(batch_size=6, sampler=sampler, num_workers=workers, collate_fn=bcd.torch.collate)
    if workers:
        options["multiprocessing_context"] = "spawn"
    if stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader

        loader = StatefulDataLoader(mix, **options)
        loader.load_state_dict(state)
    else:
        loader = torch.utils.data.DataLoader(mix, **options)
        sampler.load_state_dict(state)
    sampler.set_epoch(epoch)
    return [(int(s), int(r)) for batch in loader for s, r in zip(batch.sources.tolist(), batch.indices.tolist())]


def partition(**settings):
    return bcd.partition(**settings).tolist()


if __name__ == "__main__":
    print(json.dumps("ok"))
