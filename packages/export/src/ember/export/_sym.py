"""Symbolic sizes inside exported graphs: ``sym_size`` nodes and sympy -> graph arithmetic.

A dynamic size is read from an input with ``sym_size(x, dim)`` (PyTorch's
``aten.sym_size.int``) and combined with ``operator`` arithmetic, so that the generated code
(and the interpreter, and a loaded program) recomputes sizes from each call's inputs.
"""

from __future__ import annotations

import operator

import sympy


def sym_size(tensor, dim: int) -> int:
    """``tensor.shape[dim]``: a graph node reading a dynamic size."""
    return tensor.shape[dim]


sym_size.__module__ = "ember.export"


def _assert_scalar(cond, message: str) -> None:
    """A runtime check of an unbacked symbol's range (PyTorch's ``aten._assert_scalar``). While a
    graph holding it is traced again, the condition is stated as a fact (``torch._check``)."""
    if hasattr(type(cond), "__ember_unguarded__"):
        cond.__ember_unguarded__()
        return
    if not cond:
        raise RuntimeError(message)


_assert_scalar.__module__ = "ember.export"


class SizeBuilder:
    """Emits graph nodes computing sympy size expressions, memoized, at the top of the graph."""

    def __init__(self, graph, sources: dict, anchor):
        self.graph = graph
        self.sources = sources  # symbol -> (placeholder node, dim, coeff, offset): size = coeff*sym + offset
        self.anchor = anchor  # insert after this node (the last placeholder, then the last size node)
        self.cache: dict = {}
        # Unbacked symbols (``item``/``nonzero`` sizes) are known only where the graph computes
        # them: an expression of one is computed just before ``current``, the node that uses it.
        self.unbacked: set = set()
        self.current = None
        self._late = False
        # size expression -> (placeholder node, dim) of every input dim of that size: a derived
        # dim (``2*s0 + 1``) is read from its own input, as PyTorch's graph does, not rebuilt
        # from the root's source (``2*(x.size(0) // 2) + 1``), so the graph stays exact for the
        # inputs ep.module() accepts (an odd size of a ``2*_n`` dim, as PyTorch 2.13).
        self.inputs: dict = {}

    def _emit(self, target, args, val, expr=None):
        if self._late:
            with self.graph.inserting_before(self.current):
                node = self.graph.call_function(target, args)
        else:
            with self.graph.inserting_after(self.anchor):
                node = self.graph.call_function(target, args)
            self.anchor = node
        node.meta["val"] = val
        if expr is not None:
            node.meta["sym_expr"] = expr
        return node

    def node_for(self, expr, hint: int):
        """A node (or a plain int) holding ``expr``; ``hint`` is its value at the example inputs."""
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        if expr in self.cache:
            return self.cache[expr]
        late = self._late
        self._late = bool(self.unbacked and expr.free_symbols & self.unbacked)
        try:
            return self._node_for(expr, hint)
        finally:
            self._late = late

    def _node_for(self, expr, hint: int):
        if not expr.is_Symbol and expr in self.inputs and not self._late:
            out = self._emit(sym_size, self.inputs[expr], hint, expr)
        elif expr.is_Symbol:
            node, dim, coeff, offset = self.sources[expr]
            size = self._emit(sym_size, (node, dim), coeff * hint + offset, coeff * expr + offset)
            if offset:
                size = self._emit(operator.sub, (size, offset), coeff * hint, coeff * expr)
            if coeff != 1:
                size = self._emit(operator.floordiv, (size, coeff), hint, expr)
            out = size
        elif expr.is_Add or expr.is_Mul:
            terms = list(expr.args)
            fn = operator.add if expr.is_Add else operator.mul
            out = None
            acc = None
            for t in terms:
                value = self._value(t)
                part = self.node_for(t, value)
                if out is None:
                    out, acc = part, value
                else:
                    acc = fn(acc, value)
                    out = self._emit(fn, (out, part), acc)
            out.meta["sym_expr"] = expr
        elif isinstance(expr, (sympy.floor, sympy.ceiling)) and _ratio(expr.args[0]):
            num, den = _ratio(expr.args[0])  # floor(a/b) = a // b; ceil(a/b) = -((-a) // b)
            if isinstance(expr, sympy.ceiling):
                num = -num
            out = self._emit(operator.floordiv, (self.node_for(num, self._value(num)),
                                                 self.node_for(den, self._value(den))),
                             hint if isinstance(expr, sympy.floor) else -hint, sympy.floor(num / den))
            if isinstance(expr, sympy.ceiling):
                out = self._emit(operator.neg, (out,), hint, expr)
        elif expr.is_Pow and expr.exp.is_Integer and int(expr.exp) > 1:
            base = self.node_for(expr.base, self._value(expr.base))
            out = self._emit(operator.pow, (base, int(expr.exp)), hint, expr)
        elif type(expr).__name__ == "RoundToInt":  # round(n / 2): Python's round of the float
            import builtins

            arg = expr.args[0]
            out = self._emit(builtins.round, (self.node_for_float(arg, self._float_value(arg)),), hint, expr)
        elif isinstance(expr, (sympy.Min, sympy.Max)):  # a slice bound clamped to the size (x[:k.item()])
            from ember.compiler._unbacked_export import sym_max, sym_min

            fn = sym_min if isinstance(expr, sympy.Min) else sym_max
            args = sorted(expr.args, key=lambda a: (not a.free_symbols, str(a)))
            out = self.node_for(args[0], self._value(args[0]))
            acc = self._value(args[0])
            for a in args[1:]:
                acc = fn(acc, self._value(a))
                out = self._emit(fn, (out, self.node_for(a, self._value(a))), acc, None)
            out.meta["sym_expr"] = expr
        elif isinstance(expr, sympy.Mod):
            num, den = expr.args
            out = self._emit(operator.mod, (self.node_for(num, self._value(num)),
                                            self.node_for(den, self._value(den))), hint, expr)
        else:
            raise NotImplementedError(f"size expression {expr}")
        self.cache[expr] = out
        return out

    def node_for_float(self, expr, hint: float):
        """A node computing the symbolic float ``expr``: a ratio ``num / den`` (``float_ratio``)
        as ``operator.truediv``; sums, products and powers of such (``s0**0.5``, PyTorch's
        ``sym_float(s0) ** 0.5``) as ``operator`` arithmetic on them (``float_expressible``)."""
        expr = sympy.sympify(expr)
        key = ("float", expr)
        if key in self.cache:
            return self.cache[key]
        if _is_size(expr):
            return self.node_for(expr, self._value(expr))
        if expr.is_Number:
            return float(expr) if not expr.is_Integer else int(expr)
        ratio = float_ratio(expr)
        if ratio is not None:
            num, den = ratio
            out = self._emit(operator.truediv, (self.node_for(num, self._value(num)), den), hint)
        elif expr.is_Pow:
            out = self._emit(operator.pow, (self.node_for_float(expr.base, self._float_value(expr.base)),
                                            self.node_for_float(expr.exp, self._float_value(expr.exp))), hint)
        elif expr.is_Add or expr.is_Mul:
            fn = operator.add if expr.is_Add else operator.mul
            terms = sorted(expr.args, key=lambda t: not t.free_symbols)  # the size first
            out = self.node_for_float(terms[0], self._float_value(terms[0]))
            acc = self._float_value(terms[0])
            for t in terms[1:]:
                acc = fn(acc, self._float_value(t))
                out = self._emit(fn, (out, self.node_for_float(t, self._float_value(t))), acc)
        else:
            raise NotImplementedError(f"symbolic float {expr}")
        self.cache[key] = out
        return out

    def _float_value(self, expr) -> float:
        expr = sympy.sympify(expr)
        if _is_size(expr):
            return self._value(expr)
        return float(expr.subs(self.hints))

    def _value(self, expr) -> int:
        from ember.compiler._unbacked_export import _HINT

        expr = sympy.sympify(expr)
        return int(expr.subs(self.hints).subs({s: _HINT for s in self.unbacked}))

    hints: dict = {}


def _ratio(arg):
    """(numerator, positive denominator) of a rational size expression (``s0/2 + 1/2`` as
    ``(s0 + 1, 2)``; ``s0/s1``), or None."""
    num, den = sympy.together(arg).as_numer_denom()
    if den.is_Integer and int(den) <= 0 or not (num.free_symbols | den.free_symbols):
        return None
    return num, den


def _is_size(expr) -> bool:
    """An integer size expression (``node_for``'s): a polynomial of sizes with integer coefficients."""
    if not expr.free_symbols or not expr.is_polynomial():
        return False
    return all(c.is_Integer for c in sympy.Poly(expr, *sorted(expr.free_symbols, key=str)).coeffs())


def float_expressible(expr) -> bool:
    """Whether ``node_for_float`` computes the symbolic float ``expr`` in the graph."""
    expr = sympy.sympify(expr)
    if expr.is_Number or _is_size(expr) or float_ratio(expr) is not None:
        return True
    if expr.is_Pow or expr.is_Add or expr.is_Mul:
        return all(float_expressible(a) for a in expr.args)
    return False


def float_ratio(expr):
    """(numerator, integer denominator) when a symbolic float is a ratio of a size expression and
    an integer (``s0/2``, ``(s0 + 1)/4``): the graph computes it as ``operator.truediv``."""
    num, den = sympy.together(sympy.sympify(expr)).as_numer_denom()
    if not den.is_Integer or int(den) <= 0 or not num.free_symbols or not num.is_polynomial():
        return None
    if any(not c.is_Integer for c in sympy.Poly(num, *sorted(num.free_symbols, key=str)).coeffs()):
        return None
    return num, int(den)
