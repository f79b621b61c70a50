"""bcd.torch.MapDataset with a ``transform``: each sample goes through it as
``dataset[i]`` gives it, read through the mappings or positionally; a
transform may keep what it is given; and each value is let go as soon as its
transform returns, before the next one is read, so a batch of large values
reuses the same memory instead of holding (and glibc then trimming and the
kernel zeroing again) a whole batch of them."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import torch

import bcd
import bcd.torch

WAYS = [None, True, False]  # positional=: the default (the main process: mapped), positional, mapped


def values_of_every_size(count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)

    def value(i):
        kind = i % 4
        if kind == 0:
            return b""
        if kind == 1:
            return b"word %d " % i * int(rng.integers(1, 400))  # small, compressible
        if kind == 2:
            return rng.integers(0, 256, size=int(rng.integers(1, 5_000)), dtype=np.uint8).tobytes()
        return rng.integers(0, 256, size=int(rng.integers(40_000, 130_000)), dtype=np.uint8).tobytes()  # large

    return [value(i) for i in range(count)]


@pytest.fixture(scope="module", params=[None, "lz4"])
def stored(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("transform") / "d"
    values = values_of_every_size(200, 5)
    bcd.Dataset.create(path, compression=request.param, max_shard_size=2 << 20).extend(values)
    return path, values


def batches(count: int, size: int, seed: int) -> list:
    order = [int(i) for i in np.random.default_rng(seed).permutation(count)]
    return [order[start : start + size] for start in range(0, count, size)]


@pytest.mark.parametrize("positional", WAYS)
def test_each_sample_goes_through_the_transform_which_may_keep_it(stored, positional):
    path, values = stored
    labels = np.arange(len(values)) * 3
    kept = []

    def keep(sample):
        kept.append(sample)
        value, label = sample
        return len(value), label

    dataset = bcd.torch.MapDataset(path, fields={"label": labels}, transform=keep, positional=positional)
    order = []
    for batch in batches(len(values), 64, 1):
        assert dataset.__getitems__(batch) == [(len(values[i]), labels[i]) for i in batch]
        order.extend(batch)
    # The samples the transform kept are intact after every later batch.
    assert [value for value, _ in kept] == [values[i] for i in order]
    assert all(type(value) is bytes for value, _ in kept)
    assert [label for _, label in kept] == [labels[i] for i in order]
    assert dataset[7] == (len(values[7]), labels[7])


@pytest.mark.parametrize("positional", WAYS)
def test_each_value_is_let_go_when_its_transform_returns(stored, positional):
    # A tensor value (output="tensor") can be watched with a weak reference:
    # when the transform is called for a sample, the previous sample's value is
    # already gone, whichever way the batch is read.
    path, values = stored
    previous = []

    def watch(tensor):
        if previous:
            assert previous[-1]() is None, "the previous value is still alive"
        previous.append(weakref.ref(tensor))
        return bytes(tensor.numpy())

    dataset = bcd.torch.MapDataset(path, output="tensor", transform=watch, positional=positional)
    for batch in batches(len(values), 64, 2):
        assert dataset.__getitems__(batch) == [values[i] for i in batch]
    assert len(previous) == len(values)


class GetBatchSpy:
    """A dataset whose ``get_batch`` calls are recorded (how many values each)."""

    def __init__(self, dataset):
        self.dataset, self.calls = dataset, []

    def __len__(self):
        return len(self.dataset)

    def get_batch(self, indices, **how):
        self.calls.append((len(indices), how))
        return self.dataset.get_batch(indices, **how)


def test_positional_values_are_read_in_pieces_of_about_64_kib(tmp_path):
    # Large values (100 KB) one at a time; small ones (500 bytes) in pieces that
    # grow to about 64 KiB of values once their size is known; through the
    # mappings (views of the shards, no new memory) the batch at once.
    rng = np.random.default_rng(8)
    large = [rng.integers(0, 256, size=100_000, dtype=np.uint8).tobytes() for _ in range(20)]
    small = [b"%05d " % i * 83 for i in range(600)]  # 498 bytes each
    for name, values in (("large", large), ("small", small)):
        bcd.Dataset.create(tmp_path / name, compression="lz4").extend(values)
    piece = 64 * 1024 // 498  # small values to a piece, once one has been read
    for name, values, expected in (("large", large, [1] * 20), ("small", small, [1] + [piece] * 4 + [600 - 1 - 4 * piece])):
        dataset = bcd.torch.MapDataset(tmp_path / name, transform=len, positional=True)
        spy = dataset._source = GetBatchSpy(dataset._source)
        batch = list(range(len(values)))
        assert dataset.__getitems__(batch) == [len(value) for value in values]
        assert all(how == {"positional": True} for _, how in spy.calls)
        assert [count for count, _ in spy.calls] == expected, name
    dataset = bcd.torch.MapDataset(tmp_path / "large", transform=len, positional=False)
    spy = dataset._source = GetBatchSpy(dataset._source)
    assert dataset.__getitems__(list(range(20))) == [len(value) for value in large]
    assert [count for count, _ in spy.calls] == [20]


def test_a_transform_in_dataloader_workers_reads_every_value_once(stored):
    # Workers read positionally by default: the epoch's samples are the values.
    path, values = stored
    dataset = bcd.torch.MapDataset(path, transform=lambda value: (len(value), value[:8]))
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=32, sampler=bcd.torch.Sampler(dataset, seed=4), num_workers=2,
        multiprocessing_context="fork", collate_fn=lambda samples: samples,
    )
    seen = [sample for batch in loader for sample in batch]
    assert sorted(seen) == sorted((len(value), value[:8]) for value in values)
