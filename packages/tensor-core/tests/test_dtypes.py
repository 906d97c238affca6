"""Type promotion tables, promote_types/can_cast/result_type, finfo/iinfo and the default dtype."""

from __future__ import annotations

import itertools

import pytest
import torch
from opinfo.core import ALL_NAMES, E_DTYPES, T_DTYPES

import ember

PAIRS = list(itertools.product(ALL_NAMES, ALL_NAMES))
SCALARS = [True, 2, -1, 1000, 2.5, -0.0]


def _tname(d):
    return str(d).split(".")[-1]


@pytest.mark.parametrize("a,b", PAIRS)
def test_promote_types_and_can_cast(a, b):
    assert ember.promote_types(E_DTYPES[a], E_DTYPES[b]).name == _tname(torch.promote_types(T_DTYPES[a], T_DTYPES[b]))
    assert ember.can_cast(E_DTYPES[a], E_DTYPES[b]) == torch.can_cast(T_DTYPES[a], T_DTYPES[b])


@pytest.mark.parametrize("a", ALL_NAMES)
def test_tensor_tensor_and_zero_dim_promotion(a):
    """(n-d x n-d), (0-d x n-d), (n-d x 0-d) and (0-d x 0-d) through result_type and real ops."""
    for b in ALL_NAMES:
        for sa, sb in (((2,), (2,)), ((), (2,)), ((2,), ()), ((), ())):
            ea, eb = ember.ones(sa, dtype=E_DTYPES[a]), ember.ones(sb, dtype=E_DTYPES[b])
            ta, tb = torch.ones(sa, dtype=T_DTYPES[a]), torch.ones(sb, dtype=T_DTYPES[b])
            expected = _tname(torch.result_type(ta, tb))
            assert ember.result_type(ea, eb).name == expected, (a, b, sa, sb)
            assert (ea * eb).dtype.name == _tname((ta * tb).dtype), (a, b, sa, sb)
            assert ember.maximum(ea, eb).dtype.name == _tname(torch.maximum(ta, tb).dtype)
            assert ember.div(ea, eb).dtype.name == _tname(torch.div(ta, tb).dtype)
            assert ember.atan2(ea, eb).dtype.name == _tname(torch.atan2(ta, tb).dtype)
            assert (ea == eb).dtype is ember.bool


@pytest.mark.parametrize("a", ALL_NAMES)
@pytest.mark.parametrize("shape", [(2,), ()], ids=["nd", "0d"])
def test_tensor_scalar_promotion(a, shape):
    for s in SCALARS:
        e, t = ember.ones(shape, dtype=E_DTYPES[a]), torch.ones(shape, dtype=T_DTYPES[a])
        assert ember.result_type(e, s).name == _tname(torch.result_type(t, s)), (a, s)
        assert ember.result_type(s, e).name == _tname(torch.result_type(s, t)), (a, s)
        for fn in (lambda x, y: x + y, lambda x, y: y * x, lambda x, y: x / y, lambda x, y: x > y):
            try:
                expected = fn(t, s)
            except RuntimeError:
                with pytest.raises(RuntimeError):
                    fn(e, s)
                continue
            assert fn(e, s).dtype.name == _tname(expected.dtype), (a, s)


@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16"])
def test_set_default_dtype(default):
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(E_DTYPES[default])
        assert ember.get_default_dtype() is E_DTYPES[default]
        assert ember.tensor([1.5]).dtype is E_DTYPES[default]
        assert ember.zeros(2).dtype is E_DTYPES[default]
        assert ember.arange(0.0, 1.0, 0.5).dtype is E_DTYPES[default]
        assert (ember.ones(2, dtype=ember.int32) / 2).dtype is E_DTYPES[default]
        assert (ember.ones(2, dtype=ember.int32) * 2.5).dtype is E_DTYPES[default]
        assert ember.sqrt(ember.ones(2, dtype=ember.int64)).dtype is E_DTYPES[default]
        assert ember.finfo().dtype == default
    finally:
        ember.set_default_dtype(old)
    assert ember.get_default_dtype() is ember.float32
    with pytest.raises(TypeError):
        ember.set_default_dtype(ember.int32)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo(name):
    e, t = ember.finfo(E_DTYPES[name]), torch.finfo(T_DTYPES[name])
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(e, attr) == getattr(t, attr), attr
    assert e.dtype == t.dtype
    with pytest.raises(TypeError):
        ember.finfo(ember.int32)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo(name):
    e, t = ember.iinfo(E_DTYPES[name]), torch.iinfo(T_DTYPES[name])
    assert (e.bits, e.min, e.max, e.dtype) == (t.bits, t.min, t.max, t.dtype)
    with pytest.raises(TypeError):
        ember.iinfo(ember.float32)


def test_dtype_attributes_and_aliases():
    for name in ALL_NAMES:
        e, t = E_DTYPES[name], T_DTYPES[name]
        assert e.is_floating_point == t.is_floating_point
        assert e.is_signed == t.is_signed
        assert e.itemsize == t.itemsize
        assert repr(e) == "ember." + name
    assert ember.float is ember.float32 and ember.double is ember.float64 and ember.half is ember.float16
    assert ember.long is ember.int64 and ember.int is ember.int32 and ember.short is ember.int16
    assert ember.zeros(1, dtype=float).dtype is ember.float64
    assert ember.zeros(1, dtype=int).dtype is ember.int64
    assert ember.zeros(1, dtype=bool).dtype is ember.bool


def test_conversions_between_all_dtypes():
    vals = [-2.7, -1.0, -0.0, 0.0, 0.4, 1.5, 2.5, 100.9, 255.0]
    for a, b in PAIRS:
        if a == "uint8" or b == "uint8":
            continue  # negative float -> uint8 is undefined behaviour in PyTorch
        t = torch.tensor(vals, dtype=torch.float64).to(T_DTYPES[a])
        e = ember.tensor(vals, dtype=ember.float64).to(E_DTYPES[a])
        got, expected = e.to(E_DTYPES[b]), t.to(T_DTYPES[b])
        assert got.dtype is E_DTYPES[b]
        assert got.double().tolist() == expected.double().tolist(), (a, b)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64"])
def test_finfo_iinfo_repr_as_torch(name):
    info = "finfo" if name.startswith(("float", "bfloat")) else "iinfo"
    assert repr(getattr(ember, info)(getattr(ember, name))) == repr(getattr(torch, info)(getattr(torch, name)))
