"""Interop: NumPy (zero-copy both ways, __array__), DLPack with NumPy and PyTorch, tolist/item, pickling."""

from __future__ import annotations

import ctypes
import gc
import pickle
import weakref

import numpy as np
import pytest

import ember

from conftest import DTYPE_PAIRS, torch

ALL = list(DTYPE_PAIRS)
NUMPY_NAMES = [n for n in ALL if n != "bfloat16"]  # NumPy has no bfloat16
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def capsule_name(capsule) -> str:
    return _get_name(capsule).decode()


def bump(value):
    """A different value of the same type (for write-through checks)."""
    return (not value) if isinstance(value, bool) else value + 1


def first_index(shape):
    return (0,) * len(shape)


def make_pair(shape, name, layout="contiguous"):
    """The same values as an ember and a torch tensor, in one of four layouts (built with views)."""
    shape = tuple(shape)
    base_shape = {"contiguous": shape, "transposed": shape[:-2] + shape[-2:][::-1],
                  "sliced": (2 * shape[0] + 1,) + shape[1:] if shape else shape,
                  "expanded": (1,) + shape[1:] if shape else shape}[layout]
    arr = np.asarray(np.random.default_rng(0).integers(-9, 9, size=base_shape))
    if name == "bool":
        arr = np.asarray(arr % 2 == 0)
    else:
        arr = arr.astype("float32" if name == "bfloat16" else name)
    e_dtype, t_dtype = DTYPE_PAIRS[name]
    e, t = ember.tensor(arr).to(e_dtype), torch.from_numpy(arr.copy()).to(t_dtype)
    if layout == "transposed":
        e, t = e.transpose(-1, -2), t.transpose(-1, -2)
    elif layout == "sliced":  # every other row, starting at row 1 (a storage offset)
        stride = (2 * e.stride(0),) + e.stride()[1:]
        e, t = e.as_strided(shape, stride, e.stride(0)), t.as_strided(shape, stride, t.stride(0))
    elif layout == "expanded":
        e, t = e.expand(*shape), t.expand(*shape)
    return e, t


# -- NumPy ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NUMPY_NAMES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_numpy_shares_memory_both_ways(name, layout):
    e, t = make_pair((3, 4), name, layout=layout)
    arr = e.numpy()
    np.testing.assert_array_equal(arr, t.numpy())
    assert arr.strides == tuple(s * e.itemsize for s in e.stride())
    idx = first_index(arr.shape)
    arr[idx] = bump(arr[idx].item())
    assert e.tolist()[0][0] == arr[idx].item()
    back = ember.from_numpy(arr)
    assert back.data_ptr() == e.data_ptr() and back.stride() == e.stride()
    back.fill_(1)
    assert np.all(arr == 1)


def test_from_numpy_keeps_array_alive_and_rejects_bad_arrays():
    arr = np.arange(6.0)
    ref = weakref.ref(arr)
    e = ember.from_numpy(arr)
    del arr
    gc.collect()
    assert ref() is not None and e.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    del e
    gc.collect()
    assert ref() is None
    bad_inputs = [(np.arange(3.0)[::-1], ValueError), (np.array([None]), TypeError), ([1, 2], TypeError)]
    for bad, expected in bad_inputs:
        with pytest.raises(expected):
            torch.from_numpy(bad)
        with pytest.raises(expected):
            ember.from_numpy(bad)


@pytest.mark.parametrize("name", NUMPY_NAMES)
def test_array_protocol(name):
    e, t = make_pair((2, 3), name)
    arr = np.asarray(e)
    np.testing.assert_array_equal(arr, np.asarray(t))
    assert arr.dtype == np.asarray(t).dtype
    assert np.shares_memory(arr, e.numpy())
    np.testing.assert_array_equal(np.asarray(e, dtype=np.float64), np.asarray(t, dtype=np.float64))


def test_bfloat16_numpy_errors_like_torch():
    with pytest.raises(TypeError):
        torch.ones(2, dtype=torch.bfloat16).numpy()
    with pytest.raises(TypeError):
        ember.ones(2, dtype=ember.bfloat16).numpy()


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (2, 0, 3)])
def test_tolist_and_item(name, shape):
    e, t = make_pair(shape, name)
    assert e.tolist() == t.tolist()
    if e.numel() == 1:
        assert e.item() == t.item() and type(e.item()) is type(t.item())


@pytest.mark.parametrize("name", ALL)
def test_item_of_one_element_views_and_extremes(name):
    # item() of a one-element CPU tensor is read from the storage in C (_C._cpu_item): views with an
    # offset, 1-element tensors of several dims, extreme and non-finite values, as PyTorch gives them.
    values = [3.7, -2.5, 0.0, -0.0, 1e-40, 65504.0, 3.0e38, float("inf"), float("nan"), 2.0 ** 62, -2.0 ** 31, 1.0]
    for v in values:
        try:
            t = torch.tensor([0.0, v], dtype=torch.float64).to(getattr(torch, name))
        except (RuntimeError, OverflowError):
            continue
        e = ember.tensor(t.tolist(), dtype=getattr(ember, name)) if name != "bfloat16" else \
            ember.tensor(t.float().tolist(), dtype=ember.float32).to(ember.bfloat16)
        for te, ee in ((t[1], e[1]), (t[1:].view(1, 1, 1), e[1:].view(1, 1, 1)), (t[1:], e[1:])):
            assert ember._C._cpu_item(ee) is not None  # the native read, not the NumPy path
            a, b = ee.item(), te.item()
            assert type(a) is type(b), (name, v)
            assert (a == b) or (a != a and b != b), (name, v, a, b)
            if isinstance(b, float) and b == 0:
                assert str(a) == str(b)  # the sign of zero


def test_item_errors_like_torch():
    for m in (torch, ember):
        with pytest.raises(RuntimeError):
            m.ones(2).item()


# -- pickling -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pickle_round_trip(name, layout):
    e, t = make_pair((3, 4), name, layout=layout)
    back = pickle.loads(pickle.dumps(e))
    assert back.dtype is e.dtype and back.shape == e.shape and back.tolist() == t.tolist()
    assert back.data_ptr() != e.data_ptr() and back.is_contiguous()


@pytest.mark.parametrize("shape", [(), (0,), (0, 5)])
def test_pickle_scalars_and_empty(shape):
    e = ember.ones(shape, dtype=ember.int16)
    back = pickle.loads(pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.shape == e.shape and back.dtype is ember.int16 and back.tolist() == e.tolist()


# -- DLPack with NumPy --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NUMPY_NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_from_ember_dlpack(name, layout):
    e, t = make_pair((3, 4), name, layout=layout)
    arr = np.from_dlpack(e)
    np.testing.assert_array_equal(arr, t.numpy())
    assert arr.dtype == t.numpy().dtype
    assert arr.__array_interface__["data"][0] == e.data_ptr()
    assert arr.strides == tuple(s * e.itemsize for s in e.stride())


@pytest.mark.parametrize("name", NUMPY_NAMES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "broadcast"])
def test_ember_from_numpy_dlpack(name, layout):
    base = np.arange(24).reshape(4, 6)
    arr = {"contiguous": base, "transposed": base.T, "sliced": base[::2, 1:5:2],
           "broadcast": np.broadcast_to(base[:1], (3, 6))}[layout]
    arr = (arr % 2 == 0) if name == "bool" else arr.astype(name)
    arr = np.broadcast_to(arr[:1], (3,) + arr.shape[1:]) if layout == "broadcast" else arr
    e = ember.from_dlpack(arr)
    assert e.dtype is getattr(ember, name) and e.shape == arr.shape
    assert e.data_ptr() == arr.__array_interface__["data"][0]
    assert e.stride() == tuple(s // arr.itemsize for s in arr.strides)
    assert e.tolist() == arr.tolist()


def test_numpy_dlpack_write_through_both_ways():
    arr = np.zeros((3, 4), dtype=np.float32)
    e = ember.from_dlpack(arr)
    e.t().narrow(0, 1, 2).fill_(5.0)  # writes columns 1 and 2 through a strided view
    assert arr[:, 1:3].tolist() == [[5.0, 5.0]] * 3 and arr[:, 0].sum() == 0
    x = ember.zeros(2, 3, dtype=ember.int64)
    view = np.from_dlpack(x.t())
    view[2, 1] = 7
    assert x.tolist() == [[0, 0, 0], [0, 0, 7]]


def test_copy_requests_give_copies():
    e = ember.zeros(3)
    arr = np.from_dlpack(e, copy=True)
    arr[0] = 1
    assert e.tolist() == [0.0, 0.0, 0.0]
    src = np.zeros(3)
    copied = ember.from_dlpack(src, copy=True)
    copied.fill_(2)
    assert src.tolist() == [0.0, 0.0, 0.0] and copied.tolist() == [2.0, 2.0, 2.0]
    assert ember.from_dlpack(src, device="cpu").data_ptr() == src.__array_interface__["data"][0]


def test_numpy_producer_released_when_consumer_dies():
    arr = np.arange(10.0)
    ref = weakref.ref(arr)
    e = ember.from_dlpack(arr)
    del arr
    gc.collect()
    assert ref() is not None and e.tolist() == list(np.arange(10.0))
    view = e.narrow(0, 2, 3)
    del e
    gc.collect()
    assert ref() is not None and view.tolist() == [2.0, 3.0, 4.0]
    del view
    gc.collect()
    assert ref() is None  # the storage called the producer's deleter


# -- DLPack with PyTorch ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_from_ember(name, layout):
    e, t = make_pair((3, 4), name, layout=layout)
    tt = torch.from_dlpack(e)
    assert tt.dtype == t.dtype and tt.shape == t.shape and tt.stride() == e.stride()
    assert tt.data_ptr() == e.data_ptr()
    assert torch.equal(tt, t)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_ember_from_torch(name, layout):
    e_ref, t = make_pair((3, 4), name, layout=layout)
    e = ember.from_dlpack(t)
    assert e.dtype is e_ref.dtype and e.shape == t.shape and e.stride() == t.stride()
    assert e.data_ptr() == t.data_ptr()
    assert e.tolist() == t.tolist()


@pytest.mark.parametrize("name", ["float32", "bfloat16", "bool", "int8"])
def test_torch_write_through_both_ways(name):
    e = ember.zeros(4, 3, dtype=getattr(ember, name))
    tt = torch.from_dlpack(e.t())
    tt[1, 2] = 1
    assert e.tolist()[2][1] == tt[1, 2].item() and sum(map(sum, e.to(ember.float32).tolist())) == 1
    src = torch.zeros(3, 5, dtype=getattr(torch, name))
    back = ember.from_dlpack(src[:, 1:4:2])
    back.fill_(1)
    assert src[:, 1].tolist() == src[:, 3].tolist() == [1, 1, 1] and src.float().sum().item() == 6


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1, 1)])
def test_scalars_and_empty(shape):
    e = ember.ones(shape, dtype=ember.float64)
    assert torch.from_dlpack(e).shape == torch.Size(shape)
    assert np.from_dlpack(e).shape == shape
    assert ember.from_dlpack(torch.ones(shape)).shape == shape
    assert ember.from_dlpack(np.ones(shape)).tolist() == np.ones(shape).tolist()


def test_producer_deleted_before_consumer():
    e = ember.arange(1000.0)
    tt = torch.from_dlpack(e)
    arr = np.from_dlpack(e)
    del e
    gc.collect()
    junk = [ember.full((1000,), -1.0) for _ in range(20)]  # reuse freed memory, if any was freed
    assert tt.sum().item() == 499500.0 and arr.sum() == 499500.0
    del junk
    t = torch.arange(100, dtype=torch.int32)
    back = ember.from_dlpack(t)
    del t
    gc.collect()
    assert back.tolist() == list(range(100))


def test_capsule_keeps_storage_until_deleter_runs():
    arr = np.arange(4.0)
    ref = weakref.ref(arr)
    e = ember.from_numpy(arr)  # ember storage borrowing arr
    del arr
    for kwargs in ({}, {"max_version": (1, 0)}):
        cap = e.__dlpack__(**kwargs)
        del e
        gc.collect()
        assert ref() is not None  # the unconsumed capsule holds the storage
        e = ember.from_dlpack(cap)  # consumed: now the new tensor's storage holds it
        del cap
        gc.collect()
        assert ref() is not None and e.tolist() == [0.0, 1.0, 2.0, 3.0]
    cap = e.__dlpack__()
    del e, cap  # dropped unconsumed: the capsule runs the deleter
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("max_version,name", [(None, "dltensor"), ((0, 8), "dltensor"),
                                              ((1, 0), "dltensor_versioned"), ((1, 3), "dltensor_versioned")])
def test_capsule_kinds_and_consumption(max_version, name):
    e = ember.arange(6).reshape(2, 3)
    cap = e.__dlpack__(max_version=max_version)
    assert capsule_name(cap) == name
    back = ember.from_dlpack(cap)
    assert capsule_name(cap) == "used_" + name
    assert back.tolist() == [[0, 1, 2], [3, 4, 5]] and back.data_ptr() == e.data_ptr()
    with pytest.raises(RuntimeError):
        ember.from_dlpack(cap)
    # torch consumes both kinds from ember, and ember both kinds from torch.
    assert torch.from_dlpack(e.__dlpack__(max_version=max_version)).tolist() == back.tolist()
    t = torch.arange(3)
    assert ember.from_dlpack(t.__dlpack__(max_version=max_version)).tolist() == [0, 1, 2]


def test_dlpack_device_and_errors_like_torch():
    assert ember.zeros(2).__dlpack_device__() == tuple(int(v) for v in torch.zeros(2).__dlpack_device__())
    cases = [
        lambda m: m.zeros(2, device="meta").__dlpack_device__(),
        lambda m: m.from_dlpack(3),
        lambda m: m.ones(2, requires_grad=True).__dlpack__(),
    ]
    for call in cases:
        with pytest.raises(Exception) as expected:
            call(torch)
        with pytest.raises(expected.type):
            call(ember)


def test_unsupported_inputs_raise_cleanly():
    with pytest.raises(RuntimeError, match="negative strides"):
        ember.from_dlpack(np.arange(3.0)[::-1])
    with pytest.raises(TypeError, match="data type"):
        ember.from_dlpack(np.ones(2, dtype=np.uint16))
    with pytest.raises(BufferError):
        ember.zeros(2, device="meta").__dlpack__()
    with pytest.raises(BufferError):
        ember.zeros(2).__dlpack__(dl_device=(2, 0))
    # A capsule that failed to import is still unconsumed and usable.
    cap = np.ones(2, dtype=np.uint16).__dlpack__()
    with pytest.raises(TypeError):
        ember.from_dlpack(cap)
    assert capsule_name(cap) == "dltensor"


def test_import_ember_does_not_import_numpy():
    import subprocess
    import sys

    code = "import sys, ember; ember.zeros(2); print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_ember_leaves_heavy_stdlib_modules_to_their_users():
    # Issue 18 (import ember < 0.1 s): these load where used. Measured against what the interpreter
    # had before `import ember` (a site hook may have loaded some already).
    import subprocess
    import sys

    heavy = ["multiprocessing", "socket", "inspect", "logging", "traceback", "zipfile", "tempfile", "shutil",
             "importlib.abc", "urllib.parse", "pickletools"]
    code = ("import sys\nbefore = set(sys.modules)\nimport ember\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules and m not in before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("first", ["ember", "multiprocessing"])
def test_forking_pickler_sends_shared_tensors_by_memory(first):
    # The reducer is registered on multiprocessing's first import (after ember) or at once (before).
    import subprocess
    import sys

    code = (
        f"import {first}\nimport ember, multiprocessing, sys\n"
        "from multiprocessing.reduction import ForkingPickler\n"
        "t = ember.zeros(3).share_memory_()\n"
        "u = ForkingPickler.loads(bytes(ForkingPickler.dumps(t)))\n"
        "t[1] = 5\n"
        "print(u.tolist(), any(type(f).__name__ == 'type' and f.__name__ == '_ReducersOnImport' "
        "for f in sys.meta_path))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[0.0, 5.0, 0.0] False"


@pytest.mark.parametrize("shape,stride,offset", [((0,), (1,), 7), ((0, 3), (1, 1), 9), ((2, 0), (3, 1), 6)])
def test_numpy_of_an_empty_view_past_the_end_of_its_storage(shape, stride, offset):
    # Found by test_fuzz_ops: as_strided accepts an empty view at any offset (as PyTorch does), but
    # .numpy() then raised NumPy's ValueError about the buffer size.
    v = ember.ones(2, 3).as_strided(shape, stride, offset)
    arr = v.numpy()
    assert arr.shape == shape and arr.dtype == np.float32
    assert v.clone().shape == shape


NUMPY_SCALARS = [np.float32(2.5), np.float64(-1.5), np.float16(0.5), np.int64(3), np.int32(2), np.uint8(3),
                 np.bool_(True)]
NUMPY_SCALAR_CALLS = {
    "add": lambda L, x, i, s: x + s, "int_mul": lambda L, x, i, s: i * s, "rsub": lambda L, x, i, s: s - x,
    "rtruediv": lambda L, x, i, s: s / i, "floordiv": lambda L, x, i, s: i // s, "rpow": lambda L, x, i, s: s ** x,
    "gt": lambda L, x, i, s: x > s, "fn_add": lambda L, x, i, s: L.add(x, s), "fn_mul": lambda L, x, i, s: L.mul(i, s),
    "clamp": lambda L, x, i, s: x.clamp(max=s), "full": lambda L, x, i, s: L.full((2,), s),
    "where": lambda L, x, i, s: L.where(x > 0, x, s), "masked_fill": lambda L, x, i, s: x.masked_fill(x > 0, s),
    "fill_": lambda L, x, i, s: x.clone().fill_(s), "add_": lambda L, x, i, s: x.clone().add_(s),
    "lerp": lambda L, x, i, s: L.lerp(x, x * 2, s), "arange": lambda L, x, i, s: L.arange(s),
    "new_full": lambda L, x, i, s: x.new_full((2,), s), "sub_alpha": lambda L, x, i, s: x.sub(s, alpha=2),
    "addcmul": lambda L, x, i, s: L.addcmul(x, x, x, value=s), "full_like": lambda L, x, i, s: L.full_like(x, s),
    "remainder": lambda L, x, i, s: L.remainder(x, s),
    "div_floor": lambda L, x, i, s: L.div(x, s, rounding_mode="floor"),
}


@pytest.mark.parametrize("scalar", NUMPY_SCALARS, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("call", list(NUMPY_SCALAR_CALLS))
def test_numpy_scalars_are_numbers_as_in_torch(call, scalar):
    """PyTorch's argument parser takes NumPy scalars as numbers (a NumPy bool as a float):
    ``tensor * np.float32(2.5)`` is a tensor, not NumPy's array nor a TypeError."""
    fn = NUMPY_SCALAR_CALLS[call]

    def run(L):
        return fn(L, L.tensor([1.5, -2.0, 3.0]), L.tensor([1, 2, 3]), scalar)

    try:
        expected = run(torch)
    except RuntimeError:  # arange(np.float64(-1.5)): an empty range the wrong way round
        with pytest.raises(RuntimeError):
            run(ember)
        return
    got = run(ember)
    assert isinstance(got, ember.Tensor), type(got)
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make", [lambda lib, a: lib.tensor(a), lambda lib, a: lib.as_tensor(a),
                                  lambda lib, a: lib.from_numpy(a), lambda lib, a: lib.Tensor(a),
                                  lambda lib, a: lib.asarray(a)])
def test_numpy_negative_strides_refused_as_torch(make):
    # torch.tensor(arr[::-1]) copies nothing: PyTorch raises for negative strides in every constructor;
    # ember's tensor() copied the array instead
    for arr in (np.arange(6.0)[::-1], np.arange(6.0).reshape(2, 3)[:, ::-1]):
        with pytest.raises(ValueError, match="At least one stride in the given numpy array is negative"):
            make(torch, arr)
        with pytest.raises(ValueError, match="At least one stride in the given numpy array is negative"):
            make(ember, arr)
    assert make(ember, np.arange(6.0)[::-1][::2][::-1]).tolist() == [1.0, 3.0, 5.0]  # positive strides again


def test_from_numpy_byte_order_and_type_names_as_torch():
    for arr in (np.arange(3, dtype=">i4"), np.arange(3, dtype=">f8")):
        with pytest.raises(ValueError) as expected:
            torch.from_numpy(arr)
        with pytest.raises(ValueError) as got:
            ember.from_numpy(arr)
        assert str(got.value) == str(expected.value)
    for arr, name in ((np.array([1, "a"], dtype=object), "numpy.object_"), (np.array(["a"]), "numpy.str_"),
                      (np.array([b"a"]), "numpy.bytes_")):
        with pytest.raises(TypeError, match=f"can't convert np.ndarray of type {name}. The only supported"):
            torch.from_numpy(arr)
        with pytest.raises(TypeError, match=f"can't convert np.ndarray of type {name}. The only supported"):
            ember.from_numpy(arr)
