"""Images decoded and cropped in Rust (bcd.ImageOptions, bcd.decode_images,
Dataset.get_images_into) against Pillow, which decodes JPEGs with
libjpeg-turbo too and resamples with the same antialiased bilinear filter:
full-size decodes within 1 on average, crops as Pillow's resize of the same
box, the centre crop as Resize then CenterCrop, layouts, flips, errors that
name the record, and hostile images refused without a crash."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest
from PIL import Image

import bcd


def photo(width: int, height: int, seed: int = 0) -> Image.Image:
    """A photographic-looking RGB image: smooth colour, edges and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack(
        [128 + 100 * np.sin(x / (17 + 3 * c) + y / (23 + 5 * c) + c) for c in range(3)], axis=-1
    )
    base[(x - width / 3) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 4) ** 2] = (200, 40, 90)
    base += rng.normal(0, 6, base.shape)
    return Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def pillow_rgb(value: bytes) -> Image.Image:
    return Image.open(io.BytesIO(value)).convert("RGB")


def decode(values, options, **keys) -> tuple[np.ndarray, list]:
    out = np.zeros((len(values), *options.shape), dtype=np.uint8)
    failures = bcd.decode_images(values, out, options, **keys)
    return out, failures


IMAGE = photo(331, 247)
VALUES = {
    "jpeg 4:2:0": encode(IMAGE, "JPEG", quality=90),
    "jpeg 4:4:4": encode(IMAGE, "JPEG", quality=95, subsampling=0),
    "jpeg progressive": encode(IMAGE, "JPEG", quality=85, progressive=True),
    "jpeg greyscale": encode(IMAGE.convert("L"), "JPEG", quality=90),
    "png rgb": encode(IMAGE, "PNG"),
    "png rgba": encode(IMAGE.convert("RGBA"), "PNG"),
    "png palette": encode(IMAGE.convert("P"), "PNG"),
    "png greyscale": encode(IMAGE.convert("L"), "PNG"),
    "png greyscale with alpha": encode(IMAGE.convert("LA"), "PNG"),
}


@pytest.mark.parametrize("name", list(VALUES))
def test_the_whole_image_at_its_size_is_pillows_decode(name):
    value = VALUES[name]
    width, height = IMAGE.size
    options = bcd.ImageOptions((height, width), crop="resize")
    out, failures = decode([value], options)
    assert failures == []
    reference = np.asarray(pillow_rgb(value), dtype=np.int16)
    difference = np.abs(out[0].astype(np.int16) - reference)
    assert difference.mean() <= 1.0, (name, difference.mean())
    if name.startswith("png"):
        assert difference.max() == 0, name  # lossless: exactly Pillow's pixels


@pytest.mark.parametrize("dct_scaling", [True, False])
@pytest.mark.parametrize("name", ["jpeg 4:2:0", "jpeg progressive", "png rgb"])
def test_random_crops_are_pillows_resize_of_the_same_box(name, dct_scaling):
    value = VALUES[name]
    options = bcd.ImageOptions(48, dct_scaling=dct_scaling)  # small: DCT scaling applies to big boxes
    records = list(range(12))
    out, failures = decode([value] * len(records), options, seed=5, epoch=2, records=records)
    assert failures == []
    full = pillow_rgb(value)
    differences = []
    for record, image in zip(records, out):
        left, top, width, height, flipped = options.crop_box(*full.size, seed=5, epoch=2, record=record)
        reference = full.resize((48, 48), Image.BILINEAR, box=(left, top, left + width, top + height))
        if flipped:
            reference = reference.transpose(Image.FLIP_LEFT_RIGHT)
        differences.append(np.abs(image.astype(np.int16) - np.asarray(reference, dtype=np.int16)).mean())
    # Pillow resamples the box with pixels from outside it at the edges, and a
    # DCT-scaled decode is a different low-pass filter than the bilinear one:
    # both stay well within one level on average.
    assert max(differences) <= (1.5 if dct_scaling else 1.0), differences
    flips = [options.crop_box(*full.size, seed=5, epoch=2, record=r)[4] for r in range(200)]
    assert 60 < sum(flips) < 140


@pytest.mark.parametrize("dct_scaling", [True, False])
def test_the_centre_crop_is_resize_then_center_crop(dct_scaling):
    value = VALUES["jpeg 4:4:4"]
    options = bcd.ImageOptions(96, crop="center", resize=110, dct_scaling=dct_scaling)
    out, failures = decode([value], options)
    assert failures == [] and not options.flip
    full = pillow_rgb(value)
    width, height = full.size
    resized = full.resize((int(110 * width / height), 110), Image.BILINEAR)
    left = int(round((resized.size[0] - 96) / 2.0))
    top = int(round((resized.size[1] - 96) / 2.0))
    reference = np.asarray(resized.crop((left, top, left + 96, top + 96)), dtype=np.int16)
    # Decoded at half size (the DCT's low-pass) or at full size (Pillow's own).
    assert np.abs(out[0].astype(np.int16) - reference).mean() <= (1.5 if dct_scaling else 0.5)


def test_crops_depend_on_seed_epoch_and_record_only():
    value = VALUES["jpeg 4:2:0"]
    options = bcd.ImageOptions(32)
    first, _ = decode([value] * 4, options, seed=1, epoch=0, records=[7, 8, 9, 7])
    again, _ = decode([value, value], options, seed=1, epoch=0, records=[9, 7])
    assert np.array_equal(first[0], first[3]) and np.array_equal(first[2], again[0])
    assert np.array_equal(first[0], again[1])
    other_epoch, _ = decode([value], options, seed=1, epoch=1, records=[7])
    other_seed, _ = decode([value], options, seed=2, epoch=0, records=[7])
    assert not np.array_equal(first[0], other_epoch[0]) and not np.array_equal(first[0], other_seed[0])
    # The same on one thread as on many.
    out = np.zeros((4, *options.shape), dtype=np.uint8)
    bcd.decode_images([value] * 4, out, options, seed=1, records=[7, 8, 9, 7], threads=1)
    assert np.array_equal(out, first)


def test_layout_and_flip():
    value = VALUES["png rgb"]
    plain = bcd.ImageOptions((20, 30), crop="resize", flip=False)
    first = bcd.ImageOptions((20, 30), crop="resize", flip=False, channels_first=True)
    assert plain.shape == (20, 30, 3) and first.shape == (3, 20, 30)
    a, _ = decode([value], plain)
    b, _ = decode([value], first)
    assert np.array_equal(a[0].transpose(2, 0, 1), b[0])
    # A crop that flips is the mirror of the same crop unflipped.
    crop = bcd.ImageOptions(24, scale=(0.3, 0.3), ratio=(1.0, 1.0))
    flipped = next(r for r in range(50) if crop.crop_box(331, 247, record=r)[4])
    unflipped_options = bcd.ImageOptions(24, scale=(0.3, 0.3), ratio=(1.0, 1.0), flip=False)
    assert crop.crop_box(331, 247, record=flipped)[:4] == unflipped_options.crop_box(331, 247, record=flipped)[:4]
    x, _ = decode([value], crop, records=[flipped])
    y, _ = decode([value], unflipped_options, records=[flipped])
    assert np.array_equal(x[0], y[0][:, ::-1])


def test_bad_images_are_failures_naming_them_and_leave_the_others():
    good = VALUES["jpeg 4:2:0"]
    cmyk = encode(IMAGE.convert("CMYK"), "JPEG")
    truncated = good[: len(good) // 2]
    values = [good, b"", b"GIF89a....", truncated, cmyk, VALUES["png rgb"][:60], good]
    options = bcd.ImageOptions(32, crop="resize")
    out, failures = decode(values, options, records=[10, 11, 12, 13, 14, 15, 16])
    by_position = dict(failures)
    assert set(by_position) == {1, 2, 3, 4, 5}
    assert "record 11" in by_position[1] and "empty" in by_position[1]
    assert "not a JPEG or PNG" in by_position[2]
    assert "truncated" in by_position[3] or "Premature end" in by_position[3]
    assert "CMYK" in by_position[4]
    assert "PNG" in by_position[5]
    assert np.array_equal(out[0], out[6]) and out[0].any()
    assert not out[1].any()  # a failed slot is left as it was


def test_declared_sizes_are_bounded_before_decoding():
    # A PNG header claiming 100,000 x 100,000 pixels, and a JPEG claiming 65500 x 65500.
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0))
    jpeg = bytearray(VALUES["jpeg greyscale"])
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5 : sof + 9] = struct.pack(">HH", 65500, 65500)
    out, failures = decode([png, bytes(jpeg)], bcd.ImageOptions(16))
    messages = [message for _, message in failures]
    assert len(messages) == 2 and all("pixels" in message for message in messages), messages


def test_every_truncation_and_many_byte_flips_fail_cleanly():
    value = encode(photo(40, 24), "JPEG", quality=80)
    rng = np.random.default_rng(3)
    damaged = [value[:n] for n in range(0, len(value), 7)]
    for _ in range(300):
        flipped = bytearray(value)
        for at in rng.integers(0, len(value), size=3):
            flipped[at] = rng.integers(0, 256)
        damaged.append(bytes(flipped))
    out, failures = decode(damaged, bcd.ImageOptions(8))
    assert all(isinstance(message, str) and message for _, message in failures)


def test_options_are_checked_and_pickle():
    with pytest.raises(ValueError, match="crop"):
        bcd.ImageOptions(224, crop="square")
    with pytest.raises(ValueError, match="scale"):
        bcd.ImageOptions(224, scale=(0.5, 0.1))
    with pytest.raises(ValueError, match="ratio"):
        bcd.ImageOptions(224, ratio=(0.0, 1.0))
    with pytest.raises(ValueError, match="resize"):
        bcd.ImageOptions(224, crop="center", resize=100)
    with pytest.raises(ValueError, match="resize"):
        bcd.ImageOptions(224, resize=256)
    with pytest.raises(ValueError, match="size"):
        bcd.ImageOptions(0)
    with pytest.raises(TypeError, match="size"):
        bcd.ImageOptions("224")
    options = bcd.ImageOptions((200, 100), crop="center", channels_first=True)
    copy = pickle.loads(pickle.dumps(options))
    assert repr(copy) == repr(options) and copy.shape == (3, 200, 100)
    assert "resize=228" in repr(options)  # 200 / 0.875
    assert bcd.ImageOptions(224).flip and not bcd.ImageOptions(224, crop="resize").flip


@pytest.mark.parametrize("compression", ["lz4", None])
def test_a_dataset_decodes_its_records_and_names_them(tmp_path, compression):
    path = tmp_path / "images"
    dataset = bcd.Dataset.create(path, keyed=True, compression=compression)
    values = [VALUES["jpeg 4:2:0"], VALUES["png palette"], b"not an image", VALUES["jpeg greyscale"]]
    dataset.extend((b"img%d" % i, value) for i, value in enumerate(values))
    options = bcd.ImageOptions(40, crop="center")
    out = np.zeros((4, *options.shape), dtype=np.uint8)
    failures = dataset.get_images_into([0, 1, 2, -1], out, options, seed=3, epoch=1)
    assert [position for position, _ in failures] == [2]
    assert "record 2" in failures[0][1] and "img2" in failures[0][1] and str(path) in failures[0][1]
    expected, _ = decode([values[0], values[1], values[3]], options, seed=3, epoch=1, records=[0, 1, 3])
    assert np.array_equal(out[[0, 1, 3]], expected)
    # Read positionally (nothing mapped): the same images and failures.
    unmapped = np.zeros_like(out)
    assert dataset.get_images_into([0, 1, 2, -1], unmapped, options, seed=3, epoch=1, positional=True) == failures
    assert np.array_equal(unmapped, out)
    with pytest.raises(IndexError):
        dataset.get_images_into([4], out, options)
    with pytest.raises(ValueError, match="out"):
        dataset.get_images_into([0, 1], np.zeros(10, dtype=np.uint8), options)
