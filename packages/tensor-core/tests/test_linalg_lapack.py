"""ember.linalg factorizations (LAPACK kernels) and the compositions on them, against torch.

Inputs are well-conditioned (diagonally dominant, or X X^T + n I for positive-definite ones).
Results that are unique are compared directly; eigen/singular vectors (unique only up to sign)
are compared through reconstructions and orthogonality, plus the values themselves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember

from conftest import assert_same, to_torch

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:torch.(cholesky|qr|svd) is deprecated")

FLOATS = ["float32", "float64"]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]
TOL = {"float32": dict(rtol=1e-4, atol=1e-4), "float64": dict(rtol=1e-10, atol=1e-10)}


def _embed(arr: np.ndarray, name: str, layout: str):
    """``arr`` as an ember and a torch tensor with the given memory layout (same values)."""
    shape = arr.shape
    if layout == "expanded":
        arr = np.broadcast_to(arr[:1], shape)
        base = np.ascontiguousarray(arr[:1])
    elif layout == "transposed":
        base = np.ascontiguousarray(arr.swapaxes(-1, -2))
    elif layout == "sliced":
        base = np.zeros(shape[:-1] + (shape[-1] * 2,))
        base[..., ::2] = arr
    else:
        base = np.ascontiguousarray(arr)
    e = ember.tensor(base).to(getattr(ember, name))
    if layout == "expanded":
        e = e.expand(*shape)
    elif layout == "transposed":
        e = e.transpose(-1, -2)
    elif layout == "sliced":
        e = e.as_strided(shape, tuple(e.stride()[:-1]) + (2,), 0)
    return e, torch.from_numpy(np.array(arr, dtype=np.float64)).to(getattr(torch, name))


def _matrices(shape, kind="general", seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=shape)
    n = shape[-1]
    if kind == "general":  # diagonally dominant square: well-conditioned
        return x + n * np.eye(n)
    if kind == "spd":
        return x @ x.swapaxes(-1, -2) + n * np.eye(n)
    if kind == "symmetric":
        return x + x.swapaxes(-1, -2)
    return x  # "rect"


def _pair(shape, name="float64", kind="general", layout="contiguous", seed=0):
    return _embed(_matrices(shape, kind, seed), name, layout)


def _t(x):
    return to_torch(x)


SQUARE = [(3, 3), (2, 4, 4), (2, 1, 3, 3), (1, 1), (0, 0), (2, 0, 0), (0, 3, 3)]


# -- det / slogdet / inv / solve ----------------------------------------------------------------

@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_det_slogdet(name, shape):
    e, t = _pair(shape, name)
    assert_same(ember.linalg.det(e), torch.linalg.det(t), **TOL[name])
    assert_same(ember.det(e), torch.det(t), **TOL[name])
    sign, logabs = ember.linalg.slogdet(e)
    assert_same((sign, logabs), tuple(torch.linalg.slogdet(t)), **TOL[name])
    assert ember.slogdet(e).logabsdet.shape == ember.linalg.slogdet(e).sign.shape


@pytest.mark.parametrize("layout", LAYOUTS)
def test_det_layouts_and_signs(layout):
    e, t = _pair((3, 4, 4), "float64", "rect", layout, seed=3)
    assert_same(ember.linalg.det(e), torch.linalg.det(t))
    assert_same(tuple(ember.linalg.slogdet(e)), tuple(torch.linalg.slogdet(t)))
    assert_same(ember.logdet(e), torch.logdet(t))  # nan where det < 0


def test_det_singular():
    e = ember.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert ember.linalg.det(e).item() == 0
    sign, logabs = ember.linalg.slogdet(e)
    assert sign.item() == 0 and logabs.item() == -math.inf


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 5), (0, 0), (2, 0, 0)])
def test_inv(name, layout, shape):
    if layout in ("sliced", "expanded") and len(shape) < 3:
        layout = "transposed"
    e, t = _pair(shape, name, layout=layout)
    assert_same(ember.linalg.inv(e), torch.linalg.inv(t), **TOL[name])
    assert_same(ember.inverse(e), torch.inverse(t), **TOL[name])
    inv, info = ember.linalg.inv_ex(e)
    assert_same((inv, info), tuple(torch.linalg.inv_ex(t)), **TOL[name])


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)), ((2, 3, 3), (3,)), ((2, 3, 3), (3, 4)),
    ((1, 3, 3), (4, 1, 3, 2)), ((4, 4), (2, 4, 1)), ((0, 0), (0, 2)), ((2, 3, 3), (2, 3, 0)),
])
@pytest.mark.parametrize("name", FLOATS)
def test_solve(a_shape, b_shape, name):
    a_e, a_t = _pair(a_shape, name)
    b_e, b_t = _embed(np.random.default_rng(1).uniform(-1, 1, size=b_shape), name, "contiguous")
    assert_same(ember.linalg.solve(a_e, b_e), torch.linalg.solve(a_t, b_t), **TOL[name])


def test_solve_right_and_layouts():
    a_e, a_t = _pair((2, 3, 3), layout="transposed")
    b_e, b_t = _embed(np.random.default_rng(2).uniform(-1, 1, size=(2, 4, 3)), "float64", "sliced")
    assert_same(ember.linalg.solve(a_e, b_e, left=False), torch.linalg.solve(a_t, b_t, left=False))


# -- cholesky / qr / eigh / svd ----------------------------------------------------------------

@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape,layout", [((4, 4), "contiguous"), ((2, 3, 3), "transposed"),
                                          ((3, 3, 3), "expanded"), ((0, 0), "contiguous")])
def test_cholesky(name, upper, shape, layout):
    e, t = _pair(shape, name, "spd", layout)
    assert_same(ember.linalg.cholesky(e, upper=upper), torch.linalg.cholesky(t, upper=upper), **TOL[name])
    assert_same(ember.cholesky(e, upper), torch.cholesky(t, upper), **TOL[name])
    L, info = ember.linalg.cholesky_ex(e)
    assert_same((L, info), tuple(torch.linalg.cholesky_ex(t)), **TOL[name])


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4), (3, 0), (0, 3)])
def test_qr(name, mode, shape):
    e, t = _pair(shape, name, "rect")
    Q, R = ember.linalg.qr(e, mode=mode)
    tq, tr = torch.linalg.qr(t, mode=mode)
    assert Q.shape == tq.shape and R.shape == tr.shape
    assert_same(R.abs(), tr.abs(), **TOL[name])  # unique up to the signs of R's rows
    rt = _t(R)
    assert torch.equal(rt, rt.triu())
    if mode != "r":
        qt = _t(Q)
        eye = torch.eye(qt.shape[-1], dtype=qt.dtype)
        torch.testing.assert_close(qt.mT @ qt, eye.expand_as(qt.mT @ qt), **TOL[name])
        if mode == "reduced" or shape[-2] <= shape[-1]:
            torch.testing.assert_close(qt @ rt, t, **TOL[name])


def test_qr_alias():
    e, t = _pair((5, 3), kind="rect", layout="transposed")
    for some in (True, False):
        Q, R = ember.qr(e, some)
        torch.testing.assert_close(_t(Q) @ _t(R), t)
        assert Q.shape == torch.linalg.qr(t, "reduced" if some else "complete").Q.shape


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape,layout", [((4, 4), "contiguous"), ((2, 3, 3), "transposed"),
                                          ((2, 3, 3), "sliced"), ((0, 0), "contiguous")])
def test_eigh(name, uplo, shape, layout):
    e, t = _pair(shape, name, "rect", layout)  # not symmetric: only the UPLO triangle may be read
    w, v = ember.linalg.eigh(e, UPLO=uplo)
    tw, _ = torch.linalg.eigh(t, UPLO=uplo)
    assert_same(w, tw, **TOL[name])
    assert_same(ember.linalg.eigvalsh(e, uplo), torch.linalg.eigvalsh(t, uplo), **TOL[name])
    sym = t.tril() + t.tril(-1).mT if uplo == "L" else t.triu() + t.triu(1).mT
    vt = _t(v)
    torch.testing.assert_close(vt @ torch.diag_embed(_t(w)) @ vt.mT, sym, **TOL[name])


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("shape,layout", [((4, 3), "contiguous"), ((3, 5), "transposed"), ((2, 4, 4), "sliced"),
                                          ((3, 2, 3), "expanded"), ((3, 0), "contiguous"), ((0, 2), "contiguous")])
def test_svd(name, full, shape, layout):
    e, t = _pair(shape, name, "rect", layout)
    U, S, Vh = ember.linalg.svd(e, full_matrices=full)
    tu, ts, tvh = torch.linalg.svd(t, full_matrices=full)
    assert U.shape == tu.shape and Vh.shape == tvh.shape
    assert_same(S, ts, **TOL[name])
    assert_same(ember.linalg.svdvals(e), torch.linalg.svdvals(t), **TOL[name])
    ut, vht = _t(U), _t(Vh)
    k = ts.shape[-1]
    torch.testing.assert_close(ut[..., :k] * _t(S).unsqueeze(-2) @ vht[..., :k, :], t, **TOL[name])
    for q in (ut.mT @ ut, vht @ vht.mT):
        torch.testing.assert_close(q, torch.eye(q.shape[-1], dtype=q.dtype).expand_as(q), **TOL[name])


def test_torch_svd_alias():
    e, t = _pair((4, 3), kind="rect")
    U, S, V = ember.svd(e)
    torch.testing.assert_close(_t(U) * _t(S) @ _t(V).mT, t)
    assert ember.svd(e, some=False).U.shape == torch.svd(t, some=False).U.shape
    u0, s0, v0 = ember.svd(e, compute_uv=False)
    tu0, ts0, tv0 = torch.svd(t, compute_uv=False)
    assert_same((u0, s0, v0), (tu0, ts0, tv0))


# -- lstsq / pinv / matrix_rank / matrix_power -----------------------------------------------------

@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 3), (5, 2)), ((2, 6, 4), (2, 6, 1)), ((4, 4), (4, 3)),
                                             ((2, 5, 3), (1, 5, 2)), ((3, 5), (3, 2))])
def test_lstsq(driver, a_shape, b_shape):
    a_e, a_t = _pair(a_shape, kind="rect")
    b_e, b_t = _embed(np.random.default_rng(5).uniform(-1, 1, size=b_shape), "float64", "contiguous")
    res = ember.linalg.lstsq(a_e, b_e, driver=driver)
    ref = torch.linalg.lstsq(a_t, b_t, driver=driver)
    assert_same(res.solution, ref.solution)
    assert_same(res.residuals, ref.residuals)
    assert_same(res.rank, ref.rank)
    assert_same(res.singular_values, ref.singular_values)


@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (3, 3), (2, 0)])
def test_pinv(hermitian, shape):
    if hermitian:
        shape = shape[:-1] + (shape[-2],)
    e, t = _pair(shape, kind="symmetric" if hermitian else "rect")
    assert_same(ember.linalg.pinv(e, hermitian=hermitian), torch.linalg.pinv(t, hermitian=hermitian))
    assert_same(ember.linalg.pinv(e, atol=0.5, hermitian=hermitian),
                torch.linalg.pinv(t, atol=0.5, hermitian=hermitian))
    assert_same(ember.pinverse(e), torch.pinverse(t))


@pytest.mark.parametrize("hermitian", [False, True])
def test_matrix_rank(hermitian):
    x = np.random.default_rng(7).uniform(-1, 1, size=(3, 5, 2))
    low = x @ x.swapaxes(-1, -2)  # rank 2, symmetric
    e, t = _embed(low, "float64", "contiguous")
    assert_same(ember.linalg.matrix_rank(e, hermitian=hermitian), torch.linalg.matrix_rank(t, hermitian=hermitian))
    assert_same(ember.linalg.matrix_rank(e, atol=1.0, rtol=0.0), torch.linalg.matrix_rank(t, atol=1.0, rtol=0.0))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1, -3])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_matrix_power(n, shape):
    e, t = _pair(shape)
    e, t = e / 4, t / 4  # keep powers in range
    assert_same(ember.linalg.matrix_power(e, n), torch.linalg.matrix_power(t, n))
    assert_same(ember.matrix_power(e, n), torch.matrix_power(t, n))


# -- norms / cross ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norm(name, ord, dim, keepdim):
    e, t = _pair((3, 2, 4), name, "rect")
    assert_same(ember.linalg.matrix_norm(e, ord, dim, keepdim), torch.linalg.matrix_norm(t, ord, dim, keepdim),
                **TOL[name])
    assert_same(ember.linalg.norm(e, ord, dim, keepdim), torch.linalg.norm(t, ord, dim, keepdim), **TOL[name])


@pytest.mark.parametrize("ord,dim", [(None, None), (2, None), (1, 1), (math.inf, (0,)), (None, (0, 1)),
                                     ("fro", None), ("nuc", None)])
def test_norm_dispatch(ord, dim):
    shape = (3, 4) if isinstance(ord, str) or dim == (0, 1) else (3, 4) if dim is not None else (5,)
    e, t = _pair(shape, kind="rect")
    assert_same(ember.linalg.norm(e, ord, dim), torch.linalg.norm(t, ord, dim))
    assert_same(ember.linalg.vector_norm(e), torch.linalg.vector_norm(t))


def test_cross():
    a_e, a_t = _pair((2, 3), kind="rect")
    b_e, b_t = _pair((2, 3), kind="rect", seed=1)
    assert_same(ember.linalg.cross(a_e, b_e), torch.linalg.cross(a_t, b_t))
    assert_same(ember.linalg.cross(a_e.t(), b_e.t(), dim=0), torch.linalg.cross(a_t.t(), b_t.t(), dim=0))


# -- errors and meta ------------------------------------------------------------------------------------

def _raises_like(fn_e, fn_t, *args_pairs):
    e_args = [p[0] for p in args_pairs]
    t_args = [p[1] for p in args_pairs]
    with pytest.raises(Exception) as t_err:
        fn_t(*t_args)
    with pytest.raises(Exception) as e_err:
        fn_e(*e_args)
    t_type = RuntimeError if isinstance(t_err.value, torch.linalg.LinAlgError) else type(t_err.value)
    assert isinstance(e_err.value, t_type)
    assert isinstance(e_err.value, ember.linalg.LinAlgError) == isinstance(t_err.value, torch.linalg.LinAlgError)
    assert str(e_err.value) == str(t_err.value)


SINGULAR = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 0.0]]])


@pytest.mark.parametrize("fn", ["inv", "solve", "cholesky", "inverse", "matrix_power"])
def test_singular_errors(fn):
    cases = (SINGULAR, SINGULAR[1], -np.eye(3)) if fn == "cholesky" else (SINGULAR, SINGULAR[1])
    for arr in cases:
        pair = _embed(arr, "float64", "contiguous")
        if fn == "solve":
            _raises_like(ember.linalg.solve, torch.linalg.solve, pair, pair)
        elif fn == "matrix_power":
            _raises_like(lambda a: ember.linalg.matrix_power(a, -2), lambda a: torch.linalg.matrix_power(a, -2),
                         pair)
        elif fn == "inverse":
            _raises_like(ember.inverse, torch.inverse, pair)
        else:
            _raises_like(getattr(ember.linalg, fn), getattr(torch.linalg, fn), pair)


@pytest.mark.parametrize("fn", ["det", "slogdet", "inv", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals",
                                "pinv", "matrix_rank", "matrix_norm", "lstsq", "solve"])
@pytest.mark.parametrize("case", ["float16", "bfloat16", "int64", "vector", "nonsquare"])
def test_input_errors(fn, case):
    name = case if case in ("float16", "bfloat16", "int64") else "float32"
    shape = (3,) if case == "vector" else (2, 3) if case == "nonsquare" else (3, 3)
    e, t = _embed(np.ones(shape) + np.eye(*shape[-2:]) if len(shape) == 2 else np.ones(shape), name, "contiguous")
    if case == "nonsquare" and fn in ("qr", "svd", "svdvals", "pinv", "matrix_rank", "matrix_norm", "lstsq"):
        return  # defined for rectangular matrices
    if fn == "matrix_norm" and case in ("float16", "bfloat16"):
        e_r, t_r = ember.linalg.matrix_norm(e), torch.linalg.matrix_norm(t)
        assert_same(e_r, t_r)
        return
    two = fn in ("lstsq", "solve")
    e_fn = getattr(ember.linalg, fn)
    t_fn = getattr(torch.linalg, fn)
    _raises_like((lambda a: e_fn(a, a)) if two else e_fn, (lambda a: t_fn(a, a)) if two else t_fn, (e, t))


def test_linalg_error_is_runtime_error():
    assert issubclass(ember.linalg.LinAlgError, RuntimeError)
    # its class name is PyTorch's (torch._C._LinAlgError), which programs print
    assert ember.linalg.LinAlgError.__name__ == torch.linalg.LinAlgError.__name__


def test_meta_shapes():
    a = ember.empty((2, 4, 3), device="meta")
    sq = ember.empty((2, 3, 3), device="meta")
    assert ember.linalg.qr(a).Q.shape == (2, 4, 3)
    assert [x.shape for x in ember.linalg.svd(a)] == [(2, 4, 4), (2, 3), (2, 3, 3)]
    assert ember.linalg.det(sq).shape == (2,)
    assert [x.shape for x in ember.linalg.eigh(sq)] == [(2, 3), (2, 3, 3)]
    assert ember.linalg.solve(sq, ember.empty((3,), device="meta")).shape == (2, 3)


def test_solve_ex_and_inv_ex_report_info():
    e, t = _embed(SINGULAR, "float64", "contiguous")
    b_e, b_t = _embed(np.ones((2, 2)), "float64", "contiguous")
    assert_same(ember.linalg.solve_ex(e, b_e).info, torch.linalg.solve_ex(t, b_t).info)
    assert_same(ember.linalg.inv_ex(e).info, torch.linalg.inv_ex(t).info)
    assert_same(ember.linalg.cholesky_ex(e).info, torch.linalg.cholesky_ex(t).info)


@pytest.mark.parametrize("driver", ["gelsd", "gels", "gelsy"])
def test_lstsq_vector_rhs(driver):
    a_e, a_t = _pair((2, 5, 3), kind="rect")
    b_e, b_t = _embed(np.random.default_rng(6).uniform(-1, 1, size=(2, 5)), "float64", "contiguous")
    assert_same(tuple(ember.linalg.lstsq(a_e, b_e, driver=driver)), tuple(torch.linalg.lstsq(a_t, b_t, driver=driver)))


def test_svd_nonfinite_raises():
    e, t = _embed(np.array([[np.nan, 1.0], [1.0, 1.0]]), "float64", "contiguous")
    _raises_like(ember.linalg.svd, torch.linalg.svd, (e, t))


def test_batched_on_threads():
    """Many small matrices run on OpenMP threads (BLAS set to one thread meanwhile)."""
    prev = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        e, t = _pair((64, 5, 5))
        assert_same(ember.linalg.inv(e), torch.linalg.inv(t))
        s_e, s_t = _pair((64, 4, 4), kind="symmetric")
        assert_same(ember.linalg.eigvalsh(s_e), torch.linalg.eigvalsh(s_t))
    finally:
        ember.set_num_threads(prev)


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf])
def test_cond(p):
    e, t = _pair((2, 3, 3))
    assert_same(ember.linalg.cond(e, p), torch.linalg.cond(t, p))


def test_small_composites():
    e, t = _pair((2, 3, 4), kind="rect")
    assert_same(ember.linalg.diagonal(e, offset=1), torch.linalg.diagonal(t, offset=1))
    assert_same(ember.linalg.vecdot(e, e), torch.linalg.vecdot(t, t))
    assert_same(ember.linalg.vecdot(e, e, dim=1), torch.linalg.vecdot(t, t, dim=1))
    x_e, x_t = _embed(np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]), "float64", "contiguous")
    assert_same(ember.linalg.vander(x_e), torch.linalg.vander(x_t))
    assert_same(ember.linalg.vander(x_e, N=5), torch.linalg.vander(x_t, N=5))


def test_tensorinv_tensorsolve():
    a = _matrices((6, 6)).reshape(6, 2, 3)
    e, t = _embed(a, "float64", "contiguous")
    assert_same(ember.linalg.tensorinv(e, ind=1), torch.linalg.tensorinv(t, ind=1))
    b_e, b_t = _embed(np.arange(6.0), "float64", "contiguous")
    assert_same(ember.linalg.tensorsolve(e, b_e), torch.linalg.tensorsolve(t, b_t))
    a2 = np.moveaxis(_matrices((6, 6)).reshape(3, 2, 2, 3), 3, 0)  # dims=(0,) moves the 3 back to the end
    e2, t2 = _embed(np.ascontiguousarray(a2), "float64", "contiguous")
    b2_e, b2_t = _embed(np.arange(6.0).reshape(3, 2), "float64", "contiguous")
    assert_same(ember.linalg.tensorsolve(e2, b2_e, dims=(0,)), torch.linalg.tensorsolve(t2, b2_t, dims=(0,)))


def test_linalg_error_pickles_like_torch():
    # Worker processes (DataLoader, multiprocessing) send exceptions back pickled.
    import pickle

    for lib in (torch, ember):
        with pytest.raises(lib.linalg.LinAlgError) as info:
            lib.linalg.cholesky(-lib.eye(2))
        again = pickle.loads(pickle.dumps(info.value))
        assert type(again) is lib.linalg.LinAlgError and type(again).__name__ == "_LinAlgError"
        assert str(again) == str(info.value)
