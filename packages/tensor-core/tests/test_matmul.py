"""Matrix products against PyTorch: matmul's rank cases, mm/bmm/mv/dot and their add* forms,
outer/inner, einsum, tensordot, chain_matmul/multi_dot; layouts, dtypes, empty shapes, errors."""

from __future__ import annotations

import math

import pytest

import ember

from conftest import assert_same, make_pair, torch

NUM_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "int16"]


def _tol(name):
    # Half types: PyTorch and ember both accumulate in float32 but in different orders.
    return {"float16": {"rtol": 2e-3, "atol": 2e-2}, "bfloat16": {"rtol": 1.6e-2, "atol": 1e-1}}.get(name, {})


def _pair(shape, name, layout="contiguous", seed=0):
    lo, hi = (-3, 3) if name in ("int8", "uint8", "int16") else (-5, 5)
    if layout != "sliced":
        return make_pair(shape, name, low=lo, high=hi, seed=seed, layout=layout)
    # Every other row of a twice-as-tall tensor (built with as_strided: no indexing needed).
    e, t = make_pair((shape[0] * 2,) + tuple(shape[1:]), name, low=lo, high=hi, seed=seed)
    stride = (2 * t.stride(0),) + t.stride()[1:]
    return ember.as_strided(e, shape, stride, 0), torch.as_strided(t, shape, stride, 0)


MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3,)),
    ((5, 2, 3), (3, 4)),
    ((3,), (5, 3, 4)),
    ((2, 3), (5, 3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((5, 1, 2, 3), (4, 3, 2)),
    ((1, 2, 3), (6, 3, 1)),
    ((2, 0, 3), (3, 4)),
    ((2, 3, 0), (0, 4)),
    ((0,), (0,)),
    ((0, 2, 3), (3, 1)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_ranks(sa, sb):
    ea, ta = _pair(sa, "float32", seed=1)
    eb, tb = _pair(sb, "float32", seed=2)
    assert_same(ember.matmul(ea, eb), torch.matmul(ta, tb))
    assert_same(ea @ eb, ta @ tb)


@pytest.mark.parametrize("name", NUM_DTYPES)
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((4, 5), (5, 3)), ((2, 3, 4), (2, 4, 5))])
def test_matmul_dtypes(name, sa, sb):
    ea, ta = _pair(sa, name, seed=3)
    eb, tb = _pair(sb, name, seed=4)
    assert_same(ember.matmul(ea, eb), torch.matmul(ta, tb), **_tol(name))


@pytest.mark.parametrize("la", ["contiguous", "transposed", "sliced", "expanded"])
@pytest.mark.parametrize("lb", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("name", ["float32", "float64", "int32"])
def test_mm_layouts(la, lb, name):
    ea, ta = _pair((6, 5), name, layout=la, seed=5)
    eb, tb = _pair((5, 7), name, layout=lb, seed=6)
    assert_same(ember.mm(ea, eb), torch.mm(ta, tb))


@pytest.mark.parametrize("la", ["contiguous", "transposed", "sliced", "expanded"])
@pytest.mark.parametrize("lb", ["contiguous", "transposed", "expanded"])
def test_bmm_layouts(la, lb):
    ea, ta = _pair((4, 3, 5), "float64", layout=la, seed=7)
    eb, tb = _pair((4, 5, 2), "float64", layout=lb, seed=8)
    assert_same(ember.bmm(ea, eb), torch.bmm(ta, tb))


def test_strided_vectors_and_columns():
    ebase, tbase = _pair((8, 9), "float32", seed=9)

    def view(shape, stride, offset):
        return ember.as_strided(ebase, shape, stride, offset), torch.as_strided(tbase, shape, stride, offset)

    # Non-unit-stride rows/columns and vectors taken from columns.
    (ea, ta), (ev, tv) = view((4, 4), (18, 2), 1), view((4,), (18,), 9)
    assert_same(ember.mv(ea, ev), torch.mv(ta, tv))
    (ea, ta), (eb, tb) = view((4,), (1,), 0), view((4, 3), (9, 3), 0)
    assert_same(ember.matmul(ea, eb), torch.matmul(ta, tb))
    (ea, ta), (eb, tb) = view((8,), (9,), 2), view((8,), (1,), 10)
    assert_same(ember.dot(ea, eb), torch.dot(ta, tb))
    # A matrix whose both strides are non-unit is packed.
    (ea, ta), (eb, tb) = view((4, 5), (18, 2), 0), view((5, 3), (9, 3), 0)
    assert_same(ember.mm(ea, eb), torch.mm(ta, tb))
    assert_same(ember.mm(eb.t(), ea.t()), torch.mm(tb.t(), ta.t()))
    # An expanded (stride 0) vector.
    ev, tv = ember.ones(1).expand(9), torch.ones(1).expand(9)
    assert_same(ember.mv(ebase, ev), torch.mv(tbase, tv))


@pytest.mark.parametrize("threads", [1, 2])
def test_bigger_batches_match(threads):
    # With 2 threads the batch of small products runs on OpenMP threads (BLAS set to 1 thread).
    before = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        ea, ta = _pair((40, 17, 33), "float32", seed=10)
        eb, tb = _pair((40, 33, 9), "float32", seed=11)
        assert_same(ember.bmm(ea, eb), torch.bmm(ta, tb), rtol=1e-5, atol=1e-4)
        assert_same(ember.bmm(ea.double(), eb.double()), torch.bmm(ta.double(), tb.double()))
    finally:
        ember.set_num_threads(before)
    ea, ta = _pair((130, 70), "float64", seed=12)
    eb, tb = _pair((70, 90), "float64", seed=13)
    assert_same(ember.mm(ea, eb), torch.mm(ta, tb))
    ea, ta = _pair((3, 70, 60), "int64", seed=14)
    eb, tb = _pair((3, 60, 20), "int64", seed=15)
    assert_same(ember.matmul(ea, eb), torch.matmul(ta, tb))


@pytest.mark.parametrize("la", ["contiguous", "transposed", "sliced"])
def test_small_kernel_split(la):
    # M*N*K just above 1e6: the float32 product is split in two row halves.
    ea, ta = _pair((2, 128, 64), "float32", layout=la, seed=18)
    eb, tb = _pair((2, 64, 128), "float32", layout="transposed", seed=19)
    assert_same(ember.matmul(ea, eb), torch.matmul(ta, tb), rtol=1e-5, atol=1e-4)
    ei, ti = _pair((128,), "float32", seed=20)
    assert_same(ember.baddbmm(ei, ea, eb, beta=0.5, alpha=2), torch.baddbmm(ti, ta, tb, beta=0.5, alpha=2),
                rtol=1e-5, atol=1e-3)


def test_integer_wraparound():
    ea, ta = make_pair((4, 9), "int8", low=60, high=120, seed=16)
    eb, tb = make_pair((9, 3), "int8", low=60, high=120, seed=17)
    assert_same(ember.mm(ea, eb), torch.mm(ta, tb))


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "int64"])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (2, 0)])
def test_add_forms(name, beta, alpha):
    if name == "int64":
        beta, alpha = int(beta), int(alpha)
    tol = _tol(name)
    ei, ti = _pair((3, 4), name, seed=20)
    ei1, ti1 = _pair((4,), name, seed=21)
    em1, tm1 = _pair((3, 5), name, seed=22)
    em2, tm2 = _pair((5, 4), name, seed=23)
    eb1, tb1 = _pair((2, 3, 5), name, seed=24)
    eb2, tb2 = _pair((2, 5, 4), name, seed=25)
    ev, tv = _pair((5,), name, seed=26)
    ew, tw = _pair((3,), name, seed=27)
    kw = {"beta": beta, "alpha": alpha}
    assert_same(ember.addmm(ei, em1, em2, **kw), torch.addmm(ti, tm1, tm2, **kw), **tol)
    assert_same(ember.addmm(ei1, em1, em2, **kw), torch.addmm(ti1, tm1, tm2, **kw), **tol)  # broadcast input
    assert_same(ember.baddbmm(ei, eb1, eb2, **kw), torch.baddbmm(ti, tb1, tb2, **kw), **tol)
    assert_same(ember.addbmm(ei, eb1, eb2, **kw), torch.addbmm(ti, tb1, tb2, **kw), **tol)
    assert_same(ember.addmv(ew, em1, ev, **kw), torch.addmv(tw, tm1, tv, **kw), **tol)


def test_beta_zero_ignores_nan():
    nan = float("nan")
    em1, tm1 = _pair((3, 5), "float32", seed=30)
    em2, tm2 = _pair((5, 4), "float32", seed=31)
    ev, tv = _pair((5,), "float32", seed=32)
    assert_same(ember.addmm(ember.full((3, 4), nan), em1, em2, beta=0),
                torch.addmm(torch.full((3, 4), nan), tm1, tm2, beta=0))
    assert_same(ember.addmv(ember.full((3,), nan), em1, ev, beta=0),
                torch.addmv(torch.full((3,), nan), tm1, tv, beta=0))
    eb, tb = _pair((2, 3, 5), "float64", seed=33)
    ec, tc = _pair((2, 5, 1), "float64", seed=34)
    assert_same(ember.baddbmm(ember.full((2, 3, 1), nan, dtype=ember.float64), eb, ec, beta=0),
                torch.baddbmm(torch.full((2, 3, 1), nan, dtype=torch.float64), tb, tc, beta=0))


def test_inplace_and_out():
    ei, ti = _pair((3, 4), "float32", seed=40)
    em1, tm1 = _pair((3, 5), "float32", seed=41)
    em2, tm2 = _pair((5, 4), "float32", seed=42)
    version = ei._version
    ei.addmm_(em1, em2, beta=2, alpha=0.5)
    ti.addmm_(tm1, tm2, beta=2, alpha=0.5)
    assert_same(ei, ti)
    assert ei._version > version
    out = ember.zeros(0)
    res = ember.mm(em1, em2, out=out)
    assert res is out
    assert_same(out, torch.mm(tm1, tm2))
    assert_same(ember.matmul(em1, em2, out=ember.zeros(3, 4)), torch.mm(tm1, tm2))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double"):
        ember.mm(em1, em2, out=ember.zeros(3, 4, dtype=ember.float64))


@pytest.mark.parametrize("name", ["float32", "int32", "bool"])
def test_outer_inner_vdot(name):
    ea, ta = _pair((4,), name, seed=50)
    eb, tb = _pair((3,), name, seed=51)
    assert_same(ember.outer(ea, eb), torch.outer(ta, tb))
    assert_same(ember.ger(ea, eb), torch.ger(ta, tb))
    if name != "bool":
        assert_same(ember.vdot(ea, ea), torch.vdot(ta, ta))
        em, tm = _pair((2, 3, 4), name, seed=52)
        en, tn = _pair((5, 4), name, seed=53)
        assert_same(ember.inner(em, en), torch.inner(tm, tn))
        assert_same(ember.inner(ea, ea), torch.inner(ta, ta))
        assert_same(ember.inner(em, ember.tensor(2).to(em.dtype)), torch.inner(tm, torch.tensor(2).to(tm.dtype)))


def test_outer_promotes():
    ea, ta = _pair((4,), "int32", seed=54)
    eb, tb = _pair((3,), "float64", seed=55)
    assert_same(ember.outer(ea, eb), torch.outer(ta, tb))


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 2, 3)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(6, 1, 3, 4), (2, 4, 5)]),
    ("i...->...", [(3, 2, 4)]),
    ("...,...->...", [(3, 1), (4,)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),
    ("ab,bc,cd->", [(2, 3), (3, 4), (4, 2)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ik,jk,ij->i", [(3, 4), (5, 4), (3, 5)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("ij,j->", [(3, 4), (4,)]),
    ("ab,ab,ab->a", [(3, 2), (3, 2), (3, 2)]),
    ("a b, b c -> a c", [(2, 3), (3, 4)]),
    ("iJ,Jk->ki", [(2, 3), (3, 4)]),
    ("bi,bi->b", [(1, 4), (3, 4)]),
    ("ij,jk->ik", [(0, 4), (4, 5)]),
    ("ij,jk->ik", [(3, 0), (0, 5)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES)
def test_einsum(eq, shapes):
    pairs = [_pair(s, "float64", seed=60 + i) for i, s in enumerate(shapes)]
    got = ember.einsum(eq, *[p[0] for p in pairs])
    assert_same(got, torch.einsum(eq, *[p[1] for p in pairs]))
    # Operands may also be given as one list.
    assert_same(ember.einsum(eq, [p[0] for p in pairs]), torch.einsum(eq, [p[1] for p in pairs]))


@pytest.mark.parametrize("eq,shapes", [("ij->", [(2, 3)]), ("ij,k->", [(2, 3), (4,)]), ("ij,j->i", [(2, 3), (3,)]),
                                       ("ii->i", [(3, 3)])])
def test_einsum_integer_dtypes(eq, shapes):
    # Summing a label out of one operand promotes integers to int64, as torch.sum does.
    pairs = [_pair(s, "int32", seed=75 + i) for i, s in enumerate(shapes)]
    assert_same(ember.einsum(eq, *[p[0] for p in pairs]), torch.einsum(eq, *[p[1] for p in pairs]))


def test_einsum_sublist_and_layout():
    ea, ta = _pair((3, 4), "float32", layout="transposed", seed=70)
    eb, tb = _pair((4, 5), "float32", layout="sliced", seed=71)
    assert_same(ember.einsum(ea, [0, 1], eb, [1, 2], [0, 2]), torch.einsum(ta, [0, 1], tb, [1, 2], [0, 2]))
    assert_same(ember.einsum("ij,jk->ik", ea, eb), torch.einsum("ij,jk->ik", ta, tb))


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk", [(2, 3), (4, 5)]),
    ("ii", [(2, 3)]),
    ("ij", [(2, 3, 4)]),
    ("ij,jk", [(2, 3)]),
    ("ij", [(2, 3), (3, 4)]),
    ("ij->k", [(2, 3)]),
    ("ij->ii", [(2, 3)]),
    ("i.j", [(2, 3)]),
    ("i1", [(2, 3)]),
    ("...ij,...jk", [(2, 2, 3), (3, 3, 5)]),
    ("ijk...", [(2, 3)]),
])
def test_einsum_errors(eq, shapes):
    ops = [ember.ones(*s) for s in shapes]
    with pytest.raises(RuntimeError):
        torch.einsum(eq, *[torch.ones(*s) for s in shapes])
    with pytest.raises(RuntimeError):
        ember.einsum(eq, *ops)


def test_einsum_dtype_mismatch():
    with pytest.raises(RuntimeError):
        ember.einsum("ij,jk", ember.ones(2, 3), ember.ones(3, 2, dtype=ember.float64))


@pytest.mark.parametrize("sa,sb,dims", [
    ((3, 4, 5), (4, 5, 6), 2),
    ((3, 4), (4, 5), 1),
    ((3, 4), (5, 6), 0),
    ((3, 4, 5), (5, 3, 2), ([0, 2], [1, 0])),
    ((3, 4, 5), (6, 5), ([2], [1])),
    ((3, 4, 5), (5, 4), [[1, 2], [1, 0]]),
    ((2, 1), (3, 2), ([1], [0])),
    ((3, 4), (3, 4), 2),
])
def test_tensordot(sa, sb, dims):
    ea, ta = _pair(sa, "float64", seed=80)
    eb, tb = _pair(sb, "float64", seed=81)
    assert_same(ember.tensordot(ea, eb, dims=dims), torch.tensordot(ta, tb, dims=dims))


def test_tensordot_errors():
    a, b = ember.ones(2, 3), ember.ones(4, 5)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        ember.tensordot(a, b, dims=1)
    with pytest.raises(RuntimeError, match="dims >= 0"):
        ember.tensordot(a, b, dims=-1)
    with pytest.raises(RuntimeError, match="dims < ndim_a or ndim_b"):
        ember.tensordot(a, b, dims=3)
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.tensordot(a, ember.ones(3, 5, dtype=ember.float64), dims=1)
    with pytest.raises(TypeError):
        torch.tensordot(torch.ones(2, 3), torch.ones(3, 2), dims=(1, 0))
    with pytest.raises(TypeError):
        ember.tensordot(a, ember.ones(3, 2), dims=(1, 0))


def test_chain_matmul_multi_dot():
    pairs = [_pair(s, "float64", seed=90 + i) for i, s in enumerate([(3, 10), (10, 2), (2, 8), (8, 4)])]
    es, ts = [p[0] for p in pairs], [p[1] for p in pairs]
    assert_same(ember.chain_matmul(*es), torch.linalg.multi_dot(ts))
    assert_same(ember.linalg.multi_dot(es), torch.linalg.multi_dot(ts))
    ev, tv = _pair((3,), "float64", seed=95)
    ew, tw = _pair((4,), "float64", seed=96)
    assert_same(ember.linalg.multi_dot([ev] + es + [ew]), torch.linalg.multi_dot([tv] + ts + [tw]))
    assert_same(ember.linalg.matmul(es[0], es[1]), torch.linalg.matmul(ts[0], ts[1]))
    with pytest.raises(RuntimeError):
        ember.linalg.multi_dot([es[0]])


ERROR_CASES = [
    (lambda m: m.mm(m.ones(2, 3), m.ones(4, 5)), RuntimeError,
     r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda m: m.matmul(m.ones(2, 3), m.ones(4, 5)), RuntimeError, r"shapes cannot be multiplied"),
    (lambda m: m.mm(m.ones(2, 3), m.ones(3, 2, dtype=m.float64)), RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: float != double"),
    (lambda m: m.matmul(m.ones(2, 3), m.ones(3, 2, dtype=m.float64)), RuntimeError, "same dtype"),
    (lambda m: m.matmul(m.tensor(1.0), m.ones(2, 3)), RuntimeError, "at least 1D, but they are 0D and 2D"),
    (lambda m: m.matmul(m.ones(2, 3), m.tensor(1.0)), RuntimeError, "2D and 0D"),
    (lambda m: m.mm(m.ones(3), m.ones(3, 2)), RuntimeError, "self must be a matrix"),
    (lambda m: m.bmm(m.ones(2, 2, 3), m.ones(2, 4, 5)), RuntimeError,
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[2, 4\]"),
    (lambda m: m.bmm(m.ones(2, 3), m.ones(3, 3, 5)), RuntimeError, "batch1 must be a 3D tensor"),
    (lambda m: m.mv(m.ones(2, 3), m.ones(4)), RuntimeError, r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda m: m.mv(m.ones(2, 3), m.ones(3, 1)), RuntimeError, "vector \\+ matrix @ vector expected, got 1, 2, 2"),
    (lambda m: m.dot(m.ones(3), m.ones(4)), RuntimeError, "inconsistent tensor size"),
    (lambda m: m.dot(m.ones(3), m.ones(3, 1)), RuntimeError, "1D tensors expected, but got 1D and 2D tensors"),
    (lambda m: m.dot(m.ones(3), m.ones(3, dtype=m.float64)), RuntimeError, "expected both vectors to have same dtype"),
    (lambda m: m.matmul(m.ones(3, 2, 3), m.ones(2, 3, 5)), RuntimeError, "must match the size of tensor b"),
    (lambda m: m.matmul(m.ones(2, 2, 3), m.ones(4)), RuntimeError, "size mismatch"),
    (lambda m: m.addmm(m.ones(3, 2), m.ones(2, 3), m.ones(3, 2)), RuntimeError, "expanded size"),
    (lambda m: m.addmm(m.ones(2, 2, dtype=m.float64), m.ones(2, 3), m.ones(3, 2)), RuntimeError, "same dtype"),
    (lambda m: m.addmv(m.ones(3), m.ones(2, 3), m.ones(3)), RuntimeError, "size mismatch"),
    (lambda m: m.baddbmm(m.ones(3, 2), m.ones(4, 2, 3), m.ones(4, 3, 2)), RuntimeError, "expanded size"),
    (lambda m: m.outer(m.ones(3), m.ones(2, 2)), RuntimeError, "Expected 1-D argument vec2"),
    (lambda m: m.inner(m.ones(3), m.ones(2, 4)), RuntimeError, "last dimension must match"),
    (lambda m: m.mm(m.ones(2, 3, dtype=m.bool), m.ones(3, 2, dtype=m.bool)), NotImplementedError, "Bool"),
    (lambda m: m.dot(m.ones(3, dtype=m.bool), m.ones(3, dtype=m.bool)), NotImplementedError, "Bool"),
]


@pytest.mark.parametrize("fn,exc,msg", ERROR_CASES)
def test_errors(fn, exc, msg):
    with pytest.raises(exc, match=msg):
        fn(torch)
    with pytest.raises(exc, match=msg):
        fn(ember)


@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 4)), ((5, 2, 3), (3,)), ((3,), (3,)), ((2, 1, 2, 3), (4, 3, 5))])
def test_meta(sa, sb):
    a = ember.zeros(*sa, device="meta")
    b = ember.zeros(*sb, device="meta")
    r = ember.matmul(a, b)
    assert r.device.type == "meta"
    assert tuple(r.shape) == tuple(torch.matmul(torch.empty(*sa), torch.empty(*sb)).shape)
    assert tuple(ember.einsum("...ij,...jk", a, b).shape) == tuple(r.shape) if len(sa) > 1 and len(sb) > 1 else True
    with pytest.raises(RuntimeError):
        ember.mm(ember.zeros(2, 3, device="meta"), ember.zeros(4, 5, device="meta"))


def test_meta_ops_directly():
    ops = ember.ops
    m = "meta"
    assert ops["mm"](ember.zeros(2, 3, device=m), ember.zeros(3, 4, device=m)).shape == (2, 4)
    assert ops["bmm"](ember.zeros(5, 2, 3, device=m), ember.zeros(5, 3, 4, device=m)).shape == (5, 2, 4)
    assert ops["mv"](ember.zeros(2, 3, device=m), ember.zeros(3, device=m)).shape == (2,)
    assert ops["dot"](ember.zeros(3, device=m), ember.zeros(3, device=m)).shape == ()
    assert ops["addmm"](ember.zeros(4, device=m), ember.zeros(2, 3, device=m), ember.zeros(3, 4, device=m)).shape \
        == (2, 4)
    assert ops["addbmm"](ember.zeros(2, 4, device=m), ember.zeros(5, 2, 3, device=m),
                         ember.zeros(5, 3, 4, device=m)).shape == (2, 4)
    assert ops["baddbmm"](ember.zeros(1, device=m), ember.zeros(5, 2, 3, device=m),
                          ember.zeros(5, 3, 4, device=m)).shape == (5, 2, 4)
    assert ops["addmv"](ember.zeros(2, device=m), ember.zeros(2, 3, device=m), ember.zeros(3, device=m)).shape == (2,)


def test_methods():
    ea, ta = _pair((3, 4), "float32", seed=100)
    eb, tb = _pair((4, 2), "float32", seed=101)
    assert_same(ea.mm(eb), ta.mm(tb))
    assert_same(ea.matmul(eb), ta.matmul(tb))
    ev, tv = _pair((4,), "float32", seed=102)
    assert_same(ea.mv(ev), ta.mv(tv))
    assert_same(ev.dot(ev), tv.dot(tv))
    assert math.isclose(float(ev.dot(ev).item()), float(tv.dot(tv).item()), rel_tol=1e-6)


def test_native_kernel_rejects_bad_input():
    from ember import _C

    out = ember.zeros(1, 2, 2)
    with pytest.raises(RuntimeError):
        _C.matmul_(out, ember.ones(1, 2, 3), ember.ones(1, 4, 2), 1.0, 0)
    with pytest.raises(RuntimeError):
        _C.matmul_(out, ember.ones(1, 2, 3), ember.ones(1, 3, 2, dtype=ember.float64), 1.0, 0)
    with pytest.raises(ValueError):
        _C.matmul_(out, ember.ones(2, 3), ember.ones(3, 2), 1.0, 0)


@pytest.mark.parametrize("name", ["float32", "int32"])
def test_addr_and_integer_scalars(name):
    ei, ti = _pair((3, 2), name, seed=110)
    ev, tv = _pair((3,), name, seed=111)
    ew, tw = _pair((2,), name, seed=112)
    for beta, alpha in [(1, 1), (3, 2), (0, 2)]:
        assert_same(ember.addr(ei, ev, ew, beta=beta, alpha=alpha), torch.addr(ti, tv, tw, beta=beta, alpha=alpha))
    if name == "int32":
        # PyTorch truncates float alpha/beta for integer tensors.
        em1, tm1 = _pair((3, 4), name, seed=113)
        em2, tm2 = _pair((4, 2), name, seed=114)
        assert_same(ember.addmm(ei, em1, em2, beta=2.7, alpha=1.5), torch.addmm(ti, tm1, tm2, beta=2.7, alpha=1.5))


@pytest.mark.parametrize("name", ["int64", "int8", "float64"])
def test_empty_inner_dim(name):
    ei, ti = _pair((2, 3), name, seed=120)
    ea, ta = _pair((2, 0), name, seed=121)
    eb, tb = _pair((0, 3), name, seed=122)
    assert_same(ember.mm(ea, eb), torch.mm(ta, tb))
    assert_same(ember.addmm(ei, ea, eb, beta=2), torch.addmm(ti, ta, tb, beta=2))
    assert_same(ember.bmm(ember.zeros(4, 2, 0, dtype=ea.dtype), ember.zeros(4, 0, 5, dtype=ea.dtype)),
                torch.bmm(torch.zeros(4, 2, 0, dtype=ta.dtype), torch.zeros(4, 0, 5, dtype=ta.dtype)))


def test_method_surface_matches_torch():
    for name in ["mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "addmm_", "addmv", "addmv_",
                 "baddbmm", "baddbmm_", "addbmm", "addbmm_", "addr", "matmul", "einsum", "tensordot",
                 "chain_matmul", "multi_dot"]:
        assert hasattr(ember.Tensor, name) == hasattr(torch.Tensor, name), name


# addmm (and so Linear with a bias) checks dtypes before shapes, self against mat2 first.
ADDMM_DTYPE_ERRORS = {
    "mat1_long": lambda L: L.addmm(L.zeros(2), L.ones(2, 3, dtype=L.int64), L.ones(4, 2)),
    "self_long": lambda L: L.addmm(L.zeros(2, dtype=L.int64), L.ones(2, 3), L.ones(3, 2)),
    "mat2_long": lambda L: L.addmm(L.zeros(2), L.ones(2, 3), L.ones(3, 2, dtype=L.int64)),
    "linear_long_input": lambda L: L.nn.functional.linear(L.ones(2, 3, dtype=L.int64), L.ones(2, 3), L.ones(2)),
    "linear_double_input": lambda L: L.nn.functional.linear(L.ones(2, 3, dtype=L.float64), L.ones(2, 3), L.ones(2)),
}


@pytest.mark.parametrize("name", list(ADDMM_DTYPE_ERRORS))
def test_addmm_dtype_errors_match_torch(name):
    with pytest.raises(RuntimeError) as expected:
        ADDMM_DTYPE_ERRORS[name](torch)
    with pytest.raises(RuntimeError) as got:
        ADDMM_DTYPE_ERRORS[name](ember)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("make_a", ["contiguous", "expanded", "permuted", "requires_grad", "b_requires_grad"])
def test_matmul_folds_batch_dims_into_mm_only_where_pytorch_does(make_a):
    # PyTorch folds a (B, M, K) @ (K, N) product into one mm only when a's batch dims collapse
    # without a copy (or something requires grad); an expanded a runs as bmm. Profilers and
    # FlopCounterMode see the op, so ember takes the same path.
    import numpy as np
    from torch.utils._python_dispatch import TorchDispatchMode

    from ember._src.dispatch import DispatchMode

    class TorchOps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    class EmberOps(DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    base = np.random.default_rng(0).standard_normal((3, 6, 5)).astype("float32")
    found = []
    for lib, mode in ((torch, TorchOps), (ember, EmberOps)):
        whole, first = lib.tensor(base), lib.tensor(base[0])
        a = {"contiguous": whole, "expanded": first.expand(2, 6, 5), "permuted": whole.permute(1, 0, 2),
             "requires_grad": first.clone().requires_grad_().expand(2, 6, 5),
             "b_requires_grad": first.expand(2, 6, 5)}[make_a]
        b = lib.tensor(base[1, :5, :4]).requires_grad_(make_a == "b_requires_grad")
        seen = []
        with mode():
            out = lib.matmul(a, b)
        found.append(({"mm", "bmm"} & set(seen), out.detach().numpy()))
    assert found[1][0] == found[0][0]
    np.testing.assert_allclose(found[1][1], found[0][1], rtol=1e-5, atol=1e-5)
