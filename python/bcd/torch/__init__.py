"""PyTorch datasets and sampler over bcd datasets: exact, resumable, reproducible
epochs on 1 to N ranks. Importing this module imports torch (the rest of
``bcd`` never does).

Replacing a dataset class and ``DistributedSampler`` takes two lines::

    dataset = bcd.torch.MapDataset("train.bcd", fields=["label"])
    sampler = bcd.torch.Sampler(dataset, seed=0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for values, labels in loader:   # values: the records' bytes; labels: a tensor
            ...

- :class:`MapDataset`: map-style; ``dataset[i]`` is ``(value, *fields)``; a
  DataLoader fetches each batch with one parallel read (``__getitems__``). With
  ``output="tensor"`` and ``collate_fn=bcd.torch.collate`` a batch travels from
  the worker as one uint8 tensor in shared memory plus offsets (a
  :class:`Batch`), not as pickled values.
- :class:`Sampler`: the epochs of ``bcd.partition`` (shuffle, ``block_size``,
  ``balance_by``, ``weights``/``num_samples``) split exactly over ranks, with
  ``set_epoch`` and ``state_dict``/``load_state_dict`` (torchdata's
  ``StatefulDataLoader`` saves and restores it as of the batches it handed out).
- :class:`IterableDataset`: the same epochs split over rank x DataLoader worker.
- :class:`Mix`: several map-style datasets in fixed proportions; ``Sampler(mix)``
  (or ``IterableDataset(mix)``) draws each source its share of every epoch,
  interleaved so every prefix holds each source within one sample of its share.
- Resuming on another number of ranks: load the list of every rank's state
  (``load_state_dict(states)``); the new ranks take exactly the rest of the epoch.

Rank and world size default to ``torch.distributed`` when a process group is
initialised, else the ``RANK``/``WORLD_SIZE`` environment variables, else 0/1.
"""

from .batch import Batch, collate
from .iterable import IterableDataset
from .map_dataset import MapDataset
from .mix import Mix
from .sampler import Sampler

__all__ = ["Batch", "IterableDataset", "MapDataset", "Mix", "Sampler", "collate"]
