"""The user's allow-list for ``weights_only`` loading: PyTorch's ``add_safe_globals``,
``safe_globals``, ``get_safe_globals``, ``clear_safe_globals`` and
``get_unsafe_globals_in_checkpoint``.

A global the user allows (a class or function, or ``(obj, "module.name")``) may be named by a
checkpoint that ``ember.load(weights_only=True)`` reads: calling it (REDUCE / NEWOBJ) and
BUILD on instances of an allowed class are then permitted; everything else stays refused.
"""

from __future__ import annotations

import contextlib
import io
import threading

from ._pickle_reader import Constructor

_LOCK = threading.Lock()
_USER: dict[tuple[str, str], object] = {}


def _key_of(entry) -> tuple[tuple[str, str], object]:
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str) or "." not in entry[1]:
            raise TypeError(f"safe globals must be objects or (object, 'module.name') tuples, got {entry!r:.80}")
        obj, name = entry
        module, _, qualname = name.rpartition(".")
        return (module, qualname), obj
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if not module or not name:
        raise TypeError(f"cannot name the safe global {entry!r:.80}: pass (object, 'module.name')")
    return (module, name), entry


def add_safe_globals(safe_globals: list) -> None:
    """Allows these globals in ``weights_only`` loading (for the rest of the process)."""
    pairs = [_key_of(entry) for entry in safe_globals]  # a non-iterable fails here, as PyTorch's
    with _LOCK:
        _USER.update(pairs)


def get_safe_globals() -> list:
    with _LOCK:
        return list(_USER.values())


def clear_safe_globals() -> None:
    with _LOCK:
        _USER.clear()


class safe_globals(contextlib.ContextDecorator):
    """``with ember.serialization.safe_globals([MyClass]): ember.load(f)``: allowed inside only."""

    def __init__(self, safe_globals: list):
        self._entries = [_key_of(entry) for entry in safe_globals]
        self._saved: dict = {}

    def __enter__(self):
        with _LOCK:
            self._saved = dict(_USER)
            _USER.update(self._entries)
        return self

    def __exit__(self, *exc) -> None:
        with _LOCK:
            _USER.clear()
            _USER.update(self._saved)


def _new_instance(cls, *args):
    return cls.__new__(cls, *args)


def user_global(module: str, name: str):
    """The object a user-allowed global names, or None.

    It is pushed as itself (a class or function kept as data, such as a module's
    ``activation = F.relu``, must come back as that function); ``user_constructor`` lets
    REDUCE/NEWOBJ call it."""
    with _LOCK:
        return _USER.get((module, name))


def user_constructor(obj) -> Constructor | None:
    """A Constructor for ``obj`` when it is one of the user-allowed globals (by identity), else None."""
    with _LOCK:
        key = next((k for k, v in _USER.items() if v is obj), None)
    if key is None or not callable(obj):
        return None
    qualname = f"{key[0]}.{key[1]}"
    if isinstance(obj, type):
        return Constructor(qualname, obj, lambda *args: _new_instance(obj, *args))
    return Constructor(qualname, obj)


def is_user_class_instance(inst) -> bool:
    with _LOCK:
        return any(isinstance(v, type) and type(inst) is v for v in _USER.values())


def build_user_instance(inst, state) -> None:
    """BUILD on an instance of an allowed class: ``__setstate__``, else the attribute dict."""
    # ``object`` has no ``__setstate__`` before Python 3.13 (pickle's BUILD then updates __dict__)
    cls_setstate = getattr(type(inst), "__setstate__", None)
    if cls_setstate is not None and cls_setstate is not getattr(object, "__setstate__", None):
        inst.__setstate__(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        inst.__dict__.update(state)
    for k, v in (slots or {}).items():
        setattr(inst, k, v)


def globals_in_pickle(data: bytes) -> list[str]:
    """Every ``module.name`` a pickle stream refers to (GLOBAL/INST/STACK_GLOBAL), in order."""
    import pickletools  # here: its opcode tables are built at import (import ember < 0.1 s)

    found: list[str] = []
    strings: list = []
    memo: dict = {}
    for op, arg, _pos in pickletools.genops(io.BytesIO(data)):
        if op.name in ("GLOBAL", "INST"):
            found.append(arg.replace(" ", "."))
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
            strings.append(arg)
        elif op.name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT") and strings:
            memo[len(memo) if op.name == "MEMOIZE" else arg] = strings[-1]
        elif op.name in ("GET", "BINGET", "LONG_BINGET") and arg in memo:
            strings.append(memo[arg])
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            found.append(f"{strings[-2]}.{strings[-1]}")
    return list(dict.fromkeys(found))
