"""Unbacked symbols for export (PyTorch's ``u0``): data-dependent ints as symbolic sizes.

While ``ember.export`` traces (``EXPORT_ENV`` holds its ``ShapeEnv``), ``t.item()`` of a traced
int tensor is recorded as an ``item`` node and hands back a ``SymInt`` of a fresh symbol
(``u0``, ``u1`` ...), and ``nonzero`` / a boolean-mask index give results whose first size is
such a symbol. Sizes computed from them are sympy expressions, as dynamic dims' are, so
``torch.zeros(n)`` traces. The symbol has no value: its hint (what meta kernels compute with)
is a stand-in no real size equals. Deciding on it in the program (``if n > 2``) raises
``GuardOnDataDependentSymNode``, as in PyTorch; ``torch._check(n >= 0)`` and
``torch._check_is_size(n)`` state facts instead, read as the symbol's range.
"""

from __future__ import annotations

import sys

import sympy

from ._exc import GuardOnDataDependentSymNode
from ._user_frames import _EMBER_DIRS

EXPORT_ENV: list = [None]  # the ShapeEnv of the export trace running (one at a time per process)
# draft_export's state while it traces (ember.export._draft.Draft): the real values of the
# program's .item() reads, by user line, and the report of the decisions taken with them.
DRAFT: list = [None]
_HINT = 7919  # meta kernels' stand-in value of an unbacked size (a prime: no coincidences)
_LARGE = 2**40  # sizes are below this (size-oblivious overflow checks)


def item(tensor):
    """``tensor.item()`` as a graph node (PyTorch's ``aten.item``)."""
    return tensor.item()


item.__module__ = "ember.compiler"


def record_tolist(rec, tensor):
    """``tensor.tolist()`` of a traced int tensor of static shape: nested lists of unbacked
    SymInts, one ``item`` node per element (PyTorch's graph has the same); None otherwise."""
    from ._lazy import LazyTensor

    dtype = tensor.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype.name == "bool" or tensor.numel() > 64:
        return None
    if any(type(s) is not int for s in tensor._shape) or tensor.dim() == 0:
        return None
    traced = type(tensor) is LazyTensor or rec.input_index.get(id(tensor)) in getattr(rec, "traced_inputs", ())
    if not traced:
        return None

    def rows(t):
        if t.dim() == 0:
            return record_item(rec, t)
        return [rows(t.select(0, i)) for i in range(t.shape[0])]

    return rows(tensor)


def record_item(rec, tensor):
    """Records ``tensor.item()`` of a traced int tensor as an ``item`` node and returns its
    unbacked SymInt; None when the value is not an int of the trace (the read is an error)."""
    from ._hooks import _PythonOp
    from ._lazy import LazyTensor

    dtype = tensor.dtype
    if dtype.is_floating_point or dtype.is_complex or dtype.name == "bool" or tensor.numel() != 1:
        return None
    traced = type(tensor) is LazyTensor or rec.input_index.get(id(tensor)) in getattr(rec, "traced_inputs", ())
    if not traced:
        return None
    template, key, _ = rec._conv(tensor)
    from ._user_frames import user_frame

    draft = DRAFT[0]
    real = draft.real_value(user_frame()) if draft is not None else None
    symbol = new_symbol(EXPORT_ENV[0], hint=real)
    op = _PythonOp(item, "item")
    first = len(rec.values)
    rec.values.append(None)
    rec.value_meta.append(symbol)  # build_graph_module: the node's meta["val"]
    rec.nodes.append((op, (template,), {}, first, -1))
    rec.key.append((op, (key,), ()))
    rec.symbolic = True  # sizes from here on may be symbolic: no meta cache
    if rec.want_stacks:
        from . import _module_stack
        from ._user_frames import user_frame

        rec.stacks.append(user_frame())
        rec.module_stacks.append(_module_stack.CURRENT[0])
    return symbol


def new_symbol(env, lower=None, upper=None, hint=None):
    """A fresh unbacked symbol of ``env`` with its known range (None: unbounded). ``hint``: the
    value the program had when run for real (draft_export), which its decisions then take."""
    from .symbolic_shapes import SymInt

    unbacked = env.__dict__.setdefault("unbacked", {})
    sym = sympy.Symbol(f"u{len(unbacked)}", integer=True)
    unbacked[sym] = [lower, upper]
    if hint is not None:
        env.__dict__.setdefault("real_values", {})[sym] = hint
    return SymInt(sym, _HINT if hint is None else hint, env)


def is_unbacked(env, expr) -> bool:
    unbacked = getattr(env, "unbacked", None)
    return bool(unbacked) and any(s in unbacked for s in getattr(expr, "free_symbols", ()))


class UnbackedSymBool:
    """A comparison involving an unbacked symbol. ``bool()`` answers when the symbol's known
    range decides it; otherwise, in the program's code, it is a guard that cannot be decided
    (``GuardOnDataDependentSymNode``), and in ember's own code (a kernel's ``size == 1``) it
    answers size-obliviously (a size is never 0 or 1 there, as in PyTorch), an equality not
    provable is False, and other comparisons raise too.
    ``torch._check`` records it as a fact that narrows the range."""

    __slots__ = ("value", "rel", "env")

    def __init__(self, value: bool, rel, env):
        self.value, self.rel, self.env = value, rel, env

    def __bool__(self) -> bool:
        known = _decide(self.env, self.rel)
        if known is not None:
            return known
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith(_EMBER_DIRS):
            known = _decide(self.env, self.rel, size_oblivious=True)
            if known is not None:
                return known
            if isinstance(self.rel, (sympy.Eq, sympy.Ne)):
                # not provably equal: treated as different (PyTorch's guard_or_false), so a
                # kernel takes its general path (a slice op, not the whole-dim alias)
                return isinstance(self.rel, sympy.Ne)
        if DRAFT[0] is not None:
            known = decide_by_real_values(self.env, self.rel)
            if known is not None:
                return known
        raise GuardOnDataDependentSymNode(
            f"Could not guard on data-dependent expression {self.rel} (unhinted: {self.rel}).  "
            "(Size-like symbols: none)\n\nconsider using data-dependent friendly APIs such as "
            "guard_or_false, guard_or_true and statically_known_true, or torch._check() to state a fact")

    def __ember_unguarded__(self) -> bool:
        _narrow(self.env, self.rel)
        return True

    def __repr__(self) -> str:
        return str(self.rel)


def decide_by_real_values(env, rel):
    """draft_export: ``rel`` decided by the values the program's .item() reads had when it ran (None
    when one is not known). The answer is reported and becomes a fact of the symbols' ranges, so
    the graph asserts it at run time (PyTorch's real-tensor propagation)."""
    from ._user_frames import user_frame

    real = getattr(env, "real_values", {})
    unbacked = [s for s in rel.free_symbols if s in env.unbacked]
    if not unbacked or any(s not in real for s in unbacked):
        return None
    value = rel.subs(real).subs(env.var_to_val)
    if value not in (sympy.true, sympy.false):
        return None
    answer = bool(value)
    DRAFT[0].data_dependent(rel, answer, user_frame(2))
    _narrow(env, rel if answer else rel.negated)
    return answer


def _linear(env, rel):
    """(symbol, c, d) with ``rel.lhs - rel.rhs == c*symbol + d`` (backed sizes at their hints),
    for a relation over one unbacked symbol; else None."""
    unbacked = env.unbacked
    syms = [s for s in rel.free_symbols if s in unbacked]
    if len(syms) != 1:
        return None
    sym = syms[0]
    diff = sympy.expand((rel.lhs - rel.rhs).subs(env.var_to_val))
    if diff.free_symbols != {sym} or not diff.is_polynomial(sym) or sympy.degree(diff, sym) != 1:
        return None
    c = diff.coeff(sym)
    d = diff.subs(sym, 0)
    if not (c.is_Integer and d.is_Integer):
        return None
    return sym, int(c), int(d)


def _decide(env, rel, size_oblivious: bool = False):
    """True/False when every value of the symbol's range gives that answer, else None.
    ``size_oblivious``: for a comparison with 0 or 1, the symbol is taken to be at least 2."""
    found = _linear(env, rel)
    if found is None:
        return None
    sym, c, d = found
    lower, upper = env.unbacked[sym]
    if size_oblivious:
        # a size against 0/1 (``size == 1``) or against an overflow limit (``numel > 2**63 - 1``)
        if abs(d) > abs(c) and abs(d) < abs(c) * _LARGE:
            return None
        lower = 2 if lower is None else max(lower, 2)
        upper = _LARGE if upper is None else upper
    ends = [None if v is None else c * v + d for v in (lower, upper)]
    lo, hi = (ends if c > 0 else ends[::-1])  # the range of c*sym + d; None: unbounded
    lo_ok = lo is not None
    hi_ok = hi is not None
    if isinstance(rel, sympy.Gt):
        return True if lo_ok and lo > 0 else False if hi_ok and hi <= 0 else None
    if isinstance(rel, sympy.Ge):
        return True if lo_ok and lo >= 0 else False if hi_ok and hi < 0 else None
    if isinstance(rel, sympy.Lt):
        return True if hi_ok and hi < 0 else False if lo_ok and lo >= 0 else None
    if isinstance(rel, sympy.Le):
        return True if hi_ok and hi <= 0 else False if lo_ok and lo > 0 else None
    if isinstance(rel, (sympy.Eq, sympy.Ne)):
        outside = (lo_ok and lo > 0) or (hi_ok and hi < 0)
        if outside:
            return isinstance(rel, sympy.Ne)
        if lo_ok and hi_ok and lo == hi == 0:
            return isinstance(rel, sympy.Eq)
    return None


def _narrow(env, rel) -> None:
    """Records ``rel`` (stated true by ``torch._check``) in the range of its unbacked symbol."""
    found = _linear(env, rel)
    if found is None or not isinstance(rel, (sympy.Ge, sympy.Gt, sympy.Le, sympy.Lt, sympy.Eq)):
        return
    sym, c, d = found
    bounds = env.unbacked[sym]
    k = sympy.Rational(-d, c)  # c*sym + d (op) 0  <=>  sym (op') k
    if isinstance(rel, sympy.Eq):
        if k.is_Integer:
            bounds[0] = bounds[1] = int(k)
        return
    strict = isinstance(rel, (sympy.Gt, sympy.Lt))
    if isinstance(rel, (sympy.Ge, sympy.Gt)) == (c > 0):  # sym >= k, or sym > k
        value = int(sympy.floor(k)) + 1 if strict else int(sympy.ceiling(k))
        bounds[0] = value if bounds[0] is None else max(bounds[0], value)
    else:  # sym <= k, or sym < k
        value = int(sympy.ceiling(k)) - 1 if strict else int(sympy.floor(k))
        bounds[1] = value if bounds[1] is None else min(bounds[1], value)


def ranges(env, used_as_size=()) -> dict:
    """{symbol: [lower, upper]} of ``env``'s unbacked symbols (None: unbounded); a symbol used as
    a size is at least 0."""
    out = {}
    for sym, (lower, upper) in getattr(env, "unbacked", {}).items():
        if sym in used_as_size:
            lower = 0 if lower is None else max(lower, 0)
        out[sym] = [lower, upper]
    return out


def unbacked_output(func, margs):
    """The meta result of a data-dependent-shape op whose size is a new unbacked symbol:
    ``nonzero`` ((u, ndim) int64), indexing by one boolean mask ((u, *rest)) and ``unique`` of
    all elements ((u,) values, the inverse, (u,) counts); else None."""
    from ember import _C
    from ember._src import dtypes
    from ember._src.device import META
    from ember._src.tensor import Tensor, make_tensor

    env = EXPORT_ENV[0]
    if func.name == "nonzero" and margs and isinstance(margs[0], Tensor):
        x = margs[0]
        size = new_symbol(env, 0, x.numel())
        return _meta((size, x.dim()), dtypes.int64, _C, META, make_tensor)
    if func.name == "index" and len(margs) == 2 and isinstance(margs[0], Tensor):
        x, indices = margs
        if len(indices) == 1 and isinstance(indices[0], Tensor) and indices[0].dtype is dtypes.bool:
            mask = indices[0]
            k = mask.dim()
            if tuple(mask._shape) == tuple(x._shape[:k]):
                size = new_symbol(env, 0, mask.numel())
                return _meta((size, *x._shape[k:]), x.dtype, _C, META, make_tensor)
    if func.name == "_unique2" and margs and isinstance(margs[0], Tensor) and (len(margs) < 5 or margs[4] is None):
        x = margs[0]
        size = new_symbol(env, 0, x.numel())
        return (_meta((size,), x.dtype, _C, META, make_tensor), _meta(tuple(x._shape), dtypes.int64, _C, META,
                                                                       make_tensor),
                _meta((size,), dtypes.int64, _C, META, make_tensor))
    return None


def _meta(shape, dtype, _C, META, make_tensor):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc = acc * s
    numel = 1
    for s in shape:
        numel *= int(s)
    return make_tensor(_C.Storage.meta(numel * dtype.itemsize), tuple(shape), tuple(reversed(strides)), 0, dtype, META)
