"""``Library``, ``define`` and ``impl``: PyTorch's low-level ``torch.library`` API.

``Library("mylib", "DEF").define("foo(Tensor x) -> Tensor")`` declares ``ember.ops.mylib.foo``;
``impl`` gives it kernels per dispatch key. Keys map to ember's layers: ``CPU``/``CUDA`` (a
device kernel), ``Meta`` (the fake implementation), ``CompositeExplicitAutograd`` (a kernel for
every device), ``CompositeImplicitAutograd`` (a function of other ops: it serves every device
and the meta device, and its gradient is that of the ops it runs).
"""

from __future__ import annotations

from collections.abc import Callable

from ._registry import ENTRIES, create_op, destroy, entry_of
from ._schema import parse_schema

_KINDS = ("DEF", "IMPL", "FRAGMENT")
_DEVICE_KEYS = {"CPU": "cpu", "CUDA": "cuda"}


def _apply_impl(entry, fn: Callable, dispatch_key: str) -> None:
    key = dispatch_key or "CompositeImplicitAutograd"
    if key in _DEVICE_KEYS:
        entry.kernels[_DEVICE_KEYS[key]] = fn
    elif key == "Meta":
        entry.fake = fn
    elif key in ("CompositeExplicitAutograd", "Default"):
        entry.kernels[None] = fn
    elif key == "CompositeImplicitAutograd":
        entry.composite = fn
    else:
        raise ValueError(f"impl: dispatch key {key!r} is not supported by ember; use one of CPU, CUDA, Meta, "
                         "CompositeExplicitAutograd, CompositeImplicitAutograd (or register_autograd for Autograd)")
    from ember.compiler._op_facts import META_CACHE

    META_CACHE.clear()


class Library:
    """A set of custom ops in one namespace (PyTorch's ``torch.library.Library``).

    Args:
        ns: the namespace (``"mylib"``).
        kind: ``"DEF"`` (this library defines the namespace), ``"FRAGMENT"`` (adds to it) or
            ``"IMPL"`` (only implements ops defined elsewhere).
        dispatch_key: the default key of ``impl``.
    """

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in _KINDS:
            raise ValueError(f"Unsupported kind: {kind}")
        if not ns.isidentifier():
            raise ValueError(f"Library namespace must be an identifier, got {ns!r}")
        if kind == "DEF" and any(name.startswith(ns + "::") for name in _DEFINED_BY_LIBRARIES):
            raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; please "
                               "use a FRAGMENT library to add more operators")
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self._op_defs: set = set()
        self._destroyed = False

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        """Declares ``ns::name`` from ``"name(args) -> returns"``; returns the op's name."""
        if self.kind == "IMPL":
            raise RuntimeError("define() is not allowed on an IMPL library")
        parsed = parse_schema(schema)
        name = parsed.name
        if "::" in name:
            ns, _, name = name.partition("::")
            if ns != self.ns:
                raise ValueError(f"define: the schema's namespace {ns} is not the library's ({self.ns})")
        qualname = f"{self.ns}::{name}"
        create_op(qualname, parsed, tuple(tags))
        self._op_defs.add(qualname)
        _DEFINED_BY_LIBRARIES.add(qualname)
        return name

    def impl(self, op_name, fn: Callable, dispatch_key: str = "", *, with_keyset: bool = False) -> None:
        """Registers ``fn`` for ``op_name`` (a name in this namespace, or a custom op) under ``dispatch_key``."""
        if isinstance(op_name, str) and "::" not in op_name:
            op_name = f"{self.ns}::{op_name}"
        _apply_impl(entry_of(op_name), fn, dispatch_key or self.dispatch_key)

    def fallback(self, fn, dispatch_key: str = "", *, with_keyset: bool = False) -> None:
        raise ValueError("Library.fallback: ember has no boxed fallbacks; register kernels per op with impl")

    def _destroy(self) -> None:
        for qualname in self._op_defs:
            destroy(qualname)
            _DEFINED_BY_LIBRARIES.discard(qualname)
        self._op_defs.clear()
        self._destroyed = True


_DEFINED_BY_LIBRARIES: set = set()


def define(qualname: str, schema: str, *, lib: Library | None = None, tags=()) -> None:
    """Declares the op ``"ns::name"`` with ``schema`` ``"(args) -> returns"`` (``torch.library.define``)."""
    if "::" not in qualname:
        raise ValueError(f"define: expected 'namespace::name', got {qualname!r}")
    ns, name = qualname.split("::", 1)
    if lib is None:
        lib = Library(ns, "FRAGMENT")
        _KEEP.append(lib)
    lib.define(name + schema, tags=tags)


def impl(qualname, types, func: Callable | None = None, *, lib: Library | None = None):
    """Registers ``func`` as the kernel of ``qualname`` for device types ``types`` (``torch.library.impl``).

    ``types`` is a device type (``"cpu"``), a list of them, or a dispatch key (``"CPU"``,
    ``"CompositeImplicitAutograd"``, ...)."""

    if isinstance(qualname, Library):  # the older form: impl(lib, "name", "CPU") as a decorator
        lib_, name, key = qualname, types, func or ""

        def register_in_library(fn):
            lib_.impl(name, fn, key)
            return fn

        return register_in_library

    def register(fn):
        entry = entry_of(qualname)
        keys = [types] if isinstance(types, str) else list(types)
        for key in keys:
            if key in ("cpu", "cuda"):
                entry.kernels[key] = fn
            elif key == "default":
                entry.kernels[None] = fn
            else:
                _apply_impl(entry, fn, key)
        return fn

    return register if func is None else register(func)


_KEEP: list = []  # libraries made by define(): they live as long as the process, as in PyTorch

__all__ = ["ENTRIES", "Library", "define", "impl"]
