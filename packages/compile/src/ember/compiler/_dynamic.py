"""Dynamic shapes for the lazy capture: one graph for many input sizes.

The capture re-runs Python on every call, so it needs no guards on sizes: a cached graph is
reused only for a recording identical to the one it was built from. What dynamic shapes
change is the *key*: sizes of the segment's inputs become symbols (``s0``, ``s1`` ... one per
distinct value, as PyTorch's duck sizing), and every int an op received that equals a
symbol's value this call is recorded as that symbol. The graph takes the symbols as extra
inputs (read from the inputs' sizes at each call) and passes them where the ints were.

Why this is sound: two calls share a graph only if their recordings, symbolized the same
way, are identical; in each of them a symbolized int equalled the symbol's value in that
call, so the graph, evaluating the symbol from that call's sizes, passes exactly the int
the call's Python computed. An int that only coincidentally equals a size behaves the same
way (it is that size, in every call that matches the key). Sizes 0 and 1 stay static
(PyTorch's 0/1 specialization); parameters keep static sizes as in PyTorch.

Ints commonly derived from sizes are recognized the same way, by value, where an op takes
sizes (ints inside a list/tuple argument): the product of two sizes (flattening) and half a
size (``x.shape[0] // 2``) become expressions the graph computes from the symbols. Any other
derived int is a constant, so a graph using it is specialized to it (the next size
recompiles; never a wrong answer).

Python number arguments of the compiled function (``f(x, n)``, ``f(x, lr=0.1)``) are made
symbolic the same way (PyTorch's automatic dynamic for ints and, with ``specialize_float``
off, floats): an int argument of value 2 or more, or any float argument, is a symbol whose
value the graph takes as an extra input from the call's argument, and every int (float) an
op received that equals it, slice bounds included, is recorded as that symbol. So are slice
bounds ``-n``, ``n - 1`` and ``n + 1`` (``x[-n:]``), ``n`` times an input's size inside a size
list (``x.repeat(n, 1)`` views its result as ``(n * 10, 4)``), and the float ``-a``.
"""

from __future__ import annotations

from ember._src.dtypes import dtype as DType

from ._recorder import _LIST, _TUPLE, LITERAL_INT


class SymRef:
    """A size symbol in a key or a graph template (one object per index, identity-hashed)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"s{self.index}"


_SYMS = [SymRef(i) for i in range(256)]


def sym(i: int) -> SymRef:
    while i >= len(_SYMS):
        _SYMS.append(SymRef(len(_SYMS)))
    return _SYMS[i]


def _eligible(t, k: int, d: int, all_dims) -> bool:
    marked = t.__dict__.get("_dynamo_dynamic_indices")
    if marked and d in marked:
        return True
    if not all_dims or getattr(t, "_is_param", False):
        return False
    if all_dims is not True and (k, d) not in all_dims:
        return False
    static = t.__dict__.get("_dynamo_static_indices")
    return not (static and d in static)


def has_marked_dims(inputs) -> bool:
    for t in inputs:
        if t.__dict__ and t.__dict__.get("_dynamo_dynamic_indices"):
            return True
    return False


class ScalarSource:
    """Where a number symbol's value comes from: the compiled function's argument ``slot``
    (a position or a keyword), of type ``kind`` (int or float)."""

    __slots__ = ("slot", "kind")

    def __init__(self, slot, kind: type):
        self.slot = slot
        self.kind = kind

    def __eq__(self, other) -> bool:
        return type(other) is ScalarSource and (other.slot, other.kind) == (self.slot, self.kind)

    def __hash__(self) -> int:
        return hash((self.slot, self.kind))

    def __repr__(self) -> str:
        return f"ScalarSource({self.slot!r}, {self.kind.__name__})"


def scalar_arguments(args, kwargs) -> list:
    """[(slot, value)] of the call's int and float arguments, also inside lists, tuples and
    dicts of them (``f(x, [0.5, 0.1])``, ``f(x, {"lr": 0.1})``), as PyTorch's; a slot is the
    path to the number. Bools are flags: never symbolic."""
    found: list = []
    for i, a in enumerate(args):
        _numbers(a, (i,), found, 0)
    if kwargs:
        for k, a in kwargs.items():
            _numbers(a, (k,), found, 0)
    return found


def _numbers(value, path: tuple, found: list, depth: int) -> None:
    t = type(value)
    if t is int or t is float:
        found.append((path, value))
    elif depth < 3 and (t is list or t is tuple) and len(value) <= 64:
        for i, item in enumerate(value):
            _numbers(item, (*path, i), found, depth + 1)
    elif depth < 3 and t is dict and len(value) <= 64:
        for k, item in value.items():
            if type(k) is str:
                _numbers(item, (*path, k), found, depth + 1)


def symbolic_scalars(scalar_args, slots) -> list:
    """The (slot, value) of ``scalar_args`` that become symbols: those in ``slots`` (True: all),
    ints of value 2 or more (0/1 specialization, and small constants such as dims stay apart)
    unless ``specialize_int``, floats unless ``specialize_float``."""
    from . import config

    out = []
    for slot, v in scalar_args:
        if slots is not True and slot not in slots:
            continue
        if type(v) is int and v >= 2 and not config.specialize_int:
            out.append((slot, v))
        elif type(v) is float and not config.specialize_float:
            out.append((slot, v))
    return out


def scalars_changed(previous: dict, scalar_args) -> set:
    """The slots whose number differs from ``previous`` ({slot: value}) with the same type."""
    changed = set()
    for slot, v in scalar_args:
        old = previous.get(slot, v)
        if type(old) is type(v) and old != v:
            changed.add(slot)
    return changed


def symbolize(rec, all_dims, scalars=()):
    """(symbolized key items, sources, {int value: symbol index}, derived, {float hex: symbol
    index}, the int values of number arguments) or None when nothing qualifies. Sources are
    (input index, dim) for sizes and ``ScalarSource`` for numbers. ``all_dims``: True (every
    size), False (marked ones only) or a set of (input index, dim) (automatic dynamic: the
    sizes that changed). ``scalars``: [(slot, value)] of the number arguments made symbolic."""
    by_value: dict = {}
    sources: list = []
    symbolic_dims: dict = {}  # input index -> {dim: symbol index}
    for k, t in enumerate(rec.inputs):
        for d, size in enumerate(t._shape):
            if size >= 2 and _eligible(t, k, d, all_dims):
                if size not in by_value:
                    by_value[size] = len(sources)
                    sources.append((k, d))
                symbolic_dims.setdefault(k, {})[d] = by_value[size]
    derived = derived_sizes(sources, rec, by_value)
    floats: dict = {}
    scalar_ints: set = set()
    for slot, v in scalars:
        if type(v) is float:
            if v.hex() not in floats:
                floats[v.hex()] = len(sources)
                sources.append(ScalarSource(slot, float))
        elif v not in scalar_ints:
            # An op's int equal to both a size and a number argument is keyed as the argument:
            # ``x[:n]`` keeps one graph when ``n`` happens to equal a size.
            scalar_ints.add(v)
            by_value[v] = len(sources)
            sources.append(ScalarSource(slot, int))
    if not sources:
        return None
    anywhere = _number_expressions(sources, rec, by_value, derived, floats, scalars)

    def walk(item, in_seq=False):
        t = type(item)
        if t is tuple:
            if item and item[0] is slice:
                # Slices stay static (the graph spells them as literals), except bounds that
                # are a number argument's value (``x[:n]``).
                if not scalar_ints:
                    return item
                return (slice, *[_slice_bound(b, by_value, scalar_ints, anywhere) for b in item[1:]])
            if len(item) == 2 and item[0] is int:
                v = item[1]
                if v in by_value:
                    return sym(by_value[v])
                if in_seq and v in derived:  # only sizes (ints in a list/tuple argument)
                    return derived[v]
                return item
            if len(item) == 2 and item[0] is LITERAL_INT:
                # an int the user's code spells: a constant, keyed as any constant (whether it was looked up
                # depends on this call's sizes)
                return (int, item[1])
            if len(item) == 2 and item[0] is float:
                i = floats.get(item[1])
                return item if i is None else sym(i) if type(i) is int else i
            if len(item) == 2 and (item[0] is _LIST or item[0] is _TUPLE):
                return (item[0], tuple(walk(x, True) for x in item[1]))
            return tuple(walk(x) for x in item)
        return item

    items = []
    k = 0
    for item in rec.key:
        if anywhere and type(item) is tuple and len(item) == 3 and is_slice_op(item[0]):
            # ``x[n:n + 1]`` recorded as the op ``slice(x, dim, start, end, step)``: its bounds are
            # slice bounds too (``n + 1``), as in a slice tuple
            args = tuple(walk(a) for a in item[1])
            args = tuple(anywhere.get(a[1], a) if 2 <= i <= 3 and type(a) is tuple and len(a) == 2 and a[0] is int
                         else a for i, a in enumerate(args))
            items.append((item[0], args, walk(item[2])))
        elif type(item) is tuple and item and type(item[0]) is DType:
            # An input: (dtype, device, shape, stride, offset, requires_grad). Contiguous
            # strides are implied by the (symbolic) shape; others stay as they are.
            dtype, device, shape, stride, offset, rg = item
            from ember._src.shapes import is_contiguous

            dims = symbolic_dims.get(k, {})
            sym_shape = tuple(sym(dims[d]) if d in dims else s for d, s in enumerate(shape))
            layout = "contiguous" if is_contiguous(shape, stride) else stride
            items.append((dtype, device, sym_shape, layout, offset, rg))
            k += 1
        else:
            items.append(walk(item))
    return tuple(items), sources, by_value, derived, floats, frozenset(scalar_ints), anywhere


def is_slice_op(op) -> bool:
    """Whether ``op`` is ``ember.ops.slice`` (whose args 2 and 3 are a slice's bounds)."""
    return getattr(op, "name", None) == "slice" and type(op).__name__ == "Op"


def _slice_bound(b, by_value, scalar_ints, anywhere):
    if type(b) is tuple and len(b) == 2 and b[0] is int:
        if b[1] in scalar_ints:
            return sym(by_value[b[1]])
        if b[1] in anywhere:
            return anywhere[b[1]]
    return b


def _number_expressions(sources, rec, by_value, derived, floats, scalars) -> dict:
    """Expressions of the number symbols that programs commonly compute. Returns {int value:
    expression} for ``-n``, ``n - 1``, ``n + 1`` (recognized as slice bounds only: elsewhere
    small constants would coincide too often); adds ``n * size`` to
    ``derived`` (inside size lists) and ``-a`` to ``floats`` ({float hex: expression}).
    Expressions are ("neg", i, 0), ("add", i, constant) and ("mulc", i, constant)."""
    anywhere: dict = {}
    sizes = sorted({size for t in rec.inputs for size in t._shape if size >= 2})
    for i, source in enumerate(sources):
        if type(source) is not ScalarSource:
            continue
        value = next(v for slot, v in scalars if slot == source.slot)
        if source.kind is float:
            if value != 0.0 and (-value).hex() not in floats:
                floats[(-value).hex()] = ("neg", i, 0)
            continue
        for expr_value, expr in ((-value, ("neg", i, 0)), (value - 1, ("add", i, -1)), (value + 1, ("add", i, 1))):
            if abs(expr_value) >= 2 and expr_value not in by_value:
                anywhere.setdefault(expr_value, expr)
        for size in sizes:
            product = value * size
            if product not in by_value and product not in anywhere:
                derived.setdefault(product, ("mulc", i, size))
    return anywhere


def derived_sizes(sources, rec, by_value) -> dict:
    """{value: expression} for ints commonly derived from sizes: a product of two sizes
    (flattening ``view(B * T, C)``) and half a size (``x.shape[0] // 2``). Exact sizes win; the
    first expression found wins. Each is ("mul", i, j) or ("floordiv", i, 2) over symbol indices."""
    values = [rec.inputs[k]._shape[d] for k, d in sources]
    derived: dict = {}
    for i, vi in enumerate(values):
        half = vi // 2
        if half >= 2 and half not in by_value:
            derived.setdefault(half, ("floordiv", i, 2))
    for i, vi in enumerate(values):
        for j in range(i, len(values)):
            product = vi * values[j]
            if product not in by_value:
                derived.setdefault(product, ("mul", i, j))
    # a size times a constant the user's code spells (``x.repeat(2, 1)`` views its result as ``(2 * n, c)``)
    for c in sorted(getattr(rec, "literal_values", ())):
        for i, vi in enumerate(values):
            if c * vi not in by_value:
                derived.setdefault(c * vi, ("mulc", i, c))
    return derived


def shapes_changed(previous: list, inputs) -> set:
    """The (input index, dim) whose size differs from ``previous`` (a list of shapes), when the
    inputs match it in count and ranks; an empty set otherwise."""
    if len(previous) != len(inputs):
        return set()
    changed = set()
    for k, (shape, t) in enumerate(zip(previous, inputs)):
        if len(shape) != len(t._shape):
            return set()
        changed.update((k, d) for d, (a, b) in enumerate(zip(shape, t._shape)) if a != b)
    return changed


_DERIVED_KINDS = ("mul", "mulc", "add", "neg", "floordiv")


def _symbolic_value(item, values: list):
    """This call's value of a key's symbol (``SymRef``) or derived expression, else None."""
    if type(item) is SymRef:
        return values[item.index] if item.index < len(values) else None
    if type(item) is tuple and len(item) == 3 and item[0] in _DERIVED_KINDS:
        kind, i, j = item
        if i >= len(values):
            return None
        a = values[i]
        if kind == "mul":
            return a * values[j] if j < len(values) else None
        return {"mulc": lambda: a * j, "add": lambda: a + j, "neg": lambda: -a, "floordiv": lambda: a // j}[kind]()
    return None


def same_up_to_coincidence(cached, new, values: list, cached_values: list | None = None) -> bool:
    """Whether two symbolized recordings differ only where one holds an int and the other a
    symbol (or derived size) whose value this call is that int: a constant that happened to
    equal a size (``x.view(-1, 4)`` called with 4 elements), or a size keyed as a constant in
    the other. The cached graph then computes exactly this call's ops (it passes the constant,
    or computes the symbol, and both are the int this call's Python gave), so it serves the
    call with no new compile (PyTorch's graph, traced with provenance, has no such miss).
    ``values``: this call's values of the new key's symbols; ``cached_values``: of the cached graph's
    symbols, read from this call's inputs by the graph's own sources (``values`` when not given). A
    symbol of one and a symbol of the other match when their values are equal: two sizes the graph
    keeps apart that are equal this call (``(3, 3)`` after ``(2, 3)``, one symbol in the new key)."""
    if cached_values is None:
        cached_values = values
    if cached == new and cached_values is values:
        return True
    tc, tn = type(cached), type(new)
    if tc is tuple and len(cached) == 2 and cached[0] is int:
        value = _symbolic_value(new, values)
        if value is not None:
            return value == cached[1]
    if tn is tuple and len(new) == 2 and new[0] is int:
        value = _symbolic_value(cached, cached_values)
        if value is not None:
            return value == new[1]
    theirs = _symbolic_value(cached, cached_values)
    if theirs is not None:
        return theirs == _symbolic_value(new, values)
    if tc is tuple and tn is tuple and len(cached) == len(new):
        return all(same_up_to_coincidence(a, b, values, cached_values) for a, b in zip(cached, new))
    return cached == new

