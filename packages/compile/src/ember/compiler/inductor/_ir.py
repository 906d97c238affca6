"""The loop-level IR: scalar expressions, lazy tensor values, and the buffers a graph realizes.

A tensor value during lowering is a *loader*: a function from a symbolic index (one sympy
expression per dimension) to a scalar ``Expr``. Pointwise ops and views compose loaders
(views are index arithmetic, never copies); a value is *realized* when it gets a buffer, which
a kernel then writes. Sizes and indices are sympy expressions, so a symbolic batch size is an
ordinary free symbol that becomes a kernel argument.

Note [Compute dtype]: expressions are typed with the dtype they are *computed* in. float16 and
bfloat16 never appear there: a load of a half buffer widens to float32 and a store rounds
once, as ember's eager kernels do per op.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import sympy

from ember._src import dtypes as dt

HALF_TYPES = (dt.float16, dt.bfloat16)


def compute_dtype(d):
    return dt.float32 if d in HALF_TYPES else d


# -- index arithmetic -------------------------------------------------------------------------

class FloorDiv(sympy.Function):
    """Integer division of non-negative index expressions (C's ``/`` on them)."""

    is_integer = True

    @classmethod
    def eval(cls, base, divisor):
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        return None


class ModularIndexing(sympy.Function):
    """``(base / divisor) % modulus`` on non-negative index expressions."""

    is_integer = True

    @classmethod
    def eval(cls, base, divisor, modulus):
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        return None


def index_source(expr, floordiv: str, error=NotImplementedError) -> str:
    """Source text of a (non-negative, integer) sympy index expression, for C (``floordiv``
    ``"/"``) or Python/Triton (``"//"``); ``error`` is raised for what it cannot spell."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return expr.name

    def text(e):
        return index_source(e, floordiv, error)

    if isinstance(expr, FloorDiv):
        return f"({text(expr.args[0])} {floordiv} {text(expr.args[1])})"
    if isinstance(expr, ModularIndexing):
        base, div, mod = expr.args
        inner = text(base) if div == 1 else f"({text(base)} {floordiv} {text(div)})"
        return f"({inner} % {text(mod)})"
    if expr.is_Add:
        return "(" + " + ".join(text(a) for a in expr.args) + ")"
    if expr.is_Mul:
        return "(" + " * ".join(text(a) for a in expr.args) + ")"
    if expr.is_Pow and expr.exp.is_Integer and int(expr.exp) > 0:
        return "(" + " * ".join([text(expr.base)] * int(expr.exp)) + ")"
    raise error(f"index expression {expr}")


def sym(value) -> sympy.Expr:
    """A size or index as a sympy expression (ints, SymInt-likes with ``.node.expr``, sympy)."""
    if isinstance(value, sympy.Basic):
        return value
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "expr"):
        return sympy.sympify(node.expr)
    return sympy.Integer(int(value))


def product(sizes) -> sympy.Expr:
    n = sympy.Integer(1)
    for s in sizes:
        n = n * s
    return n


def contiguous_strides(shape) -> tuple:
    strides, acc = [], sympy.Integer(1)
    for s in reversed(shape):
        strides.append(acc)
        acc = acc * s
    return tuple(reversed(strides))


def strided_index(index, strides, offset=0) -> sympy.Expr:
    expr = sympy.sympify(offset)
    for i, s in zip(index, strides):
        expr = expr + i * s
    return simplify_index(expr)


def _divmod_term(term):
    """(coefficient, the ModularIndexing/FloorDiv factor) of a product term, or (term, None)."""
    if isinstance(term, (ModularIndexing, FloorDiv)):
        return sympy.Integer(1), term
    if term.is_Mul:
        found = [f for f in term.args if isinstance(f, (ModularIndexing, FloorDiv))]
        if len(found) == 1:
            return term / found[0], found[0]
    return term, None


def simplify_index(expr) -> sympy.Expr:
    """Folds the pairs a reshape's unflattening leaves when strides line up again:
    ``c * ((x / d) % m) + c * m * (x / (d * m))`` is ``c * (x / d)`` (the quotient's digits
    put back together). A reshape of contiguous dims then reads ``x`` itself, which keeps the
    index linear: loops collapse and vectorize, and outer reductions are recognised."""
    if not (expr.has(ModularIndexing) and expr.has(FloorDiv)):
        return expr
    terms = list(sympy.Add.make_args(sympy.expand(expr)))
    changed = True
    while changed:
        changed = False
        split = [_divmod_term(t) for t in terms]
        for i, (ci, mi) in enumerate(split):
            if not isinstance(mi, ModularIndexing):
                continue
            base, div, mod = mi.args
            for j, (cj, fj) in enumerate(split):
                if isinstance(fj, FloorDiv) and fj.args[0] == base and sympy.expand(fj.args[1] - div * mod) == 0 \
                        and sympy.expand(cj - ci * mod) == 0:
                    terms = [t for k, t in enumerate(terms) if k not in (i, j)] + [ci * FloorDiv(base, div)]
                    changed = True
                    break
            if changed:
                break
    return sympy.Add(*terms)


def unflatten(flat: sympy.Expr, shape) -> list:
    """The multi-index of a row-major flat index (views through a reshape)."""
    index, divisor = [], sympy.Integer(1)
    for s in reversed(shape):
        index.append(sympy.Integer(0) if s == 1 else ModularIndexing(flat, divisor, s))
        divisor = divisor * s
    return list(reversed(index))


def linear_coeff(expr, var):
    """The coefficient of ``var`` in ``expr`` when ``expr`` is linear in it, else None."""
    expr = sympy.expand(expr)
    c = expr.coeff(var)
    rest = sympy.expand(expr - c * var)
    if var in c.free_symbols or var in rest.free_symbols:
        return None
    return c


def same_expr(a, b) -> bool:
    return a == b or sympy.expand(a - b) == 0


# -- scalar expressions -----------------------------------------------------------------------

class Expr:
    """An immutable scalar expression; ``key`` identifies it for common-subexpression reuse."""

    __slots__ = ("dtype", "key", "_hash")

    def __init__(self, dtype, key):
        self.dtype = dtype
        self.key = key
        self._hash = hash(key)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, Expr) and self._hash == other._hash and self.key == other.key

    def children(self) -> tuple:
        return ()


class Load(Expr):
    """Element ``index`` of buffer ``buf`` (stored as ``storage_dtype``), widened to ``dtype``."""

    __slots__ = ("buf", "index", "storage_dtype")

    def __init__(self, buf: str, index: sympy.Expr, storage_dtype):
        self.buf, self.index, self.storage_dtype = buf, index, storage_dtype
        super().__init__(compute_dtype(storage_dtype), ("load", buf, index))


class NumberInput(float):
    """A float input of the graph (a compiled function's number argument) as the lowering sees
    it: its value, and the input ``position`` a C kernel reads it from as an argument, so the
    kernel's source does not depend on the value."""

    position: int


def number_input(value: float, position: int) -> NumberInput:
    out = NumberInput(value)
    out.position = position
    return out


class Const(Expr):
    __slots__ = ("value", "number")

    def __init__(self, value, dtype):
        # a number input stays one (its value a kernel argument) in a floating computation
        self.number = getattr(value, "position", None) if dtype.is_floating_point else None
        if dtype is dt.bool:
            value = bool(value)
        elif not dtype.is_floating_point:
            value = int(value)
        else:
            value = float(value)
        self.value = value
        if self.number is not None:
            super().__init__(dtype, ("number", self.number, dtype.name))
        else:
            super().__init__(dtype, ("const", repr(value), dtype.name))


class IndexValue(Expr):
    """An index expression used as a value (iota, masks built from positions)."""

    __slots__ = ("index",)

    def __init__(self, index: sympy.Expr, dtype=dt.int64):
        self.index = index
        super().__init__(dtype, ("index", index, dtype.name))


class Call(Expr):
    """Scalar op ``op`` (a row of the backend's op table) on ``args``."""

    __slots__ = ("op", "args")

    def __init__(self, op: str, args: tuple, dtype):
        self.op, self.args = op, tuple(args)
        super().__init__(dtype, ("call", op, dtype.name, self.args))

    def children(self) -> tuple:
        return self.args


class Cast(Expr):
    __slots__ = ("arg",)

    def __init__(self, arg: Expr, dtype):
        self.arg = arg
        super().__init__(dtype, ("cast", dtype.name, arg))

    def children(self) -> tuple:
        return (self.arg,)


def cast(x: Expr, dtype) -> Expr:
    dtype = compute_dtype(dtype)
    if x.dtype is dtype:
        return x
    if isinstance(x, Const):
        return Const(x.value, dtype)
    if isinstance(x, Cast) and x.arg.dtype is dtype and x.arg.dtype is dt.bool:
        return x.arg  # bool -> number -> bool is the identity
    if isinstance(x, Call) and x.op == "where" and dtype is dt.bool:
        a, b = x.args[1], x.args[2]
        if isinstance(a, Const) and isinstance(b, Const) and bool(a.value) and not bool(b.value):
            return x.args[0] if x.args[0].dtype is dt.bool else Cast(x.args[0], dt.bool)
    return Cast(x, dtype)


def walk(expr: Expr):
    """Every node of ``expr`` (children first), each once."""
    seen, order, stack = set(), [], [(expr, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend((c, False) for c in node.children())
    return order


def loads_of(expr: Expr) -> list:
    return [e for e in walk(expr) if isinstance(e, Load)]


# -- tensor values and buffers ----------------------------------------------------------------

Loader = Callable[[list], Expr]


class TensorValue:
    """A lazily computed tensor: shape (sympy), dtype, and how to load element ``index``.

    ``buffer`` is set once the value has storage (an input, an extern result, or a realized
    computation); until then every consumer inlines ``loader``.
    """

    _ids = itertools.count()

    def __init__(self, shape, dtype, loader: Loader, buffer: Buffer | None = None, origin: str = ""):
        self.shape = tuple(sym(s) for s in shape)
        self.dtype = dtype
        self.loader = loader
        self.buffer = buffer
        self.origin = origin  # the graph node it came from (kernel comments and names)
        self.reads = 0  # consumers so far (the realize heuristic)
        # (buffer, shape, strides, offset) when this value is a strided view of a buffer: an
        # extern op then gets that view of the buffer instead of a copy
        self.layout = None
        self.id = next(self._ids)
        self._size = None
        self._full_reads = 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def load(self, index) -> Expr:
        return self.loader(list(index))

    def expr_size(self) -> int:
        """Nodes in one element's expression: the cost of recomputing it per consumer."""
        if self._size is None:
            index = [sympy.Symbol(f"q{i}", integer=True, nonnegative=True) for i in range(self.ndim)]
            nodes = walk(self.load(index))
            self._size = len(nodes)
            # the buffers one element reads in full (as many elements as the value has)
            own = set(index)
            self._full_reads = len({n.buf for n in nodes if isinstance(n, Load) and own <= n.index.free_symbols})
        return self._size

    def full_reads(self) -> int:
        """How many buffers one element of the value reads at its own position (not broadcast):
        what each consumer that recomputes it reads again."""
        self.expr_size()
        return self._full_reads


class Buffer:
    """Storage with a name, shape, strides and dtype."""

    def __init__(self, name: str, shape, dtype, strides=None, offset=0):
        self.name = name
        self.shape = tuple(sym(s) for s in shape)
        self.dtype = dtype
        self.strides = tuple(sym(s) for s in strides) if strides is not None else contiguous_strides(self.shape)
        self.offset = sym(offset)
        self.origins: list[str] = []

    def index(self, idx) -> sympy.Expr:
        return strided_index(idx, self.strides, self.offset)

    def as_value(self, origin: str = "") -> TensorValue:
        def loader(idx):
            return Load(self.name, self.index(idx), self.dtype)

        value = TensorValue(self.shape, self.dtype, loader, buffer=self, origin=origin or self.name)
        value.layout = (self, self.shape, self.strides, sympy.Integer(0))
        return value


class InputBuffer(Buffer):
    """A graph input (or constant attribute), bound at call time."""


class ExternBuffer(Buffer):
    """The result of an op run by ember's eager kernel (matmul, conv, anything not lowered)."""


class ComputedBuffer(Buffer):
    """A pointwise computation: element ``index`` is ``body(index)``, stored at ``target``.

    ``target`` is the buffer written: itself, or an input the graph mutates (``copy_``).
    """

    def __init__(self, name, shape, dtype, body: Loader, target: Buffer | None = None):
        super().__init__(name, shape, dtype)
        self.body = body
        self.target = target or self


class ReductionBuffer(Buffer):
    """``reduce_type`` of ``body(full_index)`` over ``reduced`` dims of ``full_shape``.

    The result has ``full_shape`` with the reduced dims removed (or kept as 1 with keepdim).
    """

    def __init__(self, name, full_shape, reduced: tuple, keepdim: bool, dtype, reduce_type: str,
                 body: Loader, acc_dtype):
        self.full_shape = tuple(sym(s) for s in full_shape)
        self.reduced = tuple(sorted(reduced))
        self.keepdim = keepdim
        self.reduce_type = reduce_type
        self.body = body
        self.acc_dtype = acc_dtype
        shape = [1 if d in self.reduced else s for d, s in enumerate(self.full_shape)]
        if not keepdim:
            shape = [s for d, s in enumerate(shape) if d not in self.reduced]
        super().__init__(name, shape, dtype)
        self.target = self

    def out_index(self, full_index) -> list:
        """Where element ``full_index`` of the reduced space lands in the result."""
        if self.keepdim:
            return [sympy.Integer(0) if d in self.reduced else i for d, i in enumerate(full_index)]
        return [i for d, i in enumerate(full_index) if d not in self.reduced]
