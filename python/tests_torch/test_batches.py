"""What a plain torch DataLoader makes of bcd.torch.MapDataset (the README's
two-line swap, no collate_fn): batches that cross from the workers as
shared-memory tensors and hold what torch's default collate makes of
``dataset[i]``; a collate_fn of the user's own still gets those samples; and
images decoded in Rust (``image=``) with crops from the sampler's seed and
epoch, against torchvision's decode and crop of the same box."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
import torch
import torch.utils.data

import bcd
import bcd.torch
from loaders import in_shared_memory, index_of, loader, make_dataset

N = 157


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "d"
    labels = make_dataset(path, N, compression="lz4")
    return path, labels


def reference_batches(dataset, sampler, batch_size=16):
    """What torch's default collate makes of the samples as ``dataset[i]``
    gives them, batch by batch, in the sampler's order."""
    order = list(sampler)
    return [
        torch.utils.data.default_collate([dataset[i] for i in order[at : at + batch_size]])
        for at in range(0, len(order), batch_size)
    ]


@pytest.mark.parametrize("workers,context", [(0, "fork"), (2, "fork"), (2, "spawn")])
def test_the_readme_loop_gets_values_and_labels_through_shared_memory(stored, workers, context):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=4)
    sampler.set_epoch(1)
    expected = reference_batches(dataset, sampler)
    got = list(loader(dataset, sampler, workers=workers, context=context))
    assert len(got) == len(expected)
    for (values, labels_tensor), (expected_values, expected_labels) in zip(got, expected):
        assert isinstance(values, bcd.torch.Batch)
        if workers:
            assert in_shared_memory(values.values)  # one tensor, not pickled values
        assert [type(v) for v in values] == [bytes] * len(values)
        assert list(values) == list(expected_values)  # each record's bytes
        assert labels_tensor.dtype == expected_labels.dtype and torch.equal(labels_tensor, expected_labels)
    assert [index_of(v) for values, _ in got for v in values] == list(sampler)


def test_a_batch_sends_its_values_as_shared_memory_and_its_small_tensors_inside_the_pickle(stored):
    # What a DataLoader worker's queue does with a batch: the values cross as a
    # handle to shared memory, the offsets, indices and small field columns
    # inside the pickle (a handle costs the main process a round trip to the
    # worker); a column past the in-band size stays a tensor.
    import pickle
    from multiprocessing.reduction import ForkingPickler

    path, _ = stored
    dataset = bcd.torch.MapDataset(path, fields=["label"])
    batch = dataset._read_batch(list(range(20)), True)  # shared, as in a worker
    big = torch.arange(20_000, dtype=torch.int64)  # 160 KB
    batch.fields["big"] = big
    _, (values, offsets, fields, indices, output, sources) = batch.__reduce__()
    # The values: a part of one of the process's reused slots, sent as its
    # number and size, with the slot's segment (not yet mapped by the parent).
    assert isinstance(values, bcd.torch.batch._SlotPart) and values.size == batch.values.numel()
    assert isinstance(values.segment, bcd.torch.batch._SlotSegment) and values.segment.pid == os.getpid()
    assert isinstance(offsets, np.ndarray) and isinstance(indices, np.ndarray)
    assert isinstance(fields["label"], np.ndarray) and fields["big"] is big
    assert sources is None
    batch = dataset._read_batch(list(range(20)), True)
    batch.fields["big"] = big
    copy = pickle.loads(ForkingPickler.dumps(batch))
    for name in ("offsets", "indices"):
        assert isinstance(getattr(copy, name), torch.Tensor) and torch.equal(getattr(copy, name), getattr(batch, name))
    assert torch.equal(copy.fields["label"], batch.fields["label"]) and torch.equal(copy.fields["big"], big)
    assert [bytes(copy.value_bytes(i)) for i in range(20)] == [dataset[i][0] for i in range(20)]

    images = bcd.torch.ImageBatch(
        torch.zeros(2, 4, 4, 3, dtype=torch.uint8), {"label": torch.tensor([3, 4])}, torch.tensor([5, 6]), torch.tensor([7])
    )
    copy = pickle.loads(ForkingPickler.dumps(images))
    assert torch.equal(copy.indices, images.indices) and torch.equal(copy.skipped, images.skipped)
    assert torch.equal(copy.fields["label"], images.fields["label"]) and torch.equal(copy.images, images.images)


def test_without_fields_a_batch_is_the_values(stored):
    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    sampler = bcd.torch.Sampler(dataset, seed=2)
    for values in loader(dataset, sampler, workers=2):
        assert isinstance(values, bcd.torch.Batch) and in_shared_memory(values.values)
        assert [index_of(v) for v in values] == values.indices.tolist()
        assert all(v == dataset[i] for v, i in zip(values, values.indices.tolist()))


def test_fields_of_every_kind_collate_as_torch_collates_them(tmp_path):
    path = tmp_path / "d"
    dataset = bcd.Dataset.create(path)
    dataset.extend(
        {"value": b"%03d" % i, "label": i % 5, "name": f"n{i}", "weight": i / 7, "flag": i % 2 == 0, "small": np.int8(i)}
        for i in range(40)
    )
    torch_dataset = bcd.torch.MapDataset(path, fields=["label", "name", "weight", "flag", "small"])
    sampler = bcd.torch.Sampler(torch_dataset, seed=0)
    for got, expected in zip(loader(torch_dataset, sampler, workers=2), reference_batches(torch_dataset, sampler)):
        assert list(got[0]) == list(expected[0])
        for column, reference in zip(got[1:], expected[1:]):
            if isinstance(reference, torch.Tensor):
                assert column.dtype == reference.dtype and torch.equal(column, reference)
            else:
                assert column == reference


def keep_samples(samples):
    """A user's collate_fn: the samples as they came, made plain."""
    return [tuple(sample) for sample in samples]


def stack_lengths(samples):
    """A user's collate_fn that calls torch's default collate on what it made."""
    return torch.utils.data.default_collate([(len(value), label) for value, label in samples])


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_users_collate_fn_gets_the_samples_dataset_i_gives(stored, context):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=9)
    order = list(sampler)
    got = [s for batch in loader(dataset, sampler, workers=2, context=context, collate_fn=keep_samples) for s in batch]
    assert got == [dataset[i] for i in order]
    assert all(isinstance(value, bytes) for value, _ in got)
    lengths = [b for b in loader(dataset, sampler, workers=2, context=context, collate_fn=stack_lengths)]
    assert torch.cat([b[0] for b in lengths]).tolist() == [len(dataset[i][0]) for i in order]
    # Samples gathered by hand collate the same as a whole batch.
    batch = dataset.__getitems__(order[:5])
    by_hand = torch.utils.data.default_collate(list(batch))
    whole = torch.utils.data.default_collate(batch)
    assert list(by_hand[0]) == list(whole[0]) and torch.equal(by_hand[1], whole[1])


def test_tensor_values_collate_by_default_and_keep_their_batch_with_bcd_collate(stored):
    path, labels = stored
    dataset = bcd.torch.MapDataset(path, fields=["label"], output="tensor")
    sampler = bcd.torch.Sampler(dataset, seed=3)
    for values, label in loader(dataset, sampler, workers=2):
        assert all(v.dtype == torch.uint8 for v in values)
        assert [index_of(bytes(v.numpy())) for v in values] == values.indices.tolist()
        assert label.tolist() == labels[values.indices.numpy()].tolist()
    for batch in loader(dataset, sampler, workers=2, collate_fn=bcd.torch.collate):
        assert isinstance(batch, bcd.torch.Batch) and batch.fields["label"].tolist() == labels[batch.indices.numpy()].tolist()


# ---------------------------------------------------------------- images


def photo(width, height, seed):
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    pixels = np.stack([128 + 90 * np.sin(x / (13 + 4 * c) + y / (19 + c) + seed) for c in range(3)], axis=-1)
    pixels += rng.normal(0, 4, pixels.shape)
    out = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=90)
    return out.getvalue()


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "d"
    values = [photo(160 + 7 * i, 120 + 5 * (i % 9), i) for i in range(48)]
    dataset = bcd.Dataset.create(path, keyed=True)
    dataset.extend({"key": b"img%02d.jpg" % i, "value": v, "label": i % 4} for i, v in enumerate(values))
    return path, values


@pytest.mark.parametrize("workers,context", [(0, "fork"), (2, "fork"), (2, "spawn")])
def test_images_are_the_crops_of_the_samplers_seed_and_epoch(images, workers, context):
    path, values = images
    dataset = bcd.torch.MapDataset(path, fields=["label"], image=bcd.torch.Image(32))
    sampler = bcd.torch.Sampler(dataset, seed=6)
    options = bcd.ImageOptions(32)
    for epoch in (0, 3):
        sampler.set_epoch(epoch)
        order = list(sampler)
        expected = np.zeros((len(order), 32, 32, 3), dtype=np.uint8)
        assert bcd.decode_images([values[i] for i in order], expected, options, seed=6, epoch=epoch, records=order) == []
        got = list(loader(dataset, sampler, workers=workers, context=context, batch_size=10))
        images_ = torch.cat([images_ for images_, _ in got]).numpy()
        labels = torch.cat([labels for _, labels in got]).tolist()
        assert np.array_equal(images_, expected)
        assert labels == [i % 4 for i in order]
        assert all(in_shared_memory(images_) for images_, _ in got) or not workers
    # dataset[i] is (image, label), the crop of record i in the current epoch.
    image, label = dataset[5]
    assert label == 1 and np.array_equal(image.numpy(), expected[order.index(5)])


def test_persistent_workers_follow_set_epoch(images):
    path, values = images
    dataset = bcd.torch.MapDataset(path, image=bcd.torch.Image(16))
    sampler = bcd.torch.Sampler(dataset, seed=2, shuffle=False)
    run = loader(dataset, sampler, workers=2, batch_size=48, persistent_workers=True)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        (batch,) = list(run)
        expected = np.zeros((48, 16, 16, 3), dtype=np.uint8)
        bcd.decode_images(values, expected, bcd.ImageOptions(16), seed=2, epoch=epoch)
        assert np.array_equal(batch.numpy(), expected)
        epochs.append(batch)
    assert not torch.equal(epochs[0], epochs[1])


def test_bad_images_raise_naming_the_record_or_are_skipped_and_counted(tmp_path, images):
    _, values = images
    path = tmp_path / "d"
    dataset = bcd.Dataset.create(path, keyed=True)
    broken = values[:6] + [b"\xff\xd8\xff garbage", values[6]]
    dataset.extend({"key": b"k%d" % i, "value": v, "label": i} for i, v in enumerate(broken))
    strict = bcd.torch.MapDataset(path, fields=["label"], image=bcd.torch.Image(16))
    with pytest.raises(ValueError, match=r'record 6 \(key "k6"\)'):
        list(loader(strict, workers=2, batch_size=4))
    lenient = bcd.torch.MapDataset(path, fields=["label"], image=bcd.torch.Image(16), bad_images="skip")
    labels = [label for _, batch_labels in loader(lenient, workers=2, batch_size=4) for label in batch_labels.tolist()]
    assert labels == [0, 1, 2, 3, 4, 5, 7]
    assert lenient.skipped == 1


def test_crops_match_torchvisions_decode_and_resized_crop(images):
    torchvision = pytest.importorskip("torchvision")
    from torchvision.io import decode_jpeg
    from torchvision.transforms.v2 import functional

    path, values = images
    options = bcd.ImageOptions(40, dct_scaling=False)
    out = np.zeros((len(values), 40, 40, 3), dtype=np.uint8)
    assert bcd.decode_images(values, out, options, seed=8) == []
    differences = []
    for record, (value, image) in enumerate(zip(values, out)):
        decoded = decode_jpeg(torch.frombuffer(bytearray(value), dtype=torch.uint8))
        left, top, width, height, flipped = options.crop_box(decoded.shape[2], decoded.shape[1], seed=8, record=record)
        reference = functional.resized_crop(decoded, int(top), int(left), int(height), int(width), [40, 40], antialias=True)
        if flipped:
            reference = functional.horizontal_flip(reference)
        reference = reference.permute(1, 2, 0).numpy().astype(np.int16)
        differences.append(np.abs(image.astype(np.int16) - reference).mean())
    # torchvision crops then resizes (no pixel outside the box); Pillow's
    # filter, which bcd follows, reaches past the box's edges.
    assert max(differences) < 1.0, differences


# ---------------------------------------------------------------- mixes and views


def spec_stream_key(seed, epoch, purpose, index):
    """``stream_key`` of the orders' specification, from its plain-Python
    implementation (python/tests/spec_orders.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    try:
        from spec_orders import MIX_SOURCE, stream_key
    finally:
        sys.path.pop(0)
    assert purpose == "MixSource"
    return stream_key(seed, epoch, MIX_SOURCE, index)


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    labels = [make_dataset(root / "a", 70, seed=1), make_dataset(root / "b", 23, seed=2)]
    return root, labels


@pytest.mark.parametrize("fields", [["label"], None], ids=["label", "no-fields"])
@pytest.mark.parametrize("workers,context", [(0, "fork"), (2, "fork"), (2, "spawn")])
def test_a_plain_loader_over_a_mix_gets_one_shared_batch_with_its_sources(two_sources, fields, workers, context):
    root, labels = two_sources
    mix = bcd.torch.Mix([bcd.torch.MapDataset(root / name, fields=fields) for name in "ab"], [0.6, 0.4], seed=3)
    sampler = bcd.torch.Sampler(mix)
    sampler.set_epoch(1)
    order = list(sampler)
    # What torch's default collate makes of the pairs mix[i] gives.
    expected = [
        torch.utils.data.default_collate([mix[i] for i in order[at : at + 16]]) for at in range(0, len(order), 16)
    ]
    got = list(loader(mix, sampler, workers=workers, context=context))
    assert len(got) == len(expected)
    pairs = []
    for (sources, samples), (expected_sources, expected_samples) in zip(got, expected):
        assert sources.dtype == expected_sources.dtype == torch.int64 and torch.equal(sources, expected_sources)
        values, label = (samples, None) if fields is None else samples
        expected_values = expected_samples if fields is None else expected_samples[0]
        # One batch of the sources' values, read and joined in the worker (the
        # per-sample route would give a list, or records -1).
        assert isinstance(values, bcd.torch.Batch) and values.sources is None
        if workers:
            assert in_shared_memory(values.values)
        assert [type(v) for v in values] == [bytes] * len(values)
        assert list(values) == list(expected_values)
        assert [index_of(v) for v in values] == values.indices.tolist()
        if fields is not None:
            assert label.dtype == expected_samples[1].dtype and torch.equal(label, expected_samples[1])
            assert label.tolist() == [int(labels[s][r]) for s, r in zip(sources.tolist(), values.indices.tolist())]
        pairs.extend(zip(sources.tolist(), values.indices.tolist()))
    sources_, records = bcd.partition_mix([70, 23], [0.6, 0.4], seed=3, epoch=1, rank=0, world_size=1)
    assert pairs == list(zip(sources_.tolist(), records.tolist()))


def test_a_mix_batch_is_the_pairs_mix_i_gives(two_sources):
    root, labels = two_sources
    for output in ("bytes", "tensor"):
        mix = bcd.torch.Mix([bcd.torch.MapDataset(root / n, fields=["label"], output=output) for n in "ab"], [1, 1])
        indices = [71, 3, 92, 0, 70, 3, 71]
        batch = mix.__getitems__(indices)
        assert isinstance(batch, bcd.torch.Batch) and batch.output == output
        assert batch.sources.tolist() == [1, 0, 1, 0, 1, 0, 1] and batch.indices.tolist() == [1, 3, 22, 0, 0, 3, 1]
        for i, pair in zip(indices, batch):
            assert isinstance(pair, bcd.torch.MixSample)
            expected = mix[i]
            assert pair[0] == expected[0]
            if output == "bytes":
                assert tuple(pair[1]) == expected[1]
            else:
                assert torch.equal(pair[1][0], expected[1][0]) and pair[1][1] == expected[1][1]
        # Pairs gathered by hand collate as the whole batch does.
        by_hand = torch.utils.data.default_collate(list(batch))
        whole = torch.utils.data.default_collate(batch)
        assert torch.equal(by_hand[0], whole[0]) and torch.equal(by_hand[1][1], whole[1][1])
        assert [bytes(v) for v in by_hand[1][0]] == [bytes(v) for v in whole[1][0]]
    # Sources that cannot share a batch (other fields) give the pairs.
    mixed = bcd.torch.Mix([bcd.torch.MapDataset(root / "a", fields=["label"]), bcd.torch.MapDataset(root / "b")], [1, 1])
    pairs = mixed.__getitems__([71, 3])
    assert isinstance(pairs, list) and pairs[0] == mixed[71] and pairs[1] == mixed[3]


def image_dataset(path, count, seed, keyed=True):
    values = [photo(150 + 11 * (i % 5), 110 + 9 * (i % 7), seed + i) for i in range(count)]
    dataset = bcd.Dataset.create(path, keyed=keyed)
    dataset.extend({"key": b"img%02d.jpg" % i, "value": v, "label": i % 3} for i, v in enumerate(values))
    return values


def expected_crops(values, records, options, seed, epoch):
    out = np.zeros((len(records), *options.shape), dtype=np.uint8)
    assert bcd.decode_images([values[r] for r in records], out, options, seed=seed, epoch=epoch, records=records) == []
    return out


@pytest.mark.parametrize("fields", [["label"], None], ids=["label", "no-fields"])
@pytest.mark.parametrize("workers,context", [(0, "fork"), (2, "fork"), (2, "spawn")])
def test_a_plain_loader_over_a_mix_of_images_crops_each_source_from_its_own_seed(tmp_path, images, fields, workers, context):
    path, first = images
    second = image_dataset(tmp_path / "second", 17, seed=100)
    options = bcd.ImageOptions(24)
    mix = bcd.torch.Mix(
        [bcd.torch.MapDataset(p, fields=fields, image=bcd.torch.Image(24)) for p in (path, tmp_path / "second")],
        [0.5, 0.5],
        seed=11,
    )
    values = [first, second]
    # One batch of both sources' images, joined in the worker.
    assert isinstance(mix.__getitems__([0, 50, 1]), bcd.torch.ImageBatch)
    sampler = bcd.torch.Sampler(mix)
    runs = []
    for epoch in (0, 2):
        sampler.set_epoch(epoch)
        got = list(loader(mix, sampler, workers=workers, context=context, batch_size=12))
        sources = torch.cat([batch[0] for batch in got]).tolist()
        images_ = torch.cat([batch[1] if fields is None else batch[1][0] for batch in got]).numpy()
        if workers:
            assert all(in_shared_memory(batch[1] if fields is None else batch[1][0]) for batch in got)
        source_of, records = bcd.partition_mix([48, 17], [0.5, 0.5], seed=11, epoch=epoch, rank=0, world_size=1)
        assert sources == source_of.tolist()
        for k in (0, 1):
            mine = np.flatnonzero(source_of == k)
            seed = spec_stream_key(11, 0, "MixSource", k)
            expected = expected_crops(values[k], records[mine].tolist(), options, seed, epoch)
            assert np.array_equal(images_[mine], expected)
        if fields is not None:
            labels = torch.cat([batch[1][1] for batch in got]).tolist()
            assert labels == [r % 4 if k == 0 else r % 3 for k, r in zip(source_of.tolist(), records.tolist())]
        runs.append(images_)
    assert not np.array_equal(runs[0], runs[1])
    # The same record number of the two sources is not cropped alike.
    a = expected_crops([first[0]], [0], options, spec_stream_key(11, 0, "MixSource", 0), 0)
    b = expected_crops([first[0]], [0], options, spec_stream_key(11, 0, "MixSource", 1), 0)
    assert not np.array_equal(a, b)


def test_a_mix_of_images_keeps_its_batch_with_bcd_collate_and_skips_what_does_not_decode(tmp_path, images):
    path, first = images
    broken = first[:5] + [b"\xff\xd8\xff garbage"] + first[5:9]
    dataset = bcd.Dataset.create(tmp_path / "broken", keyed=True)
    dataset.extend({"key": b"k%d" % i, "value": v, "label": i % 4} for i, v in enumerate(broken))
    sources = [
        bcd.torch.MapDataset(path, fields=["label"], image=bcd.torch.Image(16)),
        bcd.torch.MapDataset(tmp_path / "broken", fields=["label"], image=bcd.torch.Image(16), bad_images="skip"),
    ]
    mix = bcd.torch.Mix(sources, [0.5, 0.5], seed=4)
    sampler = bcd.torch.Sampler(mix)
    got = list(loader(mix, sampler, workers=2, batch_size=10, collate_fn=bcd.torch.collate))
    assert all(isinstance(batch, bcd.torch.ImageBatch) and batch.sources is not None for batch in got)
    source_of, records = bcd.partition_mix([48, 10], [0.5, 0.5], seed=4, epoch=0, rank=0, world_size=1)
    kept = [(k, r) for k, r in zip(source_of.tolist(), records.tolist()) if (k, r) != (1, 5)]
    pairs = [(k, r) for batch in got for k, r in zip(batch.sources.tolist(), batch.indices.tolist())]
    assert pairs == kept
    assert [label for batch in got for label in batch.fields["label"].tolist()] == [r % 4 for _, r in kept]
    assert sum(len(batch.skipped) for batch in got) == sum(1 for p in zip(source_of.tolist(), records.tolist()) if p == (1, 5))
    assert sources[1].skipped == len(records) - len(kept) > 0
    for batch in got:
        for k in (0, 1):
            mine = np.flatnonzero(batch.sources.numpy() == k)
            seed = spec_stream_key(4, 0, "MixSource", k)
            expected = expected_crops(first if k == 0 else broken, batch.indices.numpy()[mine].tolist(), bcd.ImageOptions(16), seed, 0)
            assert np.array_equal(batch.images.numpy()[mine], expected)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_view_with_images_crops_each_record_as_the_dataset_does(tmp_path, images, workers):
    path, values = images
    chosen = [1, 4, 5, 9, 16, 25, 30, 36, 41, 47]
    bcd.Dataset(path).create_view("chosen", indices=chosen, replace=True)
    options = bcd.ImageOptions(24)
    viewed = bcd.torch.MapDataset(path, view="chosen", fields=["label"], image=bcd.torch.Image(24))
    assert len(viewed) == len(chosen)
    sampler = bcd.torch.Sampler(viewed, seed=7)
    sampler.set_epoch(2)
    order = list(sampler)
    got = list(loader(viewed, sampler, workers=workers, batch_size=4))
    images_ = torch.cat([batch[0] for batch in got]).numpy()
    labels = torch.cat([batch[1] for batch in got]).tolist()
    records = [chosen[i] for i in order]
    # Keyed by the dataset record, not the position in the view.
    assert np.array_equal(images_, expected_crops(values, records, options, 7, 2))
    assert labels == [r % 4 for r in records]
    image, label = viewed[3]
    assert label == 9 % 4 and np.array_equal(image.numpy(), expected_crops(values, [9], options, 7, 2)[0])
    # The same records read without the view get the same crops.
    whole = bcd.torch.MapDataset(path, image=bcd.torch.Image(24))
    whole.use_crops(7, 2)
    assert np.array_equal(whole.read_images(records).images.numpy(), images_)
    # A view in a mix: its crops keyed by the dataset record, with the source's seed.
    labelled = bcd.torch.MapDataset(path, fields=["label"], image=bcd.torch.Image(24))
    mix = bcd.torch.Mix([viewed, labelled], [0.3, 0.7], seed=5, num_samples=30)
    sampler = bcd.torch.Sampler(mix)
    sampler.set_epoch(1)
    got = list(loader(mix, sampler, workers=workers, batch_size=8))
    source_of, positions = bcd.partition_mix([len(chosen), 48], [0.3, 0.7], seed=5, epoch=1, rank=0, world_size=1, num_samples=30)
    mixed = torch.cat([batch[1][0] for batch in got]).numpy()
    assert torch.cat([batch[0] for batch in got]).tolist() == source_of.tolist()
    for k in (0, 1):
        mine = np.flatnonzero(source_of == k)
        records = [chosen[p] if k == 0 else p for p in positions[mine].tolist()]
        expected = expected_crops(values, records, options, spec_stream_key(5, 0, "MixSource", k), 1)
        assert np.array_equal(mixed[mine], expected)


def test_reused_slots_never_change_a_batch_still_held(stored):
    # The main process keeps every third batch of two epochs (so slots are
    # held, others given back and reused, and the ones past the pool's size
    # get segments of their own) and checks them all at the end, against the
    # records read without a DataLoader.
    path, _ = stored
    dataset = bcd.torch.MapDataset(path, fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=9)
    kept, slots = [], []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for number, (values, labels) in enumerate(loader(dataset, sampler, workers=2, batch_size=4)):
            assert in_shared_memory(values.values)
            if hasattr(values.values, "_bcd_slot"):
                slots.append(values.values._bcd_slot)
            if number % 3 == 0:
                kept.append((values, labels))
    # Slots were reused: more batches came through slots than there are slots.
    assert len(slots) > 2 * len(set(slots))
    for values, labels in kept:
        for j, index in enumerate(values.indices.tolist()):
            assert values[j] == dataset[index][0] and int(labels[j]) == dataset[index][1]


def test_a_slot_is_given_back_when_its_batch_is_dropped_sent_or_not(stored):
    import gc
    import pickle
    from multiprocessing.reduction import ForkingPickler

    from bcd.torch import batch as batches

    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    in_use = lambda: sum(not slot.free() for slot in batches._POOL.slots)  # noqa: E731
    gc.collect()
    before = in_use()
    # Dropped unsent (read in a worker, never put on the queue): given back.
    taken = dataset._read_batch([0, 1, 2], True)
    assert in_use() == before + 1
    del taken
    gc.collect()
    assert in_use() == before
    # Sent: the receiver's tensor (and its views) give it back, not the sender's.
    sent = dataset._read_batch([3, 4, 5], True)
    copy = pickle.loads(ForkingPickler.dumps(sent))
    view = copy.value(1)
    del sent
    gc.collect()
    assert in_use() == before + 1
    del copy
    gc.collect()
    assert in_use() == before + 1 and bytes(view.numpy()) == dataset[4]
    del view
    gc.collect()
    assert in_use() == before
    # A batch pickled twice sends its slot once, then a copy of its bytes.
    twice = dataset._read_batch([6, 7], True)
    first = pickle.loads(ForkingPickler.dumps(twice))
    second = pickle.loads(ForkingPickler.dumps(twice))
    assert hasattr(first.values, "_bcd_slot") and not hasattr(second.values, "_bcd_slot")
    assert list(first) == list(second) == [dataset[6], dataset[7]]


def test_every_slot_in_use_gives_a_segment_of_its_own(stored):
    from bcd.torch import batch as batches

    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    batches._POOL.slots.clear()  # a pool of none in use
    held = [dataset._read_batch([i], True) for i in range(batches._MAX_SLOTS + 3)]
    assert [hasattr(b.values, "_bcd_lease") for b in held] == [True] * batches._MAX_SLOTS + [False] * 3
    assert all(b.values.is_shared() for b in held[batches._MAX_SLOTS :])
    assert [b[0] for b in held] == [dataset[i] for i in range(len(held))]


def test_a_process_forked_from_the_receiver_never_gives_back_its_slots(stored):
    # A later DataLoader's fork workers inherit the batches the main process
    # holds; one dropping its inherited copy must leave the slot in use.
    import gc
    import os
    import pickle
    from multiprocessing.reduction import ForkingPickler

    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    sent = dataset._read_batch([8, 9], True)
    slot = sent.values._bcd_lease.slot
    received = pickle.loads(ForkingPickler.dumps(sent))
    del sent
    gc.collect()
    assert not slot.free()
    child = os.fork()
    if child == 0:
        try:
            del received
            gc.collect()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert not slot.free() and list(received) == [dataset[8], dataset[9]]
    del received
    gc.collect()
    assert slot.free()


class _ThreadsSeen(bcd.torch.MapDataset):
    """Answers each batch with the threads its reads used."""

    def __getitems__(self, indices):
        super().__getitems__(indices)
        return [(self.dataset.threads, torch.get_num_threads())] * len(indices)


def test_a_dataloader_worker_reads_on_as_many_threads_as_torch_uses_there(stored):
    path, _ = stored
    dataset = _ThreadsSeen(path)
    default = dataset.dataset.threads  # every core (available_parallelism)
    seen = {pair for batch in loader(dataset, workers=2, collate_fn=list) for pair in batch}
    assert seen == {(1, 1)}  # torch sets 1 thread in its workers
    seen = {pair for batch in loader(dataset, workers=0, collate_fn=list) for pair in batch}
    assert seen == {(default, torch.get_num_threads())}  # the main process keeps every core


@pytest.mark.parametrize("proc", ["opens", "refused", "another file"])
def test_a_slots_segment_is_mapped_through_proc_or_else_fetched_from_the_worker(stored, monkeypatch, proc):
    # The receiver opens the sender's descriptor through /proc/PID/fd; where
    # that is refused (a hardened /proc), or opens another file than the slot
    # (the header names another pool or slot), it fetches the descriptor with
    # the resource_sharer handle instead; the values are the same either way.
    import pickle
    from multiprocessing.reduction import ForkingPickler

    from bcd.torch import batch as batches

    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    batches._POOL.slots.clear()  # new slots: each is sent with its segment
    sent = dataset._read_batch([10, 11, 12], True)
    other = dataset._read_batch([13], True)
    blob = ForkingPickler.dumps(sent)
    opened = []
    real_open = os.open

    def open_(name, flags, *rest):
        if str(name).startswith("/proc/"):
            opened.append(name)
            if proc == "refused":
                raise PermissionError(13, "ptrace access denied", name)
            if proc == "another file":
                name = f"/proc/{os.getpid()}/fd/{other.values._bcd_lease.slot.fd}"
        return real_open(name, flags, *rest)

    monkeypatch.setattr(batches.os, "open", open_)
    received = pickle.loads(blob)
    assert len(opened) == 1
    assert list(received) == [dataset[10], dataset[11], dataset[12]]
