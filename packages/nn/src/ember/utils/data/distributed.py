"""``DistributedSampler``: each of ``num_replicas`` processes reads its own slice of the data set.

The shuffled order is PyTorch's exactly for the same ``seed + epoch``: its CPU ``randperm`` is a
Fisher-Yates shuffle drawing from MT19937 seeded with the low 32 bits of the seed (checked
against ``torch.randperm`` in the tests), which NumPy's legacy ``RandomState`` reproduces.
Rank and world size come from ``ember.distributed`` when not given, found through the core's
plugin registry (ember-nn sits below ember-distributed and may not import it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ember._src import plugins

from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _distributed():
    found = plugins.load("distributed")
    if found is None or not found.is_available():
        raise RuntimeError("Requires distributed package to be available")
    return found


def torch_randperm(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed))``, computed with NumPy."""
    order = np.arange(n, dtype=np.int64)
    if n < 2:
        return order.tolist()
    raw = np.random.RandomState(seed & 0xFFFFFFFF)._bit_generator.random_raw(n - 1)
    picks = (raw % np.arange(n, 1, -1, dtype=np.uint64)).astype(np.int64)
    for i, z in enumerate(picks.tolist()):  # sequential by nature: each swap sees the previous ones
        j = i + z
        order[i], order[j] = order[j], order[i]
    return order.tolist()


class DistributedSampler(Sampler):
    """``torch.utils.data.distributed.DistributedSampler``.

    Args:
        dataset: the data set (only its length is used).
        num_replicas: number of processes; defaults to the default group's world size.
        rank: this process's rank; defaults to the default group's rank.
        shuffle: shuffle the indices, differently each epoch (``set_epoch``).
        seed: base seed of the shuffle; every process must use the same one.
        drop_last: drop the tail that does not divide evenly (otherwise pad by wrapping around).
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            num_replicas = _distributed().get_world_size()
        if rank is None:
            rank = _distributed().get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator:
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank : self.total_size : self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch, which changes the shuffle: call it before each epoch's iterator."""
        self.epoch = epoch
