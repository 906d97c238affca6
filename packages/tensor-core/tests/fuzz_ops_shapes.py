"""Fuzzer builders for sorting/selection, views and reordering ops (registered in BUILDERS)."""

from __future__ import annotations

import math

import torch
from fuzz_ops_table import (
    BUILDERS,
    NUMERIC,
    _d,
    _dim,
    _dims,
    _scalar,
    _tie_check,
)
from fuzz_strategies import (
    ALL_DTYPES,
    E_DT,
    T_DT,
    Call,
    Pair,
    assert_match,
    broadcast_shape_for,
    shapes,
    tensor_pairs,
)
from hypothesis import strategies as st

import ember

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
            # PyTorch 2.13 bug: median/nanmedian along a dim of an expanded (stride-0) input read past
            # the one stored element (garbage values, docs/deviations.md): torch gets a contiguous copy.
            tx = x.t.contiguous() if public in ("median", "nanmedian") and 0 in x.t.stride() else x.t
            ef = lambda: getattr(ember, public)(x.e, dim, keep)  # noqa: E731
            tf = lambda: getattr(torch, public)(tx, dim, keep)  # noqa: E731
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
    call = Call(
        lambda: ember.unique(x.e, True, inv, counts, dim),
        lambda: torch.unique(x.t, True, inv, counts, dim),
        f"unique({_d(x)}, inverse={inv}, counts={counts}, dim={dim})",
    )
    call.tags = {"empty"} if x.t.numel() == 0 else set()
    return call


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
    call = Call(
        lambda: ember.bincount(x.e, None if w is None else w.e, ml),
        lambda: torch.bincount(x.t, None if w is None else w.t, ml),
        f"bincount({_d(x)}, {_d(w)}, {ml})",
        rtol=10,
        atol=10,
    )
    call.tags = {"empty"} if x.t.numel() == 0 else set()
    return call


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
