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
    if rel is sympy.true or rel is sympy.false:
        return bool(rel)
    found = _linear(env, rel)
    if found is None:
        # not linear in one symbol (``Min(6, u0) >= 0``, ``u1 - u0``): the ranges of both sides
        return None if size_oblivious else _decide_by_bounds(env, rel)
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


def _bounds(env, expr):
    """(lower, upper) of an integer expression over unbacked symbols (their ranges) and sizes
    (their hints, as ``_linear`` reads them); +-inf where unbounded, None where not known."""
    if expr.is_Number:
        return expr, expr
    if expr.is_Symbol:
        if expr in env.unbacked:
            lower, upper = env.unbacked[expr]
            return (-sympy.oo if lower is None else sympy.Integer(lower),
                    sympy.oo if upper is None else sympy.Integer(upper))
        value = env.var_to_val.get(expr)
        return None if value is None else (sympy.Integer(value),) * 2
    parts = [_bounds(env, a) for a in expr.args]
    if any(p is None for p in parts):
        return None
    if expr.is_Add:
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if expr.is_Mul:
        lower, upper = parts[0]
        for lo, hi in parts[1:]:
            if (lower.is_infinite or upper.is_infinite) and 0 in (lo, hi) or \
                    (lo.is_infinite or hi.is_infinite) and 0 in (lower, upper):
                return None  # 0 * oo
            ends = [lower * lo, lower * hi, upper * lo, upper * hi]
            lower, upper = min(ends), max(ends)
        return lower, upper
    if isinstance(expr, (sympy.Min, sympy.Max)):
        pick = min if isinstance(expr, sympy.Min) else max
        return pick(p[0] for p in parts), pick(p[1] for p in parts)
    if isinstance(expr, (sympy.floor, sympy.ceiling)):
        fn = sympy.floor if isinstance(expr, sympy.floor) else sympy.ceiling
        lower, upper = parts[0]
        return (lower if lower.is_infinite else fn(lower)), (upper if upper.is_infinite else fn(upper))
    return None


def _decide_by_bounds(env, rel):
    if not isinstance(rel, (sympy.Gt, sympy.Ge, sympy.Lt, sympy.Le, sympy.Eq, sympy.Ne)):
        return None
    found = _bounds(env, sympy.expand(rel.lhs - rel.rhs))
    if found is None:
        return None
    lo, hi = found
    if isinstance(rel, sympy.Gt):
        return True if lo > 0 else False if hi <= 0 else None
    if isinstance(rel, sympy.Ge):
        return True if lo >= 0 else False if hi < 0 else None
    if isinstance(rel, sympy.Lt):
        return True if hi < 0 else False if lo >= 0 else None
    if isinstance(rel, sympy.Le):
        return True if hi <= 0 else False if lo > 0 else None
    if lo > 0 or hi < 0:
        return isinstance(rel, sympy.Ne)
    if lo == hi == 0:
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


def _node(v):
    from .symbolic_shapes import SymInt

    return v.node if isinstance(v, SymInt) else sympy.Integer(v)


def _known(env, rel) -> bool:
    """Whether the ranges prove ``rel`` (PyTorch's ``guard_or_false``)."""
    return _decide(env, rel) is True


def _sym_min_max(env, a, b, pick):
    from .symbolic_shapes import SymInt

    expr = (sympy.Min if pick is min else sympy.Max)(_node(a), _node(b))
    hint = pick(int.__int__(a), int.__int__(b))
    return int(expr) if expr.is_Integer else SymInt(expr, hint, env)


def sym_min(a, b):
    """``min(a, b)`` of sizes, symbolic (``Min(6, u0)``) when one is (PyTorch's ``torch.sym_min``):
    the graph node of a slice bound clamped to the size, which a trace of the graph reads again."""
    from .symbolic_shapes import SymInt

    if isinstance(a, SymInt) or isinstance(b, SymInt):
        env = a.shape_env if isinstance(a, SymInt) else b.shape_env
        return _sym_min_max(env, a, b, min)
    return a if a <= b else b


def sym_max(a, b):
    """``max(a, b)`` of sizes, symbolic when one is (PyTorch's ``torch.sym_max``)."""
    from .symbolic_shapes import SymInt

    if isinstance(a, SymInt) or isinstance(b, SymInt):
        env = a.shape_env if isinstance(a, SymInt) else b.shape_env
        return _sym_min_max(env, a, b, max)
    return a if a >= b else b


sym_min.__module__ = sym_max.__module__ = "ember.compiler"


def _slice_index(env, size, index):
    """A slice bound clamped to ``[0, size]`` with negatives counted from the end, as PyTorch's
    fake slice (``_compute_slice_index``): the bound itself, ``size - k``, 0, ``size``,
    ``Min(index, size)`` or ``Max(index + size, 0)`` where the ranges prove which applies;
    else the recorded ``clamp_slice_index`` node's new unbacked symbol."""
    i, n = _node(index), _node(size)
    if _known(env, sympy.Ge(i, 0)) and _known(env, sympy.Le(i, n)):
        return index
    if _known(env, sympy.Lt(i, 0)) and _known(env, sympy.Ge(i, -n)):
        return index + size
    if _known(env, sympy.Lt(i, -n)):
        return 0
    if _known(env, sympy.Gt(i, n)):
        return size
    if _known(env, sympy.Ge(i, 0)):
        return _sym_min_max(env, index, size, min)
    if _known(env, sympy.Lt(i, 0)):
        return _sym_min_max(env, index + size, 0, max)
    return clamp_slice_index(index, size)


def slice_bounds(size, start, stop):
    """tensor-core's slicing (``x[a:b]``) where a bound or the size is an unbacked symbol of the
    export trace running: ``(start, stop)`` clamped to ``[0, size]`` with ``stop >= start``,
    decided from the symbols' ranges instead of guarded; None when no unbacked symbol is involved
    (the plain path then compares)."""
    env = EXPORT_ENV[0]
    if env is None or not any(v is not None and not isinstance(v, bool) and is_unbacked(env, _node(v))
                              for v in (size, start, stop)):
        return None
    first = 0 if start is None else _slice_index(env, size, start)
    last = size if stop is None else _slice_index(env, size, stop)
    if not _known(env, sympy.Ge(_node(last), _node(first))):
        # PyTorch: the size is 0 where start >= stop is proved, else Max(stop - start, 0)
        last = first if _known(env, sympy.Ge(_node(first), _node(last))) else _sym_min_max(env, first, last, max)
    # the stand-in values meta kernels compute with: within [0, size], stop >= start, as proved
    size_hint = int.__int__(size)
    first = _with_hint(first, env, min(max(int.__int__(first), 0), size_hint))
    last = _with_hint(last, env, min(max(int.__int__(last), int.__int__(first)), size_hint))
    return first, last


def _with_hint(v, env, hint):
    from .symbolic_shapes import SymInt

    if not isinstance(v, SymInt) or int.__int__(v) == hint:
        return v
    return SymInt(v.node, hint, v.shape_env if v.shape_env is not None else env)


def clamp_slice_index(index, size):
    """``index`` as a slice bound of a dim of ``size``: negatives count from the end, and the
    result is clamped to ``[0, size]``. In an exported graph this node makes the new unbacked
    symbol of a bound whose sign the trace could not decide (``x[:k.item()]``; PyTorch gives
    the slice a new unbacked size); a trace of such a graph records it again."""
    from ._recorder import current
    from .symbolic_shapes import SymInt

    env = EXPORT_ENV[0]
    rec = current()
    if env is not None and rec is not None and not rec.suspended and isinstance(index, SymInt) \
            and is_unbacked(env, index.node):
        from ._hooks import _PythonOp

        bounded = type(size) is int
        symbol = new_symbol(env, 0, size if bounded else None)
        if bounded:  # meta kernels view the tensor at this length: within the dim
            symbol = SymInt(symbol.node, size, env)
        op = _PythonOp(clamp_slice_index, "clamp_slice_index")
        (t_index, k_index, _), (t_size, k_size, _) = rec._conv(index), rec._conv(size)
        first = len(rec.values)
        rec.values.append(None)
        rec.value_meta.append(symbol)
        rec.nodes.append((op, (t_index, t_size), {}, first, -1))
        rec.key.append((op, (k_index, k_size), ()))
        rec.symbolic = True
        if rec.want_stacks:
            from . import _module_stack
            from ._user_frames import user_frame

            rec.stacks.append(user_frame())
            rec.module_stacks.append(_module_stack.CURRENT[0])
        return symbol
    if index < 0:
        index = index + size
        return index if index > 0 else 0
    return index if index < size else size


clamp_slice_index.__module__ = "ember.compiler"


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


def _install() -> None:
    from ember._src.ops.shape import views

    views.SYMBOLIC_SLICE_BOUNDS[0] = slice_bounds


_install()
