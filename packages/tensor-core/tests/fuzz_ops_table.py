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
import os

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
    parse_schema,
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
    shapes = [tuple(b.t.shape) for b in (x, lo, hi) if isinstance(b, Pair)]
    tags = {"bounds_broadcast_input"} if _broadcasts_to(shapes) not in (None, shapes[0]) else set()
    return Call(
        lambda: ember.clamp(x.e, le, he),
        lambda: torch.clamp(x.t, lt, ht),
        f"clamp({_d(x)}, {_d(lo)}, {_d(hi)})",
        tags=tags,
    )


def _broadcasts_to(shapes):
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return None


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
        if not x.t.dtype.is_floating_point:
            call.tags.add("nonfloat_input")
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
        "index_add_",
        "index_add",
        IndexError,
        "PyTorch's index_add_ reports a bad index as IndexError on some paths (1-d self, single-element "
        "slices) and as RuntimeError on others; ember always raises RuntimeError",
    ),
    (
        "index_getitem index_add_",
        "empty",
        None,
        "PyTorch skips index validation when self or the result is empty (x[:, [3]] of a (0, 1) tensor "
        "returns an empty tensor); ember still checks the indices",
    ),
    (
        "scatter_reduce_",
        "bool_mean",
        None,
        "PyTorch has no bool kernel for scatter_reduce_(reduce='mean'); ember computes it",
    ),
    (
        "index_select",
        "index_select",
        RuntimeError,
        "PyTorch reports a bad index_select index as IndexError on some kernel paths and as RuntimeError on "
        "others (bool dtype: 'INDICES element is out of DATA bounds'); ember always raises IndexError",
    ),
    (
        "bincount",
        "empty",
        None,
        "torch.bincount of an empty input returns int64 zeros even with float weights (a PyTorch quirk); "
        "ember returns the weights' dtype as for non-empty inputs",
    ),
    (
        "constant_pad_nd unique scatter_reduce_",
        "empty",
        RuntimeError,
        "PyTorch rejects some empty inputs that ember handles: negative padding of an empty dim (applied "
        "through narrow()), unique(dim=d) when another dim is empty",
    ),
    (
        "norm",
        "nonfloat_input",
        RuntimeError,
        "torch.norm rejects integer/bool inputs even when dtype= asks for a float result; ember computes "
        "in the requested dtype",
    ),
    (
        "embedding",
        "zero_width",
        RuntimeError,
        "for a weight with zero-width rows PyTorch reports a bad index as RuntimeError (another code path), "
        "otherwise as IndexError; ember raises IndexError for both",
    ),
    (
        "clamp",
        "bounds_broadcast_input",
        RuntimeError,
        "gradient mode: PyTorch's clamp backward (clamp_backward, clamp_backward_min_max) combines its masks "
        "with in-place logical_and_/logical_or_, which raise 'output with shape [..] doesn't match the "
        "broadcast shape [..]' when tensor bounds broadcast the input to a larger shape; ember returns "
        "the gradient",
    ),
    (
        "conv1d conv2d",
        "nonfinite_weight_padded",
        None,
        "a NaN/inf weight over zero padding: ember multiplies the padding's zeros (0 * NaN = NaN), PyTorch's "
        "kernel skips padded positions (docs/deviations.md, issue 17 session 2)",
    ),
    (
        "index_copy_ index_fill_",
        "empty",
        RuntimeError,
        "PyTorch 2.13 misses the bounds check of index_copy_/index_fill_ into an empty dim and fails later "
        "inside setStorage (RuntimeError); ember raises the IndexError the check is meant to give",
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
    """The documented reason this mismatch is expected, or None.

    With EMBER_FUZZ_DIVERGENCE_LOG=path each use is appended there (op, tag), which shows the entries
    that no longer fire (fixed bugs whose entry would hide a regression)."""
    for ops, tag, torch_exc, reason in KNOWN_DIVERGENCES:
        if ops != "*" and name not in ops.split():
            continue
        if tag not in call.tags:
            continue
        if torch_exc is not None and not isinstance(t_exc, torch_exc):
            continue
        if os.environ.get("EMBER_FUZZ_DIVERGENCE_LOG"):
            with open(os.environ["EMBER_FUZZ_DIVERGENCE_LOG"], "a") as log:
                log.write(f"{name}\t{tag}\t{type(e_exc).__name__}\t{type(t_exc).__name__}\n")
        return reason
    return None
