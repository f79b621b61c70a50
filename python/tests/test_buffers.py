"""Keys and values go in as any C-contiguous buffer, counted in bytes; anything
else is a TypeError that leaves the dataset as it was."""

from __future__ import annotations

import array
import mmap

import numpy as np
import pytest

import bcd
from helpers import read_all, snapshot

BUFFERS = [
    pytest.param(b"bytes", b"bytes", id="bytes"),
    pytest.param(bytearray(b"bytearray"), b"bytearray", id="bytearray"),
    pytest.param(memoryview(b"a memoryview"), b"a memoryview", id="memoryview"),
    pytest.param(memoryview(b"xxsliced viewxx")[2:-2], b"sliced view", id="memoryview-slice"),
    pytest.param(np.arange(10, dtype=np.int32), np.arange(10, dtype=np.int32).tobytes(), id="numpy-int32"),
    pytest.param(np.linspace(0, 1, 7), np.linspace(0, 1, 7).tobytes(), id="numpy-float64"),
    pytest.param(np.arange(12, dtype=np.uint16).reshape(3, 4), np.arange(12, dtype=np.uint16).tobytes(), id="numpy-2d"),
    pytest.param(np.array(3.5), np.array(3.5).tobytes(), id="numpy-0d"),
    pytest.param(np.ones(3, dtype=[("a", "<i4"), ("b", "<f8")]), np.ones(3, dtype=[("a", "<i4"), ("b", "<f8")]).tobytes(), id="numpy-structured"),
    pytest.param(np.arange(20, dtype=">i4")[5:9], np.arange(20, dtype=">i4")[5:9].tobytes(), id="numpy-contiguous-slice"),
    pytest.param(array.array("d", [1.0, 2.0]), array.array("d", [1.0, 2.0]).tobytes(), id="array.array"),
    pytest.param(b"", b"", id="empty"),
]


@pytest.mark.parametrize("compression", ["lz4", None])
@pytest.mark.parametrize("buffer, expected", BUFFERS)
def test_any_contiguous_buffer_is_a_value_and_a_key(tmp_path, buffer, expected, compression):
    keyed = bcd.Dataset.create(tmp_path / "keyed", keyed=True, compression=compression)
    keyed.extend([(buffer, buffer)])
    assert read_all(keyed) == [(expected, expected)]
    assert bytes(keyed[expected]) == expected
    assert buffer in keyed
    assert len(keyed.at(0)) == len(expected)  # counted in bytes, not items

    keyless = bcd.Dataset.create(tmp_path / "keyless", compression=compression)
    keyless.extend(iter([buffer, buffer]))
    assert read_all(keyless) == [expected, expected]


def test_an_mmap_is_a_buffer(tmp_path):
    (tmp_path / "file").write_bytes(b"mapped bytes")
    with open(tmp_path / "file", "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        dataset = bcd.Dataset.create(tmp_path / "d")
        dataset.extend([mapped])
    assert bytes(dataset.at(0)) == b"mapped bytes"


def test_a_bytearray_can_be_resized_after_it_was_added(tmp_path):
    value = bytearray(b"grow me")
    dataset = bcd.Dataset.create(tmp_path / "d", compression=None)
    dataset.extend([value])
    value.extend(b" later")  # no export of the buffer was left behind
    assert bytes(dataset.at(0)) == b"grow me"


NOT_CONTIGUOUS = [
    pytest.param(np.arange(10)[::2], id="strided-numpy-slice"),
    pytest.param(np.asfortranarray(np.arange(6).reshape(2, 3)), id="fortran-order"),
    pytest.param(memoryview(b"abcdef")[::2], id="strided-memoryview"),
]

NOT_BUFFERS = [
    pytest.param("a str", id="str"),
    pytest.param(12, id="int"),
    pytest.param(None, id="None"),
    pytest.param(1.5, id="float"),
    pytest.param(object(), id="object"),
    pytest.param([1, 2, 3], id="list-of-ints"),
]


@pytest.fixture
def datasets(tmp_path):
    """A keyed and a keyless dataset with one committed record each."""
    keyed = bcd.Dataset.create(tmp_path / "keyed", keyed=True)
    keyed.extend([(b"k", b"v")])
    keyless = bcd.Dataset.create(tmp_path / "keyless")
    keyless.extend([b"v"])
    return keyed, keyless


def assert_refused(dataset, entries, match):
    before = snapshot(dataset.path)
    with pytest.raises(TypeError, match=match):
        dataset.extend(entries)
    assert snapshot(dataset.path) == before
    assert len(dataset) == 1


@pytest.mark.parametrize("buffer", NOT_CONTIGUOUS)
def test_a_non_contiguous_buffer_is_a_type_error(datasets, buffer):
    keyed, keyless = datasets
    assert_refused(keyless, [b"fine", buffer], "C-contiguous")
    assert_refused(keyed, [(b"k2", b"fine"), (b"k3", buffer)], "C-contiguous")
    assert_refused(keyed, [(buffer, b"value")], "key must be a C-contiguous")
    with pytest.raises(TypeError, match="C-contiguous"):
        buffer in keyed  # noqa: B015  (as the reference: a buffer, but unusable)


@pytest.mark.parametrize("value", NOT_BUFFERS)
def test_a_value_that_is_not_a_buffer_is_a_type_error(datasets, value):
    keyed, keyless = datasets
    assert_refused(keyless, [b"fine", value], "buffer")
    assert_refused(keyed, [(b"k2", b"fine"), (b"k3", value)], "buffer protocol")
    assert value not in keyed


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(b"no key", id="a bare buffer"),
        pytest.param((b"k", b"v", b"extra"), id="a 3-tuple"),
        pytest.param((b"k",), id="a 1-tuple"),
        pytest.param(7, id="an int"),
        pytest.param({b"k": b"v"}, id="a dict"),
    ],
)
def test_a_keyed_entry_that_is_not_a_pair_is_a_type_error(datasets, entry):
    keyed, _ = datasets
    assert_refused(keyed, [(b"k2", b"fine"), entry], r"\(key, value\) pairs")


def test_a_list_of_two_buffers_is_a_pair(datasets):
    keyed, _ = datasets
    keyed.extend([[b"k2", b"v2"]])
    assert bytes(keyed[b"k2"]) == b"v2"


def test_a_keyless_dataset_refuses_pairs(datasets):
    _, keyless = datasets
    assert_refused(keyless, [(b"k", b"v")], "keyless datasets require an iterable of buffers")


@pytest.mark.parametrize("entries", [b"abc", bytearray(b"abc"), "abc"], ids=["bytes", "bytearray", "str"])
def test_a_single_buffer_instead_of_an_iterable_is_a_type_error(datasets, entries):
    _, keyless = datasets
    assert_refused(keyless, entries, "iterable of entries, not a single")


def test_entries_must_be_iterable(datasets):
    _, keyless = datasets
    assert_refused(keyless, 5, "not iterable")
