"""Names in generated code: unique node names, and how a target or global is spelled.

Generated code must read like the program it came from (``ember.relu(x)``,
``ember.ops.mm(a, b)``, ``operator.add`` written as ``a + b``) and still run, so every
callable is spelled by a path that resolves from the ``ember`` module when one exists, and
otherwise gets a mangled global name bound in the code's globals.
"""

from __future__ import annotations

import builtins
import keyword
import math
import re
import sys
from typing import Any

_ILLEGAL_CHARS = re.compile(r"[^0-9a-zA-Z_]+")
_NAME_WITH_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")

# Names bound in every generated module's globals (beside the builtins): using one of them for
# a node would shadow it.
RESERVED_GLOBALS = ("ember", "inf", "nan", "NoneType", "device", "operator")

# Public ember namespaces, in the order a function's public spelling is looked for.
_PUBLIC_NAMESPACES = ("ember", "ember.nn.functional", "ember.special", "ember.linalg", "ember.fft")


def snake_case(s: str) -> str:
    """``pascalCase`` -> ``pascal_case``, ``ALL_CAPS`` -> ``all_caps``."""
    return _CAMEL_BOUNDARY.sub(r"_\1", s).lower()


def is_op(obj: Any) -> bool:
    """Whether ``obj`` is an ember op (``ember.ops.<name>``)."""
    from ember._src.dispatch import Op

    return isinstance(obj, Op)


def target_name_hint(target: Any) -> str:
    """The name a node calling ``target`` is given before de-duplication."""
    if isinstance(target, str):
        if target.startswith("__") and target.endswith("__"):
            target = target[2:-2]
        return snake_case(target)
    if is_op(target):
        return snake_case(target.name)
    return snake_case(getattr(target, "__name__", type(target).__name__))


def _resolve(path: str) -> Any:
    parts = path.split(".")
    obj = sys.modules.get(parts[0])
    if obj is None:
        raise AttributeError(path)
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def _resolves_to(path: str, obj: Any) -> bool:
    from ember._src.torch_function import native_of

    try:
        found = _resolve(path)
    except Exception:  # noqa: BLE001 - any failure means "not this path"
        return False
    # Once the __torch_function__ protocol is on, `ember.add` is the gate in front of the op.
    return found is obj or native_of(found) is obj


def ember_path(obj: Any) -> str | None:
    """The dotted path from the ``ember`` module that names ``obj``, if there is one."""
    if is_op(obj):
        path = f"ember.ops.{obj.name}"
        return path if obj.name.isidentifier() and _resolves_to(path, obj) else None
    name = getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None) or ""
    if not isinstance(name, str) or not (module == "ember" or module.startswith("ember.")):
        return None
    for namespace in _PUBLIC_NAMESPACES:
        if namespace in sys.modules and _resolves_to(f"{namespace}.{name}", obj):
            return f"{namespace}.{name}"
    qualname = getattr(obj, "__qualname__", name)
    for path in (f"{module}.{qualname}", f"{module}.{name}"):
        if "<" not in path and _resolves_to(path, obj):
            return path
    return None


def qualified_name(func: Any) -> str:
    """How ``func`` is written in ``format_node`` and used as a global-name hint."""
    if getattr(builtins, getattr(func, "__name__", ""), None) is func:
        return func.__name__
    path = ember_path(func)
    if path is not None:
        return path
    if is_op(func):
        return f"ember.ops.{func.name}"
    name = getattr(func, "__name__", None)
    if name is None:
        return type(func).__name__
    if name == "<lambda>":
        return "<lambda>"
    module = getattr(func, "__module__", None) or ""
    if module == "_operator":
        module = "operator"
    qualname = getattr(func, "__qualname__", name)
    return f"{module}.{qualname}" if module else qualname


class Namespace:
    """Hands out unique Python identifiers, each tied to at most one object.

    A name never shadows a keyword, a builtin (unless the object is that builtin) or one of
    the globals generated code relies on.
    """

    def __init__(self) -> None:
        self._obj_to_name: dict[int, str] = {}
        self._objects: dict[int, Any] = {}  # keeps the ids above valid
        self._used_names: set[str] = set()
        self._next_suffix: dict[str, int] = {}

    def create_name(self, candidate: str, obj: Any) -> str:
        if obj is not None and id(obj) in self._obj_to_name:
            return self._obj_to_name[id(obj)]
        if not candidate.isidentifier():
            candidate = _ILLEGAL_CHARS.sub("_", candidate) or "_unnamed"
            if candidate[0].isdigit():
                candidate = "_" + candidate
        base, suffix = _NAME_WITH_SUFFIX.match(candidate).group(1, 2)
        if not base:  # "_1" alone: keep the whole thing as the base
            base, suffix = candidate, None
        if suffix is None or candidate in self._used_names:
            num = self._next_suffix.get(base, 0)
            if self._is_illegal(candidate, obj):
                num += 1
                candidate = f"{base}_{num}"
        else:
            num = int(suffix)
        while candidate in self._used_names or self._is_illegal(candidate, obj):
            num += 1
            candidate = f"{base}_{num}"
        self._used_names.add(candidate)
        self._next_suffix[base] = num
        if obj is not None:
            self._obj_to_name[id(obj)] = candidate
            self._objects[id(obj)] = obj
        return candidate

    @staticmethod
    def _is_illegal(name: str, obj: Any) -> bool:
        if keyword.iskeyword(name):
            return True
        if name in builtins.__dict__:
            return obj is not builtins.__dict__[name]
        return name in RESERVED_GLOBALS

    def associate_name_with_obj(self, name: str, obj: Any) -> None:
        existing = self._obj_to_name.setdefault(id(obj), name)
        self._objects[id(obj)] = obj
        if existing != name:
            raise AssertionError("obj is already associated")

    def _rename_object(self, obj: Any, name: str) -> None:
        self._obj_to_name[id(obj)] = name
        self._objects[id(obj)] = obj
        self._used_names.add(name)


def constant_repr(value: Any) -> str | None:
    """The spelling of float specials that ``repr`` gets wrong for code (``inf``, ``nan``)."""
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return "nan"
    return None


_DEFAULTS_CACHE: dict = {}


def _kernel_defaults(op) -> tuple | None:
    """``(positional defaults, keyword defaults)`` every kernel of ``op`` agrees on: a list of
    ``(name, default)`` by position (``None`` where a parameter has no default), and
    ``{name: default}`` for keyword-only ones. None when a kernel's signature cannot be read."""
    import inspect

    cached = _DEFAULTS_CACHE.get(op.name, False)
    if cached is not False:
        return cached
    result = None
    for kernel in set(op.kernels.values()):
        try:
            params = inspect.signature(kernel).parameters.values()
        except (TypeError, ValueError):
            result = None
            break
        positional, keyword = [], {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            default = None if p.default is p.empty else (p.default,)
            if p.kind is not p.KEYWORD_ONLY:
                positional.append(default)
            if default is not None:
                keyword[p.name] = p.default
        if result is None:
            result = (positional, keyword)
            continue
        # kernels may name their parameters differently (``x`` / ``self``): positions must agree
        if result[0] != positional:
            result = None
            break
        for k in [k for k in result[1] if k not in keyword or not _same_literal(keyword[k], result[1][k])]:
            del result[1][k]
    _DEFAULTS_CACHE[op.name] = result
    return result


def _same_literal(value: Any, default: Any) -> bool:
    if value is None or default is None:
        return value is default
    if isinstance(default, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(default)
                and all(_same_literal(a, b) for a, b in zip(value, default)))
    return type(value) is type(default) and type(value) in (bool, int, float, str) and value == default


def without_defaults(target: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """An ember op call's arguments without the trailing positional ones and the keywords that
    equal the op's defaults, as PyTorch's graphs show them (``sum(x)``, not ``sum(x, None,
    False, None)``). Calling the op with the result means the same (the defaults are the
    kernels' own); any other target's arguments are returned unchanged."""
    if not is_op(target) or not target.kernels:
        return args, kwargs
    defaults = _kernel_defaults(target)
    if defaults is None:
        return args, kwargs
    positional, keyword = defaults
    if kwargs:
        kwargs = {k: v for k, v in kwargs.items() if not (k in keyword and _same_literal(v, keyword[k]))}
    end = len(args)
    while end > 0 and end <= len(positional):
        default = positional[end - 1]
        if default is None or not _same_literal(args[end - 1], default[0]):
            break
        end -= 1
    return (args[:end] if end < len(args) else args), kwargs
