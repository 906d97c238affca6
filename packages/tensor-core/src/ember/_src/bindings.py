"""Generates ember's public API from the op table (optable.py): ``ember.<name>``, ``Tensor``
methods and properties, in-place variants, aliases and the names of ``ember.special`` & co.

``generate`` runs once, from api.py, after every op module has declared its records; an op
declared later with variants (a plugin's, a test's toy op) is bound when declared (``bind_op``,
also into the ``ember`` module itself) and removed by ``unbind``.
"""

from __future__ import annotations

import importlib
import sys

from . import dispatch, torch_function
from ._native import _C
from .composite import CompositeOp, define_composite, pre_dispatch_tracing
from .dispatch import OPS, Op
from .ops._common import write_out
from .ops.inplace_variants import _write_back
from .optable import NAMESPACES, RECORDS, Record, Signature
from .tensor import Tensor

# "special" -> {name: function}: what ember.special (ember.linalg, ember.fft) adds from the table.
NAMESPACE_NAMES: dict[str, dict] = {ns: {} for ns in NAMESPACES}
# (place, name) -> the record bound there; place is "function" (ember.<name>) or "method" (Tensor.<name>).
_CLAIMED: dict[tuple, object] = {}
_NAMESPACE: list = [None]  # the ember namespace dict generate() filled

# Tensor's binary operators: bound through _C.OperatorMethod, which answers NotImplemented where
# the op raises TypeError (an operand it cannot take), so Python tries the other operand's
# reflected method, as with PyTorch's Tensor.
OPERATOR_NAMES = frozenset(
    f"__{prefix}{name}__"
    for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
                 "lshift", "rshift")
    for prefix in ("", "r", "i")
) | {"__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"}


def _claim(place: str, name: str, owner) -> None:
    previous = _CLAIMED.get((place, name))
    if previous is not None and previous is not owner:
        raise ValueError(f"{place} '{name}' is bound by two op records: {previous!r} and {owner!r}")
    _CLAIMED[(place, name)] = owner


def generated_inplace(name: str, fn):
    """``Tensor.<name>_`` for an op without an in-place kernel: the out-of-place result, checked
    (castable to self's dtype, self's shape) and copied into self; autograd records the copy."""

    def method(self, *args, **kwargs):
        return _write_back(self, lambda x: fn(x, *args, **kwargs), *args, *kwargs.values())

    method.__name__ = method.__qualname__ = name + "_"
    return method


def _bind_function(namespace: dict, name: str, fn, owner) -> None:
    _claim("function", name, owner)
    namespace[name] = fn
    if _NAMESPACE[0] is not None and "ember" in sys.modules:  # a late op: ember's import * is done
        setattr(sys.modules["ember"], name, fn)


def _bind_method(name: str, fn, owner) -> None:
    _claim("method", name, owner)
    setattr(Tensor, name, fn)


# Aliases whose op has no dispatcher op of the record's name to take the schema from: PyTorch's schema.
_ALIAS_SCHEMAS = {
    "moveaxis": "moveaxis(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)",
    "row_stack": "row_stack(Tensor[] tensors) -> Tensor",
    "ger": "ger(Tensor self, Tensor vec2) -> Tensor",
}


def _alias_op(record: Record, alias: str) -> CompositeOp | None:
    """The composite op ``alias`` standing for ``record``'s op in pre-dispatch graphs, or None for an
    alias that keeps no op of its own (in-place forms, ``asarray``).

    PyTorch's aliases (``arctan``, ``clip``, ``concat`` ...) are ATen ops of their own that
    ``torch.export`` records by their name (``aten.arctan.default``) and that decompose to the op
    they alias; here an alias is a composite whose decomposition is the aliased public function."""
    if record.name.endswith("_") or alias.endswith("_"):
        return None
    found = OPS.get(alias)
    if isinstance(found, CompositeOp):
        return found
    if found is not None:
        return None
    original = OPS.get(record.name)
    if original is not None:
        schema = alias + original.schema[len(original.name):]
    elif alias in _ALIAS_SCHEMAS:
        schema = _ALIAS_SCHEMAS[alias]
    else:
        return None
    return define_composite(schema, record.fn)


def _alias_function(op: CompositeOp, fn, method: bool):
    """``ember.<alias>`` (or ``Tensor.<alias>``): ``fn`` itself, except that a pre-dispatch tracer on
    top of the mode stack records the alias's op (eager calls pay one list read)."""
    if method:

        def alias(self, *args, **kwargs):
            if "out" not in kwargs and pre_dispatch_tracing():
                return op(self, *args, **kwargs)
            return fn(self, *args, **kwargs)
    else:

        def alias(*args, **kwargs):
            if "out" not in kwargs and pre_dispatch_tracing():
                return op(*args, **kwargs)
            return fn(*args, **kwargs)

    # Found again by name (pickling a graph or a partial that holds it), as torch's aliases are.
    alias.__name__ = op.name
    alias.__qualname__ = f"Tensor.{op.name}" if method else op.name
    alias.__module__ = "ember"
    alias.__doc__ = getattr(fn, "__doc__", None)
    alias.__wrapped__ = fn
    return alias


def _bind_record(record: Record, namespace: dict, claimed: dict) -> None:
    # Runs ~700 times while ember is imported: each claim is one dict lookup (_claim raises).
    names = (record.name, *record.aliases) if record.aliases else (record.name,)
    variants = record.variants
    alias_ops = {}
    if record.aliases and ("function" in variants or "method" in variants):
        for alias in record.aliases:
            op = _alias_op(record, alias)
            if op is not None:
                alias_ops[alias] = op
    if "function" in variants:
        fn = record.fn
        for name in names:
            if claimed.setdefault(("function", name), record) is not record:
                _claim("function", name, record)
            op = alias_ops.get(name)
            namespace[name] = fn if op is None else _alias_function(op, fn, method=False)
    methods = []
    if "method" in variants:
        method = record.method
        if record.name in OPERATOR_NAMES:
            method = _C.OperatorMethod(method)
        methods += [(name, method if name not in alias_ops else _alias_function(alias_ops[name], method, True))
                    for name in names]
    if "property" in variants:
        prop = property(record.fn)
        methods += [(name, prop) for name in names]
    if "inplace" in variants:
        inplace = generated_inplace(record.name, record.method)
        methods += [(name + "_", inplace) for name in names]
    for name, value in methods:
        if claimed.setdefault(("method", name), record) is not record:
            _claim("method", name, record)
        setattr(Tensor, name, value)
    for ns, ns_names in record.namespaces.items():
        fn = record.fn
        for name in ns_names:
            NAMESPACE_NAMES[ns][name] = fn


def op_function(op: Op):
    """``ember.<name>`` of a dispatcher op declared with variants: the schema's argument check
    (TypeError naming the signature, as PyTorch's parser), then the op; ``out=`` when declared."""
    signature = Signature.parse(op.schema)
    check = signature.check
    if "out" in op.variants:

        def function(*args, out=None, **kwargs):
            check(args, kwargs)
            return write_out(op(*args, **kwargs), out, tuple(a for a in args if isinstance(a, Tensor)))
    else:

        def function(*args, **kwargs):
            check(args, kwargs)
            return op(*args, **kwargs)

    function.__name__ = function.__qualname__ = op.name
    function.__doc__ = f"{op.name}{signature} (schema: {op.schema})"
    return function


def bind_op(op: Op, namespace: dict | None = None) -> None:
    """Binds the public forms of a dispatcher op declared with ``variants`` (dispatch.define)."""
    namespace = _NAMESPACE[0] if namespace is None else namespace
    variants = op.variants
    function = op_function(op)
    names = (op.name, *op.aliases)
    for name in names:
        if "function" in variants:
            _bind_function(namespace, name, function, op)
        if "method" in variants:
            _bind_method(name, function, op)
        if "inplace" in variants:
            inplace = OPS.get(op.name + "_")
            _bind_method(name + "_", inplace if inplace is not None else generated_inplace(op.name, function), op)
    for ns, ns_names in op.namespaces.items():
        for name in ns_names:
            NAMESPACE_NAMES[ns][name] = function


def unbind(name: str) -> None:
    """Removes what was bound for ``name`` (its aliases and in-place form included) and its op."""
    namespace = _NAMESPACE[0]
    for (place, bound), owner in list(_CLAIMED.items()):
        owner_name = owner.name
        if owner_name != name:
            continue
        del _CLAIMED[(place, bound)]
        if place == "function":
            namespace.pop(bound, None)
            sys.modules["ember"].__dict__.pop(bound, None)
        elif bound in Tensor.__dict__:
            delattr(Tensor, bound)
    for ns_names in NAMESPACE_NAMES.values():
        for key in [k for k, v in ns_names.items() if getattr(v, "__name__", None) == name]:
            del ns_names[key]
    OPS.pop(name, None)
    OPS.pop(name + "_", None)


def generate(namespace: dict) -> None:
    """Binds every record and every op declared with variants (api.py calls this once)."""
    for record in RECORDS:
        _bind_record(record, namespace, _CLAIMED)
    for op in list(OPS.values()):
        if op.variants:
            bind_op(op, namespace)
    _NAMESPACE[0] = namespace
    dispatch._BIND_HOOK[0] = bind_op
    torch_function._TABLE_NAMESPACES[0] = _torch_function_namespaces


def _torch_function_namespaces() -> list:
    """What the __torch_function__ switch gates (torch_function.enable): the op table's functions
    where ember binds them, and every public function of ember.special, ember.linalg, ember.fft."""
    names = {name for place, name in _CLAIMED if place == "function"}
    found = [(_NAMESPACE[0], names)]
    if "ember" in sys.modules:
        found.append((sys.modules["ember"].__dict__, names))
    # Imported here if not yet: `import ember` leaves them to first use (ember/__init__.py), and a
    # namespace imported after the switch would stay ungated.
    found += [(importlib.import_module(m), None) for m in ("ember.special", "ember.linalg", "ember.fft")]
    return found


def namespace(name: str) -> dict:
    """The names the table gives ``ember.<name>`` (special, linalg, fft)."""
    return dict(NAMESPACE_NAMES[name])
