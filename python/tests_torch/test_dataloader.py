"""bcd.torch with a real torch DataLoader: fork and spawn workers, 0 and 2 of
them, several ranks simulated by one sampler each; exactly-once epochs, equal
counts, disjoint ranks, per-epoch orders, the same order in another process,
category balance, resuming in a new process (torch's DataLoader and torchdata's
StatefulDataLoader), refresh, and the shared-memory batch path."""

from __future__ import annotations

import collections
import itertools
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.utils.data

import bcd
import bcd.torch
from loaders import batch_indices, in_shared_memory, index_of, loader, make_dataset, run_in_new_process

N = 301


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "d"
    labels = make_dataset(path, N, compression="lz4")
    return path, labels


def test_samples_are_the_value_and_the_fields(stored):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields={"label": labels})
    value, label = dataset[7]
    assert isinstance(value, bytes) and index_of(value) == 7 and label == labels[7]
    assert index_of(dataset[-1][0]) == N - 1
    assert len(dataset) == N
    tensors = bcd.torch.MapDataset(path, output="tensor")
    assert tensors[3].dtype == torch.uint8 and index_of(bytes(tensors[3].numpy())) == 3
    # One parallel read per batch; bytes mode gives samples default_collate takes.
    samples = dataset.__getitems__([5, 1, -1])
    assert [(index_of(v), l) for v, l in samples] == [(5, labels[5]), (1, labels[1]), (N - 1, labels[-1])]
    batch = tensors.__getitems__([5, 1])
    assert isinstance(batch, bcd.torch.Batch) and len(batch) == 2
    # Its samples are dataset[i]'s: the bare value when no field is asked for.
    assert [index_of(bytes(v.numpy())) for v in batch] == [5, 1]
    assert all(torch.equal(v, tensors[i]) for v, i in zip(batch, [5, 1]))
    with pytest.raises(IndexError):
        dataset[N]
    # Stored fields are read from the dataset; a name it lacks is refused.
    stored_labels = bcd.torch.MapDataset(path, fields=["label"]).column("label")
    assert list(stored_labels) == labels.tolist()
    with pytest.raises(ValueError, match="nope"):
        bcd.torch.MapDataset(path, fields=["nope"]).column("nope")


def test_a_dataset_pickles_as_its_path(stored):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields={"label": labels})
    dataset.column("label")
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy[4] == dataset[4]
    assert len(pickle.dumps(bcd.torch.MapDataset(path))) < 1000


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("output", ["bytes", "tensor"])
def test_ranks_cover_each_epoch_exactly_once_with_equal_counts(stored, context, workers, output):
    if workers == 0 and context == "spawn":
        pytest.skip("no worker processes to start")
    path, labels = stored
    world_size = 3
    dataset = bcd.torch.MapDataset(path, fields={"label": labels}, output=output)
    epochs = []
    for epoch in range(2):
        per_rank = []
        for rank in range(world_size):
            sampler = bcd.torch.Sampler(dataset, seed=11, rank=rank, world_size=world_size)
            sampler.set_epoch(epoch)
            got = []
            for batch in loader(dataset, sampler, workers=workers, context=context, collate_fn=bcd.torch.collate):
                got.extend(batch_indices(batch))
                if output == "tensor":
                    assert batch.fields["label"].tolist() == labels[batch.indices.numpy()].tolist()
                    if workers:
                        assert in_shared_memory(batch.values)  # came through shared memory
                else:
                    assert batch[1].tolist() == labels[got[-len(batch[1]):]].tolist()
            assert got == bcd.partition(N, seed=11, epoch=epoch, rank=rank, world_size=world_size).tolist()
            per_rank.append(got)
        # Equal counts; together every record, the padding only repeating.
        assert {len(p) for p in per_rank} == {-(-N // world_size)}
        counts = collections.Counter(itertools.chain(*per_rank))
        assert set(counts) == set(range(N))
        assert sum(counts.values()) - N == world_size * len(per_rank[0]) - N
        epochs.append(per_rank)
    assert epochs[0] != epochs[1]


@pytest.mark.parametrize("output", ["bytes", "tensor"])
def test_uncompressed_values_travel_the_same_way(tmp_path, output):
    path = tmp_path / "d"
    labels = make_dataset(path, 120, compression=None)
    dataset = bcd.torch.MapDataset(path, fields={"label": labels}, output=output)
    sampler = bcd.torch.Sampler(dataset, seed=1, rank=1, world_size=2)
    got = [i for b in loader(dataset, sampler, workers=2, collate_fn=bcd.torch.collate) for i in batch_indices(b)]
    assert got == bcd.partition(120, seed=1, epoch=0, rank=1, world_size=2).tolist()


def test_drop_last_ranks_are_disjoint(stored):
    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    parts = []
    for rank in range(4):
        sampler = bcd.torch.Sampler(dataset, seed=2, rank=rank, world_size=4, drop_last=True)
        parts.append([i for b in loader(dataset, sampler, batch_size=7) for i in batch_indices(b)])
    together = list(itertools.chain(*parts))
    assert len(together) == len(set(together)) == 4 * (N // 4)


def test_the_same_seed_gives_the_same_order_in_another_process(stored):
    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    sampler = bcd.torch.Sampler(dataset, seed=5, rank=1, world_size=2, block_size=8)
    sampler.set_epoch(3)
    here = [i for b in loader(dataset, sampler, workers=2) for i in batch_indices(b)]
    other = run_in_new_process("partition", n=N, seed=5, epoch=3, rank=1, world_size=2, block_size=8)
    assert here == other


def test_rank_defaults_follow_the_environment(stored, monkeypatch):
    path, _ = stored
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    sampler = bcd.torch.Sampler(bcd.torch.MapDataset(path))
    assert (sampler.rank, sampler.world_size, len(sampler)) == (1, 4, -(-N // 4))


def test_balance_by_keeps_every_prefix_of_the_loaders_output_within_one(stored):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields={"label": labels})
    world_size = 2
    parts = []
    for rank in range(world_size):
        sampler = bcd.torch.Sampler(dataset, seed=3, rank=rank, world_size=world_size, balance_by="label")
        parts.append([i for b in loader(dataset, sampler, workers=2) for i in batch_indices(b)])
    total = sum(map(len, parts))
    shares = np.bincount(labels[list(itertools.chain(*parts))], minlength=3)
    for part in parts:
        running = np.zeros(3, dtype=np.int64)
        for t, index in enumerate(part, start=1):
            running[labels[index]] += 1
            assert ((running >= (t * shares) // total) & (running <= -((-t * shares) // total))).all()


def test_balance_by_a_stored_field_uses_the_codes_every_front_end_uses(stored):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path)
    sampler = bcd.torch.Sampler(dataset, seed=5, balance_by="label")
    got = [i for b in loader(dataset, sampler) for i in batch_indices(b)]
    # The stored field's codes (bcd export --balance-by's), and the same column
    # handed over from pyarrow, give this order.
    codes = bcd.sampling.field_codes(dataset.dataset, "label")
    column = dataset.dataset.fields(["label"]).column("label")
    assert (bcd.sampling.category_codes(column) == codes).all()
    assert got == bcd.partition(N, seed=5, epoch=0, rank=0, world_size=1, categories=codes).tolist()
    assert got == bcd.partition(N, seed=5, epoch=0, rank=0, world_size=1, categories=column).tolist()
    with pytest.raises(ValueError, match=r'has no field "species" for balance_by= \(its fields: label\)'):
        bcd.torch.Sampler(dataset, balance_by="species")


def test_inverse_frequency_sampling_through_a_loader(stored):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields={"label": labels})
    sampler = bcd.torch.Sampler(dataset, seed=1, balance_by=labels, weights="inverse_frequency", num_samples=9)
    got = [i for b in loader(dataset, sampler, batch_size=4) for i in batch_indices(b)]
    assert len(got) == len(set(got)) == 9
    # The order bcd.partition gives; that classes come out equally often on
    # average is tested on large samples in python/tests/test_partition.py.
    assert got == bcd.partition(N, seed=1, epoch=0, rank=0, world_size=1, categories=labels,
                                weights="inverse_frequency", num_samples=9).tolist()


def resume_cases():
    rng = random.Random(4)
    for _ in range(4):
        yield dict(
            n=rng.randrange(40, N + 1),
            world_size=rng.randrange(1, 4),
            workers=rng.choice([0, 2]),
            batch_size=rng.randrange(1, 12),
            drop_last=rng.random() < 0.5,
            k=rng.randrange(0, 8),
        )


@pytest.mark.parametrize("stateful", [False, True], ids=["DataLoader", "StatefulDataLoader"])
@pytest.mark.parametrize("case", list(resume_cases()), ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_a_map_run_resumed_in_a_new_process_yields_the_rest(stored, tmp_path, stateful, case):
    if stateful:
        pytest.importorskip("torchdata.stateful_dataloader")
        from torchdata.stateful_dataloader import StatefulDataLoader
    path, _ = stored
    rank = case["world_size"] - 1
    settings = dict(seed=7, rank=rank, world_size=case["world_size"], drop_last=case["drop_last"])
    dataset = bcd.torch.MapDataset(path, output="tensor")
    sampler = bcd.torch.Sampler(dataset, **settings)
    sampler.set_epoch(2)
    options = dict(batch_size=case["batch_size"], sampler=sampler, collate_fn=bcd.torch.collate)
    if case["workers"]:
        options.update(num_workers=case["workers"], multiprocessing_context="fork")
    make = StatefulDataLoader if stateful else torch.utils.data.DataLoader
    uninterrupted = [i for b in make(dataset, **options) for i in batch_indices(b)]
    sampler.set_epoch(2)
    run = make(dataset, **options)
    taken = []
    for batch in itertools.islice(run, case["k"]):
        taken.extend(batch_indices(batch))
    state = run.state_dict() if stateful else sampler.state_dict(consumed=len(taken))
    state_path = tmp_path / "state.pickle"
    state_path.write_bytes(pickle.dumps(state))
    rest = run_in_new_process(
        "map_rest", path=str(path), state_path=str(state_path), n=N, world_size=case["world_size"], rank=rank,
        workers=case["workers"], batch_size=case["batch_size"], drop_last=case["drop_last"], seed=7, epoch=2,
        stateful=stateful, context="spawn",
    )
    assert taken + rest == uninterrupted


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("workers", [0, 2, 3])
def test_iterable_ranks_and_workers_cover_each_epoch_exactly_once(stored, context, workers):
    if workers == 0 and context == "spawn":
        pytest.skip("no worker processes to start")
    path, labels = stored
    world_size = 2
    per_rank = []
    for rank in range(world_size):
        dataset = bcd.torch.IterableDataset(path, seed=4, rank=rank, world_size=world_size, fields={"label": labels})
        dataset.set_epoch(1)
        got = [i for b in loader(dataset, workers=workers, context=context, batch_size=10) for i in batch_indices(b)]
        assert sorted(got) == sorted(bcd.partition(N, seed=4, epoch=1, rank=rank, world_size=world_size).tolist())
        per_rank.append(got)
    assert {len(p) for p in per_rank} == {-(-N // world_size)}
    assert set(itertools.chain(*per_rank)) == set(range(N))


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_batches_arrive_in_the_epoch_order(stored, workers):
    path, _ = stored
    dataset = bcd.torch.IterableDataset(path, seed=6, rank=0, world_size=1, batch_size=32, output="tensor")
    got = [i for b in loader(dataset, workers=workers, batch_size=None, collate_fn=bcd.torch.collate) for i in batch_indices(b)]
    assert got == bcd.partition(N, seed=6, epoch=0, rank=0, world_size=1).tolist()


@pytest.mark.parametrize("stateful", [False, True], ids=["DataLoader-consumed", "StatefulDataLoader"])
@pytest.mark.parametrize("workers, k", [(0, 3), (2, 0), (2, 5), (3, 4)])
def test_an_iterable_run_resumed_in_a_new_process_yields_the_rest(stored, tmp_path, stateful, workers, k):
    if stateful:
        pytest.importorskip("torchdata.stateful_dataloader")
        from torchdata.stateful_dataloader import StatefulDataLoader
    path, _ = stored
    settings = dict(seed=9, rank=1, world_size=2, batch_size=8, output="tensor")
    dataset = bcd.torch.IterableDataset(path, **settings)
    dataset.set_epoch(1)
    options = dict(batch_size=None, collate_fn=bcd.torch.collate)
    if workers:
        options.update(num_workers=workers, multiprocessing_context="fork")
    make = StatefulDataLoader if stateful else torch.utils.data.DataLoader
    uninterrupted = [i for b in make(dataset, **options) for i in batch_indices(b)]
    run = make(dataset, **options)
    taken = []
    for batch in itertools.islice(run, k):
        taken.extend(batch_indices(batch))
    state = run.state_dict() if stateful else dataset.state_dict(consumed=len(taken))
    state_path = tmp_path / "state.pickle"
    state_path.write_bytes(pickle.dumps(state))
    rest = run_in_new_process(
        "iterable_rest", path=str(path), state_path=str(state_path), world_size=2, rank=1, workers=workers,
        batch_size=8, seed=9, epoch=1, stateful=stateful, context="fork",
    )
    assert taken + rest == uninterrupted


def test_persistent_workers_advance_their_epoch_each_pass(stored):
    path, _ = stored
    dataset = bcd.torch.IterableDataset(path, seed=1, rank=0, world_size=1, batch_size=50)
    run = loader(dataset, workers=2, batch_size=None, persistent_workers=True, collate_fn=bcd.torch.collate)
    for epoch in range(3):
        dataset.set_epoch(epoch)
        got = [i for b in run for i in batch_indices(b)]
        assert got == bcd.partition(N, seed=1, epoch=epoch, rank=0, world_size=1).tolist()


APPEND = "import sys, bcd; bcd.Dataset(sys.argv[1]).extend([b'%08d|new' % i for i in range(int(sys.argv[2]), int(sys.argv[3]))])"


def test_refresh_at_epoch_boundaries_covers_appended_records(tmp_path):
    path = tmp_path / "d"
    make_dataset(path, 50)
    dataset = bcd.torch.MapDataset(path, refresh=True)
    sampler = bcd.torch.Sampler(dataset, seed=0)
    run = loader(dataset, sampler, workers=2, persistent_workers=True, batch_size=8)
    first = [i for b in run for i in batch_indices(b)]
    assert sorted(first) == list(range(50))
    subprocess.run([sys.executable, "-c", APPEND, str(path), "50", "70"], check=True)
    sampler.set_epoch(1)
    second = [i for b in run for i in batch_indices(b)]
    assert sorted(second) == list(range(70))


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_persistent_workers_of_a_refreshing_iterable_pick_up_appended_records(tmp_path, context):
    """Issue 20, item 12: with persistent workers every epoch yielded the first
    50 records while the dataset had 60, then 70, and nothing warned."""
    path = tmp_path / "d"
    make_dataset(path, 50)
    dataset = bcd.torch.IterableDataset(path, seed=3, rank=0, world_size=1, batch_size=10, refresh=True)
    run = loader(dataset, workers=2, context=context, batch_size=None, persistent_workers=True,
                 collate_fn=bcd.torch.collate)
    counts = [50, 60, 70]
    for epoch, count in enumerate(counts):
        if epoch:
            subprocess.run([sys.executable, "-c", APPEND, str(path), str(counts[epoch - 1]), str(count)], check=True)
        dataset.set_epoch(epoch)
        got = [i for b in run for i in batch_indices(b)]
        assert got == bcd.partition(count, seed=3, epoch=epoch, rank=0, world_size=1).tolist(), epoch


def test_persistent_workers_follow_the_epoch_set_in_the_main_process(stored):
    # Epochs 0, 5, 6: workers counting their own passes would have run 0, 1, 2.
    path, _ = stored
    dataset = bcd.torch.IterableDataset(path, seed=1, rank=0, world_size=1, batch_size=50)
    run = loader(dataset, workers=2, batch_size=None, persistent_workers=True, collate_fn=bcd.torch.collate)
    for epoch in (0, 5, 6):
        dataset.set_epoch(epoch)
        got = [i for b in run for i in batch_indices(b)]
        assert got == bcd.partition(N, seed=1, epoch=epoch, rank=0, world_size=1).tolist()


def test_the_readme_example_runs(stored):
    path, labels = stored
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Training with PyTorch", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    code = code.replace('"train.bcd"', repr(str(path)))
    seen = []
    namespace = {"labels": labels, "train_step": lambda images, labels: seen.append((images, labels)), "epochs": 2}
    exec(compile(code, "README.md", "exec"), namespace)
    assert sum(len(batch_labels) for _, batch_labels in seen) == 2 * N
    # The values came through shared memory as one tensor a batch, and each is
    # its record's bytes, beside its label.
    for images, batch_labels in seen:
        assert isinstance(images, bcd.torch.Batch) and in_shared_memory(images.values)
        assert all(isinstance(value, bytes) for value in images)
        assert [labels[index_of(value)] for value in images] == batch_labels.tolist()
