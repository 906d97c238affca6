"""The lowered-graph cache: a graph compiled once, by any process, skips lowering the next time.

Lowering, scheduling and code generation are most of a warm compile (the kernel cache in
``_codecache`` already keeps the compiled C): ~1.5 s of Python and sympy for a mini-GPT forward.
This cache keeps their product - the wrapper's Python source, the kernel sources and
signatures, and a *description* of every object the wrapper refers to - under a key made of
everything the lowering reads: each node (op, target, arguments), each input's dtype, shape and
strides (symbolic ones by their symbols), the values of non-tensor inputs that the code bakes
in, the constants' layouts, the inductor settings and compiler flags, and a hash of the code
generator's own source files (a changed generator never reads an old entry).

An entry is rebuilt from the *current* graph: weights and other constants are looked up again
on the GraphModule by their attribute paths, ops by name, Python functions by module and
qualified name. A graph whose objects cannot all be described (a lambda, a closure, an odd
argument) is simply not cached. Entries are JSON written atomically (write, then rename) into
``<cache dir>/graphs``; an entry not owned by this user, or writable by others, is ignored:
the wrapper source it holds is executed, as a compiled kernel in the kernel cache is loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile

import ember
from ember._src import dtypes as dt
from ember._src.device import device as Device
from ember._src.dispatch import Op
from ember._src.tensor import Tensor

from . import config
from ._codecache import cache_dir, flags, libraries, vector_math

_FORMAT = 1
_SOURCE_HASH: list = []  # [hash of the code generator's sources], computed once per process


class Uncacheable(Exception):
    """The graph refers to something a cache entry cannot describe."""


def _generator_hash() -> str:
    if not _SOURCE_HASH:
        h = hashlib.sha256()
        here = os.path.dirname(os.path.abspath(__file__))
        folders = [here, os.path.join(os.path.dirname(here), "decompositions")]
        for folder in folders:
            for name in sorted(os.listdir(folder)):
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), "rb") as f:
                        h.update(name.encode() + b"\0" + f.read())
        h.update(getattr(ember, "__version__", "").encode())
        _SOURCE_HASH.append(h.hexdigest())
    return _SOURCE_HASH[0]


# -- describing objects: the same text for the same meaning, in any process ------------------------

def target_text(target) -> str:
    """A stable name for a node's target (an op, an importable function, a method name)."""
    if isinstance(target, Op):
        return f"op:{target.name}"
    if isinstance(target, str):
        return f"method:{target}"
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    if module and qualname and "<" not in qualname and _resolve(module, qualname) is target:
        return f"py:{module}:{qualname}"
    raise Uncacheable(f"target {target!r}")


def _resolve(module: str, qualname: str):
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj
    except (ImportError, AttributeError):
        return None


def _value_text(value) -> str:
    """Text for a node argument or a baked-in input value."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return value.hex()  # exact, and nan/inf spelled the same every time
    if isinstance(value, dt.dtype):
        return f"dtype:{value.name}"
    if isinstance(value, Device):
        return f"device:{value}"
    if isinstance(value, (tuple, list)):
        inner = ",".join(_value_text(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_value_text(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, slice):
        return f"slice({_value_text(value.start)},{_value_text(value.stop)},{_value_text(value.step)})"
    if value is Ellipsis:
        return "..."
    if type(value).__name__ == "Node":  # an fx node: by name (its definition is hashed itself)
        return f"%{value.name}"
    if hasattr(value, "node") and hasattr(value.node, "expr"):  # a symbolic size
        return f"sym:{value.node.expr}"
    raise Uncacheable(f"argument {value!r}")


def _layout_text(t) -> str:
    shape = ",".join(_value_text(s) for s in t.shape)
    stride = ",".join(_value_text(s) for s in t.stride())
    return f"{t.dtype.name}[{shape}]/[{stride}]@{t.device}"


def _settings(namespace) -> list:
    """Every plain setting of a config namespace (all of them can change the generated code)."""
    return sorted((name, repr(value)) for name, value in vars(namespace).items()
                  if not name.startswith("_") and isinstance(value, (bool, int, float, str, tuple, type(None))))


def graph_key(gm, example_inputs) -> str:
    """The cache key of lowering ``gm`` for ``example_inputs`` (Uncacheable if there is none)."""
    h = hashlib.sha256()
    settings = (_settings(config), _settings(config.cpp), vector_math(), tuple(flags() + libraries()), os.cpu_count())
    h.update(f"{_FORMAT}|{_generator_hash()}|{settings!r}".encode())
    placeholders = 0
    for node in gm.graph.nodes:
        parts = [node.op, node.name]
        if node.op == "placeholder":
            val = node.meta.get("val")
            example = example_inputs[placeholders] if placeholders < len(example_inputs) else None
            placeholders += 1
            parts.append(_layout_text(val) if isinstance(val, Tensor) else _value_text(val) if val is not None
                         else "-")
            parts.append(_layout_text(example) if isinstance(example, Tensor) else _value_text(example))
        elif node.op == "get_attr":
            parts.append(node.target)
            value = attribute(gm, node.target)
            parts.append(_layout_text(value) if isinstance(value, Tensor) else _value_text(value))
        elif node.op in ("call_function", "call_method"):
            parts += [target_text(node.target), _value_text(node.args), _value_text(node.kwargs)]
        else:
            parts.append(_value_text(node.args))
        h.update("\x1f".join(parts).encode() + b"\x1e")
    return h.hexdigest()[:40]


def describe(obj):
    """A JSON description of an object the wrapper refers to (Uncacheable if none)."""
    if isinstance(obj, Op):
        return ["op", obj.name]
    if type(obj).__name__ == "_MethodCall":
        return ["method", obj.name]
    if isinstance(obj, Device):
        return ["device", str(obj)]
    if isinstance(obj, dt.dtype):
        return ["dtype", obj.name]
    text = target_text(obj)  # raises Uncacheable for what cannot be named
    return ["py", *text.split(":", 2)[1:]]


def resolve(desc):
    kind = desc[0]
    if kind == "op":
        return ember.ops[desc[1]]
    if kind == "method":
        from ._graph import _MethodCall

        return _MethodCall(desc[1])
    if kind == "device":
        return ember.device(desc[1])
    if kind == "dtype":
        return getattr(ember, desc[1])
    if kind == "py":
        obj = _resolve(desc[1], desc[2])
        if obj is None:
            raise Uncacheable(f"{desc[1]}.{desc[2]} no longer exists")
        return obj
    raise Uncacheable(f"unknown description {desc!r}")


def attribute(gm, path: str):
    value = gm
    for name in path.split("."):
        value = getattr(value, name)
    return value


# -- the store --------------------------------------------------------------------------------------

def _path(key: str) -> str:
    return os.path.join(cache_dir(), "graphs", key[:2], key + ".json")


def read_json(path: str):
    """The JSON held at ``path``, or None (missing, damaged, or not this user's alone: cache
    entries hold code that is executed, as a compiled kernel in the kernel cache is loaded)."""
    try:
        st = os.stat(path)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path: str, value) -> None:
    """Writes ``value`` to ``path`` atomically (readers see the old file or the whole new one)."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".entry-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(value, f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full cache only costs the next process the work again


def describe_names(names: dict, skip, gm, constants: dict) -> tuple:
    """(objects, constants) of a wrapper's globals ``names`` as an entry stores them: graph
    constants by their attribute path on ``gm``, everything else by ``describe`` (names in
    ``skip`` are the process's own: fixed helpers, kernels). Raises Uncacheable."""
    attr_of = {f"const_{n.name}": n.target for n in gm.graph.nodes if n.op == "get_attr"}
    objects, paths = {}, {}
    for name, obj in names.items():
        if name in skip:
            continue
        if name in constants:
            if name not in attr_of:
                raise Uncacheable(f"constant {name} is no attribute of the graph")
            paths[name] = attr_of[name]
        else:
            objects[name] = describe(obj)
    return objects, paths


def load_entry(key: str) -> dict | None:
    entry = read_json(_path(key))
    return entry if isinstance(entry, dict) and entry.get("format") == _FORMAT else None


def store_entry(key: str, entry: dict) -> None:
    write_json(_path(key), {"format": _FORMAT, **entry})


__all__ = ["Uncacheable", "attribute", "describe", "describe_names", "graph_key", "load_entry", "read_json",
           "resolve", "store_entry", "target_text", "write_json"]
