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
"""

from __future__ import annotations

from ember._src.dtypes import dtype as DType

from ._recorder import _LIST, _TUPLE


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


def symbolize(rec, all_dims):
    """(symbolized key items, sources [(input index, dim)], {value: symbol index}) or None
    when no input size qualifies. ``all_dims``: True (every size), False (marked ones only)
    or a set of (input index, dim) (automatic dynamic: the sizes that changed)."""
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
    if not sources:
        return None

    derived = derived_sizes(sources, rec, by_value)

    def walk(item, in_seq=False):
        t = type(item)
        if t is tuple:
            if item and item[0] is slice:
                return item  # slices stay static: the graph spells them as literals
            if len(item) == 2 and item[0] is int:
                v = item[1]
                if v in by_value:
                    return sym(by_value[v])
                if in_seq and v in derived:  # only sizes (ints in a list/tuple argument)
                    return derived[v]
                return item
            if len(item) == 2 and (item[0] is _LIST or item[0] is _TUPLE):
                return (item[0], tuple(walk(x, True) for x in item[1]))
            return tuple(walk(x) for x in item)
        return item

    items = []
    k = 0
    for item in rec.key:
        if type(item) is tuple and item and type(item[0]) is DType:
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
    return tuple(items), sources, by_value, derived


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
