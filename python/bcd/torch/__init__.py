"""PyTorch datasets and sampler over bcd datasets: exact, resumable, reproducible
epochs on 1 to N ranks. Importing this module imports torch (the rest of
``bcd`` never does).

Replacing a dataset class and ``DistributedSampler`` takes two lines::

    dataset = bcd.torch.MapDataset("train.bcd", fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for values, labels in loader:   # values: each record's bytes; labels: a tensor
            ...

- :class:`MapDataset`: map-style; ``dataset[i]`` is ``(value, *fields)``; a
  DataLoader fetches each batch with one parallel read (``__getitems__``) into
  one uint8 tensor, in shared memory inside a worker (a :class:`Batch`), which
  torch's default collate turns into ``[values, *fields]`` without touching
  each sample (:class:`Sample` is registered in ``default_collate_fn_map``):
  values cross from the workers as tensors, not pickled. ``values[j]`` is the
  value as ``dataset[i]`` has it (``bytes``, or a uint8 tensor with
  ``output="tensor"``).
- :class:`Image` (``bcd.ImageOptions``): ``MapDataset(path, fields=["label"],
  image=bcd.torch.Image(224))`` decodes, crops and resizes JPEG and PNG values
  in Rust, a batch at a time, into one uint8 tensor per batch (an
  :class:`ImageBatch`); crops drawn from the sampler's seed and epoch.
- :class:`Audio` (``bcd.AudioOptions``): ``MapDataset(path, fields=["label"],
  audio=bcd.torch.Audio(16000))`` decodes WAV values in Rust into one float32
  tensor ``(N, channels, frames)`` per batch (an :class:`AudioBatch`, with each
  clip's frames), cut at random offsets drawn as the image crops are.
- :class:`Sampler`: the epochs of ``bcd.partition`` (shuffle, ``block_size``,
  ``balance_by``, ``weights``/``num_samples``) split exactly over ranks, with
  ``set_epoch`` and ``state_dict``/``load_state_dict`` (torchdata's
  ``StatefulDataLoader`` saves and restores it as of the batches it handed out).
- :class:`IterableDataset`: the same epochs split over rank x DataLoader worker.
- :class:`Mix`: several map-style datasets in fixed proportions; ``Sampler(mix)``
  (or ``IterableDataset(mix)``) draws each source its share of every epoch,
  interleaved so every prefix holds each source within one sample of its share.
  A plain DataLoader over a mix gets ``[sources, samples]`` per batch, from one
  shared-memory batch of all its sources' samples (each a :class:`MixSample`
  ``(source, sample)``, registered in torch's default collate as
  :class:`Sample` is).
- Resuming on another number of ranks: load the list of every rank's state
  (``load_state_dict(states)``); the new ranks take exactly the rest of the epoch.

Rank and world size default to ``torch.distributed`` when a process group is
initialised, else the ``RANK``/``WORLD_SIZE`` environment variables, else 0/1.
"""

import bcd

from .batch import AudioBatch, Batch, ImageBatch, MixSample, Sample, collate
from .iterable import IterableDataset
from .map_dataset import MapDataset
from .mix import Mix
from .sampler import Sampler

Image = bcd.ImageOptions
Audio = bcd.AudioOptions

__all__ = [
    "Audio",
    "AudioBatch",
    "Batch",
    "Image",
    "ImageBatch",
    "IterableDataset",
    "MapDataset",
    "Mix",
    "MixSample",
    "Sample",
    "Sampler",
    "collate",
]
