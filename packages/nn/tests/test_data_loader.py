"""default_collate / default_convert and the single-process DataLoader against torch.utils.data."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

import ember
from ember.utils import data as ed

torch = pytest.importorskip("torch")
td = torch.utils.data

Point = collections.namedtuple("Point", "x y")


def assert_same_tree(e, t):
    """Same container structure, same leaves; tensors with the same dtype and values."""
    if isinstance(t, torch.Tensor):
        assert isinstance(e, ember.Tensor), f"expected a tensor, got {type(e).__name__}"
        assert e.dtype.name == str(t.dtype).removeprefix("torch."), (e.dtype, t.dtype)
        assert tuple(e.shape) == tuple(t.shape)
        np.testing.assert_array_equal(e.numpy(), t.numpy())
    elif isinstance(t, dict):
        assert type(e).__name__ == type(t).__name__ and list(e) == list(t)
        for k in t:
            assert_same_tree(e[k], t[k])
    elif isinstance(t, (list, tuple)):
        assert type(e).__name__ == type(t).__name__ and len(e) == len(t)
        for a, b in zip(e, t):
            assert_same_tree(a, b)
    elif isinstance(t, np.ndarray):
        np.testing.assert_array_equal(e, t)
    else:
        assert type(e) is type(t) and e == t


def both(make):
    """make(lib) builds a sample from `ember` or `torch` (for the tensor constructors)."""
    return make(ember), make(torch)


# -- collate -------------------------------------------------------------------------------------

BATCHES = {
    "floats": lambda lib: [1.5, 2.0, -3.0],
    "ints": lambda lib: [1, 2, 3],
    "bools": lambda lib: [True, False],
    "strings": lambda lib: ["a", "bc"],
    "bytes": lambda lib: [b"a", b"b"],
    "tensors": lambda lib: [lib.arange(6).reshape(2, 3), lib.ones(2, 3, dtype=lib.int64)],
    "scalar_tensors": lambda lib: [lib.tensor(1.5), lib.tensor(2.5)],
    "float16": lambda lib: [lib.zeros(2, dtype=lib.float16), lib.ones(2, dtype=lib.float16)],
    "np_arrays": lambda lib: [np.arange(4, dtype=np.int16), np.ones(4, dtype=np.int16)],
    "np_float_scalars": lambda lib: [np.float32(1.5), np.float32(2.0)],
    "np_int_scalars": lambda lib: [np.int64(3), np.int64(4)],
    "np_bool_scalars": lambda lib: [np.bool_(True), np.bool_(False)],
    "tuples": lambda lib: [(1, 2.0, "a"), (3, 4.0, "b")],
    "lists": lambda lib: [[lib.zeros(2), 1], [lib.ones(2), 2]],
    "dicts": lambda lib: [{"x": lib.zeros(2), "y": 1.0}, {"x": lib.ones(2), "y": 2.0}],
    "namedtuples": lambda lib: [Point(1, lib.zeros(1)), Point(2, lib.ones(1))],
    "nested": lambda lib: [{"a": [(1, {"b": 2.0})]}, {"a": [(3, {"b": 4.0})]}],
    "ordered_dict": lambda lib: [collections.OrderedDict(b=1, a=2.0), collections.OrderedDict(b=3, a=4.0)],
}


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_default_collate(name):
    e, t = both(BATCHES[name])
    assert_same_tree(ed.default_collate(e), td.default_collate(t))


@pytest.mark.parametrize("name", sorted(BATCHES))
def test_default_convert(name):
    e, t = both(BATCHES[name])
    for ee, tt in zip(e, t):
        assert_same_tree(ed.default_convert(ee), td.default_convert(tt))


def test_default_convert_leaves_strings_and_objects():
    arr = np.array(["a", "b"])
    assert ed.default_convert(arr) is arr
    assert ed.default_convert(np.str_("x")) == "x"
    assert ed.default_convert("abc") == "abc"
    assert isinstance(ed.default_convert(np.float64(2.0)), ember.Tensor)


def test_default_collate_errors():
    for batch in ([[1, 2], [3]], [(1, 2), (3,)]):
        with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
            td.default_collate(batch)
        with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
            ed.default_collate(batch)
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        ed.default_collate([object(), object()])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        ed.default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(RuntimeError):
        ed.default_collate([ember.zeros(2), ember.zeros(3)])


def test_collate_fn_map_extension():
    # The documented way to extend default_collate: a collate_fn_map entry for a new type.
    from ember.utils.data._utils.collate import collate, default_collate_fn_map

    class Box:
        def __init__(self, v):
            self.v = v

    def collate_box(batch, *, collate_fn_map=None):
        return sum(b.v for b in batch)

    out = collate(
        [{"b": Box(1), "t": 1.0}, {"b": Box(2), "t": 2.0}],
        collate_fn_map={**default_collate_fn_map, Box: collate_box},
    )
    assert out["b"] == 3 and out["t"].dtype == ember.float64
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        ed.default_collate([Box(1)])


# -- DataLoader, one process ---------------------------------------------------------------------


class Pairs:
    """A map-style dataset for both libraries: (float tensor row, int label, name)."""

    def __init__(self, lib, n=7):
        self.x = lib.arange(n * 2, dtype=lib.float32).reshape(n, 2)
        self.n = n

    def __getitem__(self, i):
        return {"x": self.x[i], "label": i % 3, "name": f"s{i}"}

    def __len__(self):
        return self.n


def _run_both(**kwargs):
    e = list(ed.DataLoader(Pairs(ember), **kwargs))
    t = list(td.DataLoader(Pairs(torch), **kwargs))
    assert_same_tree(e, t)
    return e


@pytest.mark.parametrize(
    "batch_size, drop_last", [(1, False), (3, False), (3, True), (7, False), (10, True), (None, False)]
)
def test_loader_batches_match_torch(batch_size, drop_last):
    _run_both(batch_size=batch_size, drop_last=drop_last)
    e_loader = ed.DataLoader(Pairs(ember), batch_size=batch_size, drop_last=drop_last)
    t_loader = td.DataLoader(Pairs(torch), batch_size=batch_size, drop_last=drop_last)
    assert len(e_loader) == len(t_loader)


def test_loader_custom_sampler_batch_sampler_collate():
    _run_both(batch_size=2, sampler=[6, 0, 3])
    batches = [[4, 1], [0, 2, 5]]
    _run_both(batch_sampler=batches)
    e = list(ed.DataLoader(Pairs(ember), batch_size=3, collate_fn=lambda b: [s["name"] for s in b]))
    assert e == [["s0", "s1", "s2"], ["s3", "s4", "s5"], ["s6"]]


def test_loader_dataset_getitems_is_used():
    class Batched(ed.Dataset):
        calls = []

        def __getitem__(self, i):
            raise AssertionError("__getitems__ should be used")

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [float(i) for i in idx]

        def __len__(self):
            return 5

    out = list(ed.DataLoader(Batched(), batch_size=2))
    assert Batched.calls == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in out] == [[0.0, 1.0], [2.0, 3.0], [4.0]]


def test_loader_shuffle_seeded_generator():
    ds = ed.TensorDataset(ember.arange(10))

    def epoch(seed):
        loader = ed.DataLoader(ds, batch_size=4, shuffle=True, generator=ember.Generator().manual_seed(seed))
        return [b[0].tolist() for b in loader]

    first = epoch(0)
    assert first == epoch(0)
    assert [len(b) for b in first] == [4, 4, 2]
    assert sorted(sum(first, [])) == list(range(10))
    # Two epochs of one loader draw two permutations from the same generator.
    loader = ed.DataLoader(ds, batch_size=10, shuffle=True, generator=ember.Generator().manual_seed(1))
    a, b = (next(iter(loader))[0].tolist() for _ in range(2))
    assert sorted(a) == sorted(b) == list(range(10))
    ember.manual_seed(3)
    default_a = [b[0].tolist() for b in ed.DataLoader(ds, batch_size=5, shuffle=True)]
    ember.manual_seed(3)
    assert default_a == [b[0].tolist() for b in ed.DataLoader(ds, batch_size=5, shuffle=True)]


class Count(ed.IterableDataset):
    def __init__(self, n, with_len=True):
        self.n = n
        self.with_len = with_len

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        if not self.with_len:
            raise TypeError("no len")
        return self.n


class TCount(td.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


@pytest.mark.parametrize(
    "batch_size, drop_last", [(1, False), (3, False), (3, True), (None, False), (20, True)]
)
def test_iterable_dataset_batches_and_len(batch_size, drop_last):
    e_loader = ed.DataLoader(Count(7), batch_size=batch_size, drop_last=drop_last)
    t_loader = td.DataLoader(TCount(7), batch_size=batch_size, drop_last=drop_last)
    assert_same_tree(list(e_loader), list(t_loader))
    assert (
        len(e_loader)
        == len(t_loader)
        == (7 if batch_size is None else (7 // batch_size if drop_last else math.ceil(7 / batch_size)))
    )
    with pytest.raises(TypeError):
        len(ed.DataLoader(Count(3, with_len=False)))


def test_iterable_dataset_len_warning():
    class Liar(Count):
        def __len__(self):
            return 2

    loader = ed.DataLoader(Liar(4), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        assert len(list(loader)) == 4


ERROR_CASES = [
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
    ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified"),
    ({"num_workers": 1, "prefetch_factor": -1}, ValueError, "prefetch_factor option should be non-negative"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers > 0"),
    ({"sampler": [0], "shuffle": True}, ValueError, "sampler option is mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "shuffle": True}, ValueError, "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "sampler": [0]}, ValueError, "batch_sampler option is mutually exclusive"),
    ({"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler option is mutually exclusive"),
    ({"batch_size": None, "drop_last": True}, ValueError, "batch_size=None option disables auto-batching"),
    ({"batch_size": 0}, ValueError, "batch_size should be a positive integer value"),
    ({"multiprocessing_context": "fork"}, ValueError, "multiprocessing_context can only be used"),
    (
        {"num_workers": 1, "multiprocessing_context": "nope"},
        ValueError,
        "should specify a valid start method",
    ),
    ({"num_workers": 1, "multiprocessing_context": 3}, TypeError, "should be a valid context object"),
]


@pytest.mark.parametrize("kwargs, exc, match", ERROR_CASES)
def test_loader_argument_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        td.DataLoader(Pairs(torch), **kwargs)
    with pytest.raises(exc, match=match):
        ed.DataLoader(Pairs(ember), **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"shuffle": True}, "expected unspecified shuffle option"),
        ({"sampler": [0]}, "expected unspecified sampler option"),
        ({"batch_sampler": [[0]]}, "expected unspecified batch_sampler"),
    ],
)
def test_iterable_dataset_rejects_samplers(kwargs, match):
    with pytest.raises(ValueError, match=match):
        td.DataLoader(TCount(3), **kwargs)
    with pytest.raises(ValueError, match=match):
        ed.DataLoader(Count(3), **kwargs)


def test_loader_frozen_attributes_and_misc():
    loader = ed.DataLoader(Pairs(ember), batch_size=2)
    for attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"):
        with pytest.raises(
            ValueError, match=f"{attr} attribute should not be set after DataLoader is initialized"
        ):
            setattr(loader, attr, None)
    loader.num_workers = 0  # other attributes stay assignable
    assert loader.collate_fn is ed.default_collate
    assert ed.DataLoader(Pairs(ember), batch_size=None).collate_fn is ed.default_convert
    assert isinstance(loader.sampler, ed.SequentialSampler)
    assert isinstance(ed.DataLoader(Pairs(ember), shuffle=True).sampler, ed.RandomSampler)
    assert ed.get_worker_info() is None
    with pytest.raises(AssertionError, match="requires timeout == 0"):
        iter(ed.DataLoader(Pairs(ember), timeout=1))
    with pytest.warns(UserWarning, match="pin_memory"):
        batches = list(ed.DataLoader(Pairs(ember), batch_size=4, pin_memory=True))
    assert len(batches) == 2
    it = iter(loader)
    assert len(it) == 4
    with pytest.raises(NotImplementedError, match="cannot be pickled"):
        it.__getstate__()


def test_reachable_as_attribute_after_import_ember():
    import subprocess
    import sys

    code = "import ember; print(ember.utils.data.DataLoader.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "DataLoader"


def test_shuffled_batches_and_splits_match_torch_for_a_seed():
    # The CPU generator is PyTorch's, so seeded shuffles, samplers and splits give torch's order.
    torch.manual_seed(0)
    ember.manual_seed(0)
    t = [b.tolist() for _ in range(2) for b in td.DataLoader(range(10), batch_size=3, shuffle=True)]
    e = [b.tolist() for _ in range(2) for b in ed.DataLoader(range(10), batch_size=3, shuffle=True)]
    assert e == t
    torch.manual_seed(3)
    ember.manual_seed(3)
    assert list(ed.RandomSampler(range(20))) == list(td.RandomSampler(range(20)))
    assert (list(ed.RandomSampler(range(20), replacement=True, num_samples=5))
            == list(td.RandomSampler(range(20), replacement=True, num_samples=5)))
    e_split = ed.random_split(range(10), [3, 7], generator=ember.Generator().manual_seed(42))
    t_split = td.random_split(range(10), [3, 7], generator=torch.Generator().manual_seed(42))
    assert [list(s) for s in e_split] == [list(s) for s in t_split]
