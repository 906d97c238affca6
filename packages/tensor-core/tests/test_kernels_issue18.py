"""Differential tests (against torch) of the kernels issue 18 reworked: softmax/log_softmax at the
machine's vector width (last and inner dims), var/std/var_mean's one-kernel path, mm's direct
2-D call, and the fused optimizer ops' native pass is in ember-nn's test_optim_fused_steps.py.

Shapes cover empty, one element, odd sizes (vector tails), non-contiguous inputs and reductions
over dims other than the last; dtypes float32/float64 and the half types computed in float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "bfloat16", "float16"]
TOL = {"float32": (2e-6, 1e-6), "float64": (1e-12, 1e-12), "bfloat16": (2e-2, 1e-2), "float16": (2e-3, 1e-3)}


def _pair(shape, dtype, seed=0, scale=3.0, transpose=False):
    a = np.random.default_rng(seed).standard_normal(shape) * scale
    e, t = ember.tensor(a, dtype=getattr(ember, dtype)), torch.tensor(a, dtype=getattr(torch, dtype))
    if transpose:
        e, t = e.transpose(0, -1), t.transpose(0, -1)
    return e, t


def _close(e, t, dtype):
    rtol, atol = TOL[dtype]
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=rtol, atol=atol)


SOFTMAX_SHAPES = [((0,), 0), ((1,), 0), ((3, 37), -1), ((5, 1000), 1), ((4, 33, 17), 1), ((67, 9), 0),
                  ((2, 3, 0), 1), ((6, 130), 0), ((2, 70, 3), 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", SOFTMAX_SHAPES, ids=str)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax(fn, shape, dim, dtype):
    e, t = _pair(shape, dtype)
    _close(getattr(ember, fn)(e, dim), getattr(torch, fn)(t, dim), dtype)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_non_contiguous_and_extremes(fn):
    e, t = _pair((40, 24), "float32", transpose=True)
    _close(getattr(ember, fn)(e, -1), getattr(torch, fn)(t, -1), "float32")
    _close(getattr(ember, fn)(e, 0), getattr(torch, fn)(t, 0), "float32")
    a = np.array([[0.0, -np.inf, 88.0, -200.0] * 5, [1e4, -1e4, 0.0, 3.0] * 5], dtype=np.float32)
    for dim in (0, 1):
        r = getattr(ember, fn)(ember.tensor(a), dim).numpy()
        w = getattr(torch, fn)(torch.tensor(a), dim).numpy()
        np.testing.assert_allclose(r, w, rtol=2e-6, atol=1e-6)


VAR_CASES = [((0,), None), ((1,), 0), ((7,), 0), ((4, 1001), 1), ((4, 1001), 0), ((3, 5, 33), (1, 2)),
             ((3, 5, 33), (0, 1)), ((6, 4, 5), 1), ((2, 3), (0, 1)), ((5, 0), 0), ((3, 4, 5), (0, 2))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", VAR_CASES, ids=str)
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std_var_mean(shape, dim, dtype, correction):
    e, t = _pair(shape, dtype, scale=5.0)
    e, t = e + 100, t + 100  # a mean far from 0: the two-pass formula must not cancel
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _close(ember.var(e, dim, correction=correction), torch.var(t, dim, correction=correction), dtype)
            _close(ember.std(e, dim, correction=correction, keepdim=True),
                   torch.std(t, dim, correction=correction, keepdim=True), dtype)
            ev, em = ember.var_mean(e, dim, correction=correction)
            tv, tm = torch.var_mean(t, dim, correction=correction)
            _close(ev, tv, dtype)
            _close(em, tm, dtype)


def test_var_non_contiguous_and_dof_warning():
    e, t = _pair((9, 14), "float32", transpose=True)
    _close(ember.var(e, 1), torch.var(t, 1), "float32")
    _close(e.var(0), t.var(0), "float32")
    with pytest.warns(UserWarning, match="degrees of freedom"):
        ember.var(ember.ones(3, 1), 1)


MM_CASES = [(64, 64, 64), (1, 5, 7), (7, 1, 3), (3, 0, 4), (0, 3, 4), (33, 17, 65), (128, 128, 128)]


@pytest.mark.parametrize("m,k,n", MM_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int64", "complex64"])
def test_mm(m, k, n, dtype):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    if dtype == "int64":
        a, b = (a * 5).round(), (b * 5).round()
    if dtype == "complex64":
        a, b = a + 1j * rng.standard_normal((m, k)), b - 2j * rng.standard_normal((k, n))
    ea, eb = ember.tensor(a, dtype=getattr(ember, dtype)), ember.tensor(b, dtype=getattr(ember, dtype))
    ta, tb = torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b, dtype=getattr(torch, dtype))
    r, w = ember.mm(ea, eb), torch.mm(ta, tb)
    assert tuple(r.shape) == tuple(w.shape) and str(r.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
    tol = {"bfloat16": 3e-2, "float32": 1e-5, "complex64": 1e-5}.get(dtype, 1e-12)
    np.testing.assert_allclose(np.asarray((ea @ eb).to(ember.complex128 if dtype == "complex64" else ember.float64)),
                               (ta @ tb).to(torch.complex128 if dtype == "complex64" else torch.float64).numpy(),
                               rtol=tol, atol=tol * max(1, k))


def test_mm_strided_operands():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((20, 30))
    ea, ta = ember.tensor(a), torch.tensor(a)
    for fe, ft in [(lambda x: x.t(), lambda x: x.t()), (lambda x: x[::2, 1::3], lambda x: x[::2, 1::3])]:
        left_e, left_t = fe(ea), ft(ta)
        right_e, right_t = left_e.t()[:, :5], left_t.t()[:, :5]
        np.testing.assert_allclose(ember.mm(left_e, right_e).numpy(), torch.mm(left_t, right_t).numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        ember.mm(ember.ones(2, 3), ember.ones(2, 3))


@pytest.mark.parametrize("n", [1, 31, 32, 33, 64, 95, 1000])
def test_row_max_nan_and_inf_placement_float32(n):
    """The float32 row max (amax/amin, softmax/log_softmax rows, cross-entropy rows) keeps
    NaN propagation and the infinities wherever they fall: in the vector body, in either of its
    two accumulators, or in the scalar tail (row lengths around the 32-float step)."""
    rows = []
    for pos in sorted({0, n // 2, n - 1, min(n - 1, 16), min(n - 1, 31)}):
        for special in (np.nan, np.inf, -np.inf):
            row = np.random.default_rng(n + pos).standard_normal(n).astype(np.float32) * 4
            row[pos] = special
            rows.append(row)
    rows.append(np.full(n, -np.inf, np.float32))
    rows.append(np.full(n, -0.0, np.float32))
    a = np.stack(rows)
    e, t = ember.tensor(a), torch.tensor(a)
    for name in ("amax", "amin"):
        np.testing.assert_array_equal(getattr(ember, name)(e, 1).numpy(), getattr(torch, name)(t, 1).numpy())
    for fn in ("softmax", "log_softmax"):
        np.testing.assert_allclose(getattr(ember, fn)(e, 1).numpy(), getattr(torch, fn)(t, 1).numpy(),
                                   rtol=2e-6, atol=1e-6)
    y = np.random.default_rng(1).integers(0, n, len(rows))
    got = ember.nn.functional.cross_entropy(e, ember.tensor(y), reduction="none").numpy()
    want = torch.nn.functional.cross_entropy(t, torch.tensor(y), reduction="none").numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
