"""bcd.sampling.EpochSampler, the torch-free state behind bcd.torch's Sampler
and IterableDataset: epochs, positions, saving and resuming, rank defaults, and
the split of a rank's epoch over DataLoader workers (modelled here as a loader
that takes one batch from each worker in turn)."""

from __future__ import annotations

import itertools
import pickle
import random
import subprocess
import sys

import numpy as np
import pytest

import bcd
from bcd.sampling import EpochSampler


def test_iterating_yields_the_rank_part_and_counts_the_position():
    sampler = EpochSampler(100, seed=4, rank=1, world_size=3)
    assert len(sampler) == 34
    got = list(sampler)
    assert got == bcd.partition(100, seed=4, epoch=0, rank=1, world_size=3).tolist()
    assert sampler.position == 34
    # A new iteration of the same epoch starts again (as DistributedSampler).
    assert list(sampler) == got
    sampler.set_epoch(1)
    assert list(sampler) == bcd.partition(100, seed=4, epoch=1, rank=1, world_size=3).tolist() != got


def test_a_state_resumes_exactly_where_the_iteration_stopped_in_another_process(tmp_path):
    sampler = EpochSampler(1000, seed=8, rank=0, world_size=2, block_size=16)
    sampler.set_epoch(3)
    iterator = iter(sampler)
    taken = list(itertools.islice(iterator, 137))
    state = sampler.state_dict()
    assert (state["epoch"], state["position"]) == (3, 137)
    rest = list(iterator)
    (tmp_path / "state.pickle").write_bytes(pickle.dumps(state))
    script = f"""
import pickle, sys
from bcd.sampling import EpochSampler
sampler = EpochSampler(1000, seed=8, rank=0, world_size=2, block_size=16)
sampler.load_state_dict(pickle.loads(open({str(tmp_path / "state.pickle")!r}, "rb").read()))
sampler.set_epoch(3)   # the loop's call for the epoch it resumes keeps the position
print(list(sampler))
"""
    resumed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert resumed.strip() == str(rest)
    assert taken + rest == bcd.partition(1000, seed=8, epoch=3, rank=0, world_size=2, block_size=16).tolist()


def test_consumed_counts_what_the_loop_took_when_the_loader_ran_ahead():
    sampler = EpochSampler(50, seed=1)
    iterator = iter(sampler)
    list(itertools.islice(iterator, 30))  # the loader prefetched 30
    state = sampler.state_dict(consumed=20)  # the loop took 20
    assert state["position"] == 20
    other = EpochSampler(50, seed=1)
    other.load_state_dict(state)
    assert list(other) == bcd.partition(50, seed=1, epoch=0, rank=0, world_size=1)[20:].tolist()
    # After a resume, consumed counts from where the iteration began.
    other.load_state_dict(state)
    iterator = iter(other)
    next(iterator)
    assert other.state_dict(consumed=5)["position"] == 25
    with pytest.raises(ValueError, match="past the end"):
        other.state_dict(consumed=31)


def test_a_state_from_other_settings_is_refused_naming_them():
    state = EpochSampler(100, seed=1, world_size=2, rank=0).state_dict()
    with pytest.raises(ValueError, match="world_size: saved 2, here 4"):
        EpochSampler(100, seed=1, world_size=4, rank=0).load_state_dict(state)
    with pytest.raises(ValueError, match="length: saved 100, here only 90"):
        EpochSampler(90, seed=1, world_size=2, rank=0).load_state_dict(state)
    with pytest.raises(ValueError, match="not a state"):
        EpochSampler(100).load_state_dict({"position": 3})


def test_a_state_saved_before_records_were_appended_resumes_the_old_epoch():
    before = EpochSampler(100, seed=3, categories=[i % 3 for i in range(100)])
    iterator = iter(before)
    list(itertools.islice(iterator, 40))
    state = before.state_dict()
    rest = list(iterator)
    grown = EpochSampler(120, seed=3, categories=[i % 3 for i in range(120)])
    grown.load_state_dict(state)
    assert list(grown) == rest
    assert grown.length == 100


def test_after_the_resumed_epoch_the_appended_records_are_sampled_again():
    # Issue 20, item 7: every later epoch covered only the saved 100 records.
    categories = [i % 3 for i in range(120)]
    before = EpochSampler(100, seed=3, categories=categories[:100])
    iterator = iter(before)
    list(itertools.islice(iterator, 40))
    state = before.state_dict()
    grown = EpochSampler(120, seed=3, categories=categories)
    grown.load_state_dict(state)
    assert len(list(grown)) == 60
    grown.set_epoch(1)
    assert len(grown) == 120
    assert list(grown) == bcd.partition(120, seed=3, epoch=1, rank=0, world_size=1, categories=categories).tolist()
    # Without set_epoch, the next pass of the same epoch covers them too.
    again = EpochSampler(120, seed=3, categories=categories)
    again.load_state_dict(state)
    list(again)
    assert sorted(again) == list(range(120))
    # A new state saves the grown length, and resumes as such.
    saved = again.state_dict()
    assert saved["length"] == 120


def test_set_epoch_to_another_epoch_drops_a_loaded_state():
    sampler = EpochSampler(10, seed=0)
    iterator = iter(sampler)
    next(iterator)
    state = sampler.state_dict()
    other = EpochSampler(10, seed=0)
    other.load_state_dict(state)
    other.set_epoch(1)
    assert list(other) == bcd.partition(10, seed=0, epoch=1, rank=0, world_size=1).tolist()


def test_rank_and_world_size_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "5")
    assert bcd.sampling.default_rank_and_world_size() == (2, 5)
    assert bcd.sampling.default_rank_and_world_size(rank=1) == (1, 5)
    sampler = EpochSampler(20)
    assert (sampler.rank, sampler.world_size) == (2, 5)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert bcd.sampling.default_rank_and_world_size() == (0, 1)
    with pytest.raises(ValueError, match="out of range"):
        EpochSampler(20, rank=5, world_size=5)


def loader_order(per_worker: list[list[int]], batch_size: int) -> list[int]:
    """What a DataLoader yields from workers that each batch their own stream:
    one batch from each worker in turn, until all are exhausted."""
    batches = [[w[i:i + batch_size] for i in range(0, len(w), batch_size)] for w in per_worker]
    out = []
    for round_ in itertools.zip_longest(*batches):
        for batch in round_:
            if batch:
                out.extend(batch)
    return out


def test_workers_split_a_rank_part_so_the_loader_yields_it_in_order():
    rng = random.Random(3)
    for _ in range(200):
        remaining = rng.randrange(0, 300)
        workers = rng.randrange(1, 6)
        batch = rng.randrange(1, 20)
        per_worker = [EpochSampler.worker_positions(remaining, w, workers, batch).tolist() for w in range(workers)]
        assert sorted(itertools.chain(*per_worker)) == list(range(remaining))
        assert loader_order(per_worker, batch) == list(range(remaining))


def test_resuming_workers_from_their_own_counts_continues_the_loader_exactly():
    # A run stops after k batches; each worker resumes its own list after what
    # it had yielded (StatefulDataLoader's per-worker states); the loader, asking
    # the next worker in turn, yields the rest of the uninterrupted run.
    rng = random.Random(9)
    for _ in range(300):
        n = rng.randrange(0, 400)
        world = rng.randrange(1, 4)
        workers = rng.randrange(1, 5)
        batch = rng.randrange(1, 17)
        drop_last = rng.random() < 0.5
        rank = rng.randrange(world)
        sampler = EpochSampler(n, seed=rng.getrandbits(32), rank=rank, world_size=world, drop_last=drop_last)
        order = sampler.indices().tolist()
        lists = [[order[p] for p in EpochSampler.worker_positions(len(order), w, workers, batch)] for w in range(workers)]
        full = loader_order(lists, batch)
        assert full == order
        total_batches = sum(-(-len(x) // batch) for x in lists)
        k = rng.randrange(0, total_batches + 1)
        # Batches worker w yielded among the first k (the loader takes them in turn).
        yielded = [0] * workers
        taken = 0
        for round_ in itertools.count():
            for w in range(workers):
                if taken == k:
                    break
                if round_ * batch < len(lists[w]):
                    yielded[w] += min(batch, len(lists[w]) - round_ * batch)
                    taken += 1
            if taken == k or all(round_ * batch >= len(x) for x in lists):
                break
        consumed = sum(yielded)
        rests = [lst[y:] for lst, y in zip(lists, yielded)]
        # The loader resumes with the worker after the last one it used.
        next_worker = k % workers if k < total_batches else 0
        rotated = rests[next_worker:] + rests[:next_worker]
        resumed = loader_order(rotated, batch)
        assert resumed == full[consumed:]


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(world_size=0), "world_size= must be at least 1"),
        (dict(rank=5, world_size=5), "rank= 5 is out of range for a world_size= of 5"),
        (dict(block_size=0), "block_size= must be at least 1"),
        (dict(block_size=4, shuffle=False), "needs shuffle=True"),
        (dict(categories=[1, 2]), "categories= has 2 entries for 20 records"),
        (dict(weights="inverse_frequency"), "need the records' categories"),
        (dict(weights="uniform"), "expected per-record weights"),
        (dict(num_samples=21), "a sample of 21 records was asked for, but there are only 20"),
    ],
)
def test_settings_that_cannot_work_are_refused_when_the_sampler_is_made(settings, message):
    # The checks and words of bcd.partition (Rust's), not a copy of them.
    with pytest.raises(ValueError) as error:
        EpochSampler(20, **settings)
    assert message in str(error.value)
