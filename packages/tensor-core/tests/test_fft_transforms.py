"""ember.fft vs torch.fft: every transform over 1-d/2-d/3-d shapes, odd and even sizes,
padding and trimming through n/s, every norm, negative dims, real and complex inputs,
non-contiguous layouts, the frequency/shift helpers, and PyTorch's errors."""

from __future__ import annotations

import pytest
import torch
from complex_pairs import check, cpair, rpair

import ember

pytestmark = pytest.mark.skipif(not ember._C.fft_available, reason="built without FFTW3")

NORMS = [None, "backward", "ortho", "forward"]
ONE_D = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
REAL_INPUT = {"rfft", "ihfft", "rfft2", "rfftn", "ihfft2", "ihfftn"}  # these reject complex inputs
INPUT_DTYPES = ["float32", "float64", "complex64", "complex128"]


def _tol(name):
    return {"rtol": 2e-4, "atol": 2e-4} if name in ("float32", "complex64", "int64") else {"rtol": 1e-9, "atol": 1e-9}


def _inputs(shape, name, layout="contiguous", seed=0):
    if name.startswith("complex"):
        return cpair(shape, name, seed=seed, layout=layout)
    return rpair(shape, name, seed=seed, layout=layout)


def _both(fn_name, e, t, **kw):
    return getattr(ember.fft, fn_name)(e, **kw), getattr(torch.fft, fn_name)(t, **kw)


@pytest.mark.parametrize("fn", ONE_D)
@pytest.mark.parametrize("name", INPUT_DTYPES)
@pytest.mark.parametrize("shape,dim", [((8,), -1), ((7,), 0), ((3, 6), -1), ((5, 4), 0), ((2, 3, 5), 1),
                                       ((2, 3, 4), -3)])
@pytest.mark.parametrize("n", [None, "smaller", "larger"])
def test_one_dim(fn, name, shape, dim, n):
    if fn in REAL_INPUT and name.startswith("complex"):
        return
    e, t = _inputs(shape, name)
    size = shape[dim]
    n = None if n is None else (max(1, size - 2) if n == "smaller" else size + 3)
    for norm in NORMS:
        if fn in ("irfft", "hfft") and n is None and size == 1:
            continue
        er, tr = _both(fn, e, t, n=n, dim=dim, norm=norm)
        check(er, tr, **_tol(name))


@pytest.mark.parametrize("fn", ONE_D)
@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
def test_one_dim_layouts(fn, layout):
    name = "float64" if fn in REAL_INPUT else "complex128"
    e, t = _inputs((4, 6), name, layout=layout)
    for dim in (0, 1):
        check(*_both(fn, e, t, dim=dim), **_tol(name))


def test_integer_and_bool_inputs_promote():
    e, t = ember.arange(6), torch.arange(6)
    for fn in ONE_D:
        check(*_both(fn, e, t), **_tol("int64"))
    check(*_both("fftn", e.view(2, 3) > 2, t.view(2, 3) > 2), **_tol("int64"))


@pytest.mark.parametrize("fn", ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"])
@pytest.mark.parametrize("name", INPUT_DTYPES)
@pytest.mark.parametrize("shape", [(4, 6), (5, 3), (2, 3, 5)])
@pytest.mark.parametrize("s", [None, (3, 4), (6, 7)])
def test_two_dim(fn, name, shape, s):
    if fn in REAL_INPUT and name.startswith("complex"):
        return
    e, t = _inputs(shape, name, seed=2)
    for norm in NORMS:
        check(*_both(fn, e, t, s=s, norm=norm), **_tol(name))
    if len(shape) == 3:
        check(*_both(fn, e, t, s=s, dim=(0, -1)), **_tol(name))


@pytest.mark.parametrize("fn", ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"])
@pytest.mark.parametrize("name", INPUT_DTYPES)
@pytest.mark.parametrize("s,dim", [(None, None), ((3, 4, 5), None), ((4, 2), None), (None, (0, 2)),
                                   ((5, -1), (-1, 0)), (None, (-2,)), ((1, 2, 3), (2, 1, 0))])
def test_n_dim(fn, name, s, dim):
    if fn in REAL_INPUT and name.startswith("complex"):
        return
    e, t = _inputs((2, 3, 4), name, seed=3)
    for norm in NORMS:
        check(*_both(fn, e, t, s=s, dim=dim, norm=norm), **_tol(name))


@pytest.mark.parametrize("fn", ["fftn", "ifftn", "rfftn", "irfftn", "fft2", "irfft2", "hfftn", "ihfft2"])
@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
def test_n_dim_layouts(fn, layout):
    name = "float32" if fn in REAL_INPUT else "complex64"
    e, t = _inputs((4, 3, 6), name, layout=layout, seed=4)
    check(*_both(fn, e, t), **_tol(name))
    check(*_both(fn, e, t, dim=(0, 2)), **_tol(name))


def test_round_trips_and_out():
    e, t = rpair((6, 8), "float64")
    spec = ember.fft.rfftn(e)
    check(ember.fft.irfftn(spec, s=(6, 8)), t)
    check(ember.fft.ifft(ember.fft.fft(e)).real, t)
    out = ember.empty(0, dtype=ember.complex128)
    ember.fft.fft(e, out=out)
    check(out, torch.fft.fft(t))
    c, tc = cpair((5,), "complex128")
    assert ember.fft.fft(c).dtype is ember.complex128 and c.tolist() == tc.tolist()  # input untouched


# -- helpers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 5, 10])
@pytest.mark.parametrize("d", [1.0, 0.25])
@pytest.mark.parametrize("dtype", [None, "float64", "float32"])
def test_freqs(n, d, dtype):
    kw_e = {} if dtype is None else {"dtype": getattr(ember, dtype)}
    kw_t = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    check(ember.fft.fftfreq(n, d, **kw_e), torch.fft.fftfreq(n, d, **kw_t))
    check(ember.fft.rfftfreq(n, d, **kw_e), torch.fft.rfftfreq(n, d, **kw_t))


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1), (1,)])
def test_shifts(dim):
    e, t = rpair((5, 4), "float32")
    check(ember.fft.fftshift(e, dim=dim), torch.fft.fftshift(t, dim=dim))
    check(ember.fft.ifftshift(e, dim=dim), torch.fft.ifftshift(t, dim=dim))
    c, tc = cpair((3, 6), "complex64")
    check(ember.fft.fftshift(c, dim), torch.fft.fftshift(tc, dim))


# -- errors ---------------------------------------------------------------------------------------------------


ERRORS = {
    "n_zero": lambda m, x: m.fft.fft(x, n=0),
    "n_negative": lambda m, x: m.fft.rfft(x, n=-2),
    "irfft_n_zero": lambda m, x: m.fft.irfft(x, n=0),
    "bad_dim": lambda m, x: m.fft.fft(x, dim=2),
    "bad_dim_neg": lambda m, x: m.fft.ifft(x, dim=-3),
    "bad_norm": lambda m, x: m.fft.fft(x, norm="bad"),
    "float16": lambda m, x: m.fft.fft(x.to(m.float16)),
    "bfloat16": lambda m, x: m.fft.rfft(x.to(m.bfloat16)),
    "rfft_complex": lambda m, x: m.fft.rfft(x.to(m.complex64)),
    "ihfft_complex": lambda m, x: m.fft.ihfft(x.to(m.complex64)),
    "s_too_long": lambda m, x: m.fft.fftn(x, s=(2, 3, 4)),
    "s_dim_mismatch": lambda m, x: m.fft.fftn(x, s=(2, 3), dim=(0,)),
    "repeated_dims": lambda m, x: m.fft.fftn(x, dim=(0, 0)),
    "repeated_neg_dims": lambda m, x: m.fft.rfftn(x, dim=(1, -1)),
    "s_zero": lambda m, x: m.fft.fft2(x, s=(0, 2)),
    "dim_out_of_range_nd": lambda m, x: m.fft.fftn(x, dim=(5,)),
    "fftfreq_int": lambda m, x: m.fft.fftfreq(4, dtype=m.int64),
    "fftfreq_complex": lambda m, x: m.fft.fftfreq(4, dtype=m.complex64),
    "rfftfreq_complex": lambda m, x: m.fft.rfftfreq(4, dtype=m.complex128),
    "not_a_tensor": lambda m, x: m.fft.fft([1.0, 2.0]),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_like_pytorch(case):
    fn = ERRORS[case]
    with pytest.raises(Exception) as t_err:
        fn(torch, torch.ones(3, 4))
    with pytest.raises(t_err.type):
        fn(ember, ember.ones(3, 4))


def test_zero_dim_input():
    with pytest.raises(IndexError):
        torch.fft.fft(torch.tensor(1.0))
    with pytest.raises(IndexError):
        ember.fft.fft(ember.tensor(1.0))


def test_empty_batch():
    # PyTorch's MKL backend errors on an empty batch; ember returns the empty result. A
    # transformed dim of size 0 is an error in both.
    e = ember.zeros(0, 4)
    for fn, shape, dtype in (("fft", (0, 4), ember.complex64), ("rfft", (0, 3), ember.complex64),
                             ("irfft", (0, 6), ember.float32), ("fft2", (0, 4), ember.complex64)):
        result = getattr(ember.fft, fn)(e, dim=(1,)) if fn == "fft2" else getattr(ember.fft, fn)(e)
        assert tuple(result.shape) == shape and result.dtype is dtype
    with pytest.raises(RuntimeError):
        ember.fft.fftn(e)

