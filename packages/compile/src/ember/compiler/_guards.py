"""Guards of the replay fast path: cheap checks that the Python state a recorded call read
is still what it was, compiled into one generated Python function.

A guard is a boolean expression over the call's ``args``/``kwargs`` and constants the
builder holds (``_c12``). The builder de-duplicates watched objects by identity and emits:

- tensors: exact class, dtype, device, sizes, strides, offset, requires_grad;
- Python scalars and strings: type and value; tuples/lists/dicts of arguments: structure and
  each item; any other object: identity, plus its contents one level deep (``watch``);
- dicts: their version tag (PEP 509: CPython gives every dict a tag that changes on each
  mutation; comparing it is the cheapest exact "unchanged" check, which is what the PEP was
  written for). Where the tag cannot be read (a Python without it), a shallow snapshot of
  the items is compared instead.
"""

from __future__ import annotations

import ctypes
import sys
import types

from ember._C import FastFront
from ember._src.tensor import Tensor

_MISSING = object()
_SCALARS = (int, float, bool, str, bytes, complex, type(None))


def _version_reader_works() -> bool:
    """The tag sits after the object header and ``ma_used`` in CPython's PyDictObject (3.6 to
    3.13); check that layout on this interpreter before trusting it."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return False
    try:
        d: dict = {}
        used = ctypes.c_ssize_t.from_address(id(d) + 2 * ctypes.sizeof(ctypes.c_void_p))
        tag = ctypes.c_uint64.from_address(id(d) + 3 * ctypes.sizeof(ctypes.c_void_p))
        seen = [tag.value]
        for change in (lambda: d.__setitem__("a", 1), lambda: d.__setitem__("a", 2),
                       lambda: d.pop("a"), lambda: d.update(b=3), d.clear):
            change()
            if tag.value in seen or used.value != len(d):
                return False
            seen.append(tag.value)
        return True
    except Exception:  # noqa: BLE001 - any failure means: do not read raw memory
        return False


_HAS_VERSION = _version_reader_works()
_TAG_OFFSET = 3 * ctypes.sizeof(ctypes.c_void_p)


# What a module's call reads besides ``__dict__`` itself; the other registries (state_dict and
# load hooks, the non-persistent buffer set) do not change what a forward computes.
_MODULE_DICTS = frozenset({"_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks",
                           "_backward_hooks", "_backward_pre_hooks", "_forward_hooks_with_kwargs",
                           "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called"})
_MODULE_IGNORED = frozenset({"_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                             "_load_state_dict_post_hooks", "_non_persistent_buffers_set"})


def _copy(v):
    return set(v) if isinstance(v, set) else v


def _snapshot(d: dict) -> tuple:
    return tuple((k, id(v)) for k, v in d.items())


def is_module(obj) -> bool:
    nn = sys.modules.get("ember.nn")
    return nn is not None and isinstance(obj, nn.Module)


def _print(obj):
    """What ``watch`` guards of ``obj``, as a comparable value."""
    if isinstance(obj, dict):
        return _tag(obj)
    if type(obj) is list:
        return tuple(map(id, obj))
    if isinstance(obj, Tensor):
        return (obj._shape, obj._stride, obj._offset, obj.dtype, obj._requires_grad)
    d = getattr(obj, "__dict__", None)
    return _tag(d) if type(d) is dict else None


def _tag(d: dict):
    if _HAS_VERSION:
        return ctypes.c_uint64.from_address(id(d) + _TAG_OFFSET).value
    return _snapshot(d)


def _tags_expr(b, dicts: list) -> str:
    """One check of every dict's version tag: numpy gathers the tags from a view of the memory
    span holding the dicts (only the tags' own words are read, and the dicts are kept alive
    by the guard, so none moves), and the bytes are compared with the recorded ones. For a
    module tree that is hundreds of tags for the price of one call."""
    dicts = list({id(d): d for d in dicts}.values())
    addrs = [id(d) + _TAG_OFFSET for d in dicts]
    lo, hi = min(addrs), max(addrs)
    if any((a - lo) % 8 for a in addrs) or hi - lo > 1 << 44:
        parts = []
        for d in dicts:
            reader = ctypes.c_uint64.from_address(id(d) + _TAG_OFFSET)
            parts.append(f"{b.const(reader)}.value == {reader.value}")
        return " and ".join(parts)
    import numpy as np

    words = np.frombuffer((ctypes.c_uint64 * ((hi - lo) // 8 + 1)).from_address(lo), dtype=np.uint64)
    index = np.array([(a - lo) // 8 for a in addrs], dtype=np.intp)
    b.const(dicts)  # keeps them alive (their addresses are read)
    expected = words[index].tobytes()
    return f"{b.const(words)}[{b.const(index)}].tobytes() == {b.const(expected)}"


class GuardBuilder:
    """Accumulates guard expressions; ``build()`` returns ``guard(args, kwargs) -> bool``."""

    def __init__(self):
        self.exprs: list[str] = []
        self.consts: dict[str, object] = {}
        self._by_id: dict[int, str] = {}
        self.watched: dict[int, object] = {}  # id -> object whose contents are guarded
        self.tensors: dict[int, Tensor] = {}  # id -> tensor whose metadata is guarded
        self.start_prints: list = []  # per watched object, its state when first watched
        self.tags: list = []  # dicts whose version tag must be unchanged

    def const(self, obj) -> str:
        name = self._by_id.get(id(obj))
        if name is None:
            name = f"_c{len(self.consts)}"
            self.consts[name] = obj
            self._by_id[id(obj)] = name
        return name

    # -- values reached through an access expression (arguments) ------------------------------
    def value(self, expr: str, v, depth: int = 0, sources: dict | None = None) -> None:
        """Guards that ``expr`` evaluates to something equivalent to ``v``; records where each
        argument tensor came from in ``sources`` (id -> expression)."""
        t = type(v)
        if isinstance(v, Tensor):
            if sources is not None:
                sources.setdefault(id(v), expr)
            self.exprs.append(f"type({expr}) is {self.const(t)}")
            self.tensor_meta(expr, v)
        elif t in _SCALARS:
            if v is None or t is bool:
                self.exprs.append(f"{expr} is {self.const(v)}")
            else:
                # float: the hex form makes -0.0 and 0.0 different keys, as the recording does.
                self.exprs.append(f"type({expr}) is {self.const(t)} and {expr} == {self.const(v)}")
                if t is float:
                    self.exprs.append(f"{expr}.hex() == {self.const(v.hex())}")
        elif t in (tuple, list) and depth < 4 and len(v) <= 64:
            self.exprs.append(f"type({expr}) is {self.const(t)} and len({expr}) == {len(v)}")
            for i, item in enumerate(v):
                self.value(f"{expr}[{i}]", item, depth + 1, sources)
        elif t is dict and depth < 4 and len(v) <= 64 and all(type(k) is str for k in v):
            self.exprs.append(f"type({expr}) is dict and tuple({expr}) == {self.const(tuple(v))}")
            for k, item in v.items():
                self.value(f"{expr}[{k!r}]", item, depth + 1, sources)
        else:
            self.exprs.append(f"{expr} is {self.const(v)}")
            self.watch(v)

    def tensor_meta(self, expr: str, t: Tensor, same_object: bool = False) -> None:
        """``same_object``: ``expr`` is this very tensor (a parameter, a global), whose size and
        stride tuples stay the same objects until something assigns new ones: identity is
        the cheaper check, and a false miss only costs a re-recording."""
        c = self.const
        eq = "is" if same_object else "=="
        self.exprs.append(
            f"{expr}._shape {eq} {c(t._shape)} and {expr}._stride {eq} {c(t._stride)} and {expr}.dtype is {c(t.dtype)}"
            f" and {expr}._offset == {t._offset} and {expr}._requires_grad is {c(t._requires_grad)}"
            f" and {expr}._device {eq} {c(t._device)}"
        )
        # mark_dynamic / mark_static live in the tensor's __dict__ and decide the graph (for
        # arguments: parameters and globals keep static sizes).
        d = t.__dict__
        if same_object:
            return
        if not d:
            self.exprs.append(f"not {expr}.__dict__")
        else:
            for key in ("_dynamo_dynamic_indices", "_dynamo_static_indices"):
                self.exprs.append(f"{expr}.__dict__.get({key!r}) == {c(_copy(d.get(key)))}")

    # -- objects the program read (globals, closure cells, modules) ---------------------------
    def watch(self, obj, depth: int = 0) -> None:
        """Guards ``obj``'s contents one level deep (an object identity guard is the caller's)."""
        oid = id(obj)
        if oid in self.watched or isinstance(obj, _SCALARS) or type(obj) is tuple and not obj:
            return
        if is_module(obj):
            if "_modules" in obj.__dict__:  # (not while under construction)
                for m in obj.modules():  # the whole tree, before any of its forwards runs
                    self.watch_module(m)
            return
        self.watched[oid] = obj
        self.start_prints.append(_print(obj))
        if isinstance(obj, Tensor):
            if oid not in self.tensors:
                self.tensors[oid] = obj
                self.tensor_meta(self.const(obj), obj, same_object=True)
            return
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, FastFront, type, types.MethodType)):
            return  # identity is the guard (code and class bodies are not re-checked)
        if isinstance(obj, dict):
            self.dict_version(obj)
            if depth <= 1:
                for v in obj.values():
                    if isinstance(v, Tensor):
                        self.watch(v, depth + 1)
            return
        if type(obj) is list:
            self.exprs.append(f"len({self.const(obj)}) == {len(obj)}")
            if len(obj) <= 64:
                for i, v in enumerate(obj):
                    self.exprs.append(f"{self.const(obj)}[{i}] is {self.const(v)}")
            return
        if type(obj) is tuple:
            if depth == 0:
                for v in obj:
                    self.watch(v, depth + 1)
            return
        d = getattr(obj, "__dict__", None)
        if type(d) is dict:
            self.dict_version(d)
            if depth == 0 and not isinstance(obj, types.ModuleType):
                for v in d.values():
                    if isinstance(v, (dict, list, Tensor)):
                        self.watch(v, depth + 1)

    def watch_module(self, m) -> None:
        """An ``nn.Module``: its ``__dict__`` (``training``, plain attributes), and the dicts
        that decide what its call does: parameters, buffers, submodules and hooks."""
        oid = id(m)
        if oid in self.watched:
            return
        self.watched[oid] = m
        d = m.__dict__
        self.start_prints.append(_tag(d))
        self.dict_version(d)
        for name, v in d.items():
            if name in _MODULE_DICTS:
                self.watched[id(v)] = v
                self.start_prints.append(_tag(v))
                self.dict_version(v)
                for t in v.values() if name in ("_parameters", "_buffers") else ():
                    if t is not None:
                        self.watch(t)
            elif name not in _MODULE_IGNORED and isinstance(v, (dict, list)):
                self.watch(v, 1)

    def dict_version(self, d: dict) -> None:
        if _HAS_VERSION:
            self.tags.append(d)  # checked all at once by build()
        else:
            self.exprs.append(f"_snapshot({self.const(d)}) == {self.const(_snapshot(d))}")

    def global_name(self, globals_: dict, builtins_: dict, name: str) -> None:
        """Guards what ``name`` resolves to in a function's globals (or builtins)."""
        g = self.const(globals_)
        v = globals_.get(name, _MISSING)
        if v is not _MISSING:
            self.exprs.append(f"{g}.get({name!r}, _MISSING) is {self.const(v)}")
        else:
            v = builtins_.get(name, _MISSING)
            if v is _MISSING:
                return  # an attribute name (co_names holds both)
            self.exprs.append(f"{name!r} not in {g} and {self.const(builtins_)}.get({name!r}, _MISSING) is "
                              f"{self.const(v)}")
        self.watch(v)

    def unchanged(self) -> bool:
        """Whether every watched object is as it was when first watched: a recorded call that
        wrote one of them had a side effect the replay would skip."""
        return [_print(o) for o in self.watched.values()] == self.start_prints

    def build(self):
        if self.tags:
            self.exprs.append(_tags_expr(self, self.tags))
        body = " and\n        ".join(f"({e})" for e in self.exprs) or "True"
        src = f"def guard(args, kwargs):\n    return (\n        {body}\n    )\n"
        ns = dict(self.consts)  # (``_alias_pattern`` is the only named helper a caller adds)
        ns["_MISSING"] = _MISSING
        ns["_snapshot"] = _snapshot
        exec(compile(src, "<ember.compile guards>", "exec"), ns)  # noqa: S102 - generated guard code
        fn = ns["guard"]
        fn.source = src
        return fn
