"""The fuzzer's op table: for each op, a hypothesis builder that draws one paired call.

Pointwise and reduction ops are derived from their dispatcher schemas (``ember._src.dispatch.
OPS``): the argument types say what to draw (a broadcastable tensor or a Python scalar for
``Tensor other``, a dim list for ``int[]? dim``, a dtype for ``ScalarType? dtype`` ...).
Views, indexing, joining, sorting, matmul and nn kernels carry constraints a schema cannot
express, so they have hand-written builders. ``BUILDERS`` maps a test id to ``fn(draw) ->
Call``.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import torch
import torch.nn.functional as F
from fuzz_strategies import (
    ALL_DTYPES,
    E_DT,
    FLOAT_DTYPES,
    GRAD_MODE,
    T_DT,
    Call,
    Pair,
    assert_match,
    broadcast_shape_for,
    index_pair,
    pair_from_numpy,
    parse_schema,
    shapes,
    tensor_pairs,
)
from hypothesis import strategies as st

import ember
from ember._src.dispatch import OPS

BUILDERS: dict = {}
NUMERIC = tuple(n for n in ALL_DTYPES if n != "bool")


def _torch_fn(name):
    return getattr(torch, name, None) or getattr(F, name)


def _public_params(name) -> set:
    try:
        return set(inspect.signature(getattr(ember, name)).parameters)
    except (TypeError, ValueError):
        return set()


def _dim(draw, nd, bad=True):
    """A dim for rank ``nd`` (negative allowed), rarely out of range."""
    n = max(nd, 1)
    if bad and draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([n, -n - 1]))
    return draw(st.integers(-n, n - 1))


def _dims(draw, nd):
    dims = draw(st.lists(st.integers(0, max(nd - 1, 0)), unique=True, max_size=nd)) if nd else []
    return [d - nd if draw(st.booleans()) else d for d in dims]


def _scalar(draw, kind=None):
    kind = kind or draw(st.sampled_from(["int", "float", "bool"]))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "int":
        return draw(st.integers(-4, 4))
    return draw(st.sampled_from([0.5, -1.5, 2.0, 0.0, -0.0, 1e-3, 3.25, float("inf"), float("nan")]))


# -- pointwise (from schemas) ---------------------------------------------------------------------

# Float arguments worth trying, by name; the default value is always a candidate too.
_FLOAT_ARGS = {
    "beta": [0.5, 1.0, 2.0],
    "threshold": [-1.0, 0.0, 0.5, 20.0],
    "alpha": [0.5, 1.0, 2.0],
    "negative_slope": [0.0, 0.01, -0.5, 2.0],
    "min_val": [-1.0, -2.0, 0.5],
    "max_val": [1.0, 2.0, -0.5],
    "value": [0.0, -3.0, 7.5],
    "eps": [None, 0.0, 1e-6, 0.2],
    "nan": [0.0, 1.5],
    "posinf": [None, 9.0],
    "neginf": [None, -9.0],
}
# Ops whose public function is spelled differently from the schema.
_UNARY_ALIASES = {
    "round_decimals": ("round", lambda draw: {"decimals": draw(st.integers(-2, 3))}),
    "gelu_tanh": ("gelu", lambda draw: {"approximate": "tanh"}),
}
_UNARY_EXTRA = {"gelu": lambda draw: {"approximate": draw(st.sampled_from(["none", "tanh"]))}}
_UNARY_TOL = {"lgamma": 10, "digamma": 100, "erfinv": 10, "tan": 10, "mish": 10, "logit": 10}


def _float_kwargs(draw, op, public):
    params = _public_params(public)
    kwargs = {}
    for a in parse_schema(op.schema)[1:]:
        if a.base == "float" and a.name in params:
            kwargs[a.name] = draw(st.sampled_from(_FLOAT_ARGS.get(a.name, [0.5]) + [float(a.default or 0)]))
    if public == "logit" and kwargs.get("eps") == -1.0:
        kwargs["eps"] = None
    return kwargs


def _inplace_form(public):
    """How both libraries spell the in-place variant: a Tensor method, or fn(..., inplace=True)."""
    if hasattr(torch.Tensor, public + "_") and hasattr(ember.Tensor, public + "_"):
        return "method"
    if "inplace" in _public_params(public):
        return "flag"
    return None


def _unary_builder(op):
    name = op.name
    public, extra = _UNARY_ALIASES.get(name, (name, _UNARY_EXTRA.get(name)))
    inplace = _inplace_form(public) if name + "_" in OPS else None
    tol = _UNARY_TOL.get(name, 1)
    tfn = _torch_fn(public)

    def build(draw):
        x = draw(tensor_pairs())
        tags = set() if x.t.dtype.is_floating_point else {"integer"}
        kwargs = _float_kwargs(draw, op, public)
        if extra:
            kwargs.update(extra(draw))
        if inplace and draw(st.integers(0, 3)) == 0:
            x = Pair((x.e.clone(), x.t.clone())) if draw(st.booleans()) else x  # keep or drop the layout
            desc = f"in-place {public}({_d(x)}, {kwargs})"
            if inplace == "method":
                m = public + "_"
                return Call(
                    lambda: getattr(x.e, m)(**kwargs),
                    lambda: getattr(x.t, m)(**kwargs),
                    desc,
                    rtol=tol,
                    atol=tol,
                    inputs=[x],
                    tags=tags,
                )
            return Call(
                lambda: getattr(ember, public)(x.e, **kwargs, inplace=True),
                lambda: getattr(F, public)(x.t, **kwargs, inplace=True),
                desc,
                rtol=tol,
                atol=tol,
                inputs=[x],
                tags=tags,
            )
        return Call(
            lambda: getattr(ember, public)(x.e, **kwargs),
            lambda: tfn(x.t, **kwargs),
            f"{public}({_d(x)}, {kwargs})",
            rtol=tol,
            atol=tol,
            tags=tags,
        )

    return build


def _d(p) -> str:
    if isinstance(p, Pair):
        return f"<{tuple(p.t.shape)} {str(p.t.dtype)[6:]} stride={p.t.stride()} off={p.t.storage_offset()}>"
    return repr(p)


_BINARY_EXTRA = {
    "add": lambda draw: {"alpha": draw(st.sampled_from([2, 0.5, -1]))} if draw(st.booleans()) else {},
    "sub": lambda draw: {"alpha": draw(st.sampled_from([2, 0.5, -1]))} if draw(st.booleans()) else {},
    "div": lambda draw: (
        {"rounding_mode": draw(st.sampled_from([None, "trunc", "floor"]))} if draw(st.booleans()) else {}
    ),
}
_BINARY_TOL = {"pow": 10, "xlogy": 10, "atan2": 2, "logaddexp": 2, "logaddexp2": 2, "hypot": 2}


def _other(draw, x, name):
    """The second operand: a broadcastable tensor (any dtype), a 0-d tensor or a Python scalar."""
    kind = draw(st.sampled_from(["tensor", "tensor", "tensor", "zero_dim", "scalar"]))
    if kind == "scalar":
        return _scalar(draw)
    shape = () if kind == "zero_dim" else broadcast_shape_for(draw, tuple(x.t.shape))
    if draw(st.integers(0, 5)) == 0:  # rarely: a shape that does not broadcast
        shape = shape + (7,)
    dtype = x.t.dtype if draw(st.booleans()) else None
    names = [n for n in ALL_DTYPES if T_DT[n] == dtype] if dtype is not None else list(ALL_DTYPES)
    return draw(tensor_pairs(shape=shape, dtypes=names))


def _binary_builder(op):
    name = op.name
    inplace = hasattr(torch.Tensor, name + "_") and hasattr(ember.Tensor, name + "_")
    extra = _BINARY_EXTRA.get(name)
    tol = _BINARY_TOL.get(name, 1)

    def build(draw):
        x = draw(tensor_pairs())
        y = _other(draw, x, name)
        kwargs = extra(draw) if extra else {}
        ye, yt = (y.e, y.t) if isinstance(y, Pair) else (y, y)
        desc = f"{name}({_d(x)}, {_d(y)}, {kwargs})"
        tags = set() if isinstance(y, Pair) else {"scalar_other"}
        if inplace and draw(st.integers(0, 3)) == 0:
            x = Pair((x.e.clone(), x.t.clone()))
            m = name + "_"
            return Call(
                lambda: getattr(x.e, m)(ye, **kwargs),
                lambda: getattr(x.t, m)(yt, **kwargs),
                "in-place " + desc,
                rtol=tol,
                atol=tol,
                inputs=[x],
                tags=tags,
            )
        return Call(
            lambda: getattr(ember, name)(x.e, ye, **kwargs),
            lambda: getattr(torch, name)(x.t, yt, **kwargs),
            desc,
            rtol=tol,
            atol=tol,
            tags=tags,
        )

    return build


def _pointwise_ops():
    for name, op in OPS.items():
        if "pointwise" not in op.tags or "inplace" in op.tags:
            continue
        args = parse_schema(op.schema)
        kinds = [a.base for a in args]
        if kinds == ["Tensor", "Tensor"]:
            BUILDERS[name] = _binary_builder(op)
        elif kinds[0] == "Tensor" and all(k == "float" for k in kinds[1:]):
            BUILDERS[name] = _unary_builder(op)


_pointwise_ops()


def _where(draw):
    x = draw(tensor_pairs())
    c = draw(tensor_pairs(shape=broadcast_shape_for(draw, tuple(x.t.shape)), dtype="bool"))
    y = _other(draw, x, "where")
    ye, yt = (y.e, y.t) if isinstance(y, Pair) else (y, y)
    return Call(
        lambda: ember.where(c.e, x.e, ye),
        lambda: torch.where(c.t, x.t, yt),
        f"where({_d(c)}, {_d(x)}, {_d(y)})",
    )


def _lerp(draw):
    x = draw(tensor_pairs(dtypes=FLOAT_DTYPES))
    dt = str(x.t.dtype)[6:]
    end = draw(tensor_pairs(shape=broadcast_shape_for(draw, tuple(x.t.shape)), dtype=dt))
    w = draw(
        st.one_of(
            st.sampled_from([0.0, 0.25, 1.0, 1.5]),
            tensor_pairs(shape=broadcast_shape_for(draw, tuple(x.t.shape)), dtype=dt, low=0, high=1),
        )
    )
    we, wt = (w.e, w.t) if isinstance(w, Pair) else (w, w)
    return Call(
        lambda: ember.lerp(x.e, end.e, we),
        lambda: torch.lerp(x.t, end.t, wt),
        f"lerp({_d(x)}, {_d(end)}, {_d(w)})",
        rtol=2,
        atol=2,
    )


def _clamp(draw):
    x = draw(tensor_pairs(dtypes=NUMERIC))

    # torch takes either two Numbers or two Tensors (None fits both), not one of each
    kinds = draw(st.sampled_from([("none", "scalar"), ("none", "tensor")]))

    def bound():
        kind = draw(st.sampled_from(kinds))
        if kind == "none":
            return None
        if kind == "scalar":
            return _scalar(draw, draw(st.sampled_from(["int", "float"])))
        return draw(tensor_pairs(shape=broadcast_shape_for(draw, tuple(x.t.shape)), dtype=str(x.t.dtype)[6:]))

    lo, hi = bound(), bound()
    le, lt = (lo.e, lo.t) if isinstance(lo, Pair) else (lo, lo)
    he, ht = (hi.e, hi.t) if isinstance(hi, Pair) else (hi, hi)
    return Call(
        lambda: ember.clamp(x.e, le, he),
        lambda: torch.clamp(x.t, lt, ht),
        f"clamp({_d(x)}, {_d(lo)}, {_d(hi)})",
    )


BUILDERS.update(where=_where, lerp=_lerp, clamp=_clamp)


# -- reductions (from schemas) --------------------------------------------------------------------

# dispatcher name -> (public name, how the schema's arguments map onto it)
_REDUCTION_ALIASES = {"max_all": "max", "min_all": "min", "max_dim": "max", "min_dim": "min"}
_ACCUMULATING = {
    "sum",
    "nansum",
    "mean",
    "nanmean",
    "prod",
    "var",
    "std",
    "var_mean",
    "std_mean",
    "norm",
    "logsumexp",
    "cumsum",
    "cumprod",
    "softmax",
    "log_softmax",
}
# Reductions whose indices may legitimately differ on ties: compared through the values they pick.
_TIE_INDICES = {"max_dim", "min_dim", "median", "nanmedian", "kthvalue", "mode", "topk"}


def _reduction_builder(op):
    name = op.name
    public = _REDUCTION_ALIASES.get(name, name)
    args = parse_schema(op.schema)[1:]
    if name in ("max_all", "min_all"):
        args = []  # ember.max(x): the whole-tensor form

    def build(draw):
        float_only = name in (
            "mean",
            "nanmean",
            "var",
            "std",
            "var_mean",
            "std_mean",
            "logsumexp",
            "softmax",
            "log_softmax",
            "norm",
        )
        x = draw(
            tensor_pairs(
                dtypes=ALL_DTYPES if not float_only or draw(st.integers(0, 9)) == 0 else FLOAT_DTYPES,
                max_dims=3,
                special=draw(st.sampled_from([0.0, 0.0, 0.2])),
            )
        )
        nd = x.t.dim()
        pos, kw = [], {}
        for a in args:
            if a.name in ("dim", "dims"):
                if public == "prod":  # torch.prod takes one int dim, or none (then no keepdim either)
                    if draw(st.booleans()):
                        pos.append(_dim(draw, nd))
                        continue
                    break
                if a.base == "int":
                    v = None if a.optional and draw(st.booleans()) else _dim(draw, nd)
                elif a.optional and draw(st.booleans()):
                    v = None
                else:
                    v = _dims(draw, nd)
                    if draw(st.integers(0, 19)) == 0:
                        v = v + [nd]  # out of range
                    if len(v) == 1 and draw(st.booleans()):
                        v = v[0]
            elif a.base == "bool":
                v = draw(st.booleans())
            elif a.base == "ScalarType":
                if GRAD_MODE["on"]:  # a dtype= cast is not what the gradient test is about
                    continue
                v = None if draw(st.integers(0, 3)) else draw(st.sampled_from(ALL_DTYPES))
                if v is not None:
                    kw[a.name] = (E_DT[v], T_DT[v])
                continue
            elif a.name == "correction":
                v = draw(st.sampled_from([None, 0, 1, 2, 0.5]))
            elif a.name == "p":
                v = draw(st.sampled_from([2, 1, 0, 3, 0.5, float("inf"), float("-inf"), "fro"]))
            else:
                raise AssertionError(f"fuzzer: no strategy for {a} of {name}")
            if a.kw_only or (a.optional and a.default == "None" and v is None and draw(st.booleans())):
                kw[a.name] = v
            else:
                pos.append(v)
        if name in ("max_dim", "min_dim") and pos[0] is None:
            pos[0] = 0
        if public == "norm" and isinstance(pos[0], str) and not isinstance(pos[1], (list, type(None))):
            pos[1] = [pos[1]]
        ek = {k: (v[0] if isinstance(v, tuple) else v) for k, v in kw.items()}
        tk = {k: (v[1] if isinstance(v, tuple) else v) for k, v in kw.items()}
        tol = 10 if name in _ACCUMULATING else 1
        check = _tie_check(name, x) if name in _TIE_INDICES else None
        tfn = getattr(torch, public)
        call = Call(
            lambda: getattr(ember, public)(x.e, *pos, **ek),
            lambda: tfn(x.t, *pos, **tk),
            f"{public}({_d(x)}, {pos}, {ek})",
            rtol=tol,
            atol=tol * 10,
            check=check,
        )
        call.tie_dim = pos[0] if pos else None
        if any(v == [] for v in pos) or kw.get("dim") == []:
            call.tags.add("empty_dim_list")
        if x.t.numel() == 0:
            call.tags.add("empty")
            if not x.t.dtype.is_floating_point:
                call.tags.add("empty_int")
        if ek.get("dtype") is ember.bool:
            call.tags.add("bool_dtype_arg")
        if x.t.dtype.is_floating_point and x.t.isinf().any():
            call.tags.add("nonfinite")
        return call

    return build


def _tie_check(name, x, dim_kw="dim"):
    """Values must match; indices must point at an element equal to the picked value."""

    def check(e_res, t_res, call):
        assert_match(e_res[0], t_res[0], call.rtol, call.atol, call.desc + " values")
        e_idx, t_idx = e_res[1], t_res[1]
        assert_match_meta(e_idx, t_idx, call.desc + " indices")
        if e_idx.numel() == 0:
            return
        got = fuzz_to_torch(e_idx)
        if torch.equal(got, t_idx):
            return
        # The element ember's index points at must equal the value (NaN matches NaN).
        dim = call.tie_dim
        src = x.t if x.t.dim() else x.t.reshape(1)
        idx = got if got.dim() == src.dim() else got.unsqueeze(dim)
        picked = src.gather(dim, idx.reshape(idx.shape if idx.dim() else (1,)))
        vals = t_res[0] if t_res[0].dim() == picked.dim() else t_res[0].unsqueeze(dim)
        assert torch.equal(picked.reshape(vals.shape).isnan(), vals.isnan()), call.desc
        mask = ~vals.isnan()
        assert torch.equal(picked.reshape(vals.shape)[mask], vals[mask]), (
            f"{call.desc}: indices pick other values"
        )

    return check


def assert_match_meta(e, t, where):
    assert tuple(e.shape) == tuple(t.shape), f"{where}: shape {tuple(e.shape)} vs {tuple(t.shape)}"
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{where}: {e.dtype} vs {t.dtype}"


def fuzz_to_torch(x):
    from fuzz_strategies import to_torch

    return to_torch(x)


for _name, _op in OPS.items():
    if "reduction" in _op.tags:
        BUILDERS[_name] = _reduction_builder(_op)


# -- sorting and selection ------------------------------------------------------------------------


def _sorting_input(draw, dtypes=NUMERIC):
    return draw(
        tensor_pairs(dtypes=dtypes, max_dims=3, low=-3, high=3, special=draw(st.sampled_from([0.0, 0.3])))
    )


def _with_dim(call, dim):
    call.tie_dim = dim
    return call


def _sort(draw):
    x = _sorting_input(draw, ALL_DTYPES)
    dim, desc, stable = _dim(draw, x.t.dim()), draw(st.booleans()), draw(st.booleans())
    call = Call(
        lambda: ember.sort(x.e, dim=dim, descending=desc, stable=stable),
        lambda: torch.sort(x.t, dim=dim, descending=desc, stable=stable),
        f"sort({_d(x)}, dim={dim}, descending={desc}, stable={stable})",
    )
    if not stable:
        call.check = _tie_check("sort", x)
    return _with_dim(call, dim)


def _argsort(draw):
    x = _sorting_input(draw, ALL_DTYPES)
    dim, desc = _dim(draw, x.t.dim()), draw(st.booleans())
    return Call(
        lambda: ember.argsort(x.e, dim=dim, descending=desc, stable=True),
        lambda: torch.argsort(x.t, dim=dim, descending=desc, stable=True),
        f"argsort({_d(x)}, {dim}, {desc})",
    )


def _topk(draw):
    x = _sorting_input(draw)
    dim = _dim(draw, x.t.dim())
    size = x.t.shape[dim] if x.t.dim() and -x.t.dim() <= dim < x.t.dim() else 1
    k = draw(st.integers(0, size + (1 if draw(st.integers(0, 9)) == 0 else 0)))
    largest = draw(st.booleans())
    return _with_dim(
        Call(
            lambda: ember.topk(x.e, k, dim, largest, True),
            lambda: torch.topk(x.t, k, dim, largest, True),
            f"topk({_d(x)}, {k}, {dim}, {largest})",
            check=_tie_check("topk", x),
        ),
        dim,
    )


def _kth_like(public):
    def build(draw):
        x = _sorting_input(draw)
        dim, keep = _dim(draw, x.t.dim()), draw(st.booleans())
        if public == "kthvalue":
            size = x.t.shape[dim] if x.t.dim() and -x.t.dim() <= dim < x.t.dim() else 1
            k = draw(st.integers(0, size + 1))
            ef, tf = (lambda: ember.kthvalue(x.e, k, dim, keep)), (lambda: torch.kthvalue(x.t, k, dim, keep))
            desc = f"kthvalue({_d(x)}, {k}, {dim}, {keep})"
        else:
            ef = lambda: getattr(ember, public)(x.e, dim, keep)  # noqa: E731
            tf = lambda: getattr(torch, public)(x.t, dim, keep)  # noqa: E731
            desc = f"{public}({_d(x)}, {dim}, {keep})"
        return _with_dim(Call(ef, tf, desc, check=_tie_check(public, x)), dim)

    return build


def _median_all(draw):
    x = _sorting_input(draw)
    fn = draw(st.sampled_from(["median", "nanmedian"]))
    tags = {"empty_int"} if x.t.numel() == 0 and not x.t.dtype.is_floating_point else set()
    return Call(lambda: getattr(ember, fn)(x.e), lambda: getattr(torch, fn)(x.t), f"{fn}({_d(x)})", tags=tags)


def _unique(draw):
    x = _sorting_input(draw, ALL_DTYPES)
    inv, counts = draw(st.booleans()), draw(st.booleans())
    dim = None if draw(st.booleans()) or not x.t.dim() else _dim(draw, x.t.dim(), bad=False)
    return Call(
        lambda: ember.unique(x.e, True, inv, counts, dim),
        lambda: torch.unique(x.t, True, inv, counts, dim),
        f"unique({_d(x)}, inverse={inv}, counts={counts}, dim={dim})",
    )


def _searchsorted(draw):
    dt = draw(st.sampled_from(NUMERIC))
    seq = draw(tensor_pairs(dtype=dt, max_dims=2, low=-3, high=3, special=0.0))
    seq = Pair((ember.sort(seq.e, dim=-1)[0], torch.sort(seq.t, dim=-1)[0])) if seq.t.dim() else seq
    lead = tuple(seq.t.shape[:-1])
    shape = lead + (draw(st.integers(0, 4)),) if lead or draw(st.booleans()) else draw(shapes(max_dims=2))
    v = draw(tensor_pairs(shape=shape, dtype=dt, low=-4, high=4))
    right, i32 = draw(st.booleans()), draw(st.booleans())
    return Call(
        lambda: ember.searchsorted(seq.e, v.e, right=right, out_int32=i32),
        lambda: torch.searchsorted(seq.t, v.t, right=right, out_int32=i32),
        f"searchsorted({_d(seq)}, {_d(v)}, right={right}, out_int32={i32})",
    )


def _histc(draw):
    x = draw(tensor_pairs(dtypes=("float32", "float64"), max_dims=2, special=0.0))
    bins, lo, hi = (
        draw(st.integers(1, 7)),
        draw(st.sampled_from([0, -2, 1])),
        draw(st.sampled_from([0, 2, 5, -1])),
    )
    return Call(
        lambda: ember.histc(x.e, bins, lo, hi),
        lambda: torch.histc(x.t, bins, lo, hi),
        f"histc({_d(x)}, {bins}, {lo}, {hi})",
    )


def _bincount(draw):
    x = draw(
        tensor_pairs(
            dtypes=("int64", "int32", "uint8", "int8"),
            shape=(draw(st.integers(0, 8)),),
            low=0,
            high=6,
            special=0.0,
        )
    )
    w = (
        draw(tensor_pairs(shape=tuple(x.t.shape), dtypes=("float32", "float64", "int64")))
        if draw(st.booleans())
        else None
    )
    ml = draw(st.integers(0, 8))
    return Call(
        lambda: ember.bincount(x.e, None if w is None else w.e, ml),
        lambda: torch.bincount(x.t, None if w is None else w.t, ml),
        f"bincount({_d(x)}, {_d(w)}, {ml})",
        rtol=10,
        atol=10,
    )


BUILDERS.update(
    sort=_sort,
    argsort=_argsort,
    topk=_topk,
    kthvalue=_kth_like("kthvalue"),
    median=_kth_like("median"),
    nanmedian=_kth_like("nanmedian"),
    mode=_kth_like("mode"),
    median_all=_median_all,
    unique=_unique,
    searchsorted=_searchsorted,
    histc=_histc,
    bincount=_bincount,
)


# -- views ----------------------------------------------------------------------------------------


def _view_call(fn_e, fn_t, x, desc, check_alias=True):
    """A view op: values must match, and the result must share ember's storage like torch's does."""

    def check(e_res, t_res, call):
        assert_match(e_res, t_res, where=call.desc)
        if check_alias and isinstance(t_res, torch.Tensor) and t_res._base is not None or t_res is x.t:
            assert e_res.untyped_storage().data_ptr() == x.e.untyped_storage().data_ptr(), (
                f"{desc}: not a view"
            )

    return Call(fn_e, fn_t, desc, check=check)


def _view_builder(kind):
    def build(draw):
        x = draw(tensor_pairs(max_dims=4))
        nd = x.t.dim()
        if kind == "permute":
            dims = list(draw(st.permutations(range(nd))))
            dims = [d - nd if draw(st.booleans()) else d for d in dims]
            if draw(st.integers(0, 9)) == 0:
                dims = dims[:-1] if dims else [0]
            call = _view_call(
                lambda: x.e.permute(*dims), lambda: x.t.permute(*dims), x, f"permute({_d(x)}, {dims})"
            )
            call.tags = set() if dims else {"no_args"}
            return call
        if kind == "transpose":
            a, b = _dim(draw, nd), _dim(draw, nd)
            return _view_call(
                lambda: x.e.transpose(a, b), lambda: x.t.transpose(a, b), x, f"transpose({_d(x)}, {a}, {b})"
            )
        if kind == "squeeze":
            d = draw(st.sampled_from(["none", "int", "list"]))
            args = () if d == "none" else (_dim(draw, nd),) if d == "int" else (tuple(_dims(draw, nd)),)
            return _view_call(
                lambda: x.e.squeeze(*args), lambda: x.t.squeeze(*args), x, f"squeeze({_d(x)}, {args})"
            )
        if kind == "unsqueeze":
            d = draw(st.integers(-nd - 2, nd + 1))
            return _view_call(
                lambda: x.e.unsqueeze(d), lambda: x.t.unsqueeze(d), x, f"unsqueeze({_d(x)}, {d})"
            )
        if kind == "narrow":
            d = _dim(draw, nd)
            size = x.t.shape[d] if nd and -nd <= d < nd else 1
            start, length = draw(st.integers(-size - 1, size + 1)), draw(st.integers(-1, size + 1))
            return _view_call(
                lambda: x.e.narrow(d, start, length),
                lambda: x.t.narrow(d, start, length),
                x,
                f"narrow({_d(x)}, {d}, {start}, {length})",
            )
        if kind == "select":
            d = _dim(draw, nd)
            size = x.t.shape[d] if nd and -nd <= d < nd else 1
            i = draw(st.integers(-size - 1, size))
            return _view_call(
                lambda: x.e.select(d, i), lambda: x.t.select(d, i), x, f"select({_d(x)}, {d}, {i})"
            )
        if kind == "diagonal":
            off, a, b = draw(st.integers(-3, 3)), _dim(draw, nd), _dim(draw, nd)
            return _view_call(
                lambda: ember.diagonal(x.e, off, a, b),
                lambda: torch.diagonal(x.t, off, a, b),
                x,
                f"diagonal({_d(x)}, {off}, {a}, {b})",
            )
        if kind == "unfold":
            d = _dim(draw, nd)
            size, step = draw(st.integers(0, 4)), draw(st.integers(0, 3))
            return _view_call(
                lambda: x.e.unfold(d, size, step),
                lambda: x.t.unfold(d, size, step),
                x,
                f"unfold({_d(x)}, {d}, {size}, {step})",
            )
        if kind == "view":
            target = _reshape_target(draw, tuple(x.t.shape))
            return _view_call(
                lambda: x.e.view(*target), lambda: x.t.view(*target), x, f"view({_d(x)}, {target})"
            )
        if kind == "reshape":
            target = _reshape_target(draw, tuple(x.t.shape))
            return Call(
                lambda: x.e.reshape(target), lambda: x.t.reshape(target), f"reshape({_d(x)}, {target})"
            )
        if kind == "flatten":
            a, b = _dim(draw, nd), _dim(draw, nd)
            return Call(lambda: x.e.flatten(a, b), lambda: x.t.flatten(a, b), f"flatten({_d(x)}, {a}, {b})")
        if kind == "expand":
            target = [
                draw(st.sampled_from([-1, s, 3])) if s == 1 else draw(st.sampled_from([-1, s]))
                for s in x.t.shape
            ]
            target = [draw(st.integers(0, 2)) for _ in range(draw(st.integers(0, 2)))] + target
            call = _view_call(
                lambda: x.e.expand(*target), lambda: x.t.expand(*target), x, f"expand({_d(x)}, {target})"
            )
            call.tags = set() if target else {"no_args"}
            return call
        if kind == "movedim":
            src, dst = _dim(draw, nd), _dim(draw, nd)
            return Call(
                lambda: ember.movedim(x.e, src, dst),
                lambda: torch.movedim(x.t, src, dst),
                f"movedim({_d(x)}, {src}, {dst})",
            )
        if kind == "as_strided":
            shape = draw(shapes(max_dims=3, max_side=3))
            stride = tuple(draw(st.integers(0, 3)) for _ in shape)
            off = draw(st.integers(0, 2))
            base = Pair((x.e.contiguous(), x.t.contiguous()))
            return Call(
                lambda: base.e.as_strided(shape, stride, off),
                lambda: base.t.as_strided(shape, stride, off),
                f"as_strided({_d(base)}, {shape}, {stride}, {off})",
            )
        if kind == "getitem":
            key_e, key_t = _basic_index(draw, tuple(x.t.shape))
            return _view_call(lambda: x.e[key_e], lambda: x.t[key_t], x, f"getitem({_d(x)}, {key_t})")
        if kind in ("split", "chunk", "unbind"):
            d = _dim(draw, nd)
            if kind == "unbind":
                return Call(lambda: x.e.unbind(d), lambda: x.t.unbind(d), f"unbind({_d(x)}, {d})")
            n = draw(st.integers(1, 4)) if draw(st.integers(0, 9)) else 0
            if kind == "split" and draw(st.booleans()) and nd and -nd <= d < nd:
                parts = [draw(st.integers(0, 3)) for _ in range(draw(st.integers(1, 3)))]
                parts[-1] = x.t.shape[d] - sum(parts[:-1])
                n = parts
            return Call(
                lambda: getattr(x.e, kind)(n, d),
                lambda: getattr(x.t, kind)(n, d),
                f"{kind}({_d(x)}, {n}, {d})",
            )
        raise AssertionError(kind)

    return build


def _reshape_target(draw, shape):
    numel = math.prod(shape)
    if numel == 0:
        out = [draw(st.sampled_from([0, 2, 3])) for _ in range(draw(st.integers(1, 3)))]
        out[0] = 0
    else:
        out, rest = [], numel
        for p in (2, 3, 5, 7):
            while rest % p == 0 and draw(st.booleans()):
                out.append(p)
                rest //= p
        out.append(rest)
        out = list(draw(st.permutations(out)))
        if draw(st.booleans()):
            out.insert(draw(st.integers(0, len(out))), 1)
    if draw(st.integers(0, 3)) == 0 and numel:
        out[draw(st.integers(0, len(out) - 1))] = -1
    if draw(st.integers(0, 15)) == 0:
        out.append(2)  # rarely: a wrong size
    return tuple(out)


def _basic_index(draw, shape):
    """A key of ints, slices (steps, negative bounds), None and Ellipsis."""
    key = []
    for s in shape[: draw(st.integers(0, len(shape)))]:
        kind = draw(st.sampled_from(["slice", "slice", "int", "none"]))
        if kind == "int":
            key.append(draw(st.integers(-s, s - 1)) if s else 0)
        elif kind == "none":
            key.append(None)
        else:
            lo = draw(st.one_of(st.none(), st.integers(-s - 2, s + 2)))
            hi = draw(st.one_of(st.none(), st.integers(-s - 2, s + 2)))
            step = draw(st.sampled_from([None, 1, 2, 3]))
            key.append(slice(lo, hi, step))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), Ellipsis)
    return tuple(key), tuple(key)


for _k in (
    "permute",
    "transpose",
    "squeeze",
    "unsqueeze",
    "narrow",
    "select",
    "diagonal",
    "unfold",
    "view",
    "reshape",
    "flatten",
    "expand",
    "movedim",
    "as_strided",
    "getitem",
    "split",
    "chunk",
    "unbind",
):
    BUILDERS["view_" + _k] = _view_builder(_k)


def _flip_like(public):
    def build(draw):
        x = draw(tensor_pairs(max_dims=3))
        nd = x.t.dim()
        if public == "flip":
            dims = _dims(draw, nd)
            return Call(
                lambda: ember.flip(x.e, dims), lambda: torch.flip(x.t, dims), f"flip({_d(x)}, {dims})"
            )
        if public == "roll":
            shifts = draw(st.integers(-6, 6))
            dims = None if draw(st.booleans()) else _dim(draw, nd)
            return Call(
                lambda: ember.roll(x.e, shifts, dims),
                lambda: torch.roll(x.t, shifts, dims),
                f"roll({_d(x)}, {shifts}, {dims})",
                tags={"empty"} if x.t.numel() == 0 else set(),
            )
        if public in ("tril", "triu"):
            k = draw(st.integers(-3, 3))
            return Call(
                lambda: getattr(ember, public)(x.e, k),
                lambda: getattr(torch, public)(x.t, k),
                f"{public}({_d(x)}, {k})",
            )
        if public == "repeat":
            reps = [draw(st.integers(0, 3)) for _ in range(nd + draw(st.integers(-1, 2)))]
            return Call(
                lambda: x.e.repeat(*reps),
                lambda: x.t.repeat(*reps),
                f"repeat({_d(x)}, {reps})",
                tags=set() if reps else {"no_args"},
            )
        if public == "contiguous":
            return Call(lambda: x.e.contiguous(), lambda: x.t.contiguous(), f"contiguous({_d(x)})")
        if public == "to":
            dt = draw(st.sampled_from(ALL_DTYPES))
            return Call(lambda: x.e.to(E_DT[dt]), lambda: x.t.to(T_DT[dt]), f"to({_d(x)}, {dt})")
        if public == "copy_":
            src = draw(tensor_pairs(shape=broadcast_shape_for(draw, tuple(x.t.shape))))
            y = Pair((x.e.clone(), x.t.clone()))
            return Call(
                lambda: y.e.copy_(src.e), lambda: y.t.copy_(src.t), f"copy_({_d(y)}, {_d(src)})", inputs=[y]
            )
        if public == "fill_":
            v = _scalar(draw)
            y = Pair((x.e.clone(), x.t.clone()))
            return Call(lambda: y.e.fill_(v), lambda: y.t.fill_(v), f"fill_({_d(y)}, {v})", inputs=[y])
        raise AssertionError(public)

    return build


for _k in ("flip", "roll", "tril", "triu", "repeat", "contiguous", "to", "copy_", "fill_"):
    BUILDERS[_k] = _flip_like(_k)


# -- known divergences ----------------------------------------------------------------------------
# Mismatches that are not ember bugs, each with its reason. An entry applies when the op
# matches, the drawn call carries the tag, and (if given) torch raised that exception type.
# Anything else that differs fails the test.
KNOWN_DIVERGENCES = [
    (
        "*",
        "scalar_other",
        TypeError,
        "torch's bindings of atan2/hypot/logical_*/nextafter... and of most in-place methods take only a Tensor as "
        "`other` (TypeError); ember also takes a Python number there, like torch.add does",
    ),
    (
        "all any",
        "empty_dim_list",
        None,
        "PyTorch is inconsistent: all/any(dim=[]) reduce nothing, while sum/amax/mean(dim=[]) reduce every dim; "
        "ember reduces every dim for all of them",
    ),
    (
        "logsumexp",
        "empty_dim_list",
        RuntimeError,
        "torch.logsumexp(x, dim=[]) fails inside PyTorch ('output with shape [] doesn't match the broadcast shape'): "
        "a PyTorch bug",
    ),
    (
        "median nanmedian median_all",
        "empty_int",
        None,
        "median of an empty integer tensor: PyTorch casts NaN to the integer type (undefined behaviour in C++, "
        "INT_MIN on x86); ember returns 0",
    ),
    (
        "round_decimals",
        "integer",
        NotImplementedError,
        "torch.round(x, decimals=d) has no integer kernel; ember rounds integers too (to themselves for d >= 0)",
    ),
    (
        "roll cummax cummin softmax log_softmax",
        "empty",
        None,
        "PyTorch returns early for empty inputs without checking dim (roll, cummax, cummin) or dtype (softmax, "
        "log_softmax); ember validates its arguments first",
    ),
    (
        "cumsum cumprod",
        "bool_dtype_arg",
        NotImplementedError,
        "torch.cumsum/cumprod(dtype=torch.bool) have no bool kernel; ember computes them (logical or/and)",
    ),
    (
        "hardtanh",
        "integer",
        None,
        "PyTorch's in-place hardtanh_ runs on clamp_ and accepts integer tensors while F.hardtanh rejects them; "
        "ember rejects both",
    ),
    (
        "repeat view_permute view_expand",
        "no_args",
        TypeError,
        "ember's varargs methods accept an empty size list (a no-op on a 0-d tensor); PyTorch's parser wants one",
    ),
    (
        "var_mean std_mean",
        "nonfinite",
        None,
        "PyTorch's Welford var_mean/std_mean return a NaN mean for inputs holding inf while torch.mean returns inf; "
        "ember's mean agrees with torch.mean",
    ),
]


def known_divergence(name: str, e_exc, t_exc, call) -> str | None:
    """The documented reason this mismatch is expected, or None."""
    for ops, tag, torch_exc, reason in KNOWN_DIVERGENCES:
        if ops != "*" and name not in ops.split():
            continue
        if tag not in call.tags:
            continue
        if torch_exc is not None and not isinstance(t_exc, torch_exc):
            continue
        return reason
    return None


# -- indexing, scatter, joining -------------------------------------------------------------------


def _idx_setup(draw, min_dims=1):
    x = draw(tensor_pairs(min_dims=min_dims, max_dims=3))
    return x, _dim(draw, x.t.dim())


def _size(x, d):
    nd = x.t.dim()
    return x.t.shape[d] if nd and -nd <= d < nd else 1


def _index_select(draw):
    x, d = _idx_setup(draw, 0)
    idx = index_pair(
        draw, _size(x, d), (draw(st.integers(0, 5)),), dtype=draw(st.sampled_from(["int64", "int32"]))
    )
    return Call(
        lambda: ember.index_select(x.e, d, idx.e),
        lambda: torch.index_select(x.t, d, idx.t),
        f"index_select({_d(x)}, {d}, {idx.t.tolist()})",
    )


def _gather(draw):
    x, d = _idx_setup(draw, 0)
    shape = tuple(draw(st.integers(0, s)) for s in x.t.shape)
    if x.t.dim() and -x.t.dim() <= d < x.t.dim():
        shape = shape[: d % x.t.dim()] + (draw(st.integers(0, 4)),) + shape[d % x.t.dim() + 1 :]
    idx = index_pair(draw, _size(x, d), shape)
    return Call(
        lambda: ember.gather(x.e, d, idx.e),
        lambda: torch.gather(x.t, d, idx.t),
        f"gather({_d(x)}, {d}, {idx.t.tolist()})",
    )


def _unique_index(draw, size, n):
    """n distinct indices into size (no duplicate writes: their order is unspecified)."""
    n = min(n, size)
    perm = draw(st.permutations(range(size)))[:n] if size else []
    bad = draw(st.integers(0, 14)) == 0
    vals = [size + 1] if bad else [p - size if draw(st.booleans()) else p for p in perm]
    return pair_from_numpy(np.array(vals, dtype=np.int64).reshape(-1), "int64")


def _scatter_like(kind):
    def build(draw):
        x, d = _idx_setup(draw)
        x = Pair((x.e.clone(), x.t.clone()))
        nd = x.t.dim()
        dn = d % nd if -nd <= d < nd else 0
        size = _size(x, d)
        if kind in ("index_add_", "index_copy_", "index_fill_"):
            idx = (
                _unique_index(draw, size, draw(st.integers(0, 4)))
                if kind != "index_add_"
                else index_pair(draw, size, (draw(st.integers(0, 4)),))
            )
            src_shape = tuple(x.t.shape[:dn]) + (idx.t.numel(),) + tuple(x.t.shape[dn + 1 :])
            if kind == "index_fill_":
                v = _scalar(draw, "int")
                return Call(
                    lambda: x.e.index_fill_(d, idx.e, v),
                    lambda: x.t.index_fill_(d, idx.t, v),
                    f"index_fill_({_d(x)}, {d}, {idx.t.tolist()}, {v})",
                    inputs=[x],
                )
            src = draw(tensor_pairs(shape=src_shape, dtype=str(x.t.dtype)[6:]))
            kw = {"alpha": draw(st.sampled_from([1, 2]))} if kind == "index_add_" else {}
            return Call(
                lambda: getattr(x.e, kind)(d, idx.e, src.e, **kw),
                lambda: getattr(x.t, kind)(d, idx.t, src.t, **kw),
                f"{kind}({_d(x)}, {d}, {idx.t.tolist()}, {_d(src)}, {kw})",
                inputs=[x],
                rtol=10,
                atol=10,
            )
        # scatter family: index has the rank of x, each side no larger than x's (src's)
        shape = [draw(st.integers(0, s)) for s in x.t.shape]
        if kind == "scatter_":  # distinct targets along d
            shape[dn] = draw(st.integers(0, size))
            cols = [
                _unique_index(draw, size, shape[dn]).t
                for _ in range(max(1, math.prod(shape[:dn] + shape[dn + 1 :])))
            ]
            arr = (
                torch.stack(cols, -1).reshape([shape[dn]] + shape[:dn] + shape[dn + 1 :]).movedim(0, dn)
                if shape[dn] and math.prod(shape)
                else torch.zeros(shape, dtype=torch.int64)
            )
            idx = pair_from_numpy(arr.numpy(), "int64")
        else:
            idx = index_pair(draw, size, tuple(shape))
        src = draw(tensor_pairs(shape=tuple(shape), dtype=str(x.t.dtype)[6:]))
        if kind == "scatter_reduce_":
            red, inc = draw(st.sampled_from(["sum", "prod", "mean", "amax", "amin"])), draw(st.booleans())
            return Call(
                lambda: x.e.scatter_reduce_(d, idx.e, src.e, red, include_self=inc),
                lambda: x.t.scatter_reduce_(d, idx.t, src.t, red, include_self=inc),
                f"scatter_reduce_({_d(x)}, {d}, {idx.t.tolist()}, {_d(src)}, {red}, {inc})",
                inputs=[x],
                rtol=10,
                atol=10,
            )
        return Call(
            lambda: getattr(x.e, kind)(d, idx.e, src.e),
            lambda: getattr(x.t, kind)(d, idx.t, src.t),
            f"{kind}({_d(x)}, {d}, {idx.t.tolist()}, {_d(src)})",
            inputs=[x],
            rtol=10,
            atol=10,
        )

    return build


def _masked(kind):
    def build(draw):
        x = draw(tensor_pairs(max_dims=3))
        m = draw(tensor_pairs(shape=broadcast_shape_for(draw, tuple(x.t.shape)), dtype="bool"))
        if kind == "masked_fill":
            v = _scalar(draw)
            return Call(
                lambda: ember.masked_fill(x.e, m.e, v),
                lambda: torch.masked_fill(x.t, m.t, v),
                f"masked_fill({_d(x)}, {_d(m)}, {v})",
            )
        if kind == "masked_select":
            return Call(
                lambda: ember.masked_select(x.e, m.e),
                lambda: torch.masked_select(x.t, m.t),
                f"masked_select({_d(x)}, {_d(m)})",
            )
        y = Pair((x.e.clone(), x.t.clone()))
        src = draw(
            tensor_pairs(
                shape=(x.t.numel() + draw(st.integers(-1, 2)),) if x.t.numel() else (1,),
                dtype=str(x.t.dtype)[6:],
            )
        )
        return Call(
            lambda: y.e.masked_scatter_(m.e, src.e),
            lambda: y.t.masked_scatter_(m.t, src.t),
            f"masked_scatter_({_d(y)}, {_d(m)}, {_d(src)})",
            inputs=[y],
        )

    return build


def _advanced_index(kind):
    def build(draw):
        x = draw(tensor_pairs(min_dims=1, max_dims=3))
        nd = x.t.dim()
        n_idx = draw(st.integers(1, nd))
        shape = (draw(st.integers(0, 3)),)
        key = []
        for i in range(n_idx):
            if draw(st.integers(0, 3)) == 0:
                key.append(slice(None))
            elif draw(st.integers(0, 5)) == 0:
                key.append(draw(tensor_pairs(shape=tuple(x.t.shape[i : i + 1]), dtype="bool")))
            else:
                key.append(index_pair(draw, x.t.shape[i], shape))
        ek = tuple(k.e if isinstance(k, Pair) else k for k in key)
        tk = tuple(k.t if isinstance(k, Pair) else k for k in key)
        desc = f"{kind}({_d(x)}, {[k.t.tolist() if isinstance(k, Pair) else k for k in key]})"
        if kind == "getitem":
            return Call(lambda: x.e[ek], lambda: x.t[tk], desc)
        y = Pair((x.e.clone(), x.t.clone()))
        acc = draw(st.booleans())
        v = draw(tensor_pairs(shape=(), dtype=str(x.t.dtype)[6:]))
        if acc:  # accumulate: every index; otherwise duplicate targets would make the result order-dependent
            return (
                Call(
                    lambda: y.e.index_put_(ek, v.e, accumulate=True),
                    lambda: y.t.index_put_(tk, v.t, accumulate=True),
                    "index_put_ " + desc,
                    inputs=[y],
                    rtol=10,
                    atol=10,
                )
                if all(isinstance(k, Pair) for k in key)
                else Call(lambda: None, lambda: None, "skip")
            )
        return Call(
            lambda: y.e.__setitem__(ek, v.e), lambda: y.t.__setitem__(tk, v.t), "setitem " + desc, inputs=[y]
        )

    return build


def _take(draw):
    x = draw(tensor_pairs(max_dims=3))
    idx = index_pair(draw, x.t.numel(), (draw(st.integers(0, 4)),))
    return Call(
        lambda: ember.take(x.e, idx.e), lambda: torch.take(x.t, idx.t), f"take({_d(x)}, {idx.t.tolist()})"
    )


def _nonzero(draw):
    x = draw(tensor_pairs(max_dims=3, low=-1, high=1))
    return Call(lambda: ember.nonzero(x.e), lambda: torch.nonzero(x.t), f"nonzero({_d(x)})")


def _join(kind):
    def build(draw):
        base = draw(shapes(min_dims=0 if kind == "stack" else 1, max_dims=3))
        nd = len(base)
        d = _dim(draw, nd + (1 if kind == "stack" else 0))
        parts = []
        for _ in range(draw(st.integers(1, 3))):
            shape = list(base)
            if kind == "cat" and nd and -nd <= d < nd:
                shape[d] = draw(st.integers(0, 3))
            if draw(st.integers(0, 9)) == 0 and shape:
                shape[0] += 1  # rarely: mismatched sizes
            if kind == "cat" and draw(st.integers(0, 12)) == 0:
                shape = [0]  # legacy: 1-D empty tensors are skipped by cat
            parts.append(draw(tensor_pairs(shape=tuple(shape))))
        es, ts = [p.e for p in parts], [p.t for p in parts]
        return Call(
            lambda: getattr(ember, kind)(es, d),
            lambda: getattr(torch, kind)(ts, d),
            f"{kind}({[_d(p) for p in parts]}, {d})",
        )

    return build


BUILDERS.update(
    index_select=_index_select,
    gather=_gather,
    take=_take,
    nonzero=_nonzero,
    masked_fill=_masked("masked_fill"),
    masked_select=_masked("masked_select"),
    masked_scatter_=_masked("masked_scatter_"),
    index_getitem=_advanced_index("getitem"),
    index_put_=_advanced_index("put"),
    cat=_join("cat"),
    stack=_join("stack"),
)
for _k in ("scatter_", "scatter_add_", "scatter_reduce_", "index_add_", "index_copy_", "index_fill_"):
    BUILDERS[_k] = _scatter_like(_k)


# -- matmul and nn kernels ------------------------------------------------------------------------


def _matmul(kind):
    def build(draw):
        dt = draw(st.sampled_from(FLOAT_DTYPES + ("int64", "int32")))
        n, k, m, b = (draw(st.integers(0, 4)) for _ in range(4))
        k2 = k if draw(st.integers(0, 9)) else k + 1  # rarely: mismatched inner sizes
        shapes_ = {
            "mm": ((n, k), (k2, m)),
            "bmm": ((b, n, k), (b, k2, m)),
            "mv": ((n, k), (k2,)),
            "dot": ((k,), (k2,)),
            "matmul": (draw(shapes(min_dims=1, max_dims=3, max_side=3)), None),
        }[kind]
        a = draw(tensor_pairs(shape=shapes_[0], dtype=dt))
        if kind == "matmul":
            bs = list(broadcast_shape_for(draw, tuple(a.t.shape[:-2])))
            tail = [a.t.shape[-1], draw(st.integers(0, 3))] if draw(st.booleans()) else [a.t.shape[-1]]
            shapes_ = (None, tuple(bs + tail) if len(tail) == 2 else tuple(tail))
        c = draw(tensor_pairs(shape=shapes_[1], dtype=dt))
        tol = 1 + max(1, a.t.shape[-1] if a.t.dim() else 1)
        return Call(
            lambda: getattr(ember, kind)(a.e, c.e),
            lambda: getattr(torch, kind)(a.t, c.t),
            f"{kind}({_d(a)}, {_d(c)})",
            rtol=tol * 10,
            atol=tol * 10,
        )

    return build


def _conv(nd):
    def build(draw):
        dt = draw(st.sampled_from(("float32", "float64")))
        n, cin, g = draw(st.integers(0, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
        cin, cout = cin * g, draw(st.integers(1, 2)) * g
        ks = tuple(draw(st.integers(1, 3)) for _ in range(nd))
        spatial = tuple(draw(st.integers(1, 6)) for _ in range(nd))
        x = draw(tensor_pairs(shape=(n, cin) + spatial, dtype=dt))
        w = draw(tensor_pairs(shape=(cout, cin // g) + ks, dtype=dt))
        bias = draw(tensor_pairs(shape=(cout,), dtype=dt)) if draw(st.booleans()) else None
        kw = dict(
            stride=draw(st.integers(1, 2)),
            padding=draw(st.integers(0, 2)),
            dilation=draw(st.integers(1, 2)),
            groups=g,
        )
        fn = f"conv{nd}d"
        return Call(
            lambda: getattr(ember, fn)(x.e, w.e, None if bias is None else bias.e, **kw),
            lambda: getattr(torch, fn)(x.t, w.t, None if bias is None else bias.t, **kw),
            f"{fn}({_d(x)}, {_d(w)}, {_d(bias)}, {kw})",
            rtol=100,
            atol=100,
        )

    return build


def _pool(kind):
    def build(draw):
        dt = draw(st.sampled_from(FLOAT_DTYPES))
        nd = 2 if kind == "max_pool2d" else 1
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + tuple(
            draw(st.integers(1, 7)) for _ in range(nd)
        )
        x = draw(tensor_pairs(shape=shape, dtype=dt))
        k = draw(st.integers(1, 3))
        kw = dict(
            stride=draw(st.sampled_from([None, 1, 2])),
            padding=draw(st.integers(0, k // 2)),
            ceil_mode=draw(st.booleans()),
        )
        if kind == "max_pool2d":
            kw["dilation"] = draw(st.integers(1, 2))
        else:
            kw["count_include_pad"] = draw(st.booleans())
        return Call(
            lambda: getattr(ember, kind)(x.e, k, **kw),
            lambda: getattr(torch, kind)(x.t, k, **kw),
            f"{kind}({_d(x)}, {k}, {kw})",
            rtol=2,
            atol=2,
        )

    return build


def _embedding(draw):
    w = draw(tensor_pairs(shape=(draw(st.integers(1, 5)), draw(st.integers(0, 3))), dtypes=FLOAT_DTYPES))
    idx = index_pair(draw, w.t.shape[0], draw(shapes(max_dims=2, max_side=3)))
    pad = draw(st.sampled_from([-1, 0]))
    return Call(
        lambda: ember.embedding(w.e, idx.e, pad),
        lambda: torch.embedding(w.t, idx.t, pad),
        f"embedding({_d(w)}, {idx.t.tolist()}, {pad})",
    )


def _norm_layer(kind):
    def build(draw):
        dt = draw(st.sampled_from(("float32", "float64")))
        g = draw(st.integers(1, 2))
        shape = (draw(st.integers(1, 3)), g * draw(st.integers(1, 2))) + tuple(
            draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))
        )
        x = draw(tensor_pairs(shape=shape, dtype=dt, special=0.0))
        affine = draw(st.booleans())
        if kind == "layer_norm":
            ns = shape[-draw(st.integers(1, len(shape))) :]
            w = draw(tensor_pairs(shape=ns, dtype=dt)) if affine else None
            return Call(
                lambda: ember.layer_norm(x.e, ns, None if w is None else w.e, None, 1e-5),
                lambda: torch.layer_norm(x.t, ns, None if w is None else w.t, None, 1e-5),
                f"layer_norm({_d(x)}, {ns}, {_d(w)})",
                rtol=100,
                atol=100,
            )
        w = draw(tensor_pairs(shape=(shape[1],), dtype=dt)) if affine else None
        return Call(
            lambda: ember.group_norm(x.e, g, None if w is None else w.e, None, 1e-5),
            lambda: torch.group_norm(x.t, g, None if w is None else w.t, None, 1e-5),
            f"group_norm({_d(x)}, {g}, {_d(w)})",
            rtol=100,
            atol=100,
        )

    return build


def _pad(draw):
    x = draw(tensor_pairs(min_dims=1, max_dims=3))
    pad = [draw(st.integers(-1, 2)) for _ in range(2 * draw(st.integers(1, x.t.dim())))]
    v = _scalar(draw, "int")
    return Call(
        lambda: ember.constant_pad_nd(x.e, pad, v),
        lambda: torch.constant_pad_nd(x.t, pad, v),
        f"constant_pad_nd({_d(x)}, {pad}, {v})",
    )


BUILDERS.update({k: _matmul(k) for k in ("mm", "bmm", "mv", "dot", "matmul")})
BUILDERS.update(
    conv1d=_conv(1),
    conv2d=_conv(2),
    max_pool2d=_pool("max_pool2d"),
    avg_pool1d=_pool("avg_pool1d"),
    embedding=_embedding,
    layer_norm=_norm_layer("layer_norm"),
    group_norm=_norm_layer("group_norm"),
    constant_pad_nd=_pad,
)
