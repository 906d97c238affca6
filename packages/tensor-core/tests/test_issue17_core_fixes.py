"""Regression tests for the mismatches issue 17 lists (tensor-core), each against PyTorch 2.13."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import ember

from conftest import torch


def _outcome(fn):
    """(result as a NumPy array or plain value, or the exception type) of fn."""
    try:
        r = fn()
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return type(exc)
    if isinstance(r, (ember.Tensor, torch.Tensor)):
        return np.asarray(r.detach().numpy() if isinstance(r, torch.Tensor) else r.numpy())
    if isinstance(r, tuple):
        return tuple(_outcome(lambda x=x: x) for x in r)
    return r


def _same(fn):
    """fn(ember) and fn(torch) give equal values (NaN equal NaN) or the same exception type."""
    e, t = _outcome(lambda: fn(ember)), _outcome(lambda: fn(torch))
    if isinstance(t, type):
        assert e is t, (e, t)
        return
    if isinstance(t, tuple):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            np.testing.assert_array_equal(a, b)
        return
    np.testing.assert_array_equal(e, t)
    if isinstance(t, np.ndarray):
        assert e.dtype == t.dtype


def test_where_method_takes_self_as_values():
    _same(lambda L: L.tensor([1.0, 2, 3]).where(L.tensor([True, False, True]), L.tensor(0.0)))
    _same(lambda L: L.arange(6).reshape(2, 3).where(L.tensor([True, False, True]), -1))


@pytest.mark.parametrize("alpha", [0.5, 1.7, -1.7, 2])
def test_index_add_integer_alpha_is_converted_first(alpha):
    _same(lambda L: L.zeros(5, dtype=L.int64).index_add(0, L.tensor([0, 1]), L.tensor([3, 5]), alpha=alpha))


@pytest.mark.parametrize("shape", [(5,), (5, 3), (5, 3, 2), (5, 3, 2, 2), ()])
def test_index_add_out_of_bounds_error_type(shape):
    for d in range(max(len(shape), 1)):
        src = list(shape)
        if src:
            src[d] = 1
        bad = shape[d] if shape else 1
        _same(lambda L, d=d, src=src, bad=bad: L.zeros(shape).index_add(d, L.tensor([bad]), L.ones(src)))
    _same(lambda L: L.zeros(5).index_add(0, L.tensor([-1]), L.ones(1)))


@pytest.mark.parametrize("dtype", ["int16", "int32", "int8", "uint8", "int64"])
def test_nll_loss_target_dtypes(dtype):
    def call(L):
        x = L.tensor([[0.1, -0.3, 0.5, 2.0]] * 3)
        return L.nn.functional.nll_loss(x, L.tensor([1, 2, 3], dtype=getattr(L, dtype)))

    if not hasattr(ember, "nn"):
        pytest.skip("needs ember-nn")
    _same(call)


@pytest.mark.parametrize("call", [
    lambda L: L.ones(2).repeat(), lambda L: L.ones(2).expand(), lambda L: L.ones(2).reshape(),
    lambda L: L.ones(2).permute(), lambda L: L.ones(2).view(), lambda L: L.ones(2).expand(size=(3, 2)),
    lambda L: L.ones(2).repeat(repeats=(2,)), lambda L: L.tensor(1.0).expand(()),
])
def test_size_arguments(call):
    _same(call)


@pytest.mark.parametrize("value", [300, -256, -255, -1, 1e10, 2.5, -0.5, 255.9, math.nan, math.inf, True])
@pytest.mark.parametrize("call", [
    lambda L, v: L.tensor([1, 2], dtype=L.uint8).fill_(v),
    lambda L, v: L.tensor([1, 2], dtype=L.uint8).masked_fill(L.tensor([True, False]), v),
    lambda L, v: L.tensor([1, 2], dtype=L.uint8).clamp(max=v),
    lambda L, v: L.tensor([1, 2], dtype=L.uint8).clamp(-5, v) if v == v else L.ones(1),
    lambda L, v: L.full((2,), v, dtype=L.uint8),
    lambda L, v: L.tensor([1, 2], dtype=L.int8).index_fill(0, L.tensor([0]), v),
    lambda L, v: L.where(L.tensor([True, False]), L.tensor([1, 2], dtype=L.uint8), v),
    lambda L, v: L.tensor([1, 2], dtype=L.int8).scatter(0, L.tensor([0]), v),
    lambda L, v: L.tensor([v], dtype=L.uint8),
    lambda L, v: L.tensor([1, 2], dtype=L.uint8).add(v) if isinstance(v, int) else L.ones(1),
])
def test_python_scalars_written_into_integer_tensors(call, value):
    _same(lambda L: call(L, value))


def test_uint8_clamp_raises():
    with pytest.raises(RuntimeError, match="without overflow"):
        ember.tensor([1, 2], dtype=ember.uint8).clamp(-5, 300)
    _same(lambda L: L.ones(2, dtype=L.float16).clamp(max=1e5))


def test_inplace_cast_check_comes_before_the_kernel():
    _same(lambda L: L.ones(3, dtype=L.int32).bitwise_xor_(float("nan")))
    _same(lambda L: L.ones(3, dtype=L.int32).bitwise_and_(L.ones(3)))
    _same(lambda L: L.ones(3).bitwise_or_(L.ones(3)))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape,scale", [((2, 3, 7, 9), 0.5), ((1, 1, 5), 1.7), ((1, 2, 4, 4, 5), 3)])
def test_interpolate_nearest_uint8(mode, shape, scale):
    if not hasattr(ember, "nn"):
        pytest.skip("needs ember-nn")
    a = np.random.default_rng(0).integers(0, 256, size=shape).astype(np.uint8)
    _same(lambda L: L.nn.functional.interpolate(L.tensor(a), scale_factor=scale, mode=mode))


@pytest.mark.parametrize("dtype", [None, "float32"])
def test_dtype_must_be_a_dtype(dtype):
    for bad in ("float32", np.float32, np.dtype("float32")):
        with pytest.raises(TypeError):
            ember.zeros(2, dtype=bad)
    for ok, want in ((float, ember.float64), (int, ember.int64), (bool, ember.bool), (complex, ember.complex128)):
        assert ember.zeros(2, dtype=ok).dtype is want
    assert ember.tensor(np.ones(2, dtype=np.float32)).dtype is ember.float32  # NumPy dtypes still infer


FLOATS = [math.nan, 1e20, -1e20, math.inf, -math.inf, 3e9, -3e9, 300.0, -1.0, 2.5, -2.5, 2147483520.0, 1e10]


@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("dst", ["int64", "int32", "int16", "int8", "uint8"])
def test_float_to_int_casts_match_torch_and_numpy(src, dst):
    values = FLOATS if src not in ("float16", "bfloat16") else [v for v in FLOATS if abs(v) < 6e4 or v != v]
    _same(lambda L: L.tensor(values, dtype=getattr(L, src)).to(getattr(L, dst)))
    if src in ("float32", "float64"):
        with np.errstate(invalid="ignore"):
            want = np.array(values, dtype=src).astype(dst)
        np.testing.assert_array_equal(ember.tensor(values, dtype=getattr(ember, src)).to(getattr(ember, dst)).numpy(),
                                      want)


@pytest.mark.parametrize("data", [
    [math.nan, 1.0, math.nan, 1.0], [math.nan, 2.0, math.nan, 1.0, -math.nan], [1.0, 1.0, 2.0],
])
def test_unique_keeps_nans_apart(data):
    _same(lambda L: L.unique(L.tensor(data), return_inverse=True, return_counts=True))
    _same(lambda L: L.unique_consecutive(L.tensor(data), return_inverse=True, return_counts=True))
    # Rows with a NaN are groups of their own too (PyTorch orders them by its comparator's whims).
    rows = [[math.nan, 1.0], [math.nan, 1.0], [2.0, 3.0], [2.0, 3.0]]
    counts = [ember.unique(ember.tensor(rows), dim=0, return_counts=True)[1].tolist(),
              torch.unique(torch.tensor(rows), dim=0, return_counts=True)[1].tolist()]
    assert sorted(counts[0]) == sorted(counts[1]) == [1, 1, 2]


def test_tensor_of_one_element_tensors_and_buffers():
    _same(lambda L: L.tensor([L.tensor([1.0]), L.tensor([2.0])]))
    _same(lambda L: L.tensor([L.tensor([[1]], dtype=L.int32), L.tensor(2, dtype=L.int32)]))
    _same(lambda L: L.tensor([L.tensor([1.0, 2.0])]))
    _same(lambda L: L.tensor(bytearray(b"\x01\xff")))
    _same(lambda L: L.tensor([bytearray(b"\x01\xff")]))
    _same(lambda L: L.tensor(memoryview(b"\x01\x02")))
    _same(lambda L: L.tensor(memoryview(np.array([1.5, 2.5], dtype=np.float32))))


@pytest.mark.parametrize("stride", [2**40, 2**62, 2**63 - 1])
def test_size_one_dim_with_huge_stride(stride):
    x = ember.as_strided(ember.arange(4.0), (1, 2), (stride, 1))
    assert x.numpy().tolist() == [[0.0, 1.0]]
    assert x.tolist() == [[0.0, 1.0]]
    assert x[:, :1].item() == 0.0
    y = ember.as_strided(ember.arange(4.0), (1,), (stride,))
    assert y.numpy().tolist() == [0.0] and y.item() == 0.0


def test_more_than_64_dims():
    _same(lambda L: L.ones([1] * 65).sum())
    _same(lambda L: (L.ones([1] * 70) + 1).reshape(-1))


@pytest.mark.parametrize("name", ["sum", "prod", "cumsum", "cumprod"])
def test_out_dtype_is_the_accumulation_dtype(name):
    def call(L):
        out = L.empty((2,) if name.startswith("cum") else (), dtype=L.int32)
        getattr(L, name)(L.tensor([1.5, 2.5]), 0, out=out)
        return out

    _same(call)


@pytest.mark.parametrize("shape", [(2, 0), (0, 2), (0, 0), (3, 2, 0), (3, 4)])
@pytest.mark.parametrize("ord", [1, -1, math.inf, -math.inf, 2, -2, "nuc", "fro"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_matrix_norm_of_empty_matrices(shape, ord, keepdim):
    a = np.random.default_rng(3).standard_normal(shape)  # full rank when not empty
    _same(lambda L: L.linalg.matrix_norm(L.tensor(a), ord=ord, keepdim=keepdim))


def test_module_level_names():
    assert (ember.pi, ember.e, ember.inf) == (torch.pi, torch.e, torch.inf)
    assert math.isnan(ember.nan) and ember.newaxis is None
    assert ember.ones(3)[ember.newaxis].shape == (1, 3)
    importlib.import_module("ember.accelerator")
    assert importlib.import_module("ember.backends.cudnn") is ember.backends.cudnn
    assert ember.accelerator.is_available() is torch.accelerator.is_available() is False
    assert ember.accelerator.current_accelerator() is None and ember.accelerator.device_count() == 0
    with pytest.raises(RuntimeError):
        ember.accelerator.synchronize()
    assert ember.backends.cudnn is ember.backends.cudnn and ember.backends.cudnn.is_available() is False
    t = ember.ones(2)
    for name in ("is_xpu", "is_mps", "is_xla", "is_ipu", "is_maia", "is_mtia", "is_vulkan", "is_mkldnn",
                 "is_sparse_csr", "is_nested", "is_cuda", "is_meta", "is_quantized", "is_sparse"):
        assert getattr(t, name) is getattr(torch.ones(2), name) is False, name


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor", "IntTensor", "ByteTensor",
                                  "BoolTensor", "HalfTensor", "ShortTensor", "CharTensor", "BFloat16Tensor"])
def test_legacy_tensor_types(name):
    E, T = getattr(ember, name), getattr(torch, name)
    assert E(2, 3).shape == T(2, 3).shape and E(2, 3).dtype.name == str(T(2, 3).dtype).split(".")[-1]
    assert E().shape == T().shape
    assert E(ember.Size([2])).shape == T(torch.Size([2])).shape
    _same(lambda L: getattr(L, name)([1, 0, 1]).double())
    _same(lambda L: getattr(L, name)(2.5))
    assert isinstance(ember.tensor([1, 0]).to(E.dtype), E) and isinstance(T([1]), T)
    assert not isinstance(ember.ones(1, dtype=ember.complex64), E)
    # Tensor.type takes a legacy type as it takes its name: x.type(torch.LongTensor).
    _same(lambda L: L.tensor([1.5, -2.0, 0.0]).type(getattr(L, name)).double())
    _same(lambda L: L.tensor([1.5, -2.0, 0.0]).type(getattr(L, name)).type())
    # seq2seq tutorial: LongTensor(np.int32 array) copies the array's data (ember took the array
    # for sizes: "only integer scalar arrays can be converted"); a NumPy integer is still a size.
    import numpy as np

    data = np.arange(6, dtype=np.int32).reshape(2, 3) % 2
    _same(lambda L: getattr(L, name)(data).double())
    _same(lambda L: getattr(L, name)(np.array([1.0, 0.0])).double())
    assert E(np.int64(3)).shape == T(np.int64(3)).shape == (3,)
    assert E(np.array(4)).shape == T(np.array(4)).shape == (4,)


def test_factories_take_size_by_keyword():
    for fn in ("empty", "zeros", "ones"):
        assert getattr(ember, fn)(size=(2, 3)).shape == getattr(torch, fn)(size=(2, 3)).shape
        assert getattr(ember, fn)(size=[4]).shape == (4,)
    _same(lambda L: L.zeros(size=(2,), dtype=L.int32))


# -- resize_ of borrowed memory: PyTorch's "not resizable" ----------------------------------------


@pytest.mark.parametrize("source", ["numpy", "numpy_view", "frombuffer", "dlpack_numpy", "dlpack_torch"])
def test_resize_borrowed_memory_is_not_resizable(source):
    import numpy as np
    import torch

    arr = np.arange(3.0)
    makers = {
        "numpy": lambda lib: lib.from_numpy(arr),
        "numpy_view": lambda lib: lib.from_numpy(arr)[1:],
        "frombuffer": lambda lib: lib.frombuffer(bytearray(24), dtype=lib.float64),
        "dlpack_numpy": lambda lib: lib.from_dlpack(arr),
        "dlpack_torch": lambda lib: lib.from_dlpack(torch.arange(3.0, dtype=torch.float64)),
    }
    t, e = makers[source](torch), makers[source](ember)
    with pytest.raises(RuntimeError, match="not resizable"):
        t.resize_(5)
    with pytest.raises(RuntimeError, match="not resizable"):
        e.resize_(5)
    # Shrinking needs no new memory: allowed, and still shares (as PyTorch).
    assert list(e.resize_(1).shape) == list(t.resize_(1).shape) == [1]
    if source == "numpy":
        arr[0] = 7.0
        assert e.item() == t.item() == 7.0


def test_resize_own_memory_still_grows_after_numpy_tensor_dies():
    import gc

    import numpy as np

    from ember._src.interop import _UNRESIZABLE

    addresses = []
    for _ in range(3):
        t = ember.from_numpy(np.zeros(4))
        addresses.append(t.data_ptr())
        t.resize_(2)
        del t
    gc.collect()
    x = ember.zeros(3)
    x.resize_(10)
    assert list(x.shape) == [10]
    # the arrays died: their addresses left the registry (other tests' live arrays may remain)
    assert not [a for a in addresses if a in _UNRESIZABLE and _UNRESIZABLE[a]() is not None]


def test_div_inplace_rounding_refuses_a_result_self_cannot_hold():
    # Found by the 100k fuzz run (seed 17): bool.div_(1, rounding_mode="trunc") is int64 in PyTorch.
    for mode in ("trunc", "floor"):
        for lib in (torch, ember):
            with pytest.raises(RuntimeError, match="can't be cast to the desired output type Bool"):
                lib.tensor([True, False]).div_(1, rounding_mode=mode)
        assert ember.tensor([3, 7], dtype=ember.uint8).div_(2, rounding_mode=mode).tolist() == [1, 3]


@pytest.mark.parametrize("call", [
    lambda L: L.ones(2, dtype=L.int64) + 2**70,  # beyond 64 bits: Python's OverflowError
    lambda L: L.ones(2) * 2**64,
    lambda L: L.ones(2, dtype=L.int64) + 2**63,  # [2**63, 2**64) wraps, as PyTorch reads it
    lambda L: 2**70 - L.ones(2, dtype=L.int64),
    lambda L: L.full((2,), 2**70),
    lambda L: L.full((2,), 2**63, dtype=L.int64),  # fits 64 bits, not int64: RuntimeError
    lambda L: L.ones(2, dtype=L.int64).fill_(2**70),
])
def test_python_ints_beyond_64_bits(call):
    _same(call)
