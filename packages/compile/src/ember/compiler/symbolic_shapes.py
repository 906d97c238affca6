"""Symbolic sizes on sympy (PyTorch's ``torch.fx.experimental.symbolic_shapes``).

``ShapeEnv`` creates size symbols (``s0``, ``s1`` ...) with their concrete hints and records
the guards (sympy relations) that a trace assumed; ``SymInt`` is an ``int`` carrying a sympy
expression, so arithmetic on sizes (``x.shape[0] // 2``) keeps the expression while every
integer use still sees the concrete value. ``mark_dynamic`` / ``mark_static`` annotate
tensors as PyTorch's do (``_dynamo_dynamic_indices``).
"""

from __future__ import annotations

import operator

import sympy


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

    def __hash__(self):
        return int.__hash__(self)


class ShapeEnv:
    """Size symbols with their hints, and the guards a trace relied on."""

    def __init__(self, *, specialize_zero_one: bool = True):
        self.specialize_zero_one = specialize_zero_one
        self.var_to_val: dict = {}
        self.var_to_range: dict = {}
        self.guards: list = []

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
        expr = sympy.simplify(expr)
        if expr is not sympy.true:
            self.guards.append(expr)

    def evaluate_guards(self, values: dict) -> bool:
        """Whether ``values`` ({symbol: int}) satisfies every guard and range."""
        for sym, (lo, hi) in self.var_to_range.items():
            v = values.get(sym)
            if v is None or v < lo or (hi is not None and v > hi):
                return False
        return all(bool(g.subs(values)) for g in self.guards)


def mark_dynamic(t, index, *, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """Marks size ``index`` (an int or a list of them) of ``t`` dynamic for ``ember.compile``."""
    indices = index if isinstance(index, (list, tuple)) else [index]
    dyn = t.__dict__.setdefault("_dynamo_dynamic_indices", set())
    ranges = t.__dict__.setdefault("_dynamo_dynamic_range", {})
    for i in indices:
        if not -t.ndim <= i < t.ndim:
            raise IndexError(f"mark_dynamic: dimension {i} out of range for a {t.ndim}-d tensor")
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


__all__ = ["ShapeEnv", "SymInt", "mark_dynamic", "mark_static", "maybe_mark_dynamic"]
