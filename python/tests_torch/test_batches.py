"""What a plain torch DataLoader makes of bcd.torch.MapDataset (the README's
two-line swap, no collate_fn): batches that cross from the workers as
shared-memory tensors and hold what torch's default collate makes of
``dataset[i]``; a collate_fn of the user's own still gets those samples; and
images decoded in Rust (``image=``) with crops from the sampler's seed and
epoch, against torchvision's decode and crop of the same box."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import torch.utils.data

import bcd
import bcd.torch
from loaders import index_of, loader, make_dataset

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
            assert values.values.is_shared()  # one tensor, not pickled values
        assert [type(v) for v in values] == [bytes] * len(values)
        assert list(values) == list(expected_values)  # each record's bytes
        assert labels_tensor.dtype == expected_labels.dtype and torch.equal(labels_tensor, expected_labels)
    assert [index_of(v) for values, _ in got for v in values] == list(sampler)


def test_without_fields_a_batch_is_the_values(stored):
    path, _ = stored
    dataset = bcd.torch.MapDataset(path)
    sampler = bcd.torch.Sampler(dataset, seed=2)
    for values in loader(dataset, sampler, workers=2):
        assert isinstance(values, bcd.torch.Batch) and values.values.is_shared()
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
        assert all(images_.is_shared() for images_, _ in got) or not workers
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
