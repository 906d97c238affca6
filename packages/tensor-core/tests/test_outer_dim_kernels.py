"""Differential tests (against torch) of the outer-dim kernels: softmax/log_softmax, sum and
var/var_mean reduced over a dim that has a contiguous inner dim behind it. Those kernels walk
whole row pieces (up to 1024 columns) with vectorized lanes; softmax walks the rows in chunks
that stay in L2 (max, then the sum of exponentials against the running max, rescaled where a
later chunk raises it) and writes the result in a second pass, float32 var sums shifted values
in double in one pass.

Cases: widths below, at and above the block (1024) with vector tails, -inf runs before a finite
value, NaN and inf columns, a large offset (the variance shift), empty dims, non-contiguous input.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "bfloat16", "float16"]
TOL = {"float32": (3e-6, 1e-6), "float64": (1e-12, 1e-12), "bfloat16": (2e-2, 1e-2), "float16": (2e-3, 1e-3)}
SHAPES = [((33, 1030), 0), ((5, 7, 1024), 1), ((64, 13), 0), ((3, 0, 17), 1), ((0, 9), 0), ((2, 40, 3, 300), 1),
          # many rows: softmax's blocks narrow to 96 and 16 columns (vector and scalar tails)
          ((600, 300), 0), ((2, 3000, 45), 1)]


def _pair(a, dtype):
    return ember.tensor(a, dtype=getattr(ember, dtype)), torch.tensor(a, dtype=getattr(torch, dtype))


def _close(e, t, dtype, tol=None):
    rtol, atol = tol or TOL[dtype]
    np.testing.assert_allclose(e.float().numpy(), t.float().numpy(), rtol=rtol, atol=atol, equal_nan=True)


def _data(shape, seed=0, scale=3.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_outer(fn, shape, dim, dtype):
    e, t = _pair(_data(shape), dtype)
    _close(getattr(ember, fn)(e, dim), getattr(torch, fn)(t, dim), dtype)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_outer_extremes(fn, dtype):
    # Columns: -inf runs then finite, all -inf, NaN in the middle, +inf, a growing max, huge spread.
    n, cols = 12, 40
    a = _data((n, cols), seed=1)
    a[:5, 0] = -np.inf
    a[:, 1] = -np.inf
    a[6, 2] = np.nan
    a[3, 3] = np.inf
    a[:, 4] = np.arange(n) * 10.0
    a[::2, 5] = 1e4
    a[1::2, 5] = -1e4
    a[0, 6] = -np.inf
    e, t = _pair(a, dtype)
    for dim in (0,):
        _close(getattr(ember, fn)(e, dim), getattr(torch, fn)(t, dim), dtype)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_outer_extremes_across_chunks(fn, dtype):
    # Enough rows for several L2 chunks (a chunk is 256 KiB of a column block): a max that
    # grows in a later chunk (the running sum is rescaled), -inf for whole chunks before a
    # finite value, a column all -inf, NaN and +inf in a late chunk, a tiny value after huge ones.
    n, cols = 9000, 37
    a = _data((n, cols), seed=4)
    a[:, 0] = np.linspace(-50, 50, n)
    a[:7000, 1] = -np.inf
    a[:, 2] = -np.inf
    a[8000, 3] = np.nan
    a[8500, 4] = np.inf
    a[:4000, 5] = 80.0
    a[4000:, 5] = -80.0
    a[:-1, 6] = -np.inf
    a[-1, 6] = -300.0
    e, t = _pair(a, dtype)
    _close(getattr(ember, fn)(e, 0), getattr(torch, fn)(t, 0), dtype)
    _close(getattr(ember, fn)(e.reshape(3, 3000, cols), 1), getattr(torch, fn)(t.reshape(3, 3000, cols), 1), dtype)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("cols", [37, 48], ids=str)
def test_softmax_outer_single_read_chunks(fn, cols):
    # float32 over a non-last dim takes each L2 chunk's column max and exp sum in one read, shifted
    # by the max of the chunks before it, and redoes a vector of 16 columns from cache where its
    # chunk max rose more than 2 above that (softmax_col_stats_f32, reduce.cpp): a slow rise (never
    # redone), a fast one (redone every chunk), steps of 1.9 and 2.1 at a chunk boundary, a spread
    # of 1e4, -inf until a late chunk, NaN and +inf late; against torch in float64 (the chunks are
    # 256 KiB: ~1770 rows at 37 columns), and the same bits for one or two threads.
    n = 20000
    a = _data((n, cols), seed=7, scale=1.0)
    a[:, 0] = np.linspace(-1, 1, n)
    a[:, 1] = np.linspace(0, 200, n)
    a[:, 2] = np.where(np.arange(n) < 7 * 1771, 0.0, 1.9) + a[:, 2] * 1e-3
    a[:, 3] = np.where(np.arange(n) < 7 * 1771, 0.0, 2.1) + a[:, 3] * 1e-3
    a[::2, 4] = 1e4
    a[:15000, 5] = -np.inf
    a[16000, 17] = np.nan
    a[18000, 18] = np.inf
    a[:, 20] = np.linspace(30, -30, n)
    x = a.astype(np.float32)
    got = getattr(ember, fn)(ember.tensor(x), 0).numpy()
    want = getattr(torch, fn)(torch.tensor(x, dtype=torch.float64), 0).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7 if fn == "softmax" else 2e-6, equal_nan=True)
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        two = getattr(ember, fn)(ember.tensor(x), 0).numpy()
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(two, got)


def test_softmax_outer_non_contiguous():
    a = _data((50, 70, 9), seed=2)
    e, t = _pair(a, "float32")
    e, t = e.transpose(1, 2), t.transpose(1, 2)
    for dim in (0, 1, 2):
        _close(ember.softmax(e, dim), torch.softmax(t, dim), "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
def test_sum_outer(shape, dim, dtype):
    e, t = _pair(_data(shape, seed=3), dtype)
    # float32 rows are summed in order (PyTorch folds pairwise): allow for n rounding steps.
    tol = (2e-5, 2e-5) if dtype == "float32" else (5e-2, 5e-2) if dtype == "bfloat16" else None
    _close(e.sum(dim), t.sum(dim), dtype, tol)
    _close(e.sum(dim, keepdim=True), t.sum(dim, keepdim=True), dtype, tol)


def test_sum_outer_int_and_nan():
    a = np.random.default_rng(4).integers(-50, 50, (70, 1100))
    e, t = ember.tensor(a), torch.tensor(a)
    assert np.array_equal(e.sum(0).numpy(), t.sum(0).numpy())
    f = _data((20, 30), seed=5)
    f[3, 4] = np.nan
    f[5, 6] = np.inf
    _close(ember.tensor(f).sum(0), torch.tensor(f).sum(0), "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", SHAPES, ids=str)
@pytest.mark.parametrize("correction", [1, 0])
def test_var_mean_outer(shape, dim, dtype, correction):
    a = _data(shape, seed=6) + 5.0
    e, t = _pair(a, dtype)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev, em = ember.var_mean(e, dim, correction=correction)
        tv, tm = torch.var_mean(t, dim, correction=correction)
        _close(e.var(dim, correction=correction), t.var(dim, correction=correction), dtype)
    _close(ev, tv, dtype)
    _close(em, tm, dtype)


def test_var_outer_offset_and_specials():
    # A large common offset: the one-pass float32 path shifts by each column's first value.
    a = (1e4 + _data((300, 40), seed=7) * 1e-2).astype(np.float32)
    a[0, 1] = 2e4  # the shift itself an outlier
    a[:, 2] = 7.0  # constant column: variance exactly 0
    a[4, 3] = np.inf
    a[0, 4] = np.inf  # inf as the shift value
    a[9, 5] = np.nan
    a[0, 6] = -np.inf
    a[1, 6] = np.inf
    e, t = ember.tensor(a), torch.tensor(a)
    ev, em = ember.var_mean(e, 0)
    tv, tm = torch.var_mean(t, 0)
    np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=1e-4, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(em.numpy()[7:], tm.numpy()[7:], rtol=1e-6, atol=1e-6)
    # With inf in a column PyTorch's Welford mean depends on where the inf sits (NaN once a later
    # value subtracts it); ember's is the plain mean, torch.mean's value.
    np.testing.assert_allclose(em.numpy(), t.mean(0).numpy(), rtol=1e-6, equal_nan=True)
    assert ev.numpy()[2] == 0.0
    e2, t2 = e.t(), t.t()  # non-contiguous: the reduced dim is the inner one of the storage
    np.testing.assert_allclose(e2.var(1).numpy(), t2.var(1).numpy(), rtol=1e-4, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("fn", ["exp", "sigmoid", "tanh", "erf", "gelu", "gelu_tanh"])
def test_vector_math_lanes_and_tails(fn):
    # float32 transcendental kernels run whole machine vectors then a scalar tail: both must give
    # the same (2-ulp) values, with NaN/inf/range limits in lanes of either part.
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.7, 88.8, -103.9, -104.5, 1e-30, 0.62, 0.63, 0.99, 1.0, 3.99,
               4.0, -4.5, 20.0, -20.0]
    rng = np.random.default_rng(8)
    a = np.concatenate([special, rng.standard_normal(45) * 4, special]).astype(np.float32)
    e, t = ember.tensor(a), torch.tensor(a)

    def run(lib, x):
        if fn.startswith("gelu"):
            return lib.nn.functional.gelu(x, approximate="tanh" if fn == "gelu_tanh" else "none")
        return getattr(lib, fn)(x)

    got, want = run(ember, e), run(torch, t)
    keep = np.ones(a.shape, bool)
    if fn == "gelu":
        # PyTorch's own gelu(+inf) depends on the path: inf from its scalar loop, NaN from its
        # AVX-512 vector loop. ember gives inf (the limit) on both.
        keep = a != np.inf
        assert np.all(got.numpy()[~keep] == np.inf)
    # PyTorch's gelu computes 1 + erf(x / sqrt 2), which cancels for negative x: absolute error there.
    atol = 1e-6 if fn.startswith("gelu") else 1e-37
    np.testing.assert_allclose(got.numpy()[keep], want.numpy()[keep], rtol=3e-6, atol=atol, equal_nan=True)
    # every start offset: the same element lands in a vector lane or in the tail
    for start in range(1, 9):
        np.testing.assert_array_equal(run(ember, e[start:]).numpy(), got.numpy()[start:])


def test_exp_accuracy_against_double():
    # float32 exp (common/vecmath.h: a degree-4 polynomial in the reduced argument) on a dense
    # grid over the whole range with a normal result: within 1.02 ulp of the float64 exp, and
    # within 1 ulp of torch.exp (Sleef, 1 ulp) everywhere; softmax and cross-entropy share it.
    x = np.concatenate([np.linspace(-87.3, 88.7, 2_000_003), np.linspace(-0.35, 0.35, 400_001)]).astype(np.float32)
    got = ember.exp(ember.tensor(x)).numpy()
    want = np.exp(x.astype(np.float64))
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - want) / ulp) <= 1.02
    ref = torch.exp(torch.tensor(x)).numpy()
    assert np.max(np.abs(got.astype(np.float64) - ref) / ulp) <= 1.0


def test_gelu_accuracy_against_double():
    # float32 gelu on a dense grid against the float64 formula with erfc (no cancellation): a few
    # ulp where gelu is not small, and an absolute error of about erf's (6e-8 times |x|) in the
    # negative tail, where PyTorch's 1 + erf(x / sqrt 2) is no better.
    x = np.linspace(-5.5, 6.0, 200_003).astype(np.float32)
    got = ember.nn.functional.gelu(ember.tensor(x)).numpy().astype(np.float64)
    xd = x.astype(np.float64)
    want = 0.5 * xd * torch.special.erfc(torch.tensor(-xd / np.sqrt(2.0))).numpy()
    err = np.abs(got - want)
    assert np.all(err <= 4 * 1.2e-7 * np.abs(want) + 6e-8 * np.abs(xd))
    pos = xd > 0.5
    np.testing.assert_allclose(got[pos], want[pos], rtol=4 * 1.2e-7)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 15, 16, 17, 1001])
def test_var_one_pass_rows_and_columns(n):
    # float32 var over the last dim (one shifted pass per row) and over dim 0 (four rows per step,
    # vector columns then a tail): a large offset with a small spread, odd lengths, inf/NaN rows.
    rng = np.random.default_rng(n)
    a = (1e4 + rng.standard_normal((n, 37)) * 1e-2).astype(np.float32)
    a[0, 3] = np.inf
    a[n // 2, 5] = np.nan
    a[:, 6] = -np.inf
    for x in (a, np.ascontiguousarray(a.T)):
        e, t = ember.tensor(x), torch.tensor(x)
        for dim in (0, 1):
            for correction in (0, 1):
                for fn in ("var", "std"):  # std: the native kernel's square root of the double variance
                    np.testing.assert_allclose(getattr(e, fn)(dim, correction=correction).numpy(),
                                               getattr(t, fn)(dim, correction=correction).numpy(), rtol=2e-4,
                                               atol=1e-9, equal_nan=True)
            # the mean of an inf column: ember's is the plain mean (torch.mean's value), as above
            np.testing.assert_allclose(ember.var_mean(e, dim)[1].numpy(), t.mean(dim).numpy(), rtol=1e-6,
                                       equal_nan=True)


def test_std_native_rounds_after_the_square_root():
    # float32 std whose variance overflows float32: finite, over the last dim and over dim 0.
    a = np.array([[3e38, -1.0, 2e38], [-3e38, 5.0, 1.0]], np.float32)
    for x in (a, np.ascontiguousarray(a.T)):
        e, t = ember.tensor(x), torch.tensor(x)
        for dim in (0, 1):
            np.testing.assert_allclose(e.std(dim).numpy(), t.std(dim).numpy(), rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(ember.std_mean(e, dim)[0].numpy(), torch.std_mean(t, dim)[0].numpy(),
                                       rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "bool", "complex64", "complex128"])
def test_transposing_copy(dtype):
    # copy into a contiguous tensor from a src whose unit-stride dim is not the last (permute/movedim
    # then .contiguous()): the tiled transpose, with partial tiles, extra outer dims, a flipped dim,
    # a broadcast dim and a strided view of the input.
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 37, 45, 20)) * 50).astype(np.float64)
    e = ember.tensor(a).to(getattr(ember, dtype))
    t = torch.tensor(a).to(getattr(torch, dtype))
    for perm in [(0, 3, 2, 1), (1, 0, 3, 2), (3, 2, 1, 0), (0, 2, 3, 1)]:
        np.testing.assert_array_equal(e.permute(*perm).contiguous().numpy(), t.permute(*perm).contiguous().numpy())
    np.testing.assert_array_equal(e.movedim(1, -1).reshape(-1, 37).numpy(), t.movedim(1, -1).reshape(-1, 37).numpy())
    np.testing.assert_array_equal(e[:, ::2].transpose(1, 3).flip(0).contiguous().numpy(),
                                  t[:, ::2].transpose(1, 3).flip(0).contiguous().numpy())
    eb, tb = e[0, :, :1].expand(37, 40, 20), t[0, :, :1].expand(37, 40, 20)
    np.testing.assert_array_equal(eb.transpose(0, 1).contiguous().numpy(), tb.transpose(0, 1).contiguous().numpy())
