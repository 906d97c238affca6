"""PyTorch's helpers for deciding on symbolic values without adding a guard
(``torch.fx.experimental.symbolic_shapes.guard_or_false`` & co.), over ember's values: a plain
bool, or the ``UnbackedSymBool`` a comparison of an unbacked symbol (``u0 == 5`` during export)
gives, which these answer from the symbol's known range instead of raising."""

from __future__ import annotations

from ._unbacked_export import UnbackedSymBool, _decide


def _known(value):
    """True/False when ``value`` is decided without a data-dependent guard, else None."""
    if isinstance(value, UnbackedSymBool):
        return _decide(value.env, value.rel)
    return bool(value)


def guard_or_false(value) -> bool:
    """``value`` when it can be decided, else False (no data-dependent error)."""
    known = _known(value)
    return False if known is None else known


def guard_or_true(value) -> bool:
    """``value`` when it can be decided, else True (no data-dependent error)."""
    known = _known(value)
    return True if known is None else known


def statically_known_true(value) -> bool:
    """Whether ``value`` is known true for every value its symbols may take."""
    return _known(value) is True


def statically_known_false(value) -> bool:
    """Whether ``value`` is known false for every value its symbols may take."""
    return _known(value) is False


def has_free_symbols(value) -> bool:
    """Whether ``value`` (an int, a SymInt, a tensor or a list of them) holds a symbol."""
    if isinstance(value, (list, tuple)):
        return any(has_free_symbols(v) for v in value)
    if hasattr(value, "shape") and not isinstance(value, int):
        return any(has_free_symbols(s) for s in value.shape)
    node = getattr(value, "node", None)
    return bool(getattr(node, "free_symbols", ()))


def is_concrete_int(value) -> bool:
    """Whether ``value`` is an int with no symbol behind it."""
    return isinstance(value, int) and not isinstance(value, bool) and not has_free_symbols(value)
