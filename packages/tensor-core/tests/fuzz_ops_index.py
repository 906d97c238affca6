"""Fuzzer builders for indexing, scatter, joining, matmul and nn kernels (registered in BUILDERS)."""

from __future__ import annotations

import math

import numpy as np
import torch
from fuzz_ops_table import (
    BUILDERS,
    _d,
    _dim,
    _scalar,
)
from fuzz_strategies import (
    FLOAT_DTYPES,
    Call,
    Pair,
    broadcast_shape_for,
    index_pair,
    pair_from_numpy,
    shapes,
    tensor_pairs,
)
from hypothesis import strategies as st

import ember

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
    call = Call(
        lambda: ember.index_select(x.e, d, idx.e),
        lambda: torch.index_select(x.t, d, idx.t),
        f"index_select({_d(x)}, {d}, {idx.t.tolist()})",
    )
    call.tags = {"index_select"}
    return call


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
                    tags={"empty"} if x.t.numel() == 0 else set(),
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
                tags={"index_add"} | ({"empty"} if x.t.numel() == 0 else set()),
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
                tags=({"empty"} if x.t.numel() == 0 else set())
                | ({"bool_mean"} if red == "mean" and x.t.dtype == torch.bool else set()),
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
            return Call(lambda: x.e[ek], lambda: x.t[tk], desc, tags={"empty"} if x.t.numel() == 0 else set())
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
            atol=1000,
            tags={"nonfinite_weight_padded"} if kw["padding"] and not w.t.isfinite().all() else set(),
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
    call = Call(
        lambda: ember.embedding(w.e, idx.e, pad),
        lambda: torch.embedding(w.t, idx.t, pad),
        f"embedding({_d(w)}, {idx.t.tolist()}, {pad})",
    )
    call.tags = {"zero_width"} if w.t.shape[1] == 0 else set()
    return call


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
            atol=1000,
        )

    return build


def _pad(draw):
    x = draw(tensor_pairs(min_dims=1, max_dims=3))
    pad = [draw(st.integers(-1, 2)) for _ in range(2 * draw(st.integers(1, x.t.dim())))]
    v = _scalar(draw, "int")
    call = Call(
        lambda: ember.constant_pad_nd(x.e, pad, v),
        lambda: torch.constant_pad_nd(x.t, pad, v),
        f"constant_pad_nd({_d(x)}, {pad}, {v})",
    )
    call.tags = {"empty"} if x.t.numel() == 0 else set()
    return call


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
