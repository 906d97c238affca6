"""Datasets: map-style and iterable-style bases and the composite datasets of ``torch.utils.data``."""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from typing import Generic, TypeVar

import ember

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]

_T_co = TypeVar("_T_co", covariant=True)


class Dataset(Generic[_T_co]):
    """A map-style dataset: ``__getitem__`` by key (and usually ``__len__``).

    Subclasses may add ``__getitems__(indices)`` to fetch a whole batch at once; the
    DataLoader then calls it instead of one ``__getitem__`` per index.
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])

    # No default __len__: len() of a dataset without one is a TypeError, as in PyTorch.


class IterableDataset(Dataset[_T_co]):
    """A dataset read as a stream through ``__iter__``.

    With worker processes every worker holds its own copy; use ``get_worker_info()`` in
    ``__iter__`` (or in ``worker_init_fn``) to give each copy its shard.
    """

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are ``tuple(t[index] for t in tensors)``; every tensor has the same first dim."""

    def __init__(self, *tensors) -> None:
        if not all(tensors[0].size(0) == t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


def _fetch_many(dataset, indices):
    """A batch from ``dataset``: through its ``__getitems__`` when it has one."""
    getitems = getattr(dataset, "__getitems__", None)
    if callable(getitems):
        items = getitems(indices)
        if len(items) != len(indices):
            raise ValueError(
                f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}"
            )
        return items
    return [dataset[i] for i in indices]


class StackDataset(Dataset):
    """Zips datasets of one length: samples are tuples (``*args``) or dicts (``**kwargs``)."""

    def __init__(self, *args, **kwargs) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or"
                "``dict``- (via ``kwargs``) like input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(self._length != len(d) for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list):
        if isinstance(self.datasets, dict):
            columns = {k: _fetch_many(d, indices) for k, d in self.datasets.items()}
            return [{k: col[i] for k, col in columns.items()} for i in range(len(indices))]
        columns = [_fetch_many(d, indices) for d in self.datasets]
        return [tuple(col[i] for col in columns) for i in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """Map-style datasets one after another; ``cumulative_sizes[i]`` ends dataset ``i``."""

    @staticmethod
    def cumsum(sequence):
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        if dataset_idx == len(self.datasets):
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {len(self)}")
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]

    @property
    def cummulative_sizes(self):
        warnings.warn(
            "`cummulative_sizes` attribute is renamed to `cumulative_sizes`", FutureWarning, stacklevel=2
        )
        return self.cumulative_sizes


class ChainDataset(IterableDataset):
    """Iterable datasets streamed one after another, chained lazily."""

    def __init__(self, datasets) -> None:
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices) -> None:
        self.dataset = dataset
        self.indices = indices
        # A subclass overriding only __getitem__ would be bypassed by the DataLoader's
        # batched __getitems__ path, so PyTorch refuses it.
        if (
            type(self).__getitem__ is not Subset.__getitem__
            and type(self).__getitems__ is Subset.__getitems__
        ):
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. "
                "When subclassing Subset and overriding __getitem__, you must also override "
                "__getitems__ to ensure DataLoader works correctly with your custom logic. "
                "A simple implementation:\n\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]"
            )

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list):
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


def _fractions_to_lengths(total: int, fractions) -> list:
    """floor(total * frac) each, then the remainder handed out one by one, round robin."""
    lengths = []
    for i, frac in enumerate(fractions):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths.append(math.floor(total * frac))
    for i in range(total - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(
                f"Length of split at index {i} is 0. This might result in an empty dataset.", stacklevel=3
            )
    return lengths


def random_split(dataset, lengths, generator=ember.default_generator):
    """Splits ``dataset`` into non-overlapping random ``Subset`` s of the given lengths or fractions.

    The permutation is ``ember.randperm(len(dataset), generator=generator)`` (the default
    generator when None), so a seeded generator gives the same split every time.
    """
    if generator is None:
        generator = ember.default_generator
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _fractions_to_lengths(len(dataset), lengths)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = ember.randperm(sum(lengths), generator=generator).tolist()
    return [
        Subset(dataset, indices[end - length : end])
        for end, length in zip(itertools.accumulate(lengths), lengths, strict=True)
    ]
