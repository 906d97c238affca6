"""Facts about ops the capture needs, cached per op, and the cache of meta results.

``op_info(op)``: which arguments an op writes (its schema's ``(a!)`` marks, plus BatchNorm's
running statistics, which its kernel updates unmarked), whether it draws random numbers,
whether its results can require grad. ``META_CACHE``: meta kernel answers by (op, default
dtype, argument metadata and constants).
"""

from __future__ import annotations

from ember import _C
from ember._src.device import META
from ember._src.tensor import Tensor, make_tensor

# Ops whose kernels write into tensor arguments that their schema does not mark (a!):
# BatchNorm's running statistics.
HIDDEN_WRITES = {"native_batch_norm": (3, 4), "batch_norm": (3, 4)}
OP_INFO: dict = {}


def op_info(op) -> tuple:
    """(positions written, draws random numbers, differentiable) for an op, cached."""
    info = OP_INFO.get(op)
    if info is None:
        schema = op.schema
        args_text = schema.split("(", 1)[1].rsplit("->", 1)[0]
        written = tuple(i for i, a in enumerate(args_text.split(",")) if "!)" in a)
        written += HIDDEN_WRITES.get(op.name, ())
        random = "random" in op.tags or "Generator" in schema
        try:
            from ember.autograd.formulas import NON_DIFFERENTIABLE
        except ImportError:  # ember-autograd absent: nothing requires grad anyway
            NON_DIFFERENTIABLE = ()
        info = (written, random, op.name not in NON_DIFFERENTIABLE and op.name != "detach")
        OP_INFO[op] = info
    return info


# Meta results by (op, default dtype, argument metadata and constants): a meta kernel's answer
# depends on nothing else for ops that do not write their inputs (a view's result is rebuilt
# over its argument's meta storage).
META_CACHE: dict = {}
META_CACHE_LIMIT = 20000
UNCACHEABLE: set = set()


def remember(key, out, margs) -> None:
    outs = (out,) if isinstance(out, Tensor) else out
    if not isinstance(outs, (tuple, list)):
        return
    entry = []
    for o in outs:
        if o is None:
            entry.append(None)
            continue
        if not isinstance(o, Tensor) or o._device is not META:
            return
        alias = None
        for i, m in enumerate(margs):
            if isinstance(m, Tensor) and m._storage is o._storage:
                if m is o:  # an in-place result: the argument itself must come back
                    UNCACHEABLE.add(key[0])
                    return
                alias = i  # a view: rebuilt over that argument's storage
                break
        entry.append((o._shape, o._stride, o._offset, o.dtype, o._storage.nbytes(), alias))
    if len(META_CACHE) >= META_CACHE_LIMIT:
        META_CACHE.clear()
    META_CACHE[key] = (isinstance(out, Tensor), type(out), tuple(entry))


def from_cached(cached, margs):
    single, kind, entry = cached
    outs = []
    for e in entry:
        if e is None:
            outs.append(None)
        else:
            storage = _C.Storage.meta(e[4]) if e[5] is None else margs[e[5]]._storage
            outs.append(make_tensor(storage, e[0], e[1], e[2], e[3], META))
    if single:
        return outs[0]
    return kind(outs)
