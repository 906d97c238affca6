"""ember.utils.data datasets, random_split and samplers against torch.utils.data."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.utils import data as ed

torch = pytest.importorskip("torch")
td = torch.utils.data


def _np(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


class Squares(ed.Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self):
        return self.n


class TSquares(td.Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return i * i

    def __len__(self):
        return self.n


class Stream(ed.IterableDataset):
    def __init__(self, values):
        self.values = list(values)

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)


# -- datasets ------------------------------------------------------------------------------------


def test_dataset_base_errors():
    with pytest.raises(NotImplementedError):
        ed.Dataset()[0]
    with pytest.raises(TypeError):
        len(ed.Dataset())
    with pytest.raises(NotImplementedError):
        iter(ed.IterableDataset())


@pytest.mark.parametrize("index", [0, 3, -1, slice(1, 4)])
def test_tensor_dataset(index):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6)
    e = ed.TensorDataset(ember.from_numpy(x), ember.from_numpy(y))
    t = td.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    assert len(e) == len(t) == 6
    ei, ti = e[index], t[index]
    assert isinstance(ei, tuple) and len(ei) == len(ti) == 2
    for a, b in zip(ei, ti):
        np.testing.assert_array_equal(_np(a), b.numpy())
        assert a.dtype.name == str(b.dtype).removeprefix("torch.")


def test_tensor_dataset_size_mismatch():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        td.TensorDataset(torch.zeros(3), torch.zeros(4))
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        ed.TensorDataset(ember.zeros(3), ember.zeros(4))


@pytest.mark.parametrize("index", [0, 4, 5, 9, -1, -10, -7])
def test_concat_dataset(index):
    e = ed.ConcatDataset([Squares(3), Squares(0), Squares(7)])
    t = td.ConcatDataset([TSquares(3), TSquares(0), TSquares(7)])
    assert e.cumulative_sizes == t.cumulative_sizes == [3, 3, 10]
    assert len(e) == len(t) == 10
    assert e[index] == t[index]


def test_concat_dataset_errors_and_add():
    e = Squares(2) + Squares(3)
    assert isinstance(e, ed.ConcatDataset) and [e[i] for i in range(5)] == [0, 1, 0, 1, 4]
    with pytest.raises(ValueError, match="absolute value of index"):
        e[-6]
    with pytest.raises(IndexError):
        e[5]
    with pytest.raises(AssertionError, match="empty iterable"):
        ed.ConcatDataset([])
    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        ed.ConcatDataset([Stream([1])])
    with pytest.warns(FutureWarning):
        assert e.cummulative_sizes == [2, 5]


def test_chain_dataset():
    chained = Stream([1, 2]) + Stream([3])
    assert isinstance(chained, ed.ChainDataset)
    assert list(chained) == [1, 2, 3]
    assert len(chained) == 3
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        list(ed.ChainDataset([Squares(2)]))


def test_subset_and_getitems():
    base = Squares(10)
    sub = ed.Subset(base, [7, 2, 5])
    assert len(sub) == 3 and [sub[i] for i in range(3)] == [49, 4, 25]
    assert sub.__getitems__([2, 0]) == [25, 49]

    class Bad(ed.Subset):
        def __getitem__(self, idx):
            return 0

    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Bad(base, [0])


def test_stack_dataset():
    a, b = Squares(4), ed.TensorDataset(ember.arange(4))
    tup = ed.StackDataset(a, b)
    assert len(tup) == 4 and tup[2][0] == 4 and tup[2][1][0].item() == 2
    kw = ed.StackDataset(x=a, y=Squares(4))
    assert kw[3] == {"x": 9, "y": 9}
    assert kw.__getitems__([1, 2]) == [{"x": 1, "y": 1}, {"x": 4, "y": 4}]
    assert tup.__getitems__([0, 3])[1][0] == 9
    with pytest.raises(ValueError, match="Size mismatch"):
        ed.StackDataset(a, Squares(5))
    with pytest.raises(ValueError, match="At least one dataset"):
        ed.StackDataset()
    with pytest.raises(ValueError, match="both types are given"):
        ed.StackDataset(a, y=a)


# -- random_split --------------------------------------------------------------------------------


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.3, 0.4], [0.5, 0.5], [10]])
def test_random_split_sizes_and_partition(lengths):
    e = ed.random_split(range(10), lengths, generator=ember.Generator().manual_seed(0))
    t = td.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in e] == [len(s) for s in t]
    assert sorted(i for s in e for i in s.indices) == list(range(10))
    again = ed.random_split(range(10), lengths, generator=ember.Generator().manual_seed(0))
    assert [s.indices for s in e] == [s.indices for s in again]


def test_random_split_fraction_remainder_and_errors():
    # floor(frac * n) each, remainder handed out round robin: 11 * [0.5, 0.5] -> [6, 5].
    assert [len(s) for s in ed.random_split(range(11), [0.5, 0.5])] == [6, 5]
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        ed.random_split(range(2), [1.0, 0.0])
    with pytest.raises(ValueError, match="Sum of input lengths"):
        ed.random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="Sum of input lengths"):
        td.random_split(range(10), [3, 3])
    # Default generator: reproducible through ember.manual_seed.
    ember.manual_seed(5)
    first = [s.indices for s in ed.random_split(range(6), [2, 4])]
    ember.manual_seed(5)
    assert [s.indices for s in ed.random_split(range(6), [2, 4])] == first


# -- samplers ------------------------------------------------------------------------------------


def test_sequential_sampler():
    assert list(ed.SequentialSampler(range(5))) == list(td.SequentialSampler(range(5))) == [0, 1, 2, 3, 4]
    assert len(ed.SequentialSampler(range(5))) == 5


@pytest.mark.parametrize(
    "n, batch_size, drop_last",
    [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False), (2, 5, True), (0, 2, False)],
)
def test_batch_sampler(n, batch_size, drop_last):
    e = ed.BatchSampler(ed.SequentialSampler(range(n)), batch_size, drop_last)
    t = td.BatchSampler(td.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(e) == list(t)
    assert len(e) == len(t)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0, "drop_last": False},
        {"batch_size": -1, "drop_last": False},
        {"batch_size": 2.0, "drop_last": False},
        {"batch_size": True, "drop_last": False},
        {"batch_size": 2, "drop_last": 1},
    ],
)
def test_batch_sampler_validation(kwargs):
    with pytest.raises(ValueError) as t_err:
        td.BatchSampler(range(4), **kwargs)
    with pytest.raises(ValueError) as e_err:
        ed.BatchSampler(range(4), **kwargs)
    assert str(e_err.value) == str(t_err.value)


@pytest.mark.parametrize(
    "replacement, num_samples", [(False, None), (False, 13), (False, 3), (True, None), (True, 40)]
)
def test_random_sampler(replacement, num_samples):
    n = 5
    make = lambda seed: ed.RandomSampler(
        range(n), replacement, num_samples, ember.Generator().manual_seed(seed)
    )  # noqa: E731
    out = list(make(1))
    assert out == list(make(1))
    expected_len = len(td.RandomSampler(range(n), replacement, num_samples))
    assert len(make(1)) == len(out) == expected_len
    assert all(0 <= i < n for i in out)
    if not replacement:
        # Whole permutations first, then a partial one.
        for start in range(0, len(out) - len(out) % n, n):
            assert sorted(out[start : start + n]) == list(range(n))
        assert len(set(out[len(out) - len(out) % n :])) == len(out) % n


def test_random_sampler_default_generator_and_errors():
    ember.manual_seed(0)
    first = list(ed.RandomSampler(range(8)))
    ember.manual_seed(0)
    assert list(ed.RandomSampler(range(8))) == first
    assert sorted(first) == list(range(8))
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        ed.RandomSampler(range(3), replacement=1)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="num_samples should be a positive integer"):
            ed.RandomSampler(range(3), num_samples=bad)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        ed.RandomSampler([])


def test_subset_random_sampler():
    idx = [10, 20, 30, 40]
    out = list(ed.SubsetRandomSampler(idx, generator=ember.Generator().manual_seed(2)))
    assert sorted(out) == idx and len(ed.SubsetRandomSampler(idx)) == 4
    assert out == list(ed.SubsetRandomSampler(idx, generator=ember.Generator().manual_seed(2)))


def test_weighted_random_sampler():
    weights = [0.0, 1.0, 0.0, 3.0]
    s = ed.WeightedRandomSampler(weights, 50, generator=ember.Generator().manual_seed(0))
    out = list(s)
    assert len(out) == len(s) == 50 and set(out) <= {1, 3}
    no_repl = list(ed.WeightedRandomSampler([1.0, 2.0, 3.0], 3, replacement=False))
    assert sorted(no_repl) == [0, 1, 2]
    assert s.weights.dtype == ember.float64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kwargs in ({"num_samples": 0}, {"num_samples": True}, {"num_samples": 2, "replacement": 1}):
            with pytest.raises(ValueError) as t_err:
                td.WeightedRandomSampler(weights, **kwargs)
            with pytest.raises(ValueError) as e_err:
                ed.WeightedRandomSampler(weights, **kwargs)
            assert str(e_err.value) == str(t_err.value)
        with pytest.raises(ValueError, match=r"weights have shape \(2, 2\)"):
            ed.WeightedRandomSampler([[1.0, 2.0], [3.0, 4.0]], 2)
