"""The decomposition table: {op name: Python function over ember ops}.

A decomposition takes exactly the arguments of the op it replaces (its schema) and returns
what the op returns, computed with smaller ops. Inductor runs one for an op it has no lowering
for; ``make_fx(decomposition_table=...)`` and export's ``run_decompositions`` trace through them
(they only call ``ember.ops`` entries, so a dispatch mode sees every inner op).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ember._src.dispatch import OPS

DECOMPOSITIONS: dict[str, Callable] = {}
# The names core_decompositions() returns: composites whose parts are all core ops.
CORE: set[str] = set()


class _Ops:
    """``ops.amax(...)`` reads as the op table's ``OPS["amax"](...)``."""

    def __getattr__(self, name):
        try:
            return OPS[name]
        except KeyError:
            raise AttributeError(f"ember has no op {name!r}") from None


ops = _Ops()


def register_decomposition(*names: str, core: bool = True):
    """Registers the decorated function as the decomposition of each op in ``names``."""

    def wrap(fn):
        for name in names:
            if name in DECOMPOSITIONS:
                raise ValueError(f"decomposition of {name} registered twice")
            DECOMPOSITIONS[name] = fn
            if core:
                CORE.add(name)
        return fn

    return wrap


def _name_of(op) -> str:
    if isinstance(op, str):
        return op
    name = getattr(op, "name", None) or getattr(op, "__name__", None)
    if name is None:
        raise TypeError(f"expected an op or op name, got {op!r}")
    return name


class DecompositionTable(dict):
    """{op name: decomposition}; looking it up with the Op object itself works too."""

    def __getitem__(self, key):
        return super().__getitem__(_name_of(key))

    def __contains__(self, key):
        return super().__contains__(_name_of(key))

    def get(self, key, default=None):
        return super().get(_name_of(key), default)


def get_decompositions(names: Iterable) -> DecompositionTable:
    """The decompositions of ``names`` (ops or op names), keyed by op name.

    Names without a decomposition are skipped, as in ``torch._decomp.get_decompositions``.
    """
    table = DecompositionTable()
    for item in names:
        name = _name_of(item)
        fn = DECOMPOSITIONS.get(name)
        if fn is not None:
            table[name] = fn
    return table


def core_decompositions() -> DecompositionTable:
    """Every decomposition to the core op set (pointwise, reductions, views, matmul, conv)."""
    return get_decompositions(sorted(CORE))
