"""Batches that travel from DataLoader workers as shared-memory tensors.

A :class:`MapDataset` answers the DataLoader's ``__getitems__`` with a
:class:`Batch`: the values back to back in one uint8 tensor (in shared memory
inside a worker), their offsets, and the requested fields. Its samples are
:class:`Sample` tuples, a type registered in torch's ``default_collate_fn_map``:
torch's default collate, which looks at the type of a batch's first sample,
hands the whole batch to :func:`collate_samples`, which returns the values as
one column (a :class:`Batch` without fields) and each field collated as torch
would have collated it. So a plain ``DataLoader(dataset, batch_size=...)``
moves each batch as a few tensors, never as pickled values, and a
``collate_fn`` of the user's own still gets samples as ``dataset[i]`` gives them.

A :class:`Mix` answers with one batch of all its sources' samples, which also
carries each sample's source (``sources``): its samples are
:class:`MixSample` pairs ``(source, sample)``, as ``mix[i]`` gives them, a
type registered too: :func:`collate_mixed` returns ``[sources, samples]``, the
sources an int64 tensor and the samples collated as above, which is what
torch's default collate makes of the pairs, again from the batch's tensors.
"""

from __future__ import annotations

import mmap
import os
import weakref
from typing import Iterator, Optional

import numpy as np
import torch
import torch.utils.data
from torch.utils.data._utils.collate import collate as _torch_collate
from torch.utils.data._utils.collate import default_collate_fn_map


class Sample(tuple):
    """One record of a :class:`Batch` with fields: ``(value, *fields)``, a tuple
    like ``dataset[i]``; its type tells torch's default collate that the batch
    it came from can be collated without touching each sample."""

    __slots__ = ()


class MixSample(tuple):
    """One sample of a :class:`Mix`'s batch: ``(source, sample)``, a tuple like
    ``mix[i]``; its type tells torch's default collate that the batch it came
    from can be collated without touching each sample."""

    __slots__ = ()


class _Samples:
    """What :class:`Batch`, :class:`ImageBatch` and :class:`AudioBatch` share:
    ``batch[i]`` is ``dataset[i]``'s sample, the value alone or ``(value,
    *fields)`` (a clip: ``(clip, frames, *fields)``), and for a :class:`Mix`'s
    batch ``(source, that sample)``."""

    __slots__ = ()

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            skipped = getattr(self, "skipped", None)
            if len(self) == 0 and skipped is not None and len(skipped):
                # What torch's default collate asks of a batch whose every
                # value was skipped (bad_images= / bad_audio="skip").
                raise IndexError(
                    f"an empty batch: every record of it failed to decode and was skipped "
                    f"(records {skipped.tolist()}); torch's default collate cannot make a batch of none "
                    "(collate_fn=bcd.torch.collate passes it on as it is)"
                )
            raise IndexError(f"sample {i} of a batch of {len(self)}")
        lead = self._lead(i)
        if len(lead) == 1 and not self.fields:
            sample = lead[0]
        else:
            sample = Sample((*lead, *(_item(column, i) for column in self.fields.values())))
        if self.sources is None:
            return sample
        return MixSample((int(self.sources[i]), sample))

    def __iter__(self) -> Iterator:
        # The samples as batch[i] gives them, each column split once (a
        # tensor's rows by one unbind or tolist) rather than indexed per
        # sample: a transform over a batch of clips paid 6-8 us a sample in
        # tensor indexing.
        leads = self._leads()
        columns = [_column_items(column) for column in self.fields.values()]
        sources = None if self.sources is None else self.sources.tolist()
        for i, lead in enumerate(leads):
            if len(lead) == 1 and not columns:
                sample = lead[0]
            else:
                sample = Sample((*lead, *(column[i] for column in columns)))
            yield sample if sources is None else MixSample((sources[i], sample))

    def _lead(self, i: int) -> tuple:
        """What sample ``i`` holds before its fields."""
        return (self._value(i),)

    def _leads(self) -> list:
        """``_lead(i)`` of every sample."""
        return [self._lead(i) for i in range(len(self))]


class Batch(_Samples):
    """A batch of records as one contiguous uint8 tensor (``values``) and the
    offsets of each value in it (``offsets``, int64, ``len + 1``), with the
    requested fields (``fields``: name -> tensor, or list for values a tensor
    cannot hold) and the record indices (``indices``).

    ``batch[i]`` (and iterating) gives sample ``i`` as :class:`MapDataset`
    gives ``dataset[i]``: the value (``bytes``, or with ``output="tensor"`` a
    uint8 tensor viewing the batch's memory), or ``(value, *fields)`` (a
    :class:`Sample`) when fields were asked for. :meth:`value` gives a value as
    a tensor and :meth:`value_bytes` as a memoryview, both without a copy
    (``PIL.Image.open(io.BytesIO(batch.value_bytes(i)))``). Built in a
    DataLoader worker, the tensors live in shared memory, so the batch reaches
    the main process without its values being pickled.

    A batch of a :class:`Mix` also says where each sample came from:
    ``sources`` (int64, the source of each sample; ``indices`` are then the
    records within their sources), and ``batch[i]`` is ``(source, sample)`` (a
    :class:`MixSample`), as the mix's ``mix[index]`` is. Without a mix,
    ``sources`` is None.
    """

    __slots__ = ("values", "offsets", "fields", "indices", "output", "sources", "_memory", "_bounds")

    def __init__(
        self,
        values: torch.Tensor,
        offsets: torch.Tensor,
        fields: dict,
        indices: torch.Tensor,
        output: str = "tensor",
        sources: Optional[torch.Tensor] = None,
    ):
        self.values = values
        self.offsets = offsets
        self.fields = fields
        self.indices = indices
        self.output = output
        self.sources = sources
        self._memory = None
        self._bounds = None

    def __reduce__(self):
        # The tensors only (the caches are made again where they are needed):
        # the values as a handle to shared memory, the small ones inside the
        # pickle (see _INBAND_BYTES).
        return (
            _rebuild_batch,
            (
                _send_values(self.values),
                _send(self.offsets),
                _send_fields(self.fields),
                _send(self.indices),
                self.output,
                _send(self.sources),
            ),
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __iter__(self) -> Iterator:
        if self.fields or self.sources is not None:
            yield from _Samples.__iter__(self)
            return
        # The bare values, without a call per sample (what a loop over a
        # batch of bytes does most).
        if self._bounds is None:
            self._bounds = self.offsets.tolist()
        bounds = self._bounds
        if self.output == "bytes":
            view = self._view()
            for start, end in zip(bounds, bounds[1:]):
                yield bytes(view[start:end])
        else:
            values = self.values
            for start, end in zip(bounds, bounds[1:]):
                yield values[start:end]

    def _range(self, i: int) -> tuple:
        if self._bounds is None:
            self._bounds = self.offsets.tolist()
        return self._bounds[i], self._bounds[i + 1]

    def _view(self) -> memoryview:
        if self._memory is None:
            self._memory = memoryview(self.values.numpy()).toreadonly()
        return self._memory

    def value(self, i: int) -> torch.Tensor:
        """Value ``i`` as a uint8 tensor sharing the batch's memory."""
        start, end = self._range(i)
        return self.values[start:end]

    def value_bytes(self, i: int) -> memoryview:
        """Value ``i`` as a read-only memoryview of the batch's memory."""
        start, end = self._range(i)
        return self._view()[start:end]

    def _value(self, i: int):
        if self.output == "bytes":
            start, end = self._range(i)
            return bytes(self._view()[start:end])
        return self.value(i)

    def _collated(self, collate_fn_map) -> list:
        return Collated([self.without_fields(), *(_collate_field(column, collate_fn_map) for column in self.fields.values())])

    def without_fields(self) -> "Batch":
        """The values alone: a batch whose samples are the bare values (what the
        default collate gives as the batch's first column)."""
        return Batch(self.values, self.offsets, {}, self.indices, self.output)

    def _unmixed(self) -> "Batch":
        return Batch(self.values, self.offsets, self.fields, self.indices, self.output)

    def pin_memory(self) -> "Batch":
        """Called by a DataLoader with ``pin_memory=True``."""
        return Batch(
            self.values.pin_memory(),
            self.offsets.pin_memory(),
            _pinned(self.fields),
            self.indices.pin_memory(),
            self.output,
            None if self.sources is None else self.sources.pin_memory(),
        )

    def __repr__(self) -> str:
        mixed = "" if self.sources is None else ", from a mix"
        return (
            f"bcd.torch.Batch({len(self)} records, {int(self.offsets[-1])} bytes, "
            f"fields {list(self.fields)}, output={self.output!r}{mixed})"
        )


class ImageBatch(_Samples):
    """A batch of decoded images (a :class:`MapDataset` with ``image=``): one
    uint8 tensor ``images`` of shape ``(N, *image.shape)``, the requested
    ``fields`` and the record ``indices``, in shared memory when built in a
    DataLoader worker. ``batch[i]`` is ``dataset[i]``'s sample: the image
    tensor, or ``(image, *fields)``; torch's default collate makes
    ``[images, *fields]`` of it without copying the images. ``skipped``: the
    records whose images did not decode, left out (``bad_images="skip"``).

    A batch of a :class:`Mix` carries ``sources`` as a :class:`Batch` does
    (``indices`` and ``skipped`` are then records within their sources), and
    ``batch[i]`` is ``(source, sample)``.
    """

    __slots__ = ("images", "fields", "indices", "skipped", "sources")

    def __init__(
        self,
        images: torch.Tensor,
        fields: dict,
        indices: torch.Tensor,
        skipped: torch.Tensor,
        sources: Optional[torch.Tensor] = None,
    ):
        self.images = images
        self.fields = fields
        self.indices = indices
        self.skipped = skipped
        self.sources = sources

    def __reduce__(self):
        return (
            _rebuild_image_batch,
            (_send_values(self.images), _send_fields(self.fields), _send(self.indices), _send(self.skipped), _send(self.sources)),
        )

    def __len__(self) -> int:
        return len(self.images)

    def _value(self, i: int) -> torch.Tensor:
        return self.images[i]

    def _leads(self) -> list:
        return [(image,) for image in self.images.unbind(0)]

    def _collated(self, collate_fn_map) -> list:
        return Collated([self.images, *(_collate_field(column, collate_fn_map) for column in self.fields.values())])

    def _unmixed(self) -> "ImageBatch":
        return ImageBatch(self.images, self.fields, self.indices, self.skipped)

    def pin_memory(self) -> "ImageBatch":
        """Called by a DataLoader with ``pin_memory=True``."""
        return ImageBatch(
            self.images.pin_memory(),
            _pinned(self.fields),
            self.indices.pin_memory(),
            self.skipped,
            None if self.sources is None else self.sources.pin_memory(),
        )

    def __repr__(self) -> str:
        mixed = "" if self.sources is None else ", from a mix"
        return (
            f"bcd.torch.ImageBatch({tuple(self.images.shape)} images, fields {list(self.fields)}, "
            f"{len(self.skipped)} skipped{mixed})"
        )


class AudioBatch(_Samples):
    """A batch of decoded audio clips (a :class:`MapDataset` with ``audio=``):
    one float32 tensor ``audio`` of shape ``(N, channels, frames)``, the frames
    each clip kept (``lengths``, int64: the rest of its row is zeros), the
    requested ``fields`` and the record ``indices``, in shared memory when
    built in a DataLoader worker. ``batch[i]`` is ``dataset[i]``'s sample,
    ``(clip, frames, *fields)``; torch's default collate makes ``[audio,
    lengths, *fields]`` of it without copying the clips. ``skipped``: the
    records whose clips did not decode, left out (``bad_audio="skip"``).

    A batch of a :class:`Mix` carries ``sources`` as a :class:`Batch` does,
    and ``batch[i]`` is ``(source, sample)``.
    """

    __slots__ = ("audio", "lengths", "fields", "indices", "skipped", "sources")

    def __init__(
        self,
        audio: torch.Tensor,
        lengths: torch.Tensor,
        fields: dict,
        indices: torch.Tensor,
        skipped: torch.Tensor,
        sources: Optional[torch.Tensor] = None,
    ):
        self.audio = audio
        self.lengths = lengths
        self.fields = fields
        self.indices = indices
        self.skipped = skipped
        self.sources = sources

    def __reduce__(self):
        return (
            _rebuild_audio_batch,
            (
                _send_values(self.audio),
                _send(self.lengths),
                _send_fields(self.fields),
                _send(self.indices),
                _send(self.skipped),
                _send(self.sources),
            ),
        )

    def __len__(self) -> int:
        return len(self.audio)

    def _lead(self, i: int) -> tuple:
        return (self.audio[i], int(self.lengths[i]))

    def _leads(self) -> list:
        return list(zip(self.audio.unbind(0), self.lengths.tolist()))

    def _collated(self, collate_fn_map) -> list:
        fields = (_collate_field(column, collate_fn_map) for column in self.fields.values())
        return Collated([self.audio, self.lengths, *fields])

    def _unmixed(self) -> "AudioBatch":
        return AudioBatch(self.audio, self.lengths, self.fields, self.indices, self.skipped)

    def pin_memory(self) -> "AudioBatch":
        """Called by a DataLoader with ``pin_memory=True``."""
        return AudioBatch(
            self.audio.pin_memory(),
            self.lengths.pin_memory(),
            _pinned(self.fields),
            self.indices.pin_memory(),
            self.skipped,
            None if self.sources is None else self.sources.pin_memory(),
        )

    def __repr__(self) -> str:
        mixed = "" if self.sources is None else ", from a mix"
        return (
            f"bcd.torch.AudioBatch({tuple(self.audio.shape)} clips, fields {list(self.fields)}, "
            f"{len(self.skipped)} skipped{mixed})"
        )


# Tensors of at most this many bytes travel from a DataLoader worker inside the
# pickled batch, as NumPy arrays, rather than as handles to shared memory: the
# main process fetches each handle's file descriptor from the worker in a round
# trip, which costs more than copying a few KB (offsets and indices sent inside
# the pickle took the samples per second of an epoch of 10 KB values from 2,805
# to 6,754 with one worker).
_INBAND_BYTES = 64 << 10
_NUMPY_DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
)


def _send(tensor):
    """A small CPU tensor as a NumPy array (pickled with the batch), anything
    else as it is."""
    if (
        isinstance(tensor, torch.Tensor)
        and tensor.device.type == "cpu"
        and tensor.dtype in _NUMPY_DTYPES
        and not tensor.requires_grad
        and tensor.numel() * tensor.element_size() <= _INBAND_BYTES
    ):
        return tensor.numpy()
    return tensor


def _send_fields(fields: dict) -> dict:
    return {name: _send(column) for name, column in fields.items()}


def _received(value):
    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


def _received_fields(fields: dict) -> dict:
    return {name: _received(column) for name, column in fields.items()}


def _rebuild_batch(values, offsets, fields, indices, output, sources) -> "Batch":
    return Batch(_received_values(values), _received(offsets), _received_fields(fields), _received(indices), output, _received(sources))


def _rebuild_image_batch(images, fields, indices, skipped, sources) -> "ImageBatch":
    return ImageBatch(_received_values(images), _received_fields(fields), _received(indices), _received(skipped), _received(sources))


def _rebuild_audio_batch(audio, lengths, fields, indices, skipped, sources) -> "AudioBatch":
    return AudioBatch(
        _received_values(audio), _received(lengths), _received_fields(fields), _received(indices), _received(skipped), _received(sources)
    )


def _pinned(fields: dict) -> dict:
    return {name: column.pin_memory() if isinstance(column, torch.Tensor) else column for name, column in fields.items()}


def _item(column, i: int):
    value = column[i]
    return value.item() if isinstance(value, torch.Tensor) and value.dim() == 0 else value


def _column_items(column) -> list:
    """``[_item(column, i) for i in range(len(column))]``, at once."""
    if isinstance(column, torch.Tensor):
        return column.tolist() if column.dim() == 1 else list(column.unbind(0))
    return list(column)


# What torch's default collate makes of a column of Python scalars, by the dtype
# of the tensor a Batch keeps the column in: ints become int64 and floats
# float64 (torch.tensor of Python ints and floats), bools stay bool.
_INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _collate_field(column, collate_fn_map):
    if isinstance(column, torch.Tensor):
        if column.dtype in _INTEGERS:
            return column.to(torch.int64)
        if column.dtype in _FLOATS:
            return column.to(torch.float64)
        if column.dtype == torch.bool:
            return column.clone()
        column = column.tolist()  # unsigned wider than 8 bits: as Python ints
    # A tuple, as torch's transposition of the samples makes it (strings come
    # back as that tuple).
    return _torch_collate(tuple(column), collate_fn_map=collate_fn_map)


def collate_samples(batch, *, collate_fn_map=None):
    """torch's default collate for a batch of :class:`Sample`: a list of the
    values' column (a :class:`Batch` without fields, whose items are the values)
    and each field collated as ``default_collate`` collates it. A :class:`Batch`
    is collated from its tensors without touching its samples; samples gathered
    any other way are packed into one new batch of values."""
    collated = getattr(type(batch), "_collated", None)
    if collated is not None:  # a Batch, an ImageBatch or an AudioBatch
        return collated(batch, collate_fn_map)
    samples = list(batch)
    width = len(samples[0])
    if any(len(sample) != width for sample in samples):
        raise RuntimeError("each element in list of batch should be of equal size")
    columns = list(zip(*samples))
    values = _pack(columns[0])
    if values is None:  # values of another kind: torch's own rules, sample by sample
        return _torch_collate([tuple(sample) for sample in samples], collate_fn_map=collate_fn_map)
    return [values, *(_torch_collate(column, collate_fn_map=collate_fn_map) for column in columns[1:])]


def _pack(values) -> "Batch | None":
    """Values (all bytes, or all 1-D uint8 tensors) copied back to back into one
    new batch of values (in shared memory inside a worker); None for others."""
    if all(isinstance(value, bytes) for value in values):
        output = "bytes"
        arrays = [np.frombuffer(value, dtype=np.uint8) for value in values]
    elif all(isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1 for value in values):
        output = "tensor"
        arrays = [value.numpy() for value in values]
    else:
        return None
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(array) for array in arrays], out=offsets[1:])
    tensor = _uint8_buffer(int(offsets[-1]), torch.utils.data.get_worker_info() is not None)
    if offsets[-1]:
        np.concatenate(arrays, out=tensor.numpy())
    indices = torch.full((len(arrays),), -1, dtype=torch.int64)
    return Batch(tensor, torch.from_numpy(offsets), {}, indices, output)


def collate_mixed(batch, *, collate_fn_map=None):
    """torch's default collate for a batch of :class:`MixSample`: ``[sources,
    samples]``, the sources an int64 tensor and the samples collated as
    ``default_collate`` collates them (for samples of a :class:`MapDataset`,
    see :func:`collate_samples`), which is what ``default_collate`` makes of
    ``(source, sample)`` pairs. A mix's :class:`Batch` or :class:`ImageBatch`
    is collated from its tensors without touching its samples; pairs gathered
    any other way are transposed as torch transposes them."""
    if isinstance(batch, _Samples) and batch.sources is not None:
        samples = batch._unmixed()
        if not samples.fields and isinstance(samples, ImageBatch):
            collated = samples.images  # what stacking its image tensors would give
        else:
            collated = _torch_collate(samples, collate_fn_map=collate_fn_map)
        return Collated([batch.sources, collated])
    pairs = [tuple(pair) for pair in batch]
    if any(len(pair) != 2 for pair in pairs):
        raise RuntimeError("each element in list of batch should be of equal size")
    return [_torch_collate(list(column), collate_fn_map=collate_fn_map) for column in zip(*pairs)]


default_collate_fn_map[Sample] = collate_samples
default_collate_fn_map[MixSample] = collate_mixed


def collate(batch):
    """A ``collate_fn`` that keeps a :class:`Batch` of ``output="tensor"``, an
    :class:`ImageBatch` and an :class:`AudioBatch` as they are (a :class:`Mix`'s
    too, with their ``sources``) and collates anything else with torch's
    ``default_collate`` (which collates a :class:`Batch` of bytes from its
    tensors, see :func:`collate_samples` and :func:`collate_mixed`)."""
    if (isinstance(batch, Batch) and batch.output == "tensor") or isinstance(batch, (ImageBatch, AudioBatch)):
        return batch
    return torch.utils.data.default_collate(batch)


def _uint8_buffer(size: int, shared: bool) -> torch.Tensor:
    """An uninitialised uint8 tensor of ``size`` bytes, in shared memory when
    ``shared`` (a DataLoader worker: the tensor then crosses to the main process
    as a handle, not as bytes): a part of one of the worker's reused segments
    (:class:`_Pool`) when one is free, else a new segment."""
    if shared and size:
        pooled = _POOL.take(size)
        if pooled is not None:
            return pooled
        return _new_shared(size)
    return torch.empty(size, dtype=torch.uint8)


def _new_shared(size: int) -> torch.Tensor:
    storage = torch.UntypedStorage._new_shared(size)
    return torch.empty(0, dtype=torch.uint8).set_(storage)


# ---------------------------------------------------------------- reused segments
#
# A batch's values made in a new shared-memory segment cost the worker the
# segment (a file, its mapping) and a page fault per 4 KiB written, and the main
# process a round trip to the worker for the segment's file descriptor and a
# page fault per 4 KiB read: 9-10 ms for 64 values of 100 KB, where reading
# them into memory already mapped takes 0.6 ms. So a worker keeps a few
# segments (slots) and reuses them: a batch's tensor is a part of a slot, and
# crosses as the slot's number and the part's size; the segment itself crosses
# once, the first time its slot is sent. The main process maps it once and
# hands out each batch's part as a tensor whose memory, once nothing refers to
# it any more (the batch and every view of its values dropped), is given back:
# the main process marks the slot free in the slot's header, where the worker
# looks before reusing it. A slot is never written while it is marked in use,
# so a batch the user keeps (in a list, across steps) keeps its slot and its
# bytes; when every slot is in use, a batch gets a new segment as before.
#
# A slot's header (_HEADER bytes before its data): byte 0 is the state (0 free,
# 1 in use), bytes 8..16 the pid of the process that mapped it (little-endian
# int64; 0 until then), bytes 16..32 the pool's token and the slot's number
# (what the receiver checks it mapped). The worker sends the segment with the
# slot until the header names its parent process (the DataLoader's), so a
# batch whose pickle never reached the main process cannot leave the segment
# unknown there. The segment crosses as the worker's descriptor number, which
# the main process opens through /proc/PID/fd (torch's way, a resource_sharer
# handle, costs a connection and a round trip to a thread of the worker, 8-20
# ms for each worker's first batch; it stays the fallback).

_HEADER = 64
_FREE, _IN_USE = 0, 1
# At most this many slots per worker: a DataLoader holds prefetch_factor (2 by
# default) batches per worker in flight and the loop one or two more; past this,
# batches get new segments.
_MAX_SLOTS = 8
_SLOT_ROUNDING = 1 << 20


class _Slot:
    __slots__ = ("number", "tensor", "memory", "capacity", "fd", "shared")

    def __init__(self, number: int, capacity: int, token: int):
        self.number = number
        self.capacity = capacity
        self.tensor = _new_shared(_HEADER + capacity)
        self.memory = self.tensor.numpy()
        self.memory[:_HEADER] = 0
        self.memory[16:32].view(np.int64)[:] = (token, number)
        # The segment's descriptor, held open by the tensor's storage for as
        # long as the slot lives; a resource_sharer handle to it is made the
        # first time it is sent (see _SlotSegment).
        self.fd = self.tensor.untyped_storage()._share_fd_cpu_()[0]
        self.shared = None

    def free(self) -> bool:
        return int(self.memory[0]) == _FREE

    def mapped_by_parent(self) -> bool:
        return int(self.memory[8:16].view(np.int64)[0]) == os.getppid()


class _Lease:
    """A slot taken for one batch's tensor: sent at most once (the receiver
    gives the slot back); given back here if the tensor is dropped unsent."""

    __slots__ = ("slot", "size", "sent")

    def __init__(self, slot: _Slot, size: int):
        self.slot = slot
        self.size = size
        self.sent = False

    def dropped(self) -> None:
        if not self.sent and os.getpid() == _POOL.pid:
            self.slot.memory[0] = _FREE


class _Pool:
    """A worker's reused segments (see above); one per process."""

    def __init__(self):
        self.pid = None
        self.token = 0
        self.slots: list = []
        self.retired: list = []
        self.numbered = 0

    def _here(self) -> None:
        if self.pid != os.getpid():  # a new process (a forked worker): its own slots
            self.pid = os.getpid()
            self.token = int.from_bytes(os.urandom(8), "little", signed=True)  # an int64, as the header holds it
            self.slots, self.retired, self.numbered = [], [], 0

    def take(self, size: int) -> Optional[torch.Tensor]:
        """A uint8 tensor of ``size`` bytes in a free slot (marked in use), or
        None when every slot is in use."""
        self._here()
        free = [slot for slot in self.slots if slot.free()]
        fitting = [slot for slot in free if slot.capacity >= size]
        if fitting:
            slot = min(fitting, key=lambda s: s.capacity)
        elif free or len(self.slots) < _MAX_SLOTS:
            if free:  # too small: replaced by a larger one
                retire = max(free, key=lambda s: s.capacity)
                self.slots.remove(retire)
                self.retired.append(retire.number)
            capacity = -(-(size + size // 8) // _SLOT_ROUNDING) * _SLOT_ROUNDING
            slot = _Slot(self.numbered, capacity, self.token)
            self.numbered += 1
            self.slots.append(slot)
        else:
            return None
        slot.memory[0] = _IN_USE
        lease = _Lease(slot, size)
        part = slot.memory[_HEADER : _HEADER + size]  # its own array: the tensor's owner
        weakref.finalize(part, lease.dropped)
        tensor = torch.from_numpy(part)
        tensor._bcd_lease = lease
        return tensor


_POOL = _Pool()


def _leased_view(tensor: torch.Tensor, *shape, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """``tensor.view(*shape)`` (of its bytes as ``dtype`` when given) that is
    still sent as a part of its slot."""
    viewed = (tensor if dtype is None else tensor.view(dtype)).view(*shape)
    lease = getattr(tensor, "_bcd_lease", None)
    if lease is not None:
        viewed._bcd_lease = lease
    return viewed


class _SlotPart:
    """What crosses for a tensor in a slot: the slot's number, the part's size
    and shape, the segment the first times, and the slots the worker replaced
    since its last batch."""

    __slots__ = ("token", "pid", "number", "size", "shape", "segment", "retired", "dtype")

    def __init__(self, token, pid, number, size, shape, segment, retired, dtype=torch.uint8):
        self.token, self.pid, self.number, self.size = token, pid, number, size
        self.shape, self.segment, self.retired, self.dtype = shape, segment, retired, dtype

    def __reduce__(self):
        return (_SlotPart, (self.token, self.pid, self.number, self.size, self.shape, self.segment, self.retired, self.dtype))


def _send_values(tensor):
    """A batch's values, images or clips: a tensor in a slot as a :class:`_SlotPart`
    (once: a second pickle of the same batch sends a copy in a new segment),
    anything else as it is."""
    lease = getattr(tensor, "_bcd_lease", None) if isinstance(tensor, torch.Tensor) else None
    if lease is None:
        return tensor
    if lease.sent:
        copy = _new_shared(tensor.numel() * tensor.element_size()).view(tensor.dtype).view(tensor.shape)
        copy.copy_(tensor)
        return copy
    lease.sent = True
    slot = lease.slot
    segment = None
    if not slot.mapped_by_parent():
        if slot.shared is None:
            from multiprocessing.resource_sharer import DupFd

            slot.shared = DupFd(slot.fd)
        segment = _SlotSegment(os.getpid(), slot.fd, _HEADER + slot.capacity, slot.shared)
    retired = []
    while _POOL.retired:  # pickled on the queue's feeder thread: pop, not swap
        retired.append(_POOL.retired.pop())
    return _SlotPart(_POOL.token, os.getpid(), slot.number, lease.size, tuple(tensor.shape), segment, tuple(retired), tensor.dtype)


class _SlotSegment:
    """How the receiver maps a slot's segment: the worker's descriptor opened
    through ``/proc/PID/fd/FD`` (a parent may open its child's; no round trip),
    or where that is not allowed (a hardened /proc), the resource_sharer
    handle, which fetches a duplicate from the worker in a round trip."""

    __slots__ = ("pid", "fd", "size", "shared")

    def __init__(self, pid, fd, size, shared):
        self.pid, self.fd, self.size, self.shared = pid, fd, size, shared

    def __reduce__(self):
        return (_SlotSegment, (self.pid, self.fd, self.size, self.shared))

    def map(self, token: int, number: int) -> np.ndarray:
        """The segment's memory, checked to be slot ``number`` of the pool
        ``token`` (its header says so)."""
        try:
            fd = os.open(f"/proc/{self.pid}/fd/{self.fd}", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            fd = None
        if fd is not None:
            memory = self._mapped(fd)
            if memory is not None and _names(memory, token, number):
                return memory
        memory = self._mapped(self.shared.detach())
        if memory is None or not _names(memory, token, number):
            raise RuntimeError(
                f"bcd: the shared-memory segment of slot {number} of DataLoader worker {self.pid} "
                "is not the one the batch names"
            )
        return memory

    def _mapped(self, fd: int) -> Optional[np.ndarray]:
        try:
            if os.fstat(fd).st_size < self.size:
                return None
            return np.frombuffer(mmap.mmap(fd, self.size), dtype=np.uint8)
        finally:
            os.close(fd)


def _names(memory: np.ndarray, token: int, number: int) -> bool:
    named = memory[16:32].view(np.int64)
    return int(named[0]) == token and int(named[1]) == number


# The slots mapped here, by worker (its pool's token): the worker's pid and
# each slot's memory.
_MAPPED: dict = {}


def _received_values(value):
    """A tensor as it was sent: a slot's part as a tensor of this process's
    mapping of the slot, given back when the tensor and its views are dropped."""
    if not isinstance(value, _SlotPart):
        return value
    worker = _MAPPED.get(value.token)
    if worker is None:
        _forget_exited_workers()
        worker = _MAPPED[value.token] = (value.pid, {})
    slots = worker[1]
    for number in value.retired:
        slots.pop(number, None)
    if value.segment is not None:
        memory = value.segment.map(value.token, value.number)
        memory[8:16].view(np.int64)[0] = os.getpid()
        slots[value.number] = memory
    memory = slots.get(value.number)
    if memory is None:
        raise RuntimeError(
            f"bcd: a batch names shared-memory slot {value.number} of DataLoader worker {value.pid}, "
            "which this process never received (was the batch unpickled in another process?)"
        )
    part = memory[_HEADER : _HEADER + value.size]
    weakref.finalize(part, _give_back, memory, os.getpid())
    tensor = torch.from_numpy(part)
    if value.dtype != torch.uint8:
        tensor = tensor.view(value.dtype)
    tensor = tensor.view(value.shape)
    tensor._bcd_slot = (value.pid, value.number)  # where it came from (tests, debugging)
    return tensor


def _give_back(memory: np.ndarray, receiver: int) -> None:
    # Only where the part was received: a process forked from the receiver
    # (a later DataLoader's worker) inherits its tensors, and must not give
    # back a slot the receiver still reads. The receiver's reads of the part
    # are done before its last reference goes, long before this store.
    if os.getpid() == receiver:
        memory[0] = _FREE


def _forget_exited_workers() -> None:
    """Drop the slots of workers that have exited (each slot's memory stays
    mapped while a batch of it is alive)."""
    for token, (pid, _) in list(_MAPPED.items()):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            del _MAPPED[token]
        except PermissionError:
            pass


class Collated(list):
    """What the default collate makes of a batch of :class:`Sample` or
    :class:`MixSample`: a list (``[values, *fields]`` or ``[sources,
    samples]``) whose tensors cross from a DataLoader worker as a batch's do:
    small ones inside the pickle, a slot's part as its number."""

    def __reduce__(self):
        return (_rebuild_collated, ([_send_item(item) for item in self],))


def _send_item(item):
    if isinstance(item, torch.Tensor) and getattr(item, "_bcd_lease", None) is not None:
        return _send_values(item)
    sent = _send(item)
    return _Inband(sent) if isinstance(sent, np.ndarray) else sent


class _Inband:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __reduce__(self):
        return (_Inband, (self.array,))


def _rebuild_collated(items) -> Collated:
    return Collated(
        torch.from_numpy(item.array) if isinstance(item, _Inband) else _received_values(item) for item in items
    )
