"""complex64/complex128 vs PyTorch: dtypes and promotion, creation, NumPy interop, repr,
views between complex and real storage (real, imag, view_as_real/complex), conj, angle,
complex()/polar()."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from complex_pairs import COMPLEX_NAMES, E_COMPLEX, T_COMPLEX, check, cpair, rpair

import ember

REAL_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def _e(name):
    return getattr(ember, name)


def _t(name):
    return getattr(torch, name)


# -- dtypes ---------------------------------------------------------------------------------------


def test_dtype_objects():
    assert ember.cfloat is ember.complex64 and ember.cdouble is ember.complex128
    assert ember.complex64.itemsize == 8 and ember.complex128.itemsize == 16
    assert ember.complex64.is_complex and not ember.complex64.is_floating_point
    assert ember.complex64.to_real() is ember.float32 and ember.float64.to_complex() is ember.complex128
    assert ember.finfo(ember.complex128).eps == torch.finfo(torch.complex128).eps
    assert ember.zeros(2, dtype=ember.cdouble).is_complex() and not ember.zeros(2).is_complex()
    assert ember.is_complex(ember.zeros(1, dtype=ember.complex64))
    assert ember.ones(2).cfloat().dtype is ember.complex64 and ember.ones(2).cdouble().dtype is ember.complex128


@pytest.mark.parametrize("a", COMPLEX_NAMES + REAL_NAMES)
@pytest.mark.parametrize("b", COMPLEX_NAMES)
def test_promote_types(a, b):
    if "float16" in a:  # PyTorch gives complex32, which ember does not have (docs/deviations.md)
        assert ember.promote_types(_e(a), _e(b)) is _e(b)
        return
    expected = torch.promote_types(_t(a), _t(b))
    assert ember.promote_types(_e(a), _e(b)).name == str(expected).split(".")[-1]
    assert ember.promote_types(_e(b), _e(a)).name == str(expected).split(".")[-1]


@pytest.mark.parametrize("name", ["int32", "int64", "float32", "float64", "complex64", "complex128", "bool"])
@pytest.mark.parametrize("scalar", [1j, 2.5, 3])
def test_result_type_with_python_complex(name, scalar):
    e, t = ember.ones(2, dtype=_e(name)), torch.ones(2, dtype=_t(name))
    assert ember.result_type(e, scalar).name == str(torch.result_type(t, scalar)).split(".")[-1]


def test_zero_dim_complex_keeps_float_precision():
    # A 0-d complex128 operand upgrades a float32 vector's category, not its precision.
    e = ember.ones(2) + ember.tensor(1j, dtype=ember.complex128)
    t = torch.ones(2) + torch.tensor(1j, dtype=torch.complex128)
    check(e, t)


def test_default_dtype_float64_gives_complex128():
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor([1 + 2j]).dtype is ember.complex128
        assert (ember.ones(2, dtype=ember.int32) + 1j).dtype is ember.complex128
    finally:
        ember.set_default_dtype(ember.float32)


# -- creation and interop ---------------------------------------------------------------------------


@pytest.mark.parametrize("data", [[1 + 2j, 3 - 4j], [[1, 2j], [3.5, -1]], 1 + 1j, [[1j]], [True, 2j]])
def test_tensor_from_python(data):
    check(ember.tensor(data), torch.tensor(data))


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_tensor_with_dtype(name):
    check(ember.tensor([1, 2.5, 3j], dtype=E_COMPLEX[name]), torch.tensor([1, 2.5, 3j], dtype=T_COMPLEX[name]))
    check(ember.tensor([[1.5, 2]], dtype=E_COMPLEX[name]), torch.tensor([[1.5, 2]], dtype=T_COMPLEX[name]))


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_factories(name):
    ed, td = E_COMPLEX[name], T_COMPLEX[name]
    check(ember.zeros(2, 3, dtype=ed), torch.zeros(2, 3, dtype=td))
    check(ember.ones(4, dtype=ed), torch.ones(4, dtype=td))
    check(ember.full((2, 2), 1 - 2j, dtype=ed), torch.full((2, 2), 1 - 2j, dtype=td))
    check(ember.empty(0, 2, dtype=ed), torch.empty(0, 2, dtype=td))
    check(ember.zeros_like(ember.ones(3), dtype=ed), torch.zeros_like(torch.ones(3), dtype=td))
    check(ember.full((3,), 2j), torch.full((3,), 2j))
    check(ember.eye(3, dtype=ed), torch.eye(3, dtype=td))


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_fill_and_casts(name):
    e, t = ember.empty(3, dtype=E_COMPLEX[name]), torch.empty(3, dtype=T_COMPLEX[name])
    check(e.fill_(2 - 1j), t.fill_(2 - 1j))
    real_e, real_t = rpair((2, 3), "float64")
    check(real_e.to(E_COMPLEX[name]), real_t.to(T_COMPLEX[name]))
    ce, ct = cpair((2, 3), name)
    for target in ("float64", "float32", "int32", "bool", "complex64", "complex128"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns when a cast drops the imaginary part
            expected = ct.to(_t(target))
        check(ce.to(_e(target)), expected)


def test_fill_real_tensor_with_complex_raises():
    with pytest.raises(RuntimeError):
        ember.empty(2).fill_(1j)
    with pytest.raises(RuntimeError):
        torch.empty(2).fill_(1j)


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_numpy_roundtrip_shares_memory(name):
    arr = (np.arange(6) + 1j * np.arange(6)[::-1]).astype(name).reshape(2, 3)
    e = ember.from_numpy(arr)
    assert e.dtype is E_COMPLEX[name]
    e[0, 0] = 7 + 7j
    assert arr[0, 0] == 7 + 7j
    back = e.numpy()
    assert back.dtype == np.dtype(name) and np.shares_memory(back, arr)
    np.testing.assert_array_equal(ember.tensor(arr).numpy(), arr)
    assert ember.tensor(arr[:, ::2]).tolist() == arr[:, ::2].tolist()


def test_item_and_scalars():
    e = ember.tensor([1.5 - 2j])
    assert e.item() == 1.5 - 2j and isinstance(e.item(), complex)
    assert complex(e) == 1.5 - 2j
    assert ember.tensor(3j, dtype=ember.complex128).tolist() == 3j


# -- repr -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data,name", [
    ([1 + 2j, 3 - 4j], "complex64"),
    ([1.5 + 2j, -3.25 - 4j], "complex64"),
    ([[1e-5 + 2j, 1e6 - 4j]], "complex64"),
    ([0j, -0.5j, 2 + 0j], "complex128"),
    (1 + 2j, "complex64"),
    ([], "complex64"),
    ([[1 + 1j] * 30] * 2, "complex64"),
    ([float("nan") + 1j, float("inf") - 2j], "complex128"),
])
def test_repr(data, name):
    e, t = ember.tensor(data, dtype=E_COMPLEX[name]), torch.tensor(data, dtype=T_COMPLEX[name])
    assert repr(e) == repr(t).replace("torch.", "ember.")


def test_repr_summarized():
    arr = (np.arange(2000) * (1 + 0.5j)).astype(np.complex64)
    assert repr(ember.from_numpy(arr)) == repr(torch.from_numpy(arr))


# -- parts, views, conj --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMPLEX_NAMES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "expanded"])
def test_parts(name, layout):
    e, t = cpair((3, 4), name, layout=layout)
    check(e.real, t.real)
    check(e.imag, t.imag)
    check(ember.real(e), torch.real(t))
    check(ember.imag(e), torch.imag(t))
    check(ember.view_as_real(e), torch.view_as_real(t))
    check(ember.abs(e), torch.abs(t))
    check(e.abs(), t.abs())
    check(ember.angle(e), torch.angle(t))
    check(ember.conj(e), torch.conj(t))
    check(ember.conj_physical(e), torch.conj_physical(t))
    check(ember.sgn(e), torch.sgn(t))


def test_parts_are_views():
    e = ember.zeros(3, dtype=ember.complex64)
    e.real.fill_(2)
    e.imag[1] = 5
    assert e.tolist() == [2 + 0j, 2 + 5j, 2 + 0j]
    r = ember.view_as_real(e)
    assert r.data_ptr() == e.data_ptr() and r.stride() == (2, 1)
    r[2, 1] = -1
    assert e[2].item() == 2 - 1j
    s = e[1:]
    assert ember.view_as_real(s).storage_offset() == 2 and e.imag[1:].storage_offset() == 3


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_view_as_complex(name):
    arr = np.arange(24, dtype=name).reshape(3, 4, 2)
    e, t = ember.from_numpy(arr.copy()), torch.from_numpy(arr.copy())
    check(ember.view_as_complex(e), torch.view_as_complex(t))
    check(ember.view_as_complex(e[::2]), torch.view_as_complex(t[::2]))  # even strides are fine
    check(ember.view_as_complex(e[:, 1:]), torch.view_as_complex(t[:, 1:]))
    v = ember.view_as_complex(e)
    assert v.data_ptr() == e.data_ptr() and v.stride() == (4, 1)
    v[0, 0] = 9 - 9j
    assert e[0, 0].tolist() == [9, -9]


def test_real_of_real_is_itself_and_angle_of_real():
    e, t = rpair((5,), "float32")
    assert ember.real(e) is e
    check(ember.angle(e), torch.angle(t))
    check(ember.angle(ember.tensor([-1, 0, 2])), torch.angle(torch.tensor([-1, 0, 2])))
    check(ember.conj(e), torch.conj(t))


@pytest.mark.parametrize("make", [
    lambda m: m.ones(3, 3),                     # last dim not 2
    lambda m: m.ones(2, 4)[:, ::2],             # last dim stride 2
    lambda m: m.ones(3, 3)[:, :2],              # odd row stride
    lambda m: m.ones(5)[1:].view(2, 2),         # odd storage offset
    lambda m: m.ones(()),                       # 0-d
    lambda m: m.ones(4, 2, dtype=m.int32),      # not floating
])
def test_view_as_complex_errors(make):
    with pytest.raises(RuntimeError):
        torch.view_as_complex(make(torch))
    with pytest.raises(RuntimeError):
        ember.view_as_complex(make(ember))


def test_view_as_real_and_imag_errors():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError):
            lib.view_as_real(lib.ones(3))
        with pytest.raises(RuntimeError):
            lib.imag(lib.ones(3))


def test_conj_helpers():
    e = ember.tensor([1 + 1j])
    assert not ember.is_conj(ember.conj(e))
    assert ember.resolve_conj(e) is e


# -- construction ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_complex_and_polar(name):
    a, ta = rpair((3, 1), name, seed=1)
    b, tb = rpair((4,), name, seed=2)
    check(ember.complex(a, b), torch.complex(ta, tb))
    check(ember.polar(a.abs(), b), torch.polar(ta.abs(), tb))
    at, tat = rpair((3, 4), name, layout="transposed")
    check(ember.complex(at, at), torch.complex(tat, tat))


def test_complex_errors():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError):
            lib.complex(lib.ones(2), lib.ones(2, dtype=lib.float64))
        with pytest.raises(RuntimeError):
            lib.complex(lib.ones(2, dtype=lib.int32), lib.ones(2, dtype=lib.int32))
        with pytest.raises(RuntimeError):
            lib.complex(lib.ones(2), lib.ones(3))


# -- data movement -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_indexing_and_joining(name):
    e, t = cpair((4, 3), name, seed=3)
    idx_e, idx_t = ember.tensor([2, 0, 2]), torch.tensor([2, 0, 2])
    check(e[idx_e], t[idx_t])
    check(e[e.real > 0], t[t.real > 0])
    check(ember.where(e.imag > 0, e, 0), torch.where(t.imag > 0, t, 0))
    check(ember.flip(e, (0,)), torch.flip(t, (0,)))
    check(ember.roll(e, 1, 1), torch.roll(t, 1, 1))
    rows = [[0], [2], [1], [1]]
    check(ember.gather(e, 1, ember.tensor(rows)), torch.gather(t, 1, torch.tensor(rows)))
    check(ember.cat([e, e[:1]]), torch.cat([t, t[:1]]))
    check(ember.stack([e, e.conj()]), torch.stack([t, t.conj()]))
    check(e.t().contiguous(), t.t().contiguous())
    e2, t2 = e.clone(), t.clone()
    e2[idx_e] = 1j
    t2[idx_t] = 1j
    check(e2, t2)
    e2.masked_fill_(e2.real < 0, 2 - 2j)
    t2.masked_fill_(t2.real < 0, 2 - 2j)
    check(e2, t2)


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_dlpack_with_torch(name):
    e, t = cpair((2, 3), name, seed=4)
    check(ember.from_dlpack(t), t)
    assert torch.equal(torch.from_dlpack(e), t)


@pytest.mark.parametrize("name", COMPLEX_NAMES)
def test_conjugate_transposes(name):
    e, t = cpair((2, 3), name, seed=5)
    check(e.mH, t.mH)
    check(e.H, t.H)
    check(ember.adjoint(e), torch.adjoint(t))
    b, tb = cpair((2, 3, 4), name, seed=6)
    check(b.mH, tb.mH)
    r, tr = rpair((2, 3), "float32")
    check(r.mH, tr.mH)
