"""The map-style dataset: ``dataset[i]`` is ``(value, *fields)``."""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import torch
import torch.utils.data

import bcd

from .announcement import Announcement, Counter
from .batch import AudioBatch, Batch, ImageBatch, _leased_view, _uint8_buffer

_OUTPUTS = ("bytes", "tensor")
# With a transform, values read positionally are read in pieces of about this
# many bytes (see MapDataset._transformed): glibc keeps 128 KiB free at the top
# of its heap after a trim, so a piece's values freed there are what the next
# piece's reuse, without new pages.
_PIECE_BYTES = 64 << 10
_BAD_VALUES = ("raise", "skip")


class ReadsDataset:
    """What the torch datasets of this package share: ``dataset`` is the
    ``bcd.Dataset`` they read (a sampler takes a stored field from it), and
    ``records`` the dataset indices of their records in order (None: all of
    them), so a stored field gives one value per sample."""

    @property
    def dataset(self) -> "bcd.Dataset":
        raise NotImplementedError

    @property
    def records(self):
        return None


def _check_output(output: str) -> str:
    if output not in _OUTPUTS:
        raise ValueError(f'output={output!r}: expected "bytes" or "tensor"')
    return output


class MapDataset(torch.utils.data.Dataset, ReadsDataset):
    """The records of the dataset at ``path`` as a map-style torch dataset.

    ``dataset[i]`` (negative counts from the end) is ``(value, *fields)`` for the
    requested ``fields`` (just ``value`` without fields): the value as ``bytes``,
    or with ``output="tensor"`` as a uint8 tensor; then ``transform(sample)`` if
    given. ``fields`` names fields stored in the dataset (read once per process
    through ``Dataset.fields``), or maps names to per-record sequences for
    values kept elsewhere (``{"label": labels}``).

    A DataLoader fetches a batch with ``__getitems__``: one read of all its
    values, decoded on all cores without the GIL into one uint8 tensor (in
    shared memory inside a worker), returned as a :class:`Batch` whose samples
    are ``dataset[i]``'s (with a ``transform``, a list of transformed samples).
    torch's default collate turns it into ``[values, *fields]`` from its tensors
    (see :func:`bcd.torch.batch.collate_samples`): ``values`` is a
    :class:`Batch` of the bare values (``values[j]`` is the value as
    ``dataset[i]`` gives it), each field a tensor (or list) as torch collates
    it. So a plain DataLoader sends tensors, not pickled values, between
    processes. A ``collate_fn`` of your own gets the :class:`Batch`, a sequence
    of the samples; ``collate_fn=bcd.torch.collate`` keeps a batch of
    ``output="tensor"`` whole.

    ``image=bcd.torch.Image(size, crop=..., ...)`` (a :class:`bcd.ImageOptions`)
    makes each value a decoded image: JPEG and PNG values are decoded, cropped
    (a random resized crop and flip for training, ``crop="center"`` for
    evaluation, ``crop="resize"``) and resized in Rust, a batch at a time on
    all cores without the GIL, into one uint8 tensor ``(N, H, W, 3)`` (or ``(N,
    3, H, W)`` with ``channels_first=True``): ``dataset[i]`` is ``(image,
    *fields)``, and torch's default collate gives ``[images, *fields]``. The
    random crops come from ``(seed, epoch, record)``: the :class:`Sampler`'s
    seed and epoch (its ``set_epoch`` announces them to the workers), or
    :meth:`use_crops` / :meth:`set_epoch` without a sampler; the same in every
    run and after a resume. An image that does not decode raises ``ValueError``
    naming the record; with ``bad_images="skip"`` it is left out of its batch
    and counted in :attr:`skipped`.

    ``audio=bcd.torch.Audio(frames, channels=1, crop="random")`` (a
    :class:`bcd.AudioOptions`) makes each value a decoded clip: WAV values
    (PCM of 8 to 32 bits, 32- or 64-bit float) are decoded in Rust, a batch at
    a time on all cores without the GIL, into one float32 tensor ``(N,
    channels, frames)``, samples scaled to [-1, 1) as ``soundfile`` and
    torchaudio scale them; a longer clip is cut to ``frames`` (from a random
    offset drawn as the image crops are, ``crop="start"`` or ``"center"``), a
    shorter one zero-padded, and several channels mixed down for
    ``channels=1``. ``dataset[i]`` is ``(clip, frames, *fields)`` with the
    frames the clip kept, and torch's default collate gives ``[audio,
    lengths, *fields]`` (an :class:`AudioBatch`'s tensors). A clip that does
    not decode raises ``ValueError`` naming the record; with
    ``bad_audio="skip"`` it is left out and counted in :attr:`skipped`.

    Pickles as its path and settings: fork and spawn workers reopen the dataset
    through its persisted index. ``refresh=True`` picks up records committed
    since the open at every ``set_epoch`` (and in a worker, when asked for an
    index past the end it knows). ``path`` may be a dataset in object storage
    (``s3://``, ``gs://``, ``az://``), read through the shared local shard
    cache that ``cache_dir``, ``cache_limit`` and ``prefetch`` set up as for
    ``bcd.Dataset``: every worker on the machine shares it, and a
    :class:`Sampler` of this dataset has it fetch each epoch's shards in the
    order the epoch needs them.

    In a DataLoader worker, batches (and the values ``image=`` and ``audio=``
    decode) are read with positional reads of the shard files
    (``Dataset.get_batch_into(..., positional=True)``) rather than through the
    mappings: a worker that reads through a mapping counts every
    page it touched in its memory (its PSS), most of the dataset over an epoch,
    where a positional read maps nothing; the epoch runs as fast either way
    (BENCHMARKS.md, session 37). ``positional=False`` reads through the
    mappings in workers too, ``positional=True`` in the main process too.
    A sparse view (under 1/16 of the records) reads positionally in the main
    process as well, in every epoch (``View.get_batch_into``).

    With a ``transform``, each sample's value is made (read positionally into
    a ``bytes`` of its own, or copied out of the mapping) just before the
    transform runs on it, and let go when it returns: a transform that keeps
    nothing needs the memory of a few values at a time, not a batch of them
    (which glibc would give back to the kernel after each batch and fault in
    again for the next; BENCHMARKS.md, session 38). Read positionally, a
    batch is read in pieces of about 64 KiB of values (one at a time for large
    ones). A transform may keep what it is given.

    ``view="NAME"``: only the records of that view (``bcd view create``), in
    dataset order: ``dataset[i]`` is the view's ``i``-th record, ``len`` the
    view's, ``fields`` and a :class:`Sampler`'s ``balance_by`` the view's
    records' (given values: one per view record). With ``refresh=True`` the
    view is read again at every ``set_epoch`` (after a ``bcd view refresh``).
    With ``image=`` too, the random crops are keyed by the dataset record, not
    the position in the view: ``(seed, epoch, dataset index)``, so a record is
    cropped the same with or without the view.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        fields: Union[None, Sequence[str], Mapping[str, Sequence]] = None,
        transform: Optional[Callable[[Any], Any]] = None,
        output: str = "bytes",
        image: Optional["bcd.ImageOptions"] = None,
        bad_images: str = "raise",
        audio: Optional["bcd.AudioOptions"] = None,
        bad_audio: str = "raise",
        refresh: bool = False,
        cache_dir: Union[None, str, os.PathLike] = None,
        cache_limit: Union[None, int, str] = None,
        view: Optional[str] = None,
        prefetch: Optional[int] = None,
        positional: Optional[bool] = None,
    ):
        self.path = os.fspath(path)
        self.view = view
        self.positional = None if positional is None else bool(positional)
        if image is not None and not isinstance(image, bcd.ImageOptions):
            raise TypeError(f"image={image!r}: expected bcd.torch.Image(size, ...) (a bcd.ImageOptions)")
        if bad_images not in _BAD_VALUES:
            raise ValueError(f'bad_images={bad_images!r}: expected "raise" or "skip"')
        if audio is not None and not isinstance(audio, bcd.AudioOptions):
            raise TypeError(f"audio={audio!r}: expected bcd.torch.Audio(frames, ...) (a bcd.AudioOptions)")
        if bad_audio not in _BAD_VALUES:
            raise ValueError(f'bad_audio={bad_audio!r}: expected "raise" or "skip"')
        if image is not None and audio is not None:
            raise ValueError("image= and audio=: a value is decoded as one or the other, not both")
        self.image = image
        self.bad_images = bad_images
        self.audio = audio
        self.bad_audio = bad_audio
        # The seed and epoch of the random crops, announced by the sampler (or
        # set_epoch) in the main process; the images or clips skipped, over all
        # workers.
        self._crops = Announcement()
        self._crop_seed = 0
        # The (seed, epoch) of this process's crops when its reader knows them
        # itself (an IterableDataset's worker computes its pass): over what
        # was announced.
        self._crops_here: Optional[tuple] = None
        self._skipped = Counter()
        opening = (("cache_dir", cache_dir), ("cache_limit", cache_limit), ("prefetch", prefetch))
        self._open = {name: value for name, value in opening if value is not None}
        self.transform = transform
        self.output = _check_output(output)
        self.refresh_each_epoch = bool(refresh)
        if fields is None:
            self._field_names: list[str] = []
            self._given: dict[str, Any] = {}
        elif isinstance(fields, Mapping):
            self._field_names = list(fields)
            self._given = {name: np.asarray(values) for name, values in fields.items()}
        elif isinstance(fields, str):
            raise TypeError("fields= takes a list of names (fields=['label']) or a mapping of names to values")
        else:
            self._field_names = list(fields)
            self._given = {}
        self._open_source()
        for name, values in self._given.items():
            if len(values) < len(self._source):
                raise ValueError(f"fields={{{name!r}: ...}} has {len(values)} values for {len(self._source)} records")
        # The columns are read here, in the process that makes the dataset: a
        # DataLoader's fork workers then start with them (reading them in each
        # worker at its first batch cost each one an import of pyarrow, 0.1-0.25
        # s of an epoch of non-persistent workers); spawn workers read them again.
        self._columns: Optional[dict] = self._read_columns() if self._field_names else None

    def _open_source(self) -> None:
        """Opens the dataset, and the view when there is one: what reads go to."""
        self._dataset = bcd.Dataset(self.path, **self._open)
        self._view = None if self.view is None else self._dataset.view(self.view)
        self._source = self._dataset if self._view is None else self._view
        self._threads_set = None  # the process whose reads use its DataLoader worker's threads

    # Pickling: the path and settings; the dataset and columns are reopened.
    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_dataset"] = state["_view"] = state["_source"] = None
        state["_columns"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._open_source()

    @property
    def dataset(self) -> "bcd.Dataset":
        """The underlying ``bcd.Dataset``."""
        return self._dataset

    @property
    def records(self):
        """The dataset indices of the samples (a view's records), or None for
        all of the dataset's."""
        return None if self._view is None else self._view.indices

    @property
    def field_names(self) -> list:
        """The fields each sample carries after its value."""
        return list(self._field_names)

    def __len__(self) -> int:
        return len(self._source)

    def refresh(self) -> int:
        """Picks up records committed since the open (with a view: the view as
        it is now, after a ``bcd view refresh``); returns how many samples were
        added."""
        before = len(self._source)
        added = self._dataset.refresh()
        if self._view is not None:
            self._view = self._source = self._dataset.view(self.view)
            added = len(self._view) - before
        if added:
            self._columns = self._read_columns() if self._field_names else None
        return added

    @property
    def draws_crops(self) -> bool:
        """Whether samples are cropped at random (``image=`` or ``audio=``),
        from the seed and epoch :meth:`use_crops` announces."""
        return self.image is not None or self.audio is not None

    def set_epoch(self, epoch: int) -> None:
        """Refreshes, if the dataset was made with ``refresh=True``; with
        ``image=`` or ``audio=``, makes the random crops those of epoch ``epoch`` (a
        :class:`Sampler` over this dataset calls it from its own ``set_epoch``,
        with its seed), also in persistent DataLoader workers."""
        if self.refresh_each_epoch:
            self.refresh()
        self.use_crops(self._crop_seed, epoch)

    def use_crops(self, seed: int, epoch: int) -> None:
        """Draws the random crops of ``image=`` and ``audio=`` from ``(seed, epoch, record)``
        from now on, in this process and in its DataLoader workers (call it in
        the main process)."""
        self._crop_seed = int(seed)
        self._crops.publish(int(seed), int(epoch))

    def _crop_key(self) -> tuple:
        if self._crops_here is not None:
            return self._crops_here
        heard = self._crops.read()
        if heard is None or heard[0] == 0:
            return self._crop_seed, 0
        return heard[1], heard[2]

    @property
    def skipped(self) -> int:
        """Images or clips left out because they did not decode
        (``bad_images="skip"``, ``bad_audio="skip"``), counted over this
        process and its DataLoader workers."""
        return self._skipped.value

    def column(self, name: str):
        """Field ``name`` for every record: a NumPy array, or a list for values
        NumPy cannot hold as numbers."""
        if self._columns is None:
            self._columns = self._read_columns()
        return self._columns[name]

    def _read_columns(self) -> dict:
        columns = {name: self._given[name] for name in self._field_names if name in self._given}
        stored = [name for name in self._field_names if name not in self._given]
        if stored:
            table = stored_fields(self._source, stored)
            for name in stored:
                column = table.column(name)
                try:
                    columns[name] = column.to_numpy()
                except Exception:  # nested or nullable values: Python objects
                    columns[name] = column.to_pylist()
        return columns

    def _fields_at(self, index: int) -> tuple:
        out = []
        for name in self._field_names:
            value = self.column(name)[index]
            out.append(value.item() if isinstance(value, np.generic) else value)
        return tuple(out)

    def _value(self, view) -> Any:
        if self.output == "bytes":
            return bytes(view)
        tensor = torch.empty(len(view), dtype=torch.uint8)
        tensor.numpy()[:] = np.frombuffer(view, dtype=np.uint8)
        return tensor

    def _read(self, read: Callable, *args):
        """Calls ``read``; with ``refresh=True``, an index past the end refreshes
        and tries again (a persistent worker after an append)."""
        if self._threads_set != os.getpid() and torch.utils.data.get_worker_info() is not None:
            # In a DataLoader worker, batches are read and decoded on as many
            # threads as torch uses there (1, unless a worker_init_fn says
            # otherwise): the workers share the cores, and a batch's threads
            # waiting for one cost a scheduler tick (4 ms) where reading 64
            # values of 10 KB takes 0.2 ms.
            self._dataset.threads = max(1, torch.get_num_threads())
            self._threads_set = os.getpid()
        try:
            return read(*args)
        except IndexError:
            if not self.refresh_each_epoch or not self.refresh():
                raise
            return read(*args)

    def __getitem__(self, index: int):
        if self.image is not None:
            batch = self._read(self.read_images, [index], "raise")
            sample = batch[0] if not self._field_names else tuple(batch[0])
        elif self.audio is not None:
            sample = tuple(self._read(self.read_audio, [index], "raise")[0])
        else:
            view = self._read(self._source.at, index)
            if not self._field_names:
                sample = self._value(view)
            else:
                sample = (self._value(view), *self._fields_at(index))
        return self.transform(sample) if self.transform is not None else sample

    def __getitems__(self, indices: Sequence[int]):
        return self._samples_kept(indices)[0]

    def _samples_kept(self, indices: Sequence[int]) -> tuple:
        """The samples ``__getitems__`` gives for ``indices``, and which of the
        records they are (a boolean array over ``indices``; None: all of them):
        an image or clip that did not decode, skipped, gives no sample."""
        shared = torch.utils.data.get_worker_info() is not None
        if self.image is not None:
            batch, kept = self._read(self._read_images, indices, None, shared)
            if self.transform is not None:
                return [self.transform(tuple(s) if self._field_names else s) for s in batch], kept
            if not self._field_names and len(batch):
                # Bare tensors: torch's collate stacks them (one copy); with a
                # field, the ImageBatch's tensor is the batch as it is (and an
                # empty one, whose every image was skipped, says so).
                return list(batch.images), kept
            return batch, kept
        if self.audio is not None:
            batch, kept = self._read(self._read_audio, indices, None, shared)
            if self.transform is not None:
                return [self.transform(tuple(s)) for s in batch], kept
            return batch, kept
        if self.transform is None:
            return self._read(self.read_batch, indices), None
        return self._transformed(indices), None

    def _sample(self, value, index: int):
        """The sample of the value read for ``index``, before the transform."""
        if not self._field_names:
            return self._value(value)
        return (self._value(value), *self._fields_at(index))

    def _transformed(self, indices: Sequence[int]) -> list:
        """The samples at ``indices`` through ``transform``, each one's value
        made (a ``bytes`` or a tensor) just before its transform runs, and let
        go as soon as it returns: unless the transform keeps it, the next value
        reuses its memory. A batch of values all alive at once (64 WAV files of
        80 KB: 5 MB at the top of the heap, under glibc's 128 KiB threshold for
        mapping an allocation of its own) was freed at the end of each batch,
        where glibc gave those pages back to the kernel (its trim threshold),
        so every batch faulted in and zeroed 5 MB afresh: 2.5-4x the time of
        the reads themselves (BENCHMARKS.md, session 38).

        Through the mappings, the batch is one read of views of the shards
        (values stored verbatim) and decoded ``bytes``. Read positionally (each
        value a new ``bytes``), it is read in pieces of about
        :data:`_PIECE_BYTES`, the number of values a piece holds set by the
        mean size of those read so far: one value at a time for large ones,
        runs of neighbours still read together for small ones."""
        samples = []
        if not self._reads_positionally():
            values = self._read(self._values, indices)
            for value, index in zip(values, indices):
                samples.append(self.transform(self._sample(value, index)))
            return samples
        done = read = 0
        count = 1
        while done < len(indices):
            piece = indices[done : done + count]
            values = self._read(self._positional_values, piece)
            for value, index in zip(values, piece):
                read += len(value)
                samples.append(self.transform(self._sample(value, index)))
            values = value = None  # the piece's values go before the next piece is read
            done += len(piece)
            count = max(1, _PIECE_BYTES * done // max(read, 1))
        return samples

    def _reads_positionally(self) -> Optional[bool]:
        """Whether batches are read with positional reads of the shard files
        (nothing mapped; see the class's notes): as ``positional=`` says, else
        in a DataLoader worker; ``None`` in the main process, where a sparse
        view reads positionally and a dense one or a dataset through the
        mappings."""
        if self.positional is not None:
            return self.positional
        return torch.utils.data.get_worker_info() is not None

    def _get_batch_into(self, index_array: np.ndarray, allocate: Callable):
        positional = self._reads_positionally()
        if positional is None:
            return self._source.get_batch_into(index_array, allocate)
        return self._source.get_batch_into(index_array, allocate, positional=positional)

    def _values(self, indices: Sequence[int]) -> list:
        """The values at ``indices`` for a ``transform``, read through the
        mappings: views of the shards (values stored verbatim) or decoded
        ``bytes``."""
        return self._source.get_batch(indices)

    def _positional_values(self, indices: Sequence[int]) -> list:
        """The values at ``indices`` read positionally, each straight into a
        new ``bytes``, which ``_value`` hands on without a copy."""
        return self._source.get_batch(indices, positional=True)

    def read_batch(self, indices: Sequence[int]) -> Batch:
        """The records at ``indices`` as a :class:`Batch` (one parallel read;
        in a DataLoader worker, in shared memory)."""
        return self._read_batch(indices, torch.utils.data.get_worker_info() is not None)

    def _read_batch(self, indices: Sequence[int], shared: bool) -> Batch:
        holder: list = []

        def allocate(size: int):
            tensor = _uint8_buffer(size, shared)
            holder.append(tensor)
            return tensor.numpy()

        index_array = np.asarray(indices, dtype=np.int64)
        offsets = self._get_batch_into(index_array, allocate)
        values = holder[0]
        fields = self._batch_fields(index_array)
        return Batch(values, torch.from_numpy(offsets), fields, torch.from_numpy(index_array), self.output)

    def read_images(self, indices: Sequence[int], bad_images: Optional[str] = None) -> ImageBatch:
        """The images at ``indices``, decoded and cropped as ``image=`` says, as
        an :class:`ImageBatch` (one parallel decode; in a DataLoader worker, in
        shared memory). An image that does not decode raises ``ValueError``
        naming the record, or with ``bad_images="skip"`` is left out and
        counted in :attr:`skipped`. With ``view=``, ``indices`` are the view's
        positions (the batch's ``indices`` too) and each crop is that of the
        dataset record the position holds: the same crop as the record read
        without the view."""
        batch, _ = self._read_images(indices, bad_images, torch.utils.data.get_worker_info() is not None)
        return batch

    def _read_images(self, indices: Sequence[int], bad_images: Optional[str], shared: bool) -> tuple:
        """The :class:`ImageBatch` of ``indices``, and which of them it kept (a
        boolean array, or None when it kept all)."""
        options = self.image
        if options is None:
            raise TypeError("read_images needs a MapDataset made with image=bcd.torch.Image(...)")
        index_array = np.asarray(indices, dtype=np.int64)
        count = len(index_array)
        images = _leased_view(_uint8_buffer(count * options.image_bytes, shared), count, *options.shape)
        seed, epoch = self._crop_key()
        positional = bool(self._reads_positionally())
        failures = self._source.get_images_into(
            index_array, images.numpy(), options, seed=seed, epoch=epoch, positional=positional
        )
        keep, skipped = self._failed(failures, index_array, bad_images or self.bad_images, "images")
        if keep is not None:
            index_array = index_array[keep]
            images = images[torch.from_numpy(keep)]
        return ImageBatch(images, self._batch_fields(index_array), torch.from_numpy(index_array), skipped), keep

    def _failed(self, failures: list, index_array: np.ndarray, bad: str, what: str) -> tuple:
        """Which records of a decoded batch are kept (None: all) and the
        skipped ones' indices; raises ``ValueError`` for the first failure
        when ``bad`` is ``"raise"``, else counts them in :attr:`skipped`."""
        if not failures:
            return None, torch.empty(0, dtype=torch.int64)
        if bad == "raise":
            more = f" (and {len(failures) - 1} more {what} of this batch)" if len(failures) > 1 else ""
            raise ValueError(failures[0][1] + more)
        keep = np.ones(len(index_array), dtype=bool)
        keep[[position for position, _ in failures]] = False
        info = torch.utils.data.get_worker_info()
        self._skipped.add(len(failures), None if info is None else info.id)
        return keep, torch.from_numpy(index_array[~keep])

    def read_audio(self, indices: Sequence[int], bad_audio: Optional[str] = None) -> AudioBatch:
        """The clips at ``indices``, decoded and cut as ``audio=`` says, as an
        :class:`AudioBatch` (one parallel decode; in a DataLoader worker, in
        shared memory). A clip that does not decode raises ``ValueError``
        naming the record, or with ``bad_audio="skip"`` is left out and
        counted in :attr:`skipped`. With ``view=``, ``indices`` are the view's
        positions and each random crop is that of the dataset record."""
        batch, _ = self._read_audio(indices, bad_audio, torch.utils.data.get_worker_info() is not None)
        return batch

    def _read_audio(self, indices: Sequence[int], bad_audio: Optional[str], shared: bool) -> tuple:
        """The :class:`AudioBatch` of ``indices``, and which of them it kept (a
        boolean array, or None when it kept all)."""
        options = self.audio
        if options is None:
            raise TypeError("read_audio needs a MapDataset made with audio=bcd.torch.Audio(...)")
        index_array = np.asarray(indices, dtype=np.int64)
        count = len(index_array)
        memory = _uint8_buffer(count * options.clip_floats * 4, shared)
        audio = _leased_view(memory, count, *options.shape, dtype=torch.float32)
        seed, epoch = self._crop_key()
        positional = bool(self._reads_positionally())
        frames, failures = self._source.get_audio_into(
            index_array, audio.numpy(), options, seed=seed, epoch=epoch, positional=positional
        )
        lengths = torch.tensor(frames, dtype=torch.int64)
        keep, skipped = self._failed(failures, index_array, bad_audio or self.bad_audio, "clips")
        if keep is not None:
            index_array = index_array[keep]
            kept = torch.from_numpy(keep)
            audio, lengths = audio[kept], lengths[kept]
        batch = AudioBatch(audio, lengths, self._batch_fields(index_array), torch.from_numpy(index_array), skipped)
        return batch, keep

    def _whole_batch(self, indices: Sequence[int]) -> Optional[tuple]:
        """What a :class:`Mix` joins: the records at ``indices`` as one
        :class:`Batch`, :class:`ImageBatch` or :class:`AudioBatch` outside shared memory (the mix
        copies them into its own batch) with the indices kept (None: all), or
        None when a ``transform`` makes the samples."""
        if self.transform is not None:
            return None
        if self.image is not None:
            return self._read(self._read_images, indices, None, False)
        if self.audio is not None:
            return self._read(self._read_audio, indices, None, False)
        return self._read(self._read_batch, indices, False), None

    def _batch_fields(self, index_array: np.ndarray) -> dict:
        fields = {}
        for name in self._field_names:
            column = self.column(name)
            if isinstance(column, np.ndarray) and column.dtype.kind in "biuf":
                fields[name] = torch.from_numpy(np.ascontiguousarray(column[index_array]))
            else:
                fields[name] = [column[i] for i in index_array]
        return fields

    def __repr__(self) -> str:
        view = "" if self.view is None else f", view={self.view!r}"
        image = "" if self.image is None else f", image={self.image!r}"
        audio = "" if self.audio is None else f", audio={self.audio!r}"
        return f"bcd.torch.MapDataset({self.path!r}{view}, fields={self._field_names}, output={self.output!r}{image}{audio})"


def stored_fields(dataset: "bcd.Dataset", names: Sequence[str]):
    """The stored fields ``names`` of ``dataset`` as a pyarrow Table, one row per
    record; a clear error where this build stores no fields."""
    reader = getattr(dataset, "fields", None)
    if reader is None:
        raise TypeError(
            f"this version of bcd stores no fields, so {list(names)} cannot be read from {dataset.path}; "
            "pass the values instead: fields={'label': labels} or balance_by=labels"
        )
    return reader(list(names))
