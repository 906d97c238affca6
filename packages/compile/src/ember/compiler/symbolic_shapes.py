"""Symbolic sizes on sympy (PyTorch's ``torch.fx.experimental.symbolic_shapes``).

``ShapeEnv`` creates size symbols (``s0``, ``s1`` ...) with their concrete hints and records
the guards (sympy relations) that a trace assumed; ``SymInt`` is an ``int`` carrying a sympy
expression, so arithmetic on sizes (``x.shape[0] // 2``) keeps the expression while every
integer use still sees the concrete value. ``mark_dynamic`` / ``mark_static`` annotate
tensors as PyTorch's do (``_dynamo_dynamic_indices``).
"""

from __future__ import annotations

import operator
import sys

import sympy

from ._user_frames import is_user_file


class SymInt(int):
    """An int whose value is ``hint`` and whose meaning is the sympy expression ``node``."""

    def __new__(cls, node, hint: int, shape_env=None):
        self = int.__new__(cls, hint)
        self.node = sympy.sympify(node)
        self.shape_env = shape_env
        return self

    @property
    def hint(self) -> int:
        return int(self)

    def __repr__(self) -> str:
        return str(self.node)

    def _binary(self, other, op, reflected=False):
        if isinstance(other, SymFloat) and other.node is not None:  # n * n ** 0.5: a symbolic float
            return self._float_binary(other, op, reflected, depth=4)
        if isinstance(other, bool) or not isinstance(other, int):
            return op(int(self), other) if not reflected else op(other, int(self))
        a = self.node
        b = other.node if isinstance(other, SymInt) else sympy.Integer(other)
        expr = op(b, a) if reflected else op(a, b)
        value = op(int(other), int(self)) if reflected else op(int(self), int(other))
        return SymInt(expr, value, self.shape_env)

    def __add__(self, o):
        return self._binary(o, operator.add)

    def __radd__(self, o):
        return self._binary(o, operator.add, True)

    def __sub__(self, o):
        return self._binary(o, operator.sub)

    def __rsub__(self, o):
        return self._binary(o, operator.sub, True)

    def __mul__(self, o):
        return self._binary(o, operator.mul)

    def __rmul__(self, o):
        return self._binary(o, operator.mul, True)

    def __floordiv__(self, o):
        if isinstance(o, bool) or not isinstance(o, int):
            return int(self) // o
        b = o.node if isinstance(o, SymInt) else sympy.Integer(o)
        return SymInt(sympy.floor(self.node / b), int(self) // int(o), self.shape_env)

    def __mod__(self, o):
        if isinstance(o, bool) or not isinstance(o, int):
            return int(self) % o
        b = o.node if isinstance(o, SymInt) else sympy.Integer(o)
        return SymInt(sympy.Mod(self.node, b), int(self) % int(o), self.shape_env)

    def __neg__(self):
        return SymInt(-self.node, -int(self), self.shape_env)

    # math.floor/ceil/trunc and round() of a size are the size (PyTorch keeps it symbolic; int's
    # own methods would return a plain int, dropping the expression).
    def __floor__(self):
        return self

    __ceil__ = __trunc__ = __floor__

    def __round__(self, ndigits=None):
        return self if ndigits is None or ndigits >= 0 else int.__round__(int.__int__(self), ndigits)

    # ``n / 2`` and ``n ** 0.5`` are symbolic floats (PyTorch's SymFloat) while export traces, so
    # ``math.floor(n / 2)`` stays a size expression instead of a constant.
    def _float_binary(self, other, op, reflected, depth: int = 3):
        env = self.shape_env
        plain_other = float.__float__(other) if isinstance(other, SymFloat) else other
        plain = op(plain_other, int.__int__(self)) if reflected else op(int.__int__(self), plain_other)
        if env is None or not env.record_guards or isinstance(other, bool) or not isinstance(other, (int, float)) \
                or not isinstance(plain, float) or not _caller_is_user(depth):
            return plain  # ember's own arithmetic on sizes (arange's length) reads plain numbers
        b = _sym_node(other)
        expr = op(b, self.node) if reflected else op(self.node, b)
        return SymFloat._make(plain, expr, env)

    def __truediv__(self, o):
        return self._float_binary(o, operator.truediv, False)

    def __rtruediv__(self, o):
        return self._float_binary(o, operator.truediv, True)

    def __pow__(self, o, mod=None):
        if mod is not None or isinstance(o, int) and not isinstance(o, bool):
            return int.__pow__(int.__int__(self), int(o), mod) if mod is not None else self._binary(o, operator.pow)
        return self._float_binary(o, operator.pow, False)

    def __rpow__(self, o):
        return self._float_binary(o, operator.pow, True)

    def __hash__(self):
        return int.__hash__(self)

    # Comparisons answer from the hints, as every int use does, and record the answer as a
    # guard in the ShapeEnv (PyTorch's guard_bool): a trace that took a branch on a size is
    # valid only where the same comparison comes out the same way.
    def _compare(self, other, op, rel):
        if isinstance(other, bool) or not isinstance(other, int):
            return op(int(self), other)
        result = op(int(self), int(other))
        env = self.shape_env if self.shape_env is not None else getattr(other, "shape_env", None)
        if env is not None and env.__dict__.get("unbacked"):
            from ._unbacked_export import UnbackedSymBool, is_unbacked

            b = other.node if isinstance(other, SymInt) else sympy.Integer(other)
            if is_unbacked(env, self.node) or is_unbacked(env, b):
                # export's data-dependent sizes: no value to decide with (``_unbacked_export``)
                relation = rel(self.node, b)
                if relation is sympy.true or relation is sympy.false:
                    return bool(relation)
                return UnbackedSymBool(result, relation, env)
        if env is not None and env.record_guards:
            b = other.node if isinstance(other, SymInt) else sympy.Integer(other)
            relation = rel(self.node, b)
            if relation is not sympy.true and relation is not sympy.false and _caller_is_user(3):
                # the program's own comparison (3 frames up: past _compare and the operator) stays
                # symbolic until it is decided (PyTorch's SymBool): ``torch.cond(p, ...)`` keeps it
                # as a runtime predicate
                return SymBool._make(result, relation, env)
            env.add_guard(relation if result else sympy.Not(relation))
        return result

    def __eq__(self, o):
        return self._compare(o, operator.eq, sympy.Eq)

    def __ne__(self, o):
        return self._compare(o, operator.ne, sympy.Ne)

    def __lt__(self, o):
        return self._compare(o, operator.lt, sympy.Lt)

    def __le__(self, o):
        return self._compare(o, operator.le, sympy.Le)

    def __gt__(self, o):
        return self._compare(o, operator.gt, sympy.Gt)

    def __ge__(self, o):
        return self._compare(o, operator.ge, sympy.Ge)


# Reading a symbolic size as a plain number in the program (``int(n)``, ``float(n)``,
# ``math.sqrt(n)``) specializes it, as PyTorch's guard_int/guard_float: during export's symbolic
# trace the dims it depends on are guarded equal to their example sizes (an error for a
# ``Dim``/``Dim.DYNAMIC``, static for ``Dim.AUTO``). ember's own code reads sizes as ints freely
# (its meta kernels), so only a call from the program's frame guards. The methods are SymInt's
# only while export traces (``reading_sizes_guards``): elsewhere int() of a size stays int's own.
def _guarded_int(self) -> int:
    env = self.shape_env
    if env is not None and env.record_guards and _caller_is_user():
        _specialize(self.node, env)
    return int.__int__(self)


def _guarded_float(self) -> float:
    env = self.shape_env
    if env is not None and env.record_guards and _caller_is_user():
        _specialize(self.node, env)
    return int.__float__(self)


class reading_sizes_guards:
    """While active, ``int()``/``float()`` of a SymInt in the program record a specialization."""

    depth = 0

    def __enter__(self):
        if reading_sizes_guards.depth == 0:
            SymInt.__int__, SymInt.__float__ = _guarded_int, _guarded_float
        reading_sizes_guards.depth += 1
        return self

    def __exit__(self, *exc):
        reading_sizes_guards.depth -= 1
        if reading_sizes_guards.depth == 0:
            del SymInt.__int__, SymInt.__float__
        return False


def _sym_node(x):
    node = getattr(x, "node", None)
    if node is not None and isinstance(x, (SymInt, SymFloat)):
        return node
    return sympy.Float(x) if isinstance(x, float) else sympy.Integer(x)


def _caller_is_user(depth: int = 2) -> bool:
    """Whether the frame ``depth`` levels up (the caller of the dunder method calling this) is
    the program's, not ember's."""
    return is_user_file(sys._getframe(depth).f_code.co_filename)


def _specialize(expr, env) -> None:
    """Guards every (backed) size symbol of ``expr`` equal to its example value."""
    for sym in sorted(sympy.sympify(expr).free_symbols, key=str):
        value = env.var_to_val.get(sym)
        if value is not None:
            env.add_guard(sympy.Eq(sym, value))


class RoundToInt(sympy.Function):
    """``round(x)`` of a symbolic float: the nearest integer, halves to even (Python's and
    PyTorch's ``RoundToInt``)."""

    is_integer = True

    @classmethod
    def eval(cls, x):
        if x.is_Rational:
            from fractions import Fraction

            return sympy.Integer(round(Fraction(int(x.p), int(x.q))))
        if x.is_Number:
            return sympy.Integer(round(float(x)))
        return None


class SymFloat(float):
    """PyTorch's symbolic float: during export's symbolic trace, ``n / 2`` or ``n ** 0.5`` of a
    size ``n`` (value ``hint``, meaning the sympy expression ``node``). ``math.floor``/``ceil``/
    ``trunc`` and ``round()`` of one are sizes again (SymInts); any other use (``float()``,
    arithmetic, a comparison, an op argument) reads the number, which specializes the sizes it
    came from, as PyTorch's ``guard_float``. Other traces make plain floats; the class also
    serves the ``isinstance`` checks and annotations of PyTorch code."""

    node = None
    shape_env = None

    @classmethod
    def _make(cls, hint: float, node, env):
        self = float.__new__(cls, hint)
        self.node, self.shape_env = node, env
        return self

    def __repr__(self) -> str:
        return str(self.node) if self.node is not None else float.__repr__(self)

    def _read(self) -> float:
        if self.node is not None and self.shape_env is not None and self.shape_env.record_guards:
            _specialize(self.node, self.shape_env)
        return float.__float__(self)

    def __float__(self) -> float:
        return self._read()

    def __int__(self) -> int:
        env = self.shape_env
        if self.node is not None and env is not None and env.record_guards and _caller_is_user():
            # PyTorch's int() of a symbolic float: the dims stay symbolic under the guard that the
            # truncated value is the example's (``trunc(sqrt(n)) == 4``), which a Dim.AUTO/DYNAMIC
            # dim takes as a runtime check and a named Dim reports as a constraint violation
            value = int(float.__float__(self))
            v = float.__float__(self)
            env.add_guard(sympy.Eq(sympy.floor(self.node) if v >= 0 else sympy.ceiling(self.node), value))
            return value
        return int(self._read())

    def _to_int(self, fn, value: int):
        env = self.shape_env
        if self.node is None or env is None or not env.record_guards:
            return value
        return SymInt(fn(self.node), value, env)

    def __floor__(self):
        import math

        return self._to_int(sympy.floor, math.floor(float.__float__(self)))

    def __ceil__(self):
        import math

        return self._to_int(sympy.ceiling, math.ceil(float.__float__(self)))

    def __trunc__(self):
        import math

        v = float.__float__(self)
        return self._to_int(lambda e: sympy.floor(e) if v >= 0 else sympy.ceiling(e), math.trunc(v))

    def __round__(self, ndigits=None):
        # round() to an int stays symbolic, as PyTorch's RoundToInt (half to even); with digits
        # it reads the number (specializes)
        env = self.shape_env
        if ndigits is None and self.node is not None and env is not None and env.record_guards \
                and _caller_is_user():
            return SymInt(RoundToInt(self.node), round(float.__float__(self)), env)
        return round(self._read(), ndigits) if ndigits is not None else round(self._read())

    def __hash__(self):
        return float.__hash__(self)

    def __bool__(self) -> bool:
        return bool(self._read())


def _float_reader(name):
    base = getattr(float, name)

    def method(self, *args):
        args = tuple(float(a) if isinstance(a, (SymFloat, SymInt)) else a for a in args)
        return base(self._read(), *args) if self.node is not None else base(self, *args)

    method.__name__ = name
    return method


def _float_arithmetic(name, op, reflected):
    """``n ** 0.5 * 2``, ``1 / n ** 0.5``: arithmetic of the program on a symbolic float stays a
    symbolic float during export's trace (PyTorch's SymFloat), so an op taking it keeps the dims
    symbolic; elsewhere it reads the number (``_float_reader``)."""
    reader, plain_op = _float_reader(name), _plain_float_op(name)

    def method(self, other):
        env = self.shape_env
        if self.node is None or env is None or not env.record_guards or isinstance(other, bool) \
                or not isinstance(other, (int, float)) or not _caller_is_user(2):
            return reader(self, other)
        plain = plain_op(self, other)
        if not isinstance(plain, float):
            return reader(self, other)
        b = _sym_node(other)
        return SymFloat._make(plain, op(b, self.node) if reflected else op(self.node, b), env)

    method.__name__ = name
    return method


def _plain_float_op(name):
    base = getattr(float, name)

    def plain(self, other):
        other = float.__float__(other) if isinstance(other, SymFloat) else \
            int.__int__(other) if isinstance(other, SymInt) else other
        return base(float.__float__(self), other)

    return plain


for _name in ("__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pos__",
              "__abs__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__divmod__", "__rdivmod__"):
    setattr(SymFloat, _name, _float_reader(_name))
for _name, _op, _reflected in (("__add__", operator.add, False), ("__radd__", operator.add, True),
                               ("__sub__", operator.sub, False), ("__rsub__", operator.sub, True),
                               ("__mul__", operator.mul, False), ("__rmul__", operator.mul, True),
                               ("__truediv__", operator.truediv, False), ("__rtruediv__", operator.truediv, True),
                               ("__pow__", operator.pow, False), ("__rpow__", operator.pow, True)):
    setattr(SymFloat, _name, _float_arithmetic(_name, _op, _reflected))


def _sym_float_neg(self):
    env = self.shape_env
    if self.node is None or env is None or not env.record_guards or not _caller_is_user(2):
        return float.__neg__(self._read() if self.node is not None else self)
    return SymFloat._make(-float.__float__(self), -self.node, env)


SymFloat.__neg__ = _sym_float_neg
del _name, _op, _reflected


class SymBool:
    """A comparison of symbolic sizes made by the program during export's symbolic trace
    (PyTorch's symbolic bool): ``value`` is its answer at the example sizes, ``rel`` the sympy
    relation. Deciding on it (``bool()``, ``if``, ``and``/``not``) records the guard then, as
    PyTorch's ``guard_bool``; ``torch.cond`` takes it undecided and computes it from each call's
    sizes. ``&``, ``|`` and ``~`` combine it without deciding. Other traces specialize bools and
    never make one."""

    __slots__ = ("value", "rel", "env")

    def __init__(self, *args, **kwargs):
        raise TypeError("a SymBool is made by comparing symbolic sizes, not constructed")

    @classmethod
    def _make(cls, value: bool, rel, env):
        self = object.__new__(cls)
        self.value, self.rel, self.env = bool(value), rel, env
        return self

    def __bool__(self) -> bool:
        self.env.add_guard(self.rel if self.value else sympy.Not(self.rel))
        return self.value

    def __ember_unguarded__(self) -> bool:  # torch._check(p): the same guard, read as a bool
        return bool(self)

    def __int__(self) -> int:
        return int(bool(self))

    __index__ = __int__

    def __eq__(self, other):
        if isinstance(other, SymBool):
            return bool(self) == bool(other)
        return bool(self) == other

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(bool(self))

    def _combine(self, other, op, rel_op):
        if isinstance(other, SymBool):
            return SymBool._make(op(self.value, other.value), rel_op(self.rel, other.rel), self.env)
        return NotImplemented

    def __and__(self, other):
        if isinstance(other, bool):
            return self if other else False
        return self._combine(other, operator.and_, sympy.And)

    def __or__(self, other):
        if isinstance(other, bool):
            return True if other else self
        return self._combine(other, operator.or_, sympy.Or)

    __rand__ = __and__
    __ror__ = __or__

    def __invert__(self):
        return SymBool._make(not self.value, sympy.Not(self.rel), self.env)

    def __repr__(self) -> str:
        return str(self.rel)


class ShapeEnv:
    """Size symbols with their hints, and the guards a trace relied on."""

    def __init__(self, *, specialize_zero_one: bool = True):
        self.specialize_zero_one = specialize_zero_one
        self.var_to_val: dict = {}
        self.var_to_range: dict = {}
        self.guards: list = []
        # Comparisons of SymInts add guards only while a tracer asks for them (export's
        # symbolic trace); the lazy capture re-runs Python on every call and needs none.
        self.record_guards = False
        self.guard_frames: list = []  # per guard: the user's source line, when known
        self._implied: dict = {}  # guard -> implied by the ranges (the same checks recur per op)
        self._seen: set = set()  # guards already recorded (one entry, the first line, each)

    def create_symbol(self, hint: int, *, min: int = 2, max: int | None = None) -> sympy.Symbol:  # noqa: A002
        sym = sympy.Symbol(f"s{len(self.var_to_val)}", integer=True, positive=True)
        self.var_to_val[sym] = int(hint)
        self.var_to_range[sym] = (min, max)
        return sym

    def create_symint(self, hint: int, *, min: int = 2, max: int | None = None):  # noqa: A002
        """A SymInt for a size of value ``hint``; 0 and 1 stay plain ints (specialized)."""
        if self.specialize_zero_one and hint in (0, 1):
            return int(hint)
        return SymInt(self.create_symbol(hint, min=min, max=max), hint, self)

    def add_guard(self, expr) -> None:
        if expr is sympy.true or expr is True:
            return
        if not self.record_guards:
            expr = sympy.simplify(expr)
            if expr is not sympy.true:
                self.guards.append(expr)
            return
        implied = self._implied.get(expr)
        if implied is None:
            implied = self._implied[expr] = _implied_by_ranges(expr, self.var_to_range)
        if implied or expr in self._seen:
            return
        self._seen.add(expr)
        from ._user_frames import user_frame

        self.guards.append(expr)
        self.guard_frames.append(user_frame(2))

    def evaluate_guards(self, values: dict) -> bool:
        """Whether ``values`` ({symbol: int}) satisfies every guard and range."""
        for sym, (lo, hi) in self.var_to_range.items():
            v = values.get(sym)
            if v is None or v < lo or (hi is not None and v > hi):
                return False
        return all(bool(g.subs(values)) for g in self.guards)


def _implied_by_ranges(expr, ranges: dict) -> bool:
    """Whether a guard holds for every value of its symbols in their ranges, for the guards
    that hold trivially in practice (``s0 != 1`` for ``s0 >= 2``, ``s0*s1 >= s1``).

    With each symbol written as its lower bound plus a new variable ``t >= 0``, the two sides
    must differ by a polynomial whose non-constant monomials all have one sign: it is then
    monotone in each ``t``, so its extremes are the constant (every symbol at its lower
    bound) and its value at the upper bounds (unbounded when a range is). Overflow checks
    against int64's maximum (``s0*s1 <= 2**63 - 1``) hold as PyTorch's int_oo ranges assume.
    """
    syms = sorted(expr.free_symbols, key=str)
    if not syms:
        return bool(expr)
    rel = expr
    if isinstance(rel, sympy.Not):
        rel = rel.args[0]
        flip = {sympy.Eq: sympy.Ne, sympy.Ne: sympy.Eq, sympy.Lt: sympy.Ge, sympy.Le: sympy.Gt,
                sympy.Gt: sympy.Le, sympy.Ge: sympy.Lt}.get(type(rel))
        if flip is None:
            return False
        rel = flip(rel.lhs, rel.rhs)
    if not isinstance(rel, sympy.core.relational.Relational):
        return False
    for side in (rel.lhs, rel.rhs):
        if side.is_Integer and abs(int(side)) >= 2**62 and isinstance(rel, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
            return True
    diff = sympy.expand(rel.lhs - rel.rhs)
    shifted, his, gens = {}, [], []
    for k, sym in enumerate(syms):
        lo, hi = ranges.get(sym, (2, None))
        t = sympy.Symbol(f"_t{k}", nonnegative=True)
        gens.append(t)
        shifted[sym] = lo + t
        his.append(None if hi is None else hi - lo)
    # floor/ceiling of an increasing expression is non-decreasing: each becomes one more
    # variable of the polynomial (the extremes below are evaluated exactly, floors included).
    if diff.has(sympy.Mod):
        return False
    placeholders = {}
    for k, atom in enumerate(sorted(diff.atoms(sympy.floor, sympy.ceiling), key=str)):
        inner = sympy.expand(atom.args[0].subs(shifted))
        if not inner.is_polynomial(*gens):
            return False
        inner_poly = sympy.Poly(inner, *gens)
        if any(c < 0 for m, c in zip(inner_poly.monoms(), inner_poly.coeffs()) if any(m)):
            return False
        placeholders[atom] = sympy.Symbol(f"_a{k}", nonnegative=True)
    body = sympy.expand(diff.xreplace(placeholders).subs(shifted))
    if not body.is_polynomial(*gens, *placeholders.values()):
        return False
    poly = sympy.Poly(body, *gens, *placeholders.values())
    low = diff.subs(shifted).subs({t: 0 for t in gens})
    signs = {c > 0 for m, c in zip(poly.monoms(), poly.coeffs()) if any(m)}
    if len(signs) > 1:
        return False
    if not signs:
        high = low
    elif any(h is None for h, used in zip(his, _used(poly, len(syms))) if used):
        high = sympy.oo if signs == {True} else -sympy.oo
    else:
        high = diff.subs(shifted).subs({t: (h or 0) for t, h in zip(gens, his)})
    low, high = min(low, high), max(low, high)
    if isinstance(rel, sympy.Eq):
        return low == high == 0
    if isinstance(rel, sympy.Ne):
        return low > 0 or high < 0
    if isinstance(rel, (sympy.Ge, sympy.Gt)):  # diff >= 0 / > 0
        return low > 0 or (low == 0 and isinstance(rel, sympy.Ge))
    return high < 0 or (high == 0 and isinstance(rel, sympy.Le))


def _used(poly, n: int) -> list:
    return [any(m[k] for m in poly.monoms()) for k in range(n)]


def mark_dynamic(t, index, *, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """Marks size ``index`` (an int or a list of them) of ``t`` dynamic for ``ember.compile``."""
    indices = index if isinstance(index, (list, tuple)) else [index]
    if not hasattr(t, "__dict__"):  # PyTorch's mark_dynamic sets an attribute on the object
        raise AttributeError(f"{type(t).__name__!r} object has no attribute '_dynamo_dynamic_indices'")
    dyn = t.__dict__.setdefault("_dynamo_dynamic_indices", set())
    ranges = t.__dict__.setdefault("_dynamo_dynamic_range", {})
    for i in indices:
        if not -t.ndim <= i < t.ndim:
            dyn.add(i)  # as PyTorch: recorded, and no size of the tensor is it (nothing is made dynamic)
            continue
        i %= t.ndim
        dyn.add(i)
        ranges[i] = (2 if min is None else min, max)


def maybe_mark_dynamic(t, index) -> None:
    mark_dynamic(t, index)


def mark_static(t, index=None) -> None:
    """Marks size ``index`` (all sizes when None) of ``t`` static for ``ember.compile``."""
    if index is None:
        t.__dict__["_dynamo_static_indices"] = set(range(t.ndim))
        t.__dict__.pop("_dynamo_dynamic_indices", None)
        return
    indices = index if isinstance(index, (list, tuple)) else [index]
    static = t.__dict__.setdefault("_dynamo_static_indices", set())
    for i in indices:
        static.add(i % max(t.ndim, 1))
        t.__dict__.get("_dynamo_dynamic_indices", set()).discard(i % max(t.ndim, 1))


__all__ = ["ShapeEnv", "SymBool", "SymFloat", "SymInt", "mark_dynamic", "mark_static", "maybe_mark_dynamic"]
