"""bcd.partition: one rank's part of an epoch, against a plain-Python
implementation of the documented algorithm (spec_orders.py), and the
guarantees over ranks: exactly once, equal counts, disjoint, balanced prefixes,
resuming from any position."""

from __future__ import annotations

import collections
import random
import subprocess
import sys

import numpy as np
import pytest

import bcd
import spec_orders


def parts(n, world_size, **settings):
    return [bcd.partition(n, rank=r, world_size=world_size, **settings) for r in range(world_size)]


def random_settings(rng: random.Random):
    n = rng.randrange(0, 120)
    settings = dict(
        seed=rng.getrandbits(64),
        epoch=rng.randrange(5),
        world_size=rng.randrange(1, 6),
        drop_last=rng.random() < 0.5,
    )
    kind = rng.choice(["plain", "sequential", "blocks", "balanced", "weighted", "inverse", "sample"])
    categories = [rng.choice("aab c") for _ in range(n)]
    if kind == "sequential":
        settings["shuffle"] = False
    elif kind == "blocks":
        settings["block_size"] = rng.randrange(1, 12)
    elif kind == "balanced":
        settings["categories"] = categories
    elif kind == "weighted" and n:
        settings["weights"] = [rng.choice([0.0, 0.5, 1.0, 3.0]) for _ in range(n)]
    elif kind == "inverse" and n:
        settings["categories"] = categories
        settings["weights"] = "inverse_frequency"
        settings["num_samples"] = rng.randrange(0, n + 1)
    elif kind == "sample":
        settings["num_samples"] = rng.randrange(0, n + 1)
    return n, settings


def spec(n, rank, settings):
    settings = dict(settings)
    shuffle = settings.pop("shuffle", True)
    return spec_orders.partition(n, rank=rank, shuffle_=shuffle, **settings)


def test_orders_equal_an_independent_implementation_of_the_specification():
    rng = random.Random(2024)
    for _ in range(400):
        n, settings = random_settings(rng)
        weights = settings.get("weights")
        if isinstance(weights, list) and sum(1 for w in weights if w > 0) == 0:
            continue
        for rank in range(settings["world_size"]):
            got = bcd.partition(n, rank=rank, **settings).tolist()
            assert got == spec(n, rank, settings), (n, rank, settings)


def test_a_shuffle_over_several_buckets_equals_the_specification():
    # 300,000 records: two buckets of the bucketed shuffle, five chunks.
    n = 300_000
    got = bcd.partition(n, seed=5, epoch=2, rank=1, world_size=3)
    assert got.tolist() == spec_orders.shuffle(n, 5, 2)[100_000:200_000]


def test_pinned_orders_do_not_change():
    # The same values sampling/tests/epochs.rs pins: changing them changes every
    # user's epochs.
    assert bcd.partition(10, seed=0, epoch=0, rank=0, world_size=1).tolist() == [7, 9, 2, 0, 3, 8, 1, 4, 6, 5]
    assert bcd.partition(11, seed=42, epoch=3, rank=1, world_size=2, block_size=3).tolist() == [9, 10, 0, 2, 1, 3]


@pytest.mark.parametrize("n, world_size", [(0, 1), (1, 4), (10, 3), (1000, 7), (997, 8)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_together_cover_every_record_once_with_equal_counts(n, world_size, drop_last):
    got = parts(n, world_size, seed=3, epoch=1, drop_last=drop_last)
    m = n // world_size if drop_last else -(-n // world_size)
    assert all(len(part) == m for part in got)
    together = np.concatenate(got) if got else np.zeros(0)
    counts = collections.Counter(together.tolist())
    if drop_last:
        assert all(c == 1 for c in counts.values())  # disjoint ranks
        assert len(counts) == m * world_size
    else:
        assert set(counts) == set(range(n))  # every record
        assert sum(counts.values()) - n == m * world_size - n  # only the padding repeats


def test_every_prefix_of_every_rank_keeps_a_90_9_1_split_within_one():
    n = 5000
    categories = np.array([0] * 4500 + [1] * 450 + [2] * 50)
    np.random.default_rng(0).shuffle(categories)
    for world_size in (1, 4):
        for rank, part in enumerate(parts(n, world_size, seed=1, epoch=0, categories=categories)):
            m = len(part)
            total = m * world_size
            classes = categories[part]
            running = np.cumsum(np.eye(3, dtype=np.int64)[classes], axis=0)
            t = np.arange(1, m + 1)[:, None]
            # Shares of the padded epoch list: every record once, plus the padding.
            shares = np.bincount(categories[np.concatenate(parts(n, world_size, seed=1, epoch=0, categories=categories))], minlength=3)
            assert shares.sum() == total
            low = (t * shares) // total
            high = -((-t * shares) // total)
            assert ((running >= low) & (running <= high)).all(), (world_size, rank)


def test_the_counterexample_of_issue_26_keeps_every_prefix_within_one():
    # 301 records, 4 classes of 149, 83, 50 and 19, over 7 ranks: dealt by class
    # code, rank 1 held 22 of class 0 after 42 of its 43 entries.
    categories = np.repeat([0, 1, 2, 3], [149, 83, 50, 19])
    for rank, part in enumerate(parts(301, 7, seed=0, epoch=0, categories=categories)):
        running = np.cumsum(np.eye(4, dtype=np.int64)[categories[part]], axis=0)
        t = np.arange(1, len(part) + 1)[:, None]
        shares = np.bincount(categories, minlength=4)
        assert ((running >= (t * shares) // 301) & (running <= -((-t * shares) // 301))).all(), rank


def test_a_huge_world_size_costs_only_what_the_call_returns():
    # Issue 20: 10 records over 10**12 ranks walked all 10**12 entries of the
    # epoch (hours, with the GIL released and Ctrl-C ignored).
    categories = [0, 1, 0, 2, 0, 1, 0, 0, 1, 0]
    part = bcd.partition(10, seed=5, epoch=0, rank=10**12 - 1, world_size=10**12, categories=categories)
    assert len(part) == 1 and 0 <= part[0] < 10
    assert bcd.sampling.rank_len(10, world_size=10**12) == 1


def test_inverse_frequency_draws_classes_about_equally():
    # 90/9/1 of 300,000 records, 300 samples: ~100 per class; 4.5 standard
    # deviations (8.2 each) bound it, with fixed seeds (deterministic).
    categories = np.repeat([0, 1, 2], [270_000, 27_000, 3_000])
    for seed in range(3):
        sample = bcd.partition(len(categories), seed=seed, epoch=0, rank=0, world_size=1,
                               categories=categories, weights="inverse_frequency", num_samples=300)
        counts = np.bincount(categories[sample], minlength=3)
        assert len(set(sample.tolist())) == 300
        assert ((counts >= 63) & (counts <= 137)).all(), counts


def test_resuming_from_a_position_gives_the_rest():
    rng = random.Random(7)
    for _ in range(100):
        n, settings = random_settings(rng)
        weights = settings.get("weights")
        if isinstance(weights, list) and not any(w > 0 for w in weights):
            continue
        whole = bcd.partition(n, rank=0, **settings)
        start = rng.randrange(0, len(whole) + 1)
        rest = bcd.partition(n, rank=0, start=start, **settings)
        assert rest.tolist() == whole[start:].tolist()


def test_orders_are_the_same_in_another_process():
    script = "import bcd; print(bcd.partition(100000, seed=9, epoch=4, rank=2, world_size=3, block_size=64).tolist())"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    here = bcd.partition(100000, seed=9, epoch=4, rank=2, world_size=3, block_size=64).tolist()
    assert other.strip() == str(here)


def test_dtypes_and_the_count_function():
    for dtype, numpy_type in [("int64", np.int64), ("uint32", np.uint32), ("uint64", np.uint64)]:
        got = bcd.partition(50, seed=1, epoch=0, rank=0, world_size=2, dtype=dtype)
        assert got.dtype == numpy_type and got.flags.writeable and got.flags.c_contiguous
    assert bcd.sampling.rank_len(10, world_size=3) == 4
    assert bcd.sampling.rank_len(10, world_size=3, drop_last=True) == 3
    assert bcd.sampling.rank_len(10, world_size=1, weights=[0, 1] * 5) == 5
    assert bcd.sampling.rank_len(10, world_size=4, num_samples=6) == 2


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(world_size=0), "world_size= must be at least 1"),
        (dict(rank=3, world_size=3), "rank= 3 is out of range for a world_size= of 3 (ranks are 0 to 2)"),
        (dict(block_size=0), "block_size= must be at least 1"),
        (dict(block_size=4, shuffle=False), "needs shuffle=True"),
        (dict(categories=[1, 2]), "categories= has 2 entries for 10 records"),
        (dict(weights=[1.0] * 9), "weights= has 9 entries for 10 records"),
        (dict(weights=[1.0] * 9 + [float("nan")]), "record 9 has weight NaN"),
        (dict(weights="inverse_frequency"), "need the records' categories (categories= or balance_by=)"),
        (dict(weights="uniform"), "expected per-record weights"),
        (dict(num_samples=11), "a sample of 11 records was asked for, but there are only 10"),
        (dict(start=11), "resume position 11 is past the end of the rank's 10 entries"),
        (dict(dtype="float32"), 'dtype="float32"'),
        (dict(seed=-1), "seed=-1 is out of range"),
    ],
)
def test_settings_that_cannot_work_are_value_errors(settings, message):
    arguments = dict(seed=0, epoch=0, rank=0, world_size=1)
    arguments.update(settings)
    with pytest.raises(ValueError) as error:
        bcd.partition(10, **arguments)
    assert message in str(error.value)


def test_categories_of_any_kind_become_codes_in_sorted_order():
    assert bcd.sampling.category_codes(["b", "a", "b", "c"]).tolist() == [1, 0, 1, 2]
    assert bcd.sampling.category_codes(np.array([5, 3, 5])).tolist() == [5, 3, 5]
    assert bcd.sampling.category_codes([-1, 7, -1]).tolist() == [0, 1, 0]
    assert bcd.sampling.category_codes([True, False]).tolist() == [1, 0]
    assert bcd.sampling.category_codes([]).tolist() == []
    # Strings and their codes give the same order.
    words = ["cat", "dog", "cat", "owl", "cat", "dog"]
    codes = bcd.sampling.category_codes(words)
    by_word = bcd.partition(6, seed=2, epoch=0, rank=0, world_size=1, categories=words)
    by_code = bcd.partition(6, seed=2, epoch=0, rank=0, world_size=1, categories=codes)
    assert by_word.tolist() == by_code.tolist()


def test_pyarrow_columns_are_dictionary_encoded():
    pa = pytest.importorskip("pyarrow")
    column = pa.chunked_array([["b", None, "a"], ["b"]])
    assert bcd.sampling.category_codes(column).tolist() == [0, 2, 1, 0]


def zoo(tmp_path):
    """An ImageFolder tree of 6 cats, 3 dogs and 1 owl ingested with
    ``labels="folder"``, plus a float column on a second dataset."""
    root = tmp_path / "tree"
    for cls, count in [("cat", 6), ("dog", 3), ("owl", 1)]:
        (root / cls).mkdir(parents=True)
        for i in range(count):
            (root / cls / f"{i}.jpg").write_bytes(f"{cls} {i}".encode() * (i + 1))
    bcd.ingest(root, tmp_path / "ds", labels="folder", max_shard_size=64)
    return bcd.Dataset(tmp_path / "ds")


def test_a_stored_field_gives_the_codes_export_balance_by_uses(tmp_path):
    pa = pytest.importorskip("pyarrow")
    ds = zoo(tmp_path)
    labels = [row["label"] for row in ds.fields(["label"]).to_pylist()]
    first_seen = list(dict.fromkeys(labels))
    expected = [first_seen.index(label) for label in labels]
    # The stored field, read in Rust shard by shard (as bcd export --balance-by
    # reads it), and the same column handed over from pyarrow: the same codes.
    assert bcd.sampling.field_codes(ds, "label").tolist() == expected
    assert bcd.sampling.category_codes(ds.fields(["label"]).column("label")).tolist() == expected
    assert bcd.sampling.field_codes(ds, "label_index").tolist() == expected
    assert bcd.sampling.field_codes(ds, "label").dtype == np.uint32
    # So the balanced orders agree.
    by_field = bcd.partition(len(ds), seed=4, epoch=0, rank=0, world_size=1,
                             categories=bcd.sampling.field_codes(ds, "label"))
    by_column = bcd.partition(len(ds), seed=4, epoch=0, rank=0, world_size=1,
                              categories=pa.chunked_array([labels[:4], labels[4:]]))
    assert by_field.tolist() == by_column.tolist()


def test_a_field_that_is_missing_or_has_no_classes_is_a_value_error(tmp_path):
    pa = pytest.importorskip("pyarrow")
    ds = zoo(tmp_path)
    with pytest.raises(ValueError) as error:
        bcd.sampling.field_codes(ds, "species")
    assert str(error.value) == (
        f'{ds.path} has no field "species" for balance_by= (its fields: label, label_index)'
    )
    scored = bcd.Dataset.create(tmp_path / "scored")
    scored.extend_arrow(pa.table({"v": [b"a", b"b"], "score": [0.5, 1.5]}), "v")
    with pytest.raises(ValueError, match=r'field "score" of .* has type Float64, which has no categories'):
        bcd.sampling.field_codes(scored, "score")
    with pytest.raises(ValueError, match=r"categories= has type Float64, which has no categories"):
        bcd.partition(2, seed=0, epoch=0, rank=0, world_size=1, categories=pa.array([0.5, 1.5]))
    nested = pa.array([[1], [2]])
    with pytest.raises(ValueError, match=r"categories= has type List\("):
        bcd.sampling.category_codes(nested)
