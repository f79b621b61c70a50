"""What a plain torch DataLoader makes of bcd.torch.MapDataset(audio=...): WAV
values decoded in Rust into one float32 tensor per batch that crosses from the
workers in shared memory, ``[audio, lengths, *fields]`` from torch's default
collate, random crops from the sampler's seed and epoch (the same clips
bcd.decode_audio makes of the values), clips that do not decode raised naming
the record or skipped and counted, and a mix of audio sources joined into one
batch."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest
import torch

import bcd
import bcd.torch
from loaders import in_shared_memory, loader

FRAMES = 1200


def clip(frames: int, seed: int, channels: int = 1) -> bytes:
    rng = np.random.default_rng(seed)
    samples = rng.integers(-20000, 20000, size=frames * channels, dtype=np.int16)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(samples.tobytes())
    return out.getvalue()


def clip_dataset(path, count, seed):
    # Clips shorter and longer than FRAMES: some padded, some cut.
    values = [clip(400 + 97 * ((i * 7) % 23), seed + i, channels=1 + i % 2) for i in range(count)]
    dataset = bcd.Dataset.create(path, keyed=True)
    dataset.extend({"key": b"clip%02d.wav" % i, "value": v, "label": i % 5} for i, v in enumerate(values))
    return values


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    path = tmp_path_factory.mktemp("clips") / "d"
    return path, clip_dataset(path, 41, seed=0)


def expected_clips(values, records, options, seed, epoch):
    out = np.zeros((len(records), *options.shape), dtype=np.float32)
    frames, failures = bcd.decode_audio([values[r] for r in records], out, options, seed=seed, epoch=epoch, records=records)
    assert failures == []
    return out, frames


@pytest.mark.parametrize("workers,context", [(0, "fork"), (2, "fork"), (2, "spawn")])
def test_clips_are_the_crops_of_the_samplers_seed_and_epoch(clips, workers, context):
    path, values = clips
    options = bcd.torch.Audio(FRAMES)
    dataset = bcd.torch.MapDataset(path, fields=["label"], audio=options)
    sampler = bcd.torch.Sampler(dataset, seed=6)
    runs = []
    for epoch in (0, 3):
        sampler.set_epoch(epoch)
        order = list(sampler)
        expected, frames = expected_clips(values, order, options, seed=6, epoch=epoch)
        got = list(loader(dataset, sampler, workers=workers, context=context, batch_size=10))
        assert all(len(batch) == 3 for batch in got)  # [audio, lengths, labels]
        audio = torch.cat([batch[0] for batch in got])
        assert audio.dtype == torch.float32 and audio.shape == (len(order), 1, FRAMES)
        assert np.array_equal(audio.numpy(), expected)
        assert torch.cat([batch[1] for batch in got]).tolist() == frames
        assert torch.cat([batch[2] for batch in got]).tolist() == [i % 5 for i in order]
        if workers:
            assert all(in_shared_memory(batch[0]) for batch in got)
        runs.append(audio)
    assert not torch.equal(runs[0], runs[1])
    # dataset[i] is (clip, frames, label), the crop of record i in the current epoch.
    sample, kept, label = dataset[5]
    at = order.index(5)
    assert label == 0 and kept == frames[at] and np.array_equal(sample.numpy(), expected[at])


def test_a_users_collate_and_transform_get_the_samples(clips):
    path, values = clips
    options = bcd.torch.Audio(FRAMES, crop="start")
    dataset = bcd.torch.MapDataset(path, fields=["label"], audio=options)
    batches = list(loader(dataset, workers=2, batch_size=8, collate_fn=list))
    samples = [sample for batch in batches for sample in batch]
    expected, frames = expected_clips(values, list(range(len(values))), options, seed=0, epoch=0)
    assert [kept for _, kept, _ in samples] == frames
    assert all(np.array_equal(s.numpy(), e) for (s, _, _), e in zip(samples, expected))
    whole = list(loader(bcd.torch.MapDataset(path, audio=options), workers=2, batch_size=8, collate_fn=bcd.torch.collate))
    assert all(isinstance(batch, bcd.torch.AudioBatch) for batch in whole)
    assert np.array_equal(torch.cat([b.audio for b in whole]).numpy(), expected)
    energy = bcd.torch.MapDataset(path, audio=options, transform=lambda s: float(s[0].square().sum()))
    got = [e for batch in loader(energy, workers=2, batch_size=8) for e in batch.tolist()]
    np.testing.assert_allclose(got, np.square(expected.astype(np.float64)).sum(axis=(1, 2)), rtol=1e-5)


def test_bad_clips_raise_naming_the_record_or_are_skipped_and_counted(tmp_path, clips):
    _, values = clips
    path = tmp_path / "d"
    dataset = bcd.Dataset.create(path, keyed=True)
    broken = values[:6] + [b"RIFF\x00\x00\x00\x00WAVE garbage", values[6]]
    dataset.extend({"key": b"k%d" % i, "value": v, "label": i} for i, v in enumerate(broken))
    strict = bcd.torch.MapDataset(path, fields=["label"], audio=bcd.torch.Audio(100))
    with pytest.raises(ValueError, match=r'record 6 \(key "k6"\)'):
        list(loader(strict, workers=2, batch_size=4))
    lenient = bcd.torch.MapDataset(path, fields=["label"], audio=bcd.torch.Audio(100), bad_audio="skip")
    labels = [label for _, _, batch_labels in loader(lenient, workers=2, batch_size=4) for label in batch_labels.tolist()]
    assert labels == [0, 1, 2, 3, 4, 5, 7]
    assert lenient.skipped == 1
    # A batch whose every clip is skipped: a clear error from the default
    # collate, naming the records; bcd.torch.collate passes the empty batch on.
    all_bad = tmp_path / "all_bad"
    bcd.Dataset.create(all_bad, keyed=True).extend({"key": b"b%d" % i, "value": b"junk", "label": i} for i in range(3))
    skipping = bcd.torch.MapDataset(all_bad, fields=["label"], audio=bcd.torch.Audio(100), bad_audio="skip")
    with pytest.raises(IndexError, match=r"every record of it failed to decode and was skipped \(records \[0, 1, 2\]\)"):
        list(loader(skipping, batch_size=4))
    (empty,) = list(loader(skipping, batch_size=4, collate_fn=bcd.torch.collate))
    assert isinstance(empty, bcd.torch.AudioBatch) and len(empty) == 0 and empty.skipped.tolist() == [0, 1, 2]
    images = bcd.torch.MapDataset(all_bad, image=bcd.torch.Image(8), bad_images="skip")
    with pytest.raises(IndexError, match="every record of it failed to decode"):
        list(loader(images, batch_size=4))
    with pytest.raises(ValueError, match="not both"):
        bcd.torch.MapDataset(path, audio=bcd.torch.Audio(100), image=bcd.torch.Image(16))
    with pytest.raises(TypeError, match="AudioOptions"):
        bcd.torch.MapDataset(path, audio=100)
    with pytest.raises(ValueError, match="bad_audio"):
        bcd.torch.MapDataset(path, audio=bcd.torch.Audio(100), bad_audio="ignore")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_mix_of_audio_sources_is_one_batch_cropped_from_each_sources_seed(tmp_path, clips, workers):
    from test_batches import spec_stream_key

    path, first = clips
    second = clip_dataset(tmp_path / "second", 13, seed=100)
    options = bcd.torch.Audio(FRAMES)
    mix = bcd.torch.Mix(
        [bcd.torch.MapDataset(p, fields=["label"], audio=options) for p in (path, tmp_path / "second")],
        [0.5, 0.5],
        seed=11,
    )
    assert isinstance(mix.__getitems__([0, 45, 1]), bcd.torch.AudioBatch)
    sampler = bcd.torch.Sampler(mix)
    sampler.set_epoch(1)
    got = list(loader(mix, sampler, workers=workers, batch_size=12))
    sources = torch.cat([batch[0] for batch in got]).tolist()
    audio = torch.cat([batch[1][0] for batch in got]).numpy()
    lengths = torch.cat([batch[1][1] for batch in got]).tolist()
    source_of, records = bcd.partition_mix([41, 13], [0.5, 0.5], seed=11, epoch=1, rank=0, world_size=1)
    assert sources == source_of.tolist()
    for k, values in enumerate((first, second)):
        mine = np.flatnonzero(source_of == k)
        expected, frames = expected_clips(values, records[mine].tolist(), options, spec_stream_key(11, 0, "MixSource", k), 1)
        assert np.array_equal(audio[mine], expected)
        assert [lengths[i] for i in mine] == frames
