"""Audio clips decoded in Rust (bcd.AudioOptions, bcd.decode_audio,
Dataset.get_audio_into) against libsndfile (``soundfile``), which wrote the WAV
files of every sample format and reads them back as float32, and against
Python's ``wave`` module: the same samples, channels first, cut where the crop
says and zero-padded, channels mixed down, errors that name the record, and
hostile files refused without a crash."""

from __future__ import annotations

import io
import pickle
import struct
import wave

import numpy as np
import pytest
import soundfile

import bcd

RATE = 16_000


def noise(frames: int, channels: int, seed: int = 0) -> np.ndarray:
    """A clip of frames x channels samples in [-1, 1], with both ends reached."""
    rng = np.random.default_rng(seed)
    clip = np.clip(rng.normal(0, 0.4, (frames, channels)), -1, 1)
    clip[0, 0], clip[-1, -1] = -1.0, 1.0
    return clip


def written(clip: np.ndarray, subtype: str, fmt: str = "WAV", rate: int = RATE) -> bytes:
    """The clip as libsndfile writes it."""
    out = io.BytesIO()
    soundfile.write(out, clip, rate, subtype=subtype, format=fmt)
    return out.getvalue()


def reference(value: bytes) -> np.ndarray:
    """libsndfile's float32 samples, channels first."""
    data, _ = soundfile.read(io.BytesIO(value), dtype="float32", always_2d=True)
    return data.T


def decode(values, options, **keys) -> tuple[np.ndarray, list, list]:
    out = np.full((len(values), *options.shape), np.nan, dtype=np.float32)
    frames, failures = bcd.decode_audio(values, out, options, **keys)
    return out, frames, failures


SUBTYPES = ["PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"]


@pytest.mark.parametrize("fmt", ["WAV", "WAVEX"])
@pytest.mark.parametrize("subtype", SUBTYPES)
@pytest.mark.parametrize("channels", [1, 2])
def test_every_sample_format_is_libsndfiles_float32(subtype, fmt, channels):
    clip = noise(1001, channels)
    value = written(clip, subtype, fmt)
    options = bcd.AudioOptions(1001, channels=channels, crop="start")
    out, frames, failures = decode([value], options)
    assert failures == [] and frames == [1001]
    expected = reference(value)
    # 32-bit integers: libsndfile scales in single precision, this in double
    # (one rounding instead of two), so they may differ in the last bit.
    tolerance = 1e-7 if subtype == "PCM_32" else 0
    np.testing.assert_allclose(out[0], expected, rtol=0, atol=tolerance)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_pythons_wave_files_read_as_soundfile_reads_them(width):
    rng = np.random.default_rng(width)
    frames = rng.integers(0, 256, size=777 * 2 * width, dtype=np.uint8).tobytes()
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(width)
        w.setframerate(22_050)
        w.writeframes(frames)
    value = out.getvalue()
    options = bcd.AudioOptions(800, channels=2, crop="start", sample_rate=22_050)
    got, kept, failures = decode([value], options)
    assert failures == [] and kept == [777]
    tolerance = 1e-7 if width == 4 else 0
    np.testing.assert_allclose(got[0][:, :777], reference(value), rtol=0, atol=tolerance)
    assert not got[0][:, 777:].any()  # zero-padded


def test_clips_are_cut_where_the_crop_says_and_mixed_down():
    clip = noise(5000, 2, seed=1)
    value = written(clip, "PCM_16")
    full = reference(value)
    start, _, _ = decode([value], bcd.AudioOptions(1000, channels=2, crop="start"))
    assert np.array_equal(start[0], full[:, :1000])
    center, _, _ = decode([value], bcd.AudioOptions(1000, channels=2, crop="center"))
    assert np.array_equal(center[0], full[:, 2000:3000])
    mono, _, _ = decode([value], bcd.AudioOptions(5000, crop="start"))
    np.testing.assert_allclose(mono[0, 0], full.mean(axis=0), rtol=0, atol=1e-7)
    # Random offsets: a window of the clip, chosen by (seed, epoch, record) alone.
    options = bcd.AudioOptions(1000, channels=2)
    out, frames, _ = decode([value] * 40, options, seed=5, epoch=2, records=list(range(40)))
    assert frames == [1000] * 40
    offsets = []
    for row in out:
        matches = [at for at in range(4001) if np.array_equal(full[:, at : at + 1000], row)]
        assert len(matches) == 1
        offsets.append(matches[0])
    assert len(set(offsets)) > 30
    again, _, _ = decode([value] * 40, options, seed=5, epoch=2, records=list(range(40)))
    assert np.array_equal(out, again)
    other, _, _ = decode([value] * 40, options, seed=5, epoch=3, records=list(range(40)))
    assert not np.array_equal(out, other)
    shuffled, _, _ = decode([value] * 3, options, seed=5, epoch=2, records=[7, 0, 7])
    assert np.array_equal(shuffled[0], out[7]) and np.array_equal(shuffled[1], out[0])


def test_bad_clips_are_failures_naming_them_and_leave_the_others():
    good = written(noise(300, 1), "PCM_16")
    stereo = written(noise(300, 2), "PCM_16")
    slow = written(noise(300, 1), "PCM_16", rate=8000)
    mp3ish = b"ID3\x04\x00" + bytes(100)
    ulaw = written(noise(300, 1), "ULAW")
    truncated = good[: len(good) - 101]
    values = [good, b"", mp3ish, ulaw, truncated, stereo, slow, good]
    options = bcd.AudioOptions(300, channels=1, sample_rate=RATE, crop="start")
    out, frames, failures = decode(values, options, records=[10, 11, 12, 13, 14, 15, 16, 17])
    by_position = dict(failures)
    assert set(by_position) == {1, 2, 3, 4, 6}
    assert "record 11" in by_position[1] and "empty" in by_position[1]
    assert "not a WAV file" in by_position[2]
    assert "format code 0x0007" in by_position[3]
    assert "truncated" in by_position[4]
    assert "8000 Hz" in by_position[6] and "16000" in by_position[6]
    assert frames[5] == 300  # stereo mixed down to mono
    assert [frames[i] for i in by_position] == [0] * 5
    assert np.array_equal(out[0], out[7]) and out[0].any()
    assert np.isnan(out[1]).all()  # a failed slot is left as it was
    four = bcd.AudioOptions(10, channels=4)
    _, _, failures = decode([stereo], four)
    assert "2 channels: expected 4" in failures[0][1]


def test_every_truncation_and_many_byte_flips_fail_cleanly():
    value = written(noise(64, 2), "PCM_24")
    rng = np.random.default_rng(3)
    damaged = [value[:n] for n in range(len(value))]
    for _ in range(500):
        flipped = bytearray(value)
        for at in rng.integers(0, 80, size=3):  # the header and the first samples
            flipped[at] = rng.integers(0, 256)
        damaged.append(bytes(flipped))
    out, frames, failures = decode(damaged, bcd.AudioOptions(64, channels=2))
    assert all(isinstance(message, str) and message for _, message in failures)
    assert all(0 <= n <= 64 for n in frames)


def test_declared_lengths_are_checked_against_the_value():
    # A data chunk declaring 2 GB in a file of 60 bytes: refused, nothing allocated.
    header = written(noise(4, 1), "PCM_16")
    at = header.index(b"data") + 4
    huge = header[:at] + struct.pack("<I", 2_000_000_000) + header[at + 4 :]
    _, _, failures = decode([huge], bcd.AudioOptions(16))
    assert "declares 2000000000 bytes" in failures[0][1]
    # The length streaming writers leave (0xFFFFFFFF): the data runs to the end.
    streamed = header[:at] + struct.pack("<I", 0xFFFFFFFF) + header[at + 4 :]
    out, frames, failures = decode([streamed], bcd.AudioOptions(16, crop="start"))
    assert failures == [] and frames == [4]
    assert np.array_equal(out[0, 0, :4], reference(header)[0])


def test_options_are_checked_and_pickle():
    with pytest.raises(ValueError, match="crop"):
        bcd.AudioOptions(100, crop="end")
    with pytest.raises(ValueError, match="frames"):
        bcd.AudioOptions(0)
    with pytest.raises(ValueError, match="frames"):
        bcd.AudioOptions(-5)
    with pytest.raises(ValueError, match="channels"):
        bcd.AudioOptions(100, channels=0)
    with pytest.raises(ValueError, match="channels"):
        bcd.AudioOptions(100, channels=1000)
    with pytest.raises(ValueError, match="sample_rate"):
        bcd.AudioOptions(100, sample_rate=0)
    with pytest.raises(ValueError, match="1 GiB"):
        bcd.AudioOptions(200_000_000, channels=2)
    options = bcd.AudioOptions(48_000, channels=2, crop="center", sample_rate=48_000)
    copy = pickle.loads(pickle.dumps(options))
    assert repr(copy) == repr(options) and copy.shape == (2, 48_000) and copy.clip_floats == 96_000
    assert (copy.frames, copy.channels, copy.crop, copy.sample_rate) == (48_000, 2, "center", 48_000)
    with pytest.raises(ValueError, match="out"):
        bcd.decode_audio([b""], np.zeros(10, dtype=np.float32), bcd.AudioOptions(100))
    with pytest.raises(TypeError, match="float32"):
        bcd.decode_audio([b""], np.zeros(100, dtype=np.float64), bcd.AudioOptions(100))


@pytest.mark.parametrize("compression", ["lz4", None])
def test_a_dataset_decodes_its_records_and_names_them(tmp_path, compression):
    path = tmp_path / "clips"
    dataset = bcd.Dataset.create(path, keyed=True, compression=compression)
    values = [written(noise(n, 1, seed=n), "PCM_16") for n in (900, 1500, 100)]
    values.insert(2, b"RIFF but not audio")
    dataset.extend((b"clip%d" % i, value) for i, value in enumerate(values))
    options = bcd.AudioOptions(1000)
    out = np.zeros((4, *options.shape), dtype=np.float32)
    frames, failures = dataset.get_audio_into([0, 1, 2, -1], out, options, seed=3, epoch=1)
    assert [position for position, _ in failures] == [2]
    assert "record 2" in failures[0][1] and "clip2" in failures[0][1] and str(path) in failures[0][1]
    assert frames == [900, 1000, 0, 100]
    expected, _, _ = decode([values[0], values[1], values[3]], options, seed=3, epoch=1, records=[0, 1, 3])
    assert np.array_equal(out[[0, 1, 3]], expected)
    # Read positionally (nothing mapped): the same clips and failures.
    unmapped = np.zeros_like(out)
    assert dataset.get_audio_into([0, 1, 2, -1], unmapped, options, seed=3, epoch=1, positional=True) == (
        [900, 1000, 0, 100],
        failures,
    )
    assert np.array_equal(unmapped, out)
    with pytest.raises(IndexError):
        dataset.get_audio_into([4], out, options)
    # A view keys the crops by the dataset record.
    view = dataset.select([1, 3])
    viewed = np.zeros((2, *options.shape), dtype=np.float32)
    frames, failures = view.get_audio_into([0, 1], viewed, options, seed=3, epoch=1)
    assert failures == [] and frames == [1000, 100]
    assert np.array_equal(viewed, out[[1, 3]])
