"""bcd.torch.Mix with real DataLoaders, and elastic resumes: samples that say
their source, each source's share on every prefix of what the loader yields,
exact coverage across ranks x workers (Sampler and IterableDataset, fork and
spawn), resuming mid-epoch in a new process (torch's DataLoader and torchdata's
StatefulDataLoader), resuming on another number of ranks (8 to 3, 2 to 5) and
with another number of workers, and the README's examples."""

from __future__ import annotations

import collections
import itertools
import pickle
import random
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.utils.data

import bcd
import bcd.torch
from loaders import batch_indices, index_of, make_dataset, run_in_new_process

SIZES = (120, 9, 40)
WEIGHTS = (0.5, 0.3, 0.2)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    labels = []
    for k, n in enumerate(SIZES):
        labels.append(make_dataset(root / f"s{k}", n, seed=k))
    return root, labels


def mix_of(root, labels, output="bytes", **settings):
    datasets = [bcd.torch.MapDataset(root / f"s{k}", fields={"label": labels[k]}, output=output) for k in range(len(SIZES))]
    return bcd.torch.Mix(datasets, WEIGHTS, **settings)


def pairs_of(batch, labels) -> list:
    """The (source, record) of each sample of a loader's batch of a mix,
    checking that each value and label is its record's."""
    if isinstance(batch, bcd.torch.Batch):
        out = [(int(s), index_of(batch.value_bytes(i))) for i, s in enumerate(batch.sources.tolist())]
        assert [r for _, r in out] == batch.indices.tolist()
        got = batch.fields["label"].tolist()
    else:  # default_collate of (source, (value, label)) pairs
        sources, (values, got) = batch
        out = [(int(s), index_of(v)) for s, v in zip(sources.tolist(), values)]
        got = got.tolist()
    assert got == [int(labels[s][r]) for s, r in out]
    return out


def flat(lengths, pairs):
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [int(offsets[s]) + r for s, r in pairs]


def test_a_mix_indexes_its_sources_back_to_back(sources):
    root, labels = sources
    mix = mix_of(root, labels)
    assert len(mix) == sum(SIZES)
    source, (value, label) = mix[120 + 4]
    assert (source, index_of(value), label) == (1, 4, labels[1][4])
    assert mix[-1][0] == 2 and index_of(mix[-1][1][0]) == 39
    with pytest.raises(IndexError):
        mix[sum(SIZES)]
    got = mix.__getitems__([130, 0, 125, 168])
    assert [(s, index_of(v)) for s, (v, _) in got] == [(2, 1), (0, 0), (1, 5), (2, 39)]
    # Sources giving Batches: one Batch of them, in the order asked for.
    tensors = mix_of(root, labels, output="tensor")
    batch = tensors.__getitems__([130, 0, 125, 168, 3])
    assert isinstance(batch, bcd.torch.Batch)
    assert pairs_of(batch, labels) == [(2, 1), (0, 0), (1, 5), (2, 39), (0, 3)]
    assert batch[2][0] == 1 and index_of(bytes(batch[2][1][0].numpy())) == 5
    # Pickles as its sources (paths) and settings.
    assert len(pickle.dumps(mix)) < 20000 and pickle.loads(pickle.dumps(mix))[124][0] == 1
    with pytest.raises(ValueError, match=r"weights= has 2 entries for 3 sources"):
        bcd.torch.Mix(mix.sources, [1, 1])
    with pytest.raises(TypeError, match=r"seed= of a mixture's epochs are the mix's own"):
        bcd.torch.Sampler(mix, seed=3)


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("output", ["bytes", "tensor"])
def test_ranks_of_a_mix_take_each_source_its_share_on_every_prefix(sources, context, workers, output):
    if workers == 0 and context == "spawn":
        pytest.skip("no worker processes to start")
    root, labels = sources
    mix = mix_of(root, labels, output=output, seed=12, num_samples=300)
    world_size = 3
    parts = []
    for rank in range(world_size):
        sampler = bcd.torch.Sampler(mix, rank=rank, world_size=world_size)
        sampler.set_epoch(1)
        options = dict(batch_size=16, sampler=sampler, collate_fn=bcd.torch.collate if output == "tensor" else None)
        if workers:
            options.update(num_workers=workers, multiprocessing_context=context)
        got = [p for batch in torch.utils.data.DataLoader(mix, **options) for p in pairs_of(batch, labels)]
        sources_, records = bcd.partition_mix(SIZES, WEIGHTS, seed=12, epoch=1, rank=rank, world_size=world_size, num_samples=300)
        assert got == list(zip(sources_.tolist(), records.tolist()))
        parts.append(got)
    total = sum(map(len, parts))
    assert total == 300
    shares = collections.Counter(s for part in parts for s, _ in part)
    assert all(abs(shares[k] - total * WEIGHTS[k]) < 1 for k in range(3))
    for part in parts:
        running = collections.Counter()
        for t, (s, _) in enumerate(part, start=1):
            running[s] += 1
            for k in range(3):
                assert t * shares[k] // total <= running[k] <= -(-t * shares[k] // total)
    # The 9-record source gives 90 samples: every record 10 times.
    assert set(collections.Counter(r for part in parts for s, r in part if s == 1).values()) == {10}


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("workers", [0, 2, 3])
def test_an_iterable_mix_covers_each_epoch_exactly_once_over_ranks_and_workers(sources, context, workers):
    if workers == 0 and context == "spawn":
        pytest.skip("no worker processes to start")
    root, labels = sources
    mix = mix_of(root, labels, output="tensor", seed=5)
    everything = []
    for rank in range(2):
        dataset = bcd.torch.IterableDataset(mix, rank=rank, world_size=2, batch_size=10)
        dataset.set_epoch(3)
        options = dict(batch_size=None, collate_fn=bcd.torch.collate)
        if workers:
            options.update(num_workers=workers, multiprocessing_context=context)
        got = [p for batch in torch.utils.data.DataLoader(dataset, **options) for p in pairs_of(batch, labels)]
        # Batches arrive in the rank's epoch order.
        assert flat(SIZES, got) == bcd.partition_mix(SIZES, WEIGHTS, seed=5, epoch=3, rank=rank, world_size=2, pairs=False).tolist()
        everything.extend(got)
    want = [p for r in range(2) for p in zip(*[a.tolist() for a in bcd.partition_mix(SIZES, WEIGHTS, seed=5, epoch=3, rank=r, world_size=2)])]
    assert collections.Counter(everything) == collections.Counter(want)


@pytest.mark.parametrize("stateful", [False, True], ids=["DataLoader", "StatefulDataLoader"])
@pytest.mark.parametrize("workers, k", [(0, 3), (2, 5)])
def test_a_mix_run_resumed_in_a_new_process_yields_the_rest(sources, tmp_path, stateful, workers, k):
    if stateful:
        pytest.importorskip("torchdata.stateful_dataloader")
        from torchdata.stateful_dataloader import StatefulDataLoader
    root, labels = sources
    mix = mix_of(root, labels, output="tensor", seed=8)
    sampler = bcd.torch.Sampler(mix, rank=1, world_size=2)
    sampler.set_epoch(2)
    options = dict(batch_size=6, sampler=sampler, collate_fn=bcd.torch.collate)
    if workers:
        options.update(num_workers=workers, multiprocessing_context="fork")
    make = StatefulDataLoader if stateful else torch.utils.data.DataLoader
    uninterrupted = [p for b in make(mix, **options) for p in pairs_of(b, labels)]
    sampler.set_epoch(2)
    run = make(mix, **options)
    taken = [p for b in itertools.islice(run, k) for p in pairs_of(b, labels)]
    state = run.state_dict() if stateful else sampler.state_dict(consumed=len(taken))
    (tmp_path / "state.pickle").write_bytes(pickle.dumps(state))
    rest = run_in_new_process(
        "mix_rest", root=str(root), state_path=str(tmp_path / "state.pickle"), sizes=list(SIZES), weights=list(WEIGHTS),
        seed=8, rank=1, world_size=2, epoch=2, workers=workers, stateful=stateful,
    )
    assert taken + [tuple(p) for p in rest] == uninterrupted


def run_ranks(make_sampler, dataset, world_size, consumed, *, stateful, workers, batch_size, epoch):
    """Each of `world_size` ranks runs its loader for `consumed[rank]` batches;
    returns what each took, each rank's whole part, and each rank's state."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    taken, whole, states = [], [], []
    for rank in range(world_size):
        sampler = make_sampler(rank, world_size)
        options = dict(batch_size=batch_size, sampler=sampler, collate_fn=bcd.torch.collate)
        if workers:
            options.update(num_workers=workers, multiprocessing_context="fork")
        make = StatefulDataLoader if stateful else torch.utils.data.DataLoader
        sampler.set_epoch(epoch)
        whole.append([i for b in make(dataset, **options) for i in batch_indices_any(b)])
        sampler.set_epoch(epoch)
        run = make(dataset, **options)
        took = [i for b in itertools.islice(run, consumed[rank]) for i in batch_indices_any(b)]
        taken.append(took)
        states.append(run.state_dict() if stateful else sampler.state_dict(consumed=len(took)))
    return taken, whole, states


def batch_indices_any(batch) -> list:
    """Records of a plain dataset's batch, or indices of a mix's index space."""
    if isinstance(batch, bcd.torch.Batch) and batch.sources is not None:
        offsets = np.concatenate([[0], np.cumsum(SIZES)])
        return (offsets[batch.sources.numpy()] + batch.indices.numpy()).tolist()
    return batch_indices(batch)


@pytest.mark.parametrize("kind", ["dataset", "mix"])
@pytest.mark.parametrize("stateful", [False, True], ids=["DataLoader-consumed", "StatefulDataLoader"])
@pytest.mark.parametrize("old, new, consumed", [(8, 3, [3, 0, 2, 5, 1, 1, 4, 2]), (2, 5, [4, 7])])
def test_a_run_resumed_on_another_number_of_ranks_yields_exactly_the_rest(sources, kind, stateful, old, new, consumed):
    if stateful:
        pytest.importorskip("torchdata.stateful_dataloader")
    root, labels = sources
    if kind == "mix":
        dataset = mix_of(root, labels, output="tensor", seed=2)

        def make_sampler(rank, world_size):
            return bcd.torch.Sampler(dataset, rank=rank, world_size=world_size)
    else:
        dataset = bcd.torch.MapDataset(root / "s0", output="tensor")

        def make_sampler(rank, world_size):
            return bcd.torch.Sampler(dataset, seed=2, rank=rank, world_size=world_size, balance_by=labels[0])
    taken, whole, states = run_ranks(make_sampler, dataset, old, consumed, stateful=stateful, workers=2, batch_size=3, epoch=4)
    # Every old rank's state, gathered (as all_gather_object would) and saved.
    states = pickle.loads(pickle.dumps(states))
    resumed = []
    for rank in range(new):
        sampler = make_sampler(rank, new)
        sampler.load_state_dict(states)
        sampler.set_epoch(4)
        # A fresh loader of the same kind; the states go into the sampler (a
        # StatefulDataLoader would insist on the old world's own state).
        if stateful:
            from torchdata.stateful_dataloader import StatefulDataLoader as make
        else:
            make = torch.utils.data.DataLoader
        loader = make(dataset, batch_size=5, sampler=sampler, collate_fn=bcd.torch.collate,
                      num_workers=2, multiprocessing_context="fork")
        resumed.append([i for b in loader for i in batch_indices_any(b)])
    assert len({len(part) for part in resumed}) == 1
    epoch = collections.Counter(itertools.chain(*whole))
    seen = collections.Counter(itertools.chain(*taken, *resumed))
    rest = sum(len(w) - len(t) for w, t in zip(whole, taken))
    padding = len(resumed[0]) * new - rest
    assert 0 <= padding < new
    assert not (epoch - seen) and sum((seen - epoch).values()) == padding


@pytest.mark.parametrize("old_workers, new_workers", [(2, 3), (3, 0)])
def test_an_iterable_run_resumes_with_another_number_of_workers_and_ranks(sources, old_workers, new_workers):
    pytest.importorskip("torchdata.stateful_dataloader")
    from torchdata.stateful_dataloader import StatefulDataLoader

    root, labels = sources
    settings = dict(seed=6, batch_size=4, output="tensor")
    path = root / "s0"
    options = dict(batch_size=None, collate_fn=bcd.torch.collate)
    old_options = dict(options, num_workers=old_workers, multiprocessing_context="fork")
    new_options = dict(options, num_workers=new_workers)
    if new_workers:
        new_options["multiprocessing_context"] = "fork"
    # One rank, then the same rank with other workers: exactly the rest, in order.
    dataset = bcd.torch.IterableDataset(path, rank=0, world_size=1, **settings)
    dataset.set_epoch(1)
    whole = [i for b in StatefulDataLoader(dataset, **old_options) for i in batch_indices(b)]
    dataset.set_epoch(1)
    run = StatefulDataLoader(dataset, **old_options)
    taken = [i for b in itertools.islice(run, 5) for i in batch_indices(b)]
    state = pickle.loads(pickle.dumps(run.state_dict()))
    again = bcd.torch.IterableDataset(path, rank=0, world_size=1, **settings)
    again.load_state_dict(state)  # the loader's whole state, into the dataset
    again.set_epoch(1)
    rest = [i for b in torch.utils.data.DataLoader(again, **new_options) for i in batch_indices(b)]
    assert taken + rest == whole
    # Two ranks with `old_workers` workers each, resumed on three ranks.
    taken, whole, states = [], [], []
    for rank in range(2):
        dataset = bcd.torch.IterableDataset(path, rank=rank, world_size=2, **settings)
        dataset.set_epoch(2)
        whole.append([i for b in StatefulDataLoader(dataset, **old_options) for i in batch_indices(b)])
        dataset.set_epoch(2)
        run = StatefulDataLoader(dataset, **old_options)
        taken.append([i for b in itertools.islice(run, 3 + rank) for i in batch_indices(b)])
        states.append(pickle.loads(pickle.dumps(run.state_dict())))
    resumed = []
    for rank in range(3):
        dataset = bcd.torch.IterableDataset(path, rank=rank, world_size=3, **settings)
        dataset.load_state_dict(states)
        dataset.set_epoch(2)
        resumed.append([i for b in torch.utils.data.DataLoader(dataset, **new_options) for i in batch_indices(b)])
    epoch = collections.Counter(itertools.chain(*whole))
    seen = collections.Counter(itertools.chain(*taken, *resumed))
    assert not (epoch - seen) and sum((seen - epoch).values()) < 3


def readme_blocks(heading: str) -> list:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split(heading, 1)[1].split("\n## ", 1)[0]
    return [block.split("```", 1)[0] for block in section.split("```python")[1:]]


class FakeDistributed:
    """What the README's elastic example calls of torch.distributed, for ranks
    run one after the other in this process."""

    def __init__(self, world_size):
        self.world_size, self.rank, self.gathered = world_size, 0, []

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return self.world_size

    def all_gather_object(self, out, obj):
        # Rank r sees the states of ranks 0..r; the last rank sees them all.
        self.gathered.append(obj)
        out[:len(self.gathered)] = self.gathered


def test_the_readme_mixture_and_elastic_examples_run(sources, tmp_path, monkeypatch):
    root, labels = sources
    for k, name in enumerate(["web.bcd", "books.bcd"]):
        (tmp_path / name).symlink_to(root / f"s{k}")
    monkeypatch.chdir(tmp_path)
    blocks = readme_blocks("### Mixtures and elastic resumes")
    assert len(blocks) == 3
    steps = []
    namespace = {"train_step": steps.append, "epochs": 2}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    mix = namespace["mix"]
    assert len(steps) == 2 * -(-len(mix) // 16)
    assert all(isinstance(b, bcd.torch.Batch) and b.sources is not None for b in steps)
    # Four ranks stop at different steps and save; three ranks resume.
    saved, whole, taken = [], [], []
    old = FakeDistributed(4)
    monkeypatch.setattr(torch, "distributed", old)
    import sys
    monkeypatch.setitem(sys.modules, "torch.distributed", old)
    for rank in range(4):
        old.rank = rank
        sampler = bcd.torch.Sampler(mix)
        sampler.set_epoch(1)
        whole.append(list(sampler))
        sampler.set_epoch(1)
        steps_done, batch_size = rank + 1, 5
        taken.append(list(itertools.islice(iter(sampler), steps_done * batch_size)))
        namespace = {"sampler": sampler, "steps_done": steps_done, "batch_size": batch_size, "save": saved.append}
        exec(compile(blocks[1], "README.md", "exec"), namespace)
    states = pickle.loads(pickle.dumps(saved[-1]))
    new = FakeDistributed(3)
    monkeypatch.setattr(torch, "distributed", new)
    monkeypatch.setitem(sys.modules, "torch.distributed", new)
    resumed = []
    for rank in range(3):
        new.rank = rank
        namespace = {"mix": mix, "load": lambda: states, "epoch": 1, "bcd": bcd}
        exec(compile(blocks[2], "README.md", "exec"), namespace)
        resumed.append(list(namespace["sampler"]))
    epoch = collections.Counter(itertools.chain(*whole))
    seen = collections.Counter(itertools.chain(*taken, *resumed))
    assert not (epoch - seen) and sum((seen - epoch).values()) < 3
