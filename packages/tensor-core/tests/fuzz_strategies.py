"""Hypothesis building blocks for the differential fuzzer (test_fuzz_ops.py).

Everything here draws *pairs*: the same call prepared for ember and for PyTorch. Tensors are
built on the torch side first and copied into ember value by value, then both are re-viewed
with the same ``as_strided`` geometry (permuted, stepped, expanded, offset), so the two
libraries see identical inputs in identical layouts. Values come from a NumPy generator
seeded by hypothesis (drawing every element through hypothesis is far too slow), with a
drawn share of edge values (NaN, +-inf, -0.0, integer extremes).

Complex dtypes are left out on purpose (they are being added to the core in parallel).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import ember

ALL_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
E_DT = {n: getattr(ember, n) for n in ALL_DTYPES}
T_DT = {n: getattr(torch, n) for n in ALL_DTYPES}

# -- hypothesis profiles --------------------------------------------------------------------------
# 'ci' keeps the whole fuzz suite near a minute on 2 cores and is reproducible (derandomize);
# 'deep' is for `nox -s fuzz`. EMBER_FUZZ_PROFILE picks one (default 'ci').
_COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)
settings.register_profile("ci", max_examples=12, derandomize=True, database=None, **_COMMON)
settings.register_profile("deep", max_examples=400, **_COMMON)
settings.register_profile("dev", max_examples=60, **_COMMON)
# '100k' is the release run (`nox -s fuzz100k`): 324 examples for each of the
# 311 op and gradient tests, 100,764 cases, seeded by --hypothesis-seed in that session.
settings.register_profile("100k", max_examples=324, database=None, **_COMMON)
settings.load_profile(os.environ.get("EMBER_FUZZ_PROFILE", "ci"))


# -- schemas --------------------------------------------------------------------------------------


@dataclass
class Arg:
    type: str  # 'Tensor', 'int[]?', 'Scalar|Tensor?', ...
    name: str
    default: str | None = None
    kw_only: bool = False

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def base(self) -> str:
        """The type without alias annotations, optional mark or list size: 'int[]', 'Tensor'."""
        t = re.sub(r"\([a-z]!?\)", "", self.type).rstrip("?")
        return re.sub(r"\[\d+\]", "[]", t)


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_schema(schema: str) -> list[Arg]:
    """The arguments of a dispatcher schema ``name(Type a, Type b=default, *, ...) -> ret``.

    dispatch.define only reads the name; the fuzzer needs the rest to know what to draw.
    """
    inner = schema[schema.index("(") + 1 : schema.rindex(") ->")]
    args, kw_only = [], False
    for part in _split_top(inner):
        if part == "*":
            kw_only = True
            continue
        decl, _, default = part.partition("=")
        type_, name = decl.strip().rsplit(" ", 1)
        args.append(Arg(type_, name, default.strip() or None, kw_only))
    return args


# -- tensors --------------------------------------------------------------------------------------


class Pair(tuple):
    """(ember tensor, torch tensor): same values, dtype, shape and strides."""

    @property
    def e(self):
        return self[0]

    @property
    def t(self):
        return self[1]


def _float_specials():
    return np.array(
        [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 1e4, -1e4, 1e-6, 65504.0, 3e38]
    )


def _int_specials(name):
    info = np.iinfo(name)
    return np.array([info.min, info.max, 0, 1, -1 if name != "uint8" else 2, info.max - 1], dtype=np.int64)


def values(
    rng: np.random.Generator, name: str, n: int, low: float, high: float, special: float, ties: bool = True
) -> np.ndarray:
    """n values for dtype ``name`` (float64/int64/bool), a ``special`` share of them edge values."""
    if name == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if name in INT_DTYPES:
        info = np.iinfo(name)
        lo, hi = max(int(np.floor(low)), int(info.min)), min(int(np.ceil(high)), int(info.max))
        arr = rng.integers(lo, max(hi, lo) + 1, n).astype(np.int64)
        specials = _int_specials(name)
    else:
        arr = rng.uniform(low, high, n)
        if ties and rng.random() < 0.3:  # small integers and halves: exact ties for rounding, sorting, modes
            arr = np.round(arr * 2) / 2
        specials = _float_specials()
    if special > 0 and n:
        mask = rng.random(n) < special
        arr[mask] = rng.choice(specials, int(mask.sum()))
    return arr


@st.composite
def shapes(draw, min_dims=0, max_dims=4, min_side=0, max_side=5):
    """Shapes with 0-d, empty, size-1 and odd sizes; small enough to keep the suite fast."""
    nd = draw(st.integers(min_dims, max_dims))
    side = st.one_of(st.just(1), st.integers(min_side, max_side))
    shape = tuple(draw(side) for _ in range(nd))
    if draw(st.integers(0, 9)) == 0 and nd:  # occasionally empty
        i = draw(st.integers(0, nd - 1))
        shape = shape[:i] + (0,) + shape[i + 1 :]
    return tuple(max(s, min_side) for s in shape)


@st.composite
def layouts(draw, shape):
    """A strided geometry for ``shape``: (strides, offset, storage size, description)."""
    nd = len(shape)
    perm = list(range(nd))
    kind = draw(
        st.sampled_from(["contiguous", "contiguous", "permuted", "stepped", "expanded", "offset", "mixed"])
    )
    steps = [1] * nd
    offset = 0
    expanded = set()
    if kind in ("permuted", "mixed") and nd >= 2:
        perm = draw(st.permutations(range(nd)))
    if kind in ("stepped", "mixed") and nd:
        steps = [draw(st.sampled_from([1, 2, 3])) for _ in range(nd)]
    if kind in ("offset", "mixed"):
        offset = draw(st.integers(1, 4))
    if kind in ("expanded", "mixed") and nd:
        expanded = {i for i in range(nd) if draw(st.booleans()) and shape[i] != 0}
    # Physical sizes in memory order (outermost first), then element strides.
    phys = [shape[d] * steps[d] if d not in expanded else 1 for d in perm]
    phys_stride, acc = [0] * nd, 1
    for i in reversed(range(nd)):
        phys_stride[i] = acc
        acc *= max(phys[i], 1)
    stride = [0] * nd
    for pos, d in enumerate(perm):
        stride[d] = 0 if d in expanded else phys_stride[pos] * steps[d]
    numel = int(np.prod(shape)) if shape else 1
    extent = 0 if numel == 0 else sum((s - 1) * st_ for s, st_ in zip(shape, stride)) + 1
    return tuple(stride), offset, offset + extent, kind


def pair_from_numpy(arr: np.ndarray, name: str) -> Pair:
    """A contiguous pair holding exactly the values torch gets when converting ``arr``."""
    t = torch.from_numpy(np.array(arr, copy=True)).to(T_DT[name])
    if name == "bfloat16":
        e = ember.from_numpy(t.float().numpy().copy()).to(ember.bfloat16)
    else:
        e = ember.from_numpy(t.numpy().copy())
    return Pair((e, t))


# Gradient mode (test_fuzz_ops.test_grad_matches_torch): every float tensor a builder draws becomes
# a float64 leaf that requires grad, with continuous values (no ties, no edge values, so that
# every op is differentiable at the drawn point), and is recorded in LEAVES.
GRAD_MODE = {"on": False}
LEAVES: list = []


@st.composite
def tensor_pairs(
    draw, shape=None, dtype=None, dtypes=ALL_DTYPES, low=-5.0, high=5.0, special=None, layout=True, **shape_kw
):
    """A Pair of the given (or a drawn) shape and dtype, in a drawn memory layout."""
    shape = draw(shapes(**shape_kw)) if shape is None else tuple(shape)
    name = dtype or draw(st.sampled_from(dtypes))
    grad = (
        GRAD_MODE["on"]
        and (dtype is None or dtype in FLOAT_DTYPES)
        and any(d in FLOAT_DTYPES for d in dtypes)
    )
    if grad:
        name, special = "float64", 0.0
    if layout:
        stride, offset, size, _ = draw(layouts(shape))
    else:
        numel = int(np.prod(shape)) if shape else 1
        stride, offset, size = tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape))), 0, numel
    if special is None:
        special = draw(st.sampled_from([0.0, 0.0, 0.1, 0.5]))
    seed = draw(st.integers(0, 2**32 - 1))
    base = pair_from_numpy(
        values(np.random.default_rng(seed), name, size, low, high, special, ties=not grad), name
    )
    out = Pair((base.e.as_strided(shape, stride, offset), base.t.as_strided(shape, stride, offset)))
    if grad:  # a strided leaf: detach keeps the layout
        out = Pair((out.e.detach().requires_grad_(), out.t.detach().requires_grad_()))
        LEAVES.append(out)
    return out


def broadcast_shape_for(draw, shape):
    """A shape that broadcasts with ``shape``: a suffix, with some sides set to 1, maybe extra dims."""
    nd = len(shape)
    keep = draw(st.integers(0, nd))
    out = [1 if draw(st.integers(0, 3)) == 0 else s for s in shape[nd - keep :]]
    if draw(st.integers(0, 5)) == 0:
        out = [draw(st.integers(1, 3))] + out
    return tuple(out)


def index_pair(draw, size: int, shape, dtype="int64", allow_bad=True) -> Pair:
    """Integer indices into a dim of ``size`` (negatives allowed), rarely out of range."""
    bad = allow_bad and draw(st.integers(0, 14)) == 0
    lo, hi = (-size, size - 1) if size else (0, 0)
    if bad:
        lo, hi = hi + 1, hi + 3
    seed = draw(st.integers(0, 2**32 - 1))
    n = int(np.prod(shape)) if shape else 1
    vals = (
        np.random.default_rng(seed).integers(lo, hi + 1, n).reshape(shape)
        if (size or bad)
        else np.zeros(shape, dtype=np.int64)
    )
    return pair_from_numpy(vals, dtype)


# -- calls and comparison -------------------------------------------------------------------------


@dataclass
class Call:
    """One drawn call: ``e()`` runs it on ember, ``t()`` on torch."""

    e: object
    t: object
    desc: str = ""
    rtol: float = 1.0  # multipliers of the dtype's tolerance
    atol: float = 1.0
    check: object = None  # optional extra check(e_result, t_result, call)
    inputs: list = field(default_factory=list)  # pairs whose values after the call must match too
    tags: set = field(default_factory=set)  # situations a known divergence can name (see KNOWN_DIVERGENCES)


_TOL = {
    "float16": (2e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
    "float32": (1e-5, 1e-5),
    "float64": (1e-10, 1e-10),
}


def to_torch(x):
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.float().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(np.array(x.numpy(), copy=True))


def dtype_name(x) -> str:
    return str(x.dtype).split(".")[-1]


def assert_match(e_res, t_res, rtol=1.0, atol=1.0, where="result"):
    """ember result == torch result: structure, shapes, dtypes, NaN positions, values."""
    if isinstance(t_res, (tuple, list)):
        assert isinstance(e_res, (tuple, list)), f"{where}: ember gave {type(e_res)}, torch a sequence"
        assert len(e_res) == len(t_res), f"{where}: {len(e_res)} vs {len(t_res)} results"
        for i, (a, b) in enumerate(zip(e_res, t_res)):
            assert_match(a, b, rtol, atol, f"{where}[{i}]")
        return
    if not isinstance(t_res, torch.Tensor):
        assert not isinstance(e_res, ember.Tensor), f"{where}: ember gave a Tensor, torch {type(t_res)}"
        if isinstance(t_res, float) and np.isnan(t_res):
            assert np.isnan(e_res), f"{where}: {e_res} vs nan"
        else:
            assert e_res == t_res or abs(e_res - t_res) <= 1e-6 * max(1.0, abs(t_res)), (
                f"{where}: {e_res} vs {t_res}"
            )
        return
    assert isinstance(e_res, ember.Tensor), f"{where}: expected a Tensor, got {type(e_res)}"
    assert tuple(e_res.shape) == tuple(t_res.shape), (
        f"{where}: shape {tuple(e_res.shape)} vs {tuple(t_res.shape)}"
    )
    assert dtype_name(e_res) == dtype_name(t_res), f"{where}: dtype {e_res.dtype} vs {t_res.dtype}"
    got = to_torch(e_res)
    if t_res.dtype.is_floating_point:
        r, a = _TOL[dtype_name(t_res)]
        torch.testing.assert_close(
            got, t_res, rtol=r * rtol, atol=a * atol, equal_nan=True, msg=lambda m: f"{where}: {m}"
        )
    else:
        assert torch.equal(got, t_res), f"{where}: values differ\nember {got}\ntorch {t_res}"


def run_both(call: Call):
    """Runs the call on both sides: (ember result or exception, torch result or exception)."""
    outs = []
    for fn in (call.e, call.t):
        try:
            outs.append((fn(), None))
        except Exception as exc:  # noqa: BLE001 - the type is what gets compared
            outs.append((None, exc))
    return outs


def check_call(call: Call, skip=None):
    """Compares exception types, or results and mutated inputs, of one drawn call.

    ``skip(e_exc, t_exc, call)`` may name a documented divergence (returns its reason) for a
    mismatch; the example then passes.
    """
    (e_res, e_exc), (t_res, t_exc) = run_both(call)
    try:
        if t_exc is not None or e_exc is not None:
            assert e_exc is not None, f"{call.desc}: torch raised {t_exc!r}, ember returned {e_res}"
            assert t_exc is not None, f"{call.desc}: ember raised {e_exc!r}, torch returned {t_res}"
            # ember may raise a subclass of PyTorch's type (NotImplementedError is a RuntimeError):
            # code written against PyTorch still catches it.
            assert isinstance(e_exc, _family(t_exc)), f"{call.desc}: ember raised {e_exc!r}, torch {t_exc!r}"
            return
        if call.check is not None:
            call.check(e_res, t_res, call)
        else:
            assert_match(e_res, t_res, call.rtol, call.atol, call.desc)
        for i, p in enumerate(call.inputs):
            assert_match(p.e, p.t, call.rtol, call.atol, f"{call.desc}: input {i} after the call")
    except AssertionError:
        if skip is not None and skip(e_exc, t_exc, call):
            return
        raise


def _family(exc: BaseException) -> type:
    for kind in (NotImplementedError, IndexError, TypeError, ValueError, RuntimeError):
        if isinstance(exc, kind):
            return kind
    return type(exc)
