"""Range constraints of symbolic sizes, and the checks a call's inputs must pass.

An exported graph's input sizes are integers or sympy expressions in the symbols of the
dynamic dims (``s0``, ``s0 + 1``, ``2*s0``). ``range_constraints`` maps each symbol (and
each derived expression) to its inclusive range. ``check_inputs`` binds the symbols to the
sizes of a call's tensors and reports the first guard that fails, in PyTorch's words
(``Guard failed: x.size()[0] <= 64``, an AssertionError).
"""

from __future__ import annotations

import sympy

from ._dims import INT_OO


class ValueRange:
    """An inclusive integer range ``[lower, upper]``; ``upper`` may be ``int_oo``."""

    __slots__ = ("lower", "upper")

    def __init__(self, lower: int, upper: int):
        self.lower = int(lower)
        self.upper = int(upper) if upper < INT_OO else INT_OO

    def __contains__(self, value: int) -> bool:
        return self.lower <= value <= self.upper

    def __eq__(self, other) -> bool:
        return isinstance(other, ValueRange) and (self.lower, self.upper) == (other.lower, other.upper)

    def __hash__(self) -> int:
        return hash((self.lower, self.upper))

    def __repr__(self) -> str:
        upper = "int_oo" if self.upper >= INT_OO else str(self.upper)
        lower = "-int_oo" if self.lower <= -INT_OO else str(self.lower)
        return f"VR[{lower}, {upper}]"


def as_expr(size) -> int | sympy.Expr:
    """An int, or the sympy expression behind a symbolic size (SymInt-like or sympy already)."""
    if isinstance(size, bool):
        raise TypeError("a size cannot be a bool")
    if isinstance(size, int):
        return size
    if isinstance(size, sympy.Basic):
        return int(size) if size.is_Integer else size
    meta = getattr(size, "meta", None)
    if isinstance(meta, dict) and "sym_expr" in meta:  # an fx node computing a size
        return as_expr(meta["sym_expr"])
    if isinstance(meta, dict) and isinstance(getattr(meta.get("val"), "node", None), sympy.Basic):
        return as_expr(meta["val"].node)  # a node making an unbacked size (``item``): its symbol
    node = getattr(size, "node", None)
    if isinstance(node, sympy.Basic):
        return as_expr(node)
    expr = getattr(node, "expr", None)
    if expr is not None:
        return as_expr(expr)
    expr = getattr(size, "expr", None)
    if expr is not None:
        return as_expr(expr)
    try:
        return int(size)
    except TypeError as exc:
        raise TypeError(f"cannot read a size from {size!r}") from exc


def _size_text(name: str, dim: int) -> str:
    return f"{name}.size()[{dim}]"


def _expr_text(expr, names: dict) -> str:
    """``expr`` with each symbol written as the input size it was bound from (a name, or an
    expression of input sizes for a root solved from a derived dim: ``x.size()[0]/2``)."""
    return str(expr.subs({s: names[s] if isinstance(names[s], sympy.Basic) else sympy.Symbol(names[s])
                          for s in expr.free_symbols if s in names}))


def _py_text(expr) -> str:
    if isinstance(expr, sympy.floor):
        arg = expr.args[0]
        num, den = arg.as_numer_denom()
        if den.is_Integer and den != 1:
            inner = _py_text(num)
            inner = inner if num.is_Symbol or num.is_Atom else f"({inner})"
            return f"{inner} // {den}"
    return str(expr)


def guard_text(rel, names: dict | None = None) -> str:
    """``rel`` (an ``Ne``/``Eq``/comparison of sizes) as Python: ``x.size()[0] // 2 != 1``."""
    if names:
        rel = rel.subs({s: names[s] if isinstance(names[s], sympy.Basic) else sympy.Symbol(names[s])
                        for s in rel.free_symbols if s in names})
    ops = {sympy.Ne: "!=", sympy.Eq: "==", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">="}
    op = ops.get(type(rel))
    if op is None:
        return str(rel)
    return f"{_py_text(rel.lhs)} {op} {_py_text(rel.rhs)}"


def check_inputs(specs: list[tuple[str, tuple, object]], values: list, ranges: dict, guards=(),
                 paths: list | None = None) -> None:
    """Checks tensors against their exported metadata.

    Args:
        specs: per user input, (name, shape as ints/sympy exprs, dtype) or None for a
            non-tensor input.
        values: the call's flattened user inputs.
        ranges: ``{symbol or expression: ValueRange}``.
        guards: sympy relations of the symbols that every call must satisfy (the guards of
            Dim.AUTO/DYNAMIC dims that are no range).
        paths: per input, its place in the call (``*args[0]``): then a failure is PyTorch's
            ``unflatten`` one (``RuntimeError("Expected input at *args[0].shape[0] to be equal to
            4, but got 6. ...")``) instead of ``ep.module()``'s ``AssertionError("Guard failed: ...")``.
    """
    bindings: dict[sympy.Symbol, int] = {}
    where: dict[sympy.Symbol, str] = {}
    pending: list[tuple[str, object, int, str | None]] = []
    for i, (spec, value) in enumerate(zip(specs, values)):
        if spec is None:
            continue
        name, shape, dtype = spec
        path = paths[i] if paths is not None else None
        if not hasattr(value, "shape") or not hasattr(value, "dtype"):
            if path is not None:
                raise RuntimeError(f"Expected input at {path} to be a tensor, but got {type(value)}")
            raise AssertionError(f"Guard failed: {name} must be a Tensor, got {type(value).__name__}")
        if value.ndim != len(shape):
            if path is not None:
                raise RuntimeError(f"Unexpected number of dimensions in input at {path}.shape (expected "
                                   f"{_size_repr(shape)}, got {_size_repr(value.shape)})")
            if value.ndim < len(shape):
                # PyTorch 2.13's ep.module() guards read ``x.size()[d]`` for each exported dim: an
                # IndexError for a tensor of fewer dims (its text: "tuple index out of range").
                raise IndexError(f"tuple index out of range: Guard failed: {_size_text(name, value.ndim)} "
                                 f"(the program was exported with {name} of {len(shape)} dims, got {value.ndim})")
            # More dims than exported: PyTorch's guards check the exported dims only and run the
            # graph (whose ops decide), so the extra trailing dims pass here too.
        # (no dtype guard: PyTorch's ep.module() checks shapes only; an op decides on dtypes)
        for d, (want, got) in enumerate(zip(shape, value.shape)):
            got = int(got)
            text = _size_text(name, d)
            at = None if path is None else f"{path}.shape[{d}]"
            if isinstance(want, int):
                if got != want:
                    if at is not None:
                        raise RuntimeError(f"Expected input at {at} to be equal to {want}, but got {got}. If you "
                                           "meant for this dimension to be dynamic, please re-export and specify "
                                           "dynamic_shapes (e.g. with Dim.DYNAMIC)")
                    raise AssertionError(f"Guard failed: {text} == {want}")
            elif isinstance(want, sympy.Symbol):
                if want in bindings:
                    if bindings[want] != got:
                        if at is not None:
                            raise RuntimeError(f"Expected input at {at} to be equal to {bindings[want]}, but got {got}")
                        raise AssertionError(f"Guard failed: {text} == {where[want]}")
                else:
                    bindings[want] = got
                    where[want] = text
                    _check_range(want, got, text, ranges, at)
            elif at is not None:  # PyTorch's unflatten unifies a derived dim where it meets it
                _check_derived(text, want, got, at, bindings, where, ranges)
            else:
                pending.append((text, want, got, at))
    for text, expr, got, at in pending:
        _check_derived(text, expr, got, at, bindings, where, ranges)
    for guard in guards:
        if guard.free_symbols <= set(bindings) and guard.subs(bindings) is not sympy.true:
            if isinstance(guard, sympy.Ne):  # PyTorch's spelling: ``x.size()[0] // 2 != 1``
                raise AssertionError(f"Guard failed: {guard_text(guard, where)}")
            raise AssertionError(f"Guard failed: {_expr_text(guard, where)}")


def _check_derived(text, expr, got, at, bindings, where, ranges) -> None:
    """A dim of size expression ``expr`` (a derived dim, ``s0 + 1``) against the call's size
    ``got``: binds its one unbound root by solving, then checks the value and its range."""
    free = [s for s in expr.free_symbols if s not in bindings]
    if len(free) == 1:
        # A derived dim whose root appears nowhere else: solve for the root.
        (sym,) = free
        roots = sympy.solve(sympy.Eq(expr, got), sym)
        ints = [r for r in roots if r.is_Integer]
        if at is not None:
            if not ints:
                raise RuntimeError(f"Expected input {at} = {got} to be of the form {expr}, where {sym} is an "
                                   "integer")
            bindings[sym] = int(ints[0])
        elif (roots := ints or sympy.solve(sympy.Eq(expr.subs(sym, (r := sympy.Dummy("r"))), got), r)):
            # PyTorch 2.13's ep.module() binds a root seen only through derived dims to its
            # solution, ``x.size()[0]/2`` (not necessarily an integer: an odd size of a ``2*_n`` dim
            # passes), checks the other dims of that root against it and the derived dims' own
            # ranges, and not the root's range.
            bindings[sym] = roots[0]
        else:
            raise AssertionError(f"Guard failed: {text} == {expr}")
        solved = sympy.solve(sympy.Eq(expr.subs(sym, r := sympy.Dummy("r")), sympy.Symbol(text)), r)
        where[sym] = solved[0] if solved else text
    value = expr.subs(bindings)
    if not value.is_Integer or int(value) != got:
        if at is not None:
            raise RuntimeError(f"Expected input at {at} to be equal to {value}, but got {got}")
        raise AssertionError(f"Guard failed: {text} == {_derived_text(expr, where)}")
    _check_range(expr, got, text, ranges, at)


def _derived_text(expr, names: dict) -> str:
    """A derived dim's size as PyTorch's guard prints it: ``1 + a.size()[0]``, ``2 * a.size()[0]`` (the
    constant first, spaced products); other expressions as ``_expr_text``."""
    free = list(expr.free_symbols)
    if len(free) == 1 and isinstance(names.get(free[0]), str):
        (sym,) = free
        poly = sympy.Poly(expr, sym) if expr.is_polynomial(sym) else None
        if poly is not None and poly.degree() == 1:
            coeff, offset = poly.coeff_monomial(sym), poly.coeff_monomial(1)
            if coeff.is_Integer and offset.is_Integer:
                term = names[sym] if coeff == 1 else f"{coeff} * {names[sym]}"
                return term if offset == 0 else f"{offset} + {term}"
    return _expr_text(expr, names)


def _size_repr(shape) -> str:
    return f"ember.Size([{', '.join(str(s) for s in shape)}])"


def _check_range(key, got: int, text: str, ranges: dict, at: str | None = None) -> None:
    vr = ranges.get(key)
    if vr is None:
        return
    if got < vr.lower and vr.lower > 2:
        # A lower bound of 2 is the trace's (sizes 0 and 1 are specialized), not the program's:
        # PyTorch 2.13's exported module accepts sizes 0 and 1 there too.
        if at is not None:
            raise RuntimeError(f"Expected input at {at} to be >= {vr.lower}, but got {got}")
        raise AssertionError(f"Guard failed: {text} >= {vr.lower}")
    if got > vr.upper:
        if at is not None:
            raise RuntimeError(f"Expected input at {at} to be <= {vr.upper}, but got {got}")
        raise AssertionError(f"Guard failed: {text} <= {vr.upper}")
