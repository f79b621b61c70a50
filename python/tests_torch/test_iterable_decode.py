"""bcd.torch.IterableDataset with image= and audio=: each worker's share of the
epoch decoded in Rust, with the random crops of (the dataset's seed, the pass's
epoch, record), the same crops bcd.decode_images / bcd.decode_audio make of the
values (and a Sampler over a MapDataset draws); values that do not decode
raised naming the record, or skipped, counted, and a state saved after a
skipped record resuming exactly after what was taken."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.data

import bcd
import bcd.torch
from loaders import in_shared_memory
from test_audio import clip_dataset, expected_clips
from test_batches import expected_crops, image_dataset

SIZE = 24
FRAMES = 900


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "d"
    return path, image_dataset(path, 29, seed=7)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    path = tmp_path_factory.mktemp("clips") / "d"
    return path, clip_dataset(path, 31, seed=3)


def loader(dataset, workers, context="fork", **options):
    if workers:
        options.update(num_workers=workers, multiprocessing_context=context)
    return torch.utils.data.DataLoader(dataset, **options)


@pytest.mark.parametrize("workers,context", [(0, "fork"), (2, "fork"), (2, "spawn")])
def test_batches_of_images_are_the_crops_of_the_seed_and_each_passs_epoch(images, workers, context):
    path, values = images
    options = bcd.torch.Image(SIZE)
    dataset = bcd.torch.IterableDataset(path, fields=["label"], image=options, seed=5, batch_size=6)
    passes = []
    for epoch in (0, 2):
        dataset.set_epoch(epoch)
        got = list(loader(dataset, workers, context, batch_size=None))
        records = torch.cat([batch.indices for batch in got]).tolist()
        assert sorted(records) == list(range(len(values)))
        images_ = torch.cat([batch.images for batch in got])
        assert images_.shape == (len(values), SIZE, SIZE, 3)
        assert np.array_equal(images_.numpy(), expected_crops(values, records, options, seed=5, epoch=epoch))
        assert [label for batch in got for label in batch.fields["label"].tolist()] == [r % 3 for r in records]
        if workers:
            assert all(in_shared_memory(batch.images) for batch in got)
        passes.append(images_)
    assert not torch.equal(passes[0], passes[1])


def test_the_crops_are_those_a_sampler_over_a_map_dataset_draws(images):
    path, _ = images
    options = bcd.torch.Image(SIZE)
    streamed = bcd.torch.IterableDataset(path, fields=["label"], image=options, seed=9, shuffle=False, batch_size=29)
    streamed.set_epoch(4)
    [batch] = list(streamed)
    mapped = bcd.torch.MapDataset(path, fields=["label"], image=options)
    sampler = bcd.torch.Sampler(mapped, seed=9, shuffle=False)
    sampler.set_epoch(4)
    assert torch.equal(batch.images, mapped.read_images(list(sampler)).images)


@pytest.mark.parametrize("workers", [0, 2])
def test_samples_of_clips_collate_into_audio_and_lengths(clips, workers):
    path, values = clips
    options = bcd.torch.Audio(FRAMES)
    dataset = bcd.torch.IterableDataset(path, fields=["label"], audio=options, seed=2)
    dataset.set_epoch(1)
    got = list(loader(dataset, workers, batch_size=4))
    assert all(len(batch) == 3 for batch in got)  # [audio, lengths, labels]
    labels = torch.cat([batch[2] for batch in got]).tolist()
    audio = torch.cat([batch[0] for batch in got])
    lengths = torch.cat([batch[1] for batch in got]).tolist()
    assert audio.shape == (len(values), 1, FRAMES) and len(labels) == len(values)
    # Every record exactly once: match each clip to the record whose expected crop it is.
    expected, frames = expected_clips(values, list(range(len(values))), options, seed=2, epoch=1)
    matched = []
    for clip_, length in zip(audio.numpy(), lengths):
        hits = [r for r in range(len(values)) if frames[r] == length and np.array_equal(expected[r], clip_)]
        assert len(hits) == 1
        matched.append(hits[0])
    assert sorted(matched) == list(range(len(values)))
    assert labels == [r % 5 for r in matched]
    if not workers:
        sampler = bcd.torch.Sampler(len(values), seed=2)
        sampler.set_epoch(1)
        assert matched == list(sampler)


def broken_dataset(path, values, count, bad_at, garbage=b"\xff\xd8\xff garbage"):
    """A keyed dataset of the first ``count`` values (keys ``k<i>``, labels
    ``i``), those at ``bad_at`` replaced by ``garbage``, which does not decode."""
    dataset = bcd.Dataset.create(path, keyed=True)
    broken = [garbage if i in bad_at else v for i, v in enumerate(values[:count])]
    dataset.extend({"key": b"k%d" % i, "value": v, "label": i} for i, v in enumerate(broken))
    return path


def _label(sample):
    return int(sample[-1])


@pytest.mark.parametrize("transform", [None, _label], ids=["samples", "transform"])
@pytest.mark.parametrize("kind", ["images", "clips"])
def test_values_that_do_not_decode_raise_or_are_skipped_and_a_resume_takes_the_rest(tmp_path, images, clips, kind, transform):
    values = images[1] if kind == "images" else clips[1]
    garbage = b"RIFF garbage" if kind == "clips" else b"\xff\xd8\xff garbage"
    path = broken_dataset(tmp_path / "d", values, 12, {4, 9}, garbage)
    decode = {"image": bcd.torch.Image(16)} if kind == "images" else {"audio": bcd.torch.Audio(FRAMES)}
    bad = "bad_images" if kind == "images" else "bad_audio"
    strict = bcd.torch.IterableDataset(path, fields=["label"], shuffle=False, transform=transform, **decode)
    with pytest.raises(ValueError, match=r'record 4 \(key "k4"\)'):
        list(strict)

    def stream():
        return bcd.torch.IterableDataset(
            path, fields=["label"], shuffle=False, transform=transform, **decode, **{bad: "skip"})

    def label(sample):
        return sample if transform else int(sample[-1])

    lenient = stream()
    whole = [label(sample) for sample in lenient]
    assert whole == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11]
    assert lenient.skipped == 2
    # Taken through label 5 (record 5, past the skipped record 4): a resume
    # yields exactly the rest.
    lenient.set_epoch(0)
    taken = []
    for sample in lenient:
        taken.append(label(sample))
        if taken[-1] == 5:
            state = lenient.state_dict()
            break
    resumed = stream()
    resumed.load_state_dict(state)
    assert taken + [label(sample) for sample in resumed] == whole
    # And after the last record of a chunk, skipped, the state is at the chunk's end.
    assert state["taken"] == 6


def test_image_and_audio_belong_to_a_mixs_sources(images):
    path, _ = images
    mix = bcd.torch.Mix([bcd.torch.MapDataset(path, image=bcd.torch.Image(SIZE))], [1])
    with pytest.raises(TypeError, match="image=.*belong to the mix's sources"):
        bcd.torch.IterableDataset(mix, image=bcd.torch.Image(SIZE))
    with pytest.raises(TypeError, match="bad_audio=.*belong to the mix's sources"):
        bcd.torch.IterableDataset(mix, bad_audio="skip")


@pytest.mark.parametrize("transform", [None, _label], ids=["batches", "transform"])
def test_a_resume_over_a_mix_takes_the_rest_past_a_skipped_image(tmp_path, images, transform):
    path = broken_dataset(tmp_path / "d", images[1], 10, {3})

    def stream():
        source = bcd.torch.MapDataset(
            path, fields=["label"], image=bcd.torch.Image(16), bad_images="skip", transform=transform)
        other = bcd.torch.MapDataset(images[0], fields=["label"], image=bcd.torch.Image(16), transform=transform)
        return bcd.torch.IterableDataset(bcd.torch.Mix([source, other], [1, 1], seed=4))

    def key(sample):
        source, inner = sample
        return source, inner if transform else int(inner[-1])

    whole = [key(sample) for sample in stream()]
    # The mix draws its sources one for one: the broken source's records come
    # again, record 3 never.
    assert {k for k in whole if k[0] == 0} == {(0, i) for i in range(10) if i != 3}
    assert sum(k[0] == 0 for k in whole) > 10
    # Saved after every sample (the skipped record among them): each resume
    # yields exactly the rest.
    for count in range(1, len(whole)):
        first = stream()
        taken = []
        for sample in first:
            taken.append(key(sample))
            if len(taken) == count:
                state = first.state_dict()
                break
        resumed = stream()
        resumed.load_state_dict(state)
        assert taken + [key(sample) for sample in resumed] == whole, count


def test_a_mixs_samples_from_a_transform_keep_their_places_past_a_skipped_image(tmp_path, images):
    path = broken_dataset(tmp_path / "d", images[1], 8, {2})
    sources = [
        bcd.torch.MapDataset(path, fields=["label"], image=bcd.torch.Image(16), bad_images="skip", transform=_label),
        bcd.torch.MapDataset(images[0], fields=["label"], image=bcd.torch.Image(16), transform=_label),
    ]
    mix = bcd.torch.Mix(sources, [1, 1], seed=1)
    # The sources' records interleaved (a mix's indices are source 0's, then 1's).
    asked = [index for pair in zip(range(8, 16), range(8)) for index in pair]
    expected = []
    for index in asked:
        try:
            expected.append(mix[index])
        except ValueError:
            pass
    assert len(expected) < len(asked)
    assert mix.__getitems__(asked) == expected


def test_persistent_workers_over_a_mix_crop_each_pass_from_its_own_epoch(tmp_path, images):
    path, _ = images
    image_dataset(tmp_path / "second", 13, seed=50)
    sources = [bcd.torch.MapDataset(p, fields=["label"], image=bcd.torch.Image(SIZE)) for p in (path, tmp_path / "second")]
    mix = bcd.torch.Mix(sources, [1, 1], seed=8)
    stream = bcd.torch.IterableDataset(mix, batch_size=5)
    run = loader(stream, 2, batch_size=None, persistent_workers=True)
    offsets = np.cumsum([0] + mix.lengths)
    passes = []
    # No set_epoch: each persistent worker takes the next epoch at each pass.
    for epoch in (0, 1):
        got = list(run)
        indices = [int(offsets[s]) + int(r) for batch in got for s, r in zip(batch.sources, batch.indices)]
        images_ = torch.cat([batch.images for batch in got])
        # The crops of that epoch, as Mix.use_crops makes them here.
        mix.use_crops(epoch)
        expected = mix.__getitems__(indices)
        assert torch.equal(images_, expected.images), epoch
        passes.append(images_)
    assert not torch.equal(passes[0], passes[1])
