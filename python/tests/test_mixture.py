"""Mixtures and elastic resumes without torch: ``bcd.partition_mix`` against a
plain-Python implementation of the documented algorithm (``spec_orders``), each
source's share on every prefix, exact coverage across ranks x DataLoader
workers, resuming mid-epoch (in another process too), and resuming an epoch on
another number of ranks (8 to 3, 2 to 5, and twice) with ``EpochSampler`` and
``MixEpochSampler`` states."""

from __future__ import annotations

import collections
import itertools
import pickle
import random
import subprocess
import sys

import numpy as np
import pytest

import bcd
import spec_orders
from bcd.mixture import MixEpochSampler, mix_offsets, split_indices
from bcd.sampling import EpochSampler


def random_mixture(rng: random.Random) -> dict:
    sources = rng.randrange(1, 6)
    lengths = [rng.randrange(0, 60) for _ in range(sources)]
    weights = [0.0 if n == 0 else rng.choice([0.0, 0.5, 1.0, 3.0, 7.5]) for n in lengths]
    if not any(weights):
        lengths[0] = max(lengths[0], 1)
        weights[0] = 1.0
    return dict(lengths=lengths, weights=weights)


def test_partition_mix_is_the_documented_algorithm():
    rng = random.Random(5)
    for case in range(60):
        mixture = random_mixture(rng)
        settings = dict(
            seed=rng.randrange(1 << 64),
            epoch=rng.randrange(4),
            world_size=rng.randrange(1, 5),
            num_samples=rng.choice([None, rng.randrange(0, 150)]),
            drop_last=rng.random() < 0.3,
            **rng.choice([{}, {"shuffle": False}, {"block_size": rng.randrange(1, 9)}]),
        )
        spec_settings = {("shuffle_" if k == "shuffle" else k): v for k, v in settings.items()}
        for rank in range(settings["world_size"]):
            got = bcd.partition_mix(**mixture, rank=rank, pairs=False, **settings).tolist()
            want = spec_orders.mixture(mixture["lengths"], mixture["weights"], rank=rank, **spec_settings)
            assert got == want, (case, mixture, settings, rank)


def test_samples_say_their_source_and_every_prefix_holds_each_source_within_one():
    lengths, weights = [1000, 50, 300, 7], [0.6, 0.25, 0.1, 0.05]
    world_size = 3
    parts = [bcd.partition_mix(lengths, weights, seed=2, epoch=1, rank=r, world_size=world_size) for r in range(world_size)]
    offsets = mix_offsets(lengths)
    total = sum(len(records) for _, records in parts)
    shares = np.bincount(np.concatenate([sources for sources, _ in parts]), minlength=4)
    # Each source its share of the epoch (1357 samples padded to 1359).
    exact = total * np.array(weights) / sum(weights)
    assert (np.abs(shares - exact) < 1).all(), (shares, exact)
    for sources, records in parts:
        assert sources.dtype == np.uint8 and records.dtype == np.int64
        assert ((records >= 0) & (records < np.array(lengths)[sources])).all()
        # The split agrees with the index space.
        flat = offsets[sources] + records
        assert (split_indices(lengths, flat)[0] == sources).all()
        counts = np.zeros(4, dtype=np.int64)
        for t, source in enumerate(sources.tolist(), start=1):
            counts[source] += 1
            assert ((counts >= (t * shares) // total) & (counts <= -((-t * shares) // total))).all(), t
    # The small source (50 records, ~340 draws) is repeated, each record 6 or 7
    # times; the large ones are sampled without replacement.
    drawn = collections.Counter((int(s), int(i)) for sources, records in parts for s, i in zip(sources, records))
    assert {n for (s, _), n in drawn.items() if s == 1} <= {shares[1] // 50, -(-shares[1] // 50)}
    assert all(n == 1 for (s, _), n in drawn.items() if s in (0, 2))


def test_ranks_and_workers_together_take_every_draw_once():
    lengths, weights = [40, 13, 90], [1.0, 2.0, 0.5]
    world_size = 3
    everything = []
    for rank in range(world_size):
        sampler = MixEpochSampler(lengths, weights, seed=9, rank=rank, world_size=world_size, num_samples=200)
        sampler.set_epoch(2)
        order = sampler.indices()
        assert len(order) == len(sampler) == 67
        for workers, batch in [(1, 4), (2, 5), (3, 1), (4, 16)]:
            split = [order[EpochSampler.worker_positions(len(order), w, workers, batch)] for w in range(workers)]
            together = np.concatenate(split)
            assert sorted(together.tolist()) == sorted(order.tolist())
        everything.extend(order.tolist())
    # Together: the epoch's 201 draws (200 padded to a multiple of 3).
    want = [i for r in range(world_size) for i in spec_orders.mixture(lengths, weights, seed=9, epoch=2, rank=r,
                                                                       world_size=world_size, num_samples=200)]
    assert collections.Counter(everything) == collections.Counter(want)


def test_a_mixture_state_resumes_the_rest_of_the_epoch_in_another_process(tmp_path):
    sampler = MixEpochSampler([300, 20], [3.0, 1.0], seed=4, rank=1, world_size=2)
    sampler.set_epoch(5)
    iterator = iter(sampler)
    taken = list(itertools.islice(iterator, 61))
    state = sampler.state_dict()
    assert (state["epoch"], state["position"]) == (5, 61)
    rest = list(iterator)
    (tmp_path / "state.pickle").write_bytes(pickle.dumps(state))
    script = f"""
import pickle
from bcd.mixture import MixEpochSampler
sampler = MixEpochSampler([300, 20], [3.0, 1.0], seed=4, rank=1, world_size=2)
sampler.load_state_dict(pickle.loads(open({str(tmp_path / "state.pickle")!r}, "rb").read()))
sampler.set_epoch(5)
print(list(sampler))
"""
    resumed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert resumed.strip() == str(rest)
    assert taken + rest == bcd.partition_mix([300, 20], [3.0, 1.0], seed=4, epoch=5, rank=1, world_size=2, pairs=False).tolist()
    with pytest.raises(ValueError, match="mixture"):
        MixEpochSampler([300, 21], [3.0, 1.0], seed=4, rank=1, world_size=2).load_state_dict(state)


def stop_run(make, world_size: int, consumed: list, epoch: int = 3):
    """Runs `world_size` samplers of one epoch, each taking its `consumed`
    entries; returns their parts, their states and what they took."""
    parts, states, taken = [], [], []
    for rank in range(world_size):
        sampler = make(rank, world_size)
        sampler.set_epoch(epoch)
        part = list(sampler)
        parts.append(part)
        sampler.set_epoch(epoch + 1)  # drop the finished iteration ...
        sampler.set_epoch(epoch)      # ... and run the epoch again up to `consumed`
        iterator = iter(sampler)
        took = list(itertools.islice(iterator, consumed[rank]))
        states.append(sampler.state_dict())
        taken.append(took)
    return parts, states, taken


def resume_run(make, states, world_size: int, epoch: int = 3):
    """Each of `world_size` new samplers loads the list of states and yields
    the rest; returns their parts."""
    out = []
    for rank in range(world_size):
        sampler = make(rank, world_size)
        sampler.load_state_dict(states)
        sampler.set_epoch(epoch)  # the loop's call: keeps the loaded position
        out.append(list(sampler))
    return out


def plain(rank, world_size):
    return EpochSampler(1000, seed=6, rank=rank, world_size=world_size, categories=[i % 7 % 3 for i in range(1000)])


def mixed(rank, world_size):
    return MixEpochSampler([700, 60, 240], [0.5, 0.3, 0.2], seed=6, rank=rank, world_size=world_size)


@pytest.mark.parametrize("make", [plain, mixed], ids=["EpochSampler", "MixEpochSampler"])
@pytest.mark.parametrize("old, new, consumed", [
    (8, 3, [40, 41, 60, 55, 70, 50, 60, 60]),
    (2, 5, [100, 97]),
    (4, 4, [10, 20, 30, 40]),
])
def test_an_epoch_resumed_on_another_number_of_ranks_yields_exactly_the_rest(make, old, new, consumed):
    parts, states, taken = stop_run(make, old, consumed)
    rng = random.Random(old * 10 + new)
    rng.shuffle(states)  # the order states are gathered in does not matter
    resumed = resume_run(make, states, new)
    assert len({len(part) for part in resumed}) == 1
    epoch = collections.Counter(itertools.chain(*parts))
    seen = collections.Counter(itertools.chain(*taken, *resumed))
    rest = sum(len(p) - c for p, c in zip(parts, consumed))
    padding = len(resumed[0]) * new - rest
    assert 0 <= padding < new
    # Exactly the epoch, but the padding (entries of the rest repeated).
    assert sum((seen - epoch).values()) == padding and not (epoch - seen)
    # The same as the documented algorithm.
    first = make(0, old)
    if isinstance(first, MixEpochSampler):
        def parts_of(world):
            return [spec_orders.mixture([700, 60, 240], [0.5, 0.3, 0.2], seed=6, epoch=3, rank=r, world_size=world) for r in range(world)]
        offsets = mix_offsets([700, 60, 240])
        def class_of(e):
            return int(np.searchsorted(offsets, e, side="right") - 1)
    else:
        categories = [i % 7 % 3 for i in range(1000)]
        def parts_of(world):
            return [spec_orders.partition(1000, seed=6, epoch=3, rank=r, world_size=world, categories=categories) for r in range(world)]
        def class_of(e):
            return categories[e]
    for rank, part in enumerate(resumed):
        assert part == spec_orders.resumed(parts_of, [consumed], new, rank, class_of=class_of)


def test_an_epoch_resumed_twice_yields_the_rest_of_the_second_run():
    parts, states, taken = stop_run(mixed, 8, [5, 6, 7, 8, 9, 10, 11, 12])
    second_parts, second_states, second_taken = [], [], []
    for rank in range(3):
        sampler = mixed(rank, 3)
        sampler.load_state_dict(states)
        sampler.set_epoch(3)
        iterator = iter(sampler)
        second_taken.append(list(itertools.islice(iterator, 30 + rank)))
        second_states.append(sampler.state_dict())
    assert all(len(s["resumed_from"]) == 1 for s in second_states)
    third = resume_run(mixed, second_states, 5)
    epoch = collections.Counter(itertools.chain(*parts))
    seen = collections.Counter(itertools.chain(*taken, *second_taken, *third))
    padding = sum((seen - epoch).values())
    assert not (epoch - seen) and padding < 5 + 3
    # After the resumed epoch, the next one is laid out on the new ranks.
    sampler = mixed(1, 5)
    sampler.load_state_dict(second_states)
    sampler.set_epoch(3)
    list(sampler)
    sampler.set_epoch(4)
    assert list(sampler) == bcd.partition_mix([700, 60, 240], [0.5, 0.3, 0.2], seed=6, epoch=4, rank=1, world_size=5, pairs=False).tolist()


def test_the_same_ranks_in_step_continue_their_parts():
    # Ranks that took as many entries each: a list of their states resumes each
    # rank where its own state would.
    parts, states, _ = stop_run(plain, 4, [25] * 4)
    for rank in range(4):
        alone, together = plain(rank, 4), plain(rank, 4)
        alone.load_state_dict(states[rank])
        together.load_state_dict(states)
        assert list(alone) == list(together) == parts[rank][25:]


def test_states_that_are_not_one_run_are_refused():
    _, states, _ = stop_run(plain, 4, [1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"world_size: saved 4, here 3 \(.*load the states of all 4 ranks"):
        plain(0, 3).load_state_dict(states[0])
    with pytest.raises(ValueError, match=r"missing ranks \[2\]"):
        plain(0, 3).load_state_dict([states[0], states[1], states[3]])
    with pytest.raises(ValueError, match=r"ranks \[1\] more than once"):
        plain(0, 3).load_state_dict([states[0], states[1], states[1], states[3]])
    other_epoch = dict(states[2], epoch=9)
    with pytest.raises(ValueError, match="not of one run of one epoch: epoch"):
        plain(0, 3).load_state_dict([states[0], states[1], other_epoch, states[3]])
    with pytest.raises(ValueError, match="other settings: block_size"):
        EpochSampler(1000, seed=6, rank=0, world_size=3, block_size=4,
                     categories=[i % 7 % 3 for i in range(1000)]).load_state_dict(states)
    with pytest.raises(ValueError, match="not a state"):
        plain(0, 3).load_state_dict([{"position": 1}])


def test_a_state_inside_a_loader_state_is_found():
    # torchdata's StatefulDataLoader nests its sampler's state in its own.
    _, states, taken = stop_run(plain, 2, [10, 12])
    wrapped = [{"_index_sampler_state": None, "_sampler_iter_state": {"samples_yielded": 3, "sampler_state": s}} for s in states]
    direct, nested = plain(0, 3), plain(0, 3)
    direct.load_state_dict(states)
    nested.load_state_dict(wrapped)
    assert list(direct) == list(nested)


def test_partition_takes_resumed_from_and_checks_it():
    got = bcd.partition(100, seed=1, epoch=0, rank=1, world_size=3, resumed_from=[[10, 20]])
    parts = [bcd.partition(100, seed=1, epoch=0, rank=r, world_size=2).tolist() for r in range(2)]
    rest = parts[0][10:] + parts[1][20:]
    assert got.tolist() == rest[24:48]
    with pytest.raises(ValueError, match=r"resumed_from=: rank 1 of run 0 is at position 51, past the end of its 50 entries"):
        bcd.partition(100, seed=1, epoch=0, rank=0, world_size=3, resumed_from=[[0, 51]])
    with pytest.raises(ValueError, match="run 0 lists no ranks"):
        bcd.partition(100, seed=1, epoch=0, rank=0, world_size=3, resumed_from=[[]])
    with pytest.raises(TypeError, match="resumed_from"):
        bcd.partition(100, seed=1, epoch=0, rank=0, world_size=3, resumed_from=[3])


def test_mixture_settings_that_cannot_work_are_errors_naming_the_keyword():
    cases = [
        (dict(lengths=[3, 4], weights=[1.0]), "weights= has 1 entries for 2 sources"),
        (dict(lengths=[3, 4], weights=[1.0, -2.0]), "source 1 has weight -2"),
        (dict(lengths=[3, 4], weights=[0, 0]), "no source has a positive weight"),
        (dict(lengths=[3, 0], weights=[1, 1]), "source 1 has no records"),
        (dict(lengths=[3, 4], weights=[1, 1], world_size=0), "world_size= must be at least 1"),
        (dict(lengths=[3, 4], weights=[1, 1], rank=2, world_size=2), "rank= 2 is out of range"),
        (dict(lengths=[3, 4], weights=[1, 1], shuffle=False, block_size=3), "block_size= shuffles blocks"),
    ]
    for arguments, message in cases:
        settings = dict(seed=0, epoch=0, rank=0, world_size=1)
        settings.update(arguments)
        with pytest.raises(ValueError, match=message):
            bcd.partition_mix(**settings)
    with pytest.raises(ValueError, match="weights= has 1 entries for 2 sources"):
        MixEpochSampler([3, 4], [1.0])
    with pytest.raises(TypeError, match="lengths"):
        bcd.partition_mix(5, [1.0], seed=0, epoch=0, rank=0, world_size=1)
