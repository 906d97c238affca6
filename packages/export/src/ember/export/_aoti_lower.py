"""Lowering an exported program for AOT with its dynamic sizes kept symbolic.

compile's ``GraphLowering`` binds a symbol per symbolic input size and carries sympy sizes
through the ops it lowers; the results of extern ops (matmul, convolution ...) take their
shapes from the op's meta kernel, which it runs at the example sizes. For an AOT library that
must serve a whole range of sizes, this subclass runs those meta kernels on SymInt sizes
(export's symbolic trace makes the meta kernels propagate them), so an extern's result
buffer has a symbolic shape too, and reads the placeholders' symbolic sizes from export's
``meta["val"]``.
"""

from __future__ import annotations

import operator
import types

import sympy

from ember._src.device import META
from ember._src.tensor import Tensor, new_empty_tensor
from ember.compiler.inductor._graph import GraphLowering
from ember.compiler.inductor._ir import TensorValue
from ember.compiler.symbolic_shapes import SymInt


class _ExprInt(int):
    """An int whose ``node.expr`` is a sympy expression: how compile's lowering reads a SymInt-like."""

    def __new__(cls, expr, hint):
        self = int.__new__(cls, hint)
        self.node = types.SimpleNamespace(expr=expr)
        return self


def _adapt(size):
    return _ExprInt(size.node, int(size)) if isinstance(size, SymInt) and size.node.free_symbols else size


def _floordiv(a, b):
    from ember.compiler.inductor._ir import FloorDiv

    return FloorDiv(a, b)


_SIZE_OPS = {operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
             operator.floordiv: _floordiv, operator.neg: operator.neg}


def _as_sympy(size):
    """A SymInt's expression with ``floor``/``ceiling`` of quotients (conv/pool output sizes)
    written as compile's ``FloorDiv``, which its C index printer knows."""
    if not isinstance(size, SymInt):
        return size
    from ember.compiler.inductor._ir import FloorDiv

    def as_floordiv(arg, ceil=False):
        num, den = sympy.fraction(sympy.together(arg))
        if not den.is_Integer:
            return sympy.ceiling(arg) if ceil else sympy.floor(arg)
        num = sympy.expand(num)
        return FloorDiv(num + den - 1, den) if ceil else FloorDiv(num, den)

    expr = size.node.replace(sympy.floor, as_floordiv)
    return expr.replace(sympy.ceiling, lambda arg: as_floordiv(arg, True))


class SymbolicLowering(GraphLowering):
    """``GraphLowering`` whose extern results keep symbolic shapes (see the module docstring).

    ``extern`` repeats the base class's (compile's ``_graph.py``) with the symbolic result
    shape: a change there must be made here too."""

    def _placeholder(self, node, position):
        val = node.meta.get("val")
        if not isinstance(val, Tensor) or not any(isinstance(s, SymInt) for s in val._shape):
            return super()._placeholder(node, position)
        adapted = types.SimpleNamespace(shape=tuple(_adapt(s) for s in val._shape),
                                        stride=lambda: tuple(_adapt(s) for s in val._stride))
        saved = node.meta["val"]
        node.meta["val"] = adapted
        try:
            return super()._placeholder(node, position)
        finally:
            node.meta["val"] = saved

    def call(self, fn, args, kwargs):
        # Size arithmetic (``sym_size`` and ``operator`` nodes) stays symbolic here; the base
        # class would evaluate these Python calls at the example sizes.
        from ._sym import sym_size

        if fn is sym_size and isinstance(args[0], TensorValue):
            return args[0].shape[args[1]]
        if fn in _SIZE_OPS and any(isinstance(a, sympy.Basic) for a in args):
            return _SIZE_OPS[fn](*[sympy.sympify(a) for a in args])
        return super().call(fn, args, kwargs)

    def _symint(self, expr):
        expr = sympy.sympify(expr)
        if not expr.free_symbols:
            return int(expr)
        return SymInt(expr, int(expr.subs(self.hints)))

    def _meta(self, obj):
        def tensor(v):
            t = new_empty_tensor(self.hint_shape(v.shape), v.dtype, META)
            t._shape = tuple(self._symint(s) for s in v.shape)
            strides, acc = [], 1
            for s in reversed(t._shape):
                strides.append(acc)
                acc = acc * s
            t._stride = tuple(reversed(strides))
            return t

        def walk(o):
            if isinstance(o, TensorValue):
                return tensor(o)
            if isinstance(o, sympy.Basic):
                return self._symint(o)
            if isinstance(o, (list, tuple)):
                return type(o)(walk(x) for x in o)
            if isinstance(o, dict):
                return {k: walk(v) for k, v in o.items()}
            return o

        meta = walk(obj)
        if isinstance(meta, dict) and meta.get("device") is not None:
            meta = {**meta, "device": META}
        return meta

    def _extern_shape(self, t) -> tuple:
        return tuple(_as_sympy(s) for s in t._shape)

    def _check_extern_device(self, args, kwargs) -> None:
        """Export lowers CPU programs only; factory ops here carry no device (nothing to check)."""
