"""Data-dependent Python scalars of a ``fullgraph=True`` capture (PyTorch's unbacked symbols).

With ``fullgraph=True`` PyTorch 2.13 keeps ``Tensor.item()`` in the graph: the result is a
symbol with no value at trace time (``zuf0`` for a float, ``u0`` for an int). Arithmetic on it
is traced, but deciding anything with it (``if v > 0:``, ``while``, ``bool(v)``) cannot be, and
raises ``UserError`` ("Could not guard on data-dependent expression ...").

ember's capture does compute the value (the flush before ``item()`` is not a graph break), and
hands it back as a float or int that raises that same error where the user's program decides on
it while the capture runs. Outside the capture, or in ember's own code, it is an ordinary number;
``ember._check(cond)`` reads it without the error, as ``torch._check`` does.
"""

from __future__ import annotations

import sys
import weakref

from ._exc import UserError, UserErrorType
from ._recorder import current
from ._user_frames import _EMBER_DIRS, user_frame


def _deciding(rec_ref) -> bool:
    """True when the user's program (not ember) decides on the value while its capture runs."""
    rec = rec_ref()
    if rec is None or current() is not rec or rec.suspended:
        return False
    caller = sys._getframe(2).f_code.co_filename  # _deciding <- the dunder <- its caller
    return not caller.startswith(_EMBER_DIRS)


def _guard_error(expr: str) -> UserError:
    frame = user_frame(3)
    where = f"\nCaused by: {frame}" if frame is not None else ""
    return UserError(
        UserErrorType.ANTI_PATTERN,
        "Consider annotating your code using torch._check*(). Could not guard on data-dependent "
        f"expression {expr} (unhinted: {expr}).  (Size-like symbols: none)\n\n"
        "consider using data-dependent friendly APIs such as guard_or_false, guard_or_true and "
        f"statically_known_true.{where}",
    )


class UnbackedBool:
    """A comparison of a data-dependent scalar: ``bool()`` of it is the guard that fails."""

    __slots__ = ("value", "expr", "rec_ref")

    def __init__(self, value: bool, expr: str, rec_ref):
        self.value, self.expr, self.rec_ref = value, expr, rec_ref

    def __bool__(self) -> bool:
        if _deciding(self.rec_ref):
            raise _guard_error(self.expr)
        return self.value

    def __ember_unguarded__(self) -> bool:
        return self.value

    def __repr__(self) -> str:
        return self.expr

    def __eq__(self, other):
        return self.value == (other.value if type(other) is UnbackedBool else other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __invert__(self):
        return UnbackedBool(not self.value, f"Not({self.expr})", self.rec_ref)

    def __and__(self, other):
        return UnbackedBool(self.value and bool(_plain(other)), f"{self.expr} & {other!r}", self.rec_ref)

    def __or__(self, other):
        return UnbackedBool(self.value or bool(_plain(other)), f"{self.expr} | {other!r}", self.rec_ref)

    __rand__, __ror__ = __and__, __or__


def _plain(x):
    return x.__ember_unguarded__() if hasattr(type(x), "__ember_unguarded__") else x


def _compare(name: str, symbol: str):
    def compare(self, other):
        plain = getattr(self._kind, name)(self, _plain(other))
        if plain is NotImplemented or not _deciding(self._rec_ref):
            return plain
        return UnbackedBool(plain, f"{self._sym} {symbol} {_show(other, self._kind)}", self._rec_ref)

    compare.__name__ = name
    return compare


def _show(x, kind) -> str:
    """``x`` as PyTorch prints it beside a symbol of type ``kind`` (an int beside a float: ``0.0``)."""
    if isinstance(x, _UnbackedMixin):
        return x._sym
    if kind is float and isinstance(x, int) and not isinstance(x, bool):
        return repr(float(x))
    return repr(x)


def _arith(name: str, kind):
    def arith(self, *args):
        out = getattr(kind, name)(self, *(_plain(a) for a in args))
        if isinstance(out, (int, float)) and not isinstance(out, bool):
            return unbacked(out, self._rec_ref, self._sym)
        return out

    arith.__name__ = name
    return arith


class _UnbackedMixin:
    _sym = "u0"
    _rec_ref = None

    def __bool__(self):
        if _deciding(self._rec_ref):
            raise _guard_error(f"Ne({self._sym}, 0)")
        return self != 0

    def __ember_unguarded__(self):
        return self._kind(self)

    def __reduce__(self):  # pickles as the plain number
        return (self._kind, (self._kind(self),))


_COMPARISONS = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">=", "__eq__": "==", "__ne__": "!="}
_ARITHMETIC = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
               "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
               "__neg__", "__pos__", "__abs__")


def _make(name: str, kind) -> type:
    """``kind``'s subclass whose comparisons guard and whose arithmetic stays data-dependent."""
    namespace = {"_kind": kind, "__hash__": kind.__hash__, "__module__": __name__}
    for method, symbol in _COMPARISONS.items():
        namespace[method] = _compare(method, symbol)
    for method in _ARITHMETIC:
        namespace[method] = _arith(method, kind)
    return type(name, (_UnbackedMixin, kind), namespace)


UnbackedFloat = _make("UnbackedFloat", float)
UnbackedInt = _make("UnbackedInt", int)


def unbacked(value, rec_ref, sym: str | None = None):
    """``value`` (an ``item()`` result) as a data-dependent scalar of the capture ``rec_ref``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value  # bool and complex items: no symbolic form here
    rec = rec_ref()
    if sym is None:
        count = rec.__dict__.setdefault("unbacked_count", [0, 0]) if rec is not None else [0, 0]
        slot = 0 if isinstance(value, float) else 1
        sym = f"{'zuf' if slot == 0 else 'u'}{count[slot]}"
        count[slot] += 1
    out = (UnbackedFloat if isinstance(value, float) else UnbackedInt)(value)
    out._sym, out._rec_ref = sym, rec_ref
    return out


def item_of(tensor, item_fn):
    """``tensor.item()`` inside a capture: data-dependent under ``fullgraph=True``."""
    rec = current()
    if rec is not None and not rec.suspended:
        from ._hooks import asserted_item

        value = asserted_item(rec, tensor)
        if value is not None:
            return value
    value = item_fn(tensor)
    if type(value) is not int and type(value) is not float and type(value) is not bool:
        return value  # export's unbacked SymInt (``_unbacked_export``)
    if rec is not None and not rec.suspended and getattr(rec.owner, "fullgraph", False):
        return unbacked(value, weakref.ref(rec))
    return value


def plain_scalars(result):
    """``result`` with its data-dependent scalars made plain numbers (what leaves the capture is
    concrete, as PyTorch's graph outputs are)."""
    if isinstance(result, _UnbackedMixin):
        return result._kind(result)
    if type(result) in (tuple, list):
        items = [plain_scalars(r) for r in result]
        if any(a is not b for a, b in zip(items, result)):
            return type(result)(items)
        return result
    if type(result) is dict:
        return {k: plain_scalars(v) for k, v in result.items()}
    return result
