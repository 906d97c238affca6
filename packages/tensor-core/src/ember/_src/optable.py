"""The op table: one record per public op, from which bindings.py generates the public API.

A record says where an op appears: ``ember.<name>`` (``function``), ``Tensor.<name>``
(``method`` or ``property``), its generated in-place method ``Tensor.<name>_`` (``inplace``),
its aliases and its names in ``ember.special`` / ``ember.linalg`` / ``ember.fft``. Records are
declared in two ways, both read by the same generator:

- a dispatcher op declared with ``dispatch.define(schema, ..., variants=...)`` carries its record
  (the function, method, in-place and ``out=`` forms are then generated from the op itself, with
  the schema's argument checks);
- an op module's hand-written functions (most of today's public API: argument handling in Python
  around one or more dispatcher ops) are declared by the module's table, ``declare(__name__, TEXT)``,
  one line per op::

      abs      function method alias=absolute special=...
      T        property fn=_full_transpose
      where    function method=_where_method

  Tokens: ``function``, ``method``, ``property``, ``inplace``; keys: ``fn=`` (the attribute that
  implements it, default the name), ``method=`` (the method's own implementation), ``alias=``,
  ``special=``, ``linalg=``, ``fft=`` (comma-separated names).

Every op module imports this one: it imports no op module.
"""

from __future__ import annotations

import sys

from .device import device
from .dtypes import dtype
from .tensor import Tensor

VARIANTS = ("function", "method", "property", "inplace", "out")
_VARIANT_SET = frozenset(VARIANTS)
_NO_NAMESPACES: dict = {}
NAMESPACES = ("special", "linalg", "fft")


class Record:
    """One public op: its implementation and the places it is bound to."""

    __slots__ = ("name", "module", "fn_attr", "method_attr", "variants", "aliases", "namespaces", "op",
                 "_signature")

    def __init__(self, name: str, module: str | None, *, fn_attr=None, method_attr=None, variants=(),
                 aliases=(), namespaces=None, op=None):
        self.name = name
        self.module = module  # the module holding the implementation; None for a dispatcher op
        self.fn_attr = fn_attr or name
        self.method_attr = method_attr
        self.variants = frozenset(variants)
        self.aliases = tuple(aliases)
        self.namespaces = namespaces or _NO_NAMESPACES  # "special" -> ("expit",), ...
        self.op = op
        self._signature = None
        if not self.variants <= _VARIANT_SET:
            raise ValueError(f"record {name}: unknown variants {sorted(self.variants - _VARIANT_SET)}")

    def __repr__(self) -> str:
        return f"Record({self.name!r}, {sorted(self.variants)})"

    @property
    def fn(self):
        """The function implementing the op (the dispatcher op itself for a schema-only record)."""
        if self.module is None:
            return self.op
        return _resolve(self.module, self.fn_attr)

    @property
    def method(self):
        if self.method_attr is not None:
            return _resolve(self.module, self.method_attr)
        return self.fn

    @property
    def signature(self) -> Signature:
        """The argument signature, parsed once: from the schema for a dispatcher op, else from the
        Python function's own parameters."""
        if self._signature is None:
            if self.op is not None:
                self._signature = Signature.parse(self.op.schema)
            else:
                self._signature = Signature.of_function(self.name, self.fn)
        return self._signature


def _resolve(module: str, path: str):
    """``attr`` or ``imported_module.attr`` in the namespace of ``module``."""
    value = sys.modules[module]
    if "." not in path:
        return getattr(value, path)
    for part in path.split("."):
        value = getattr(value, part)
    return value


# Every record, in declaration order. A public name is bound once per place (``ember.<name>``,
# ``Tensor.<name>``, ...): a function and a method of one name may come from two records
# (``where``: the method's self is the values), two claims on one place are an error (bindings.py).
RECORDS: list[Record] = []


def add(record: Record) -> None:
    RECORDS.append(record)


def declare(module: str, table: str) -> list[Record]:
    """Declares the records of one op module from its table (module docstring); returns them."""
    records = []
    for line in table.splitlines():
        if "#" in line:
            line = line.split("#", 1)[0]
        tokens = line.split()
        if not tokens:
            continue
        name = tokens[0]
        variants, keys = [], {}
        for token in tokens[1:]:
            key, eq, value = token.partition("=")
            if eq:
                keys[key] = value
            else:
                variants.append(token)
        namespaces = None
        if keys:
            if "method" in keys:
                variants.append("method")
            namespaces = {ns: tuple(keys.pop(ns).split(",")) for ns in NAMESPACES if ns in keys}
        aliases = keys.pop("alias").split(",") if "alias" in keys else ()
        record = Record(name, module, fn_attr=keys.pop("fn", None), method_attr=keys.pop("method", None),
                        variants=variants, aliases=aliases, namespaces=namespaces)
        if keys:
            raise ValueError(f"record {name} in {module}: unknown keys {sorted(keys)}")
        add(record)
        records.append(record)
    return records


def forget(name: str) -> None:
    """Removes the records of ``name`` (a test that declares a toy op undoes it with this)."""
    RECORDS[:] = [r for r in RECORDS if r.name != name]


# -- signatures ------------------------------------------------------------------------------------------

def _is_tensor(v) -> bool:
    return isinstance(v, Tensor)


def _is_int(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (hasattr(v, "__index__") and not _is_tensor(v)
                                                                and not isinstance(v, bool))


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float, complex)) or (_is_tensor(v) and v.ndim == 0)


def _is_float(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int_list(v) -> bool:
    return _is_int(v) or (isinstance(v, (list, tuple)) and all(_is_int(x) for x in v))


def _is_dtype(v) -> bool:
    return isinstance(v, dtype)


def _is_device(v) -> bool:
    return isinstance(v, (str, int, device)) and not isinstance(v, bool)


def _is_tensor_list(v) -> bool:
    return isinstance(v, (list, tuple)) and all(_is_tensor(x) for x in v)


# Schema types -> (the check, the name PyTorch's argument parser prints). A type not listed accepts anything.
_TYPES = {
    "Tensor": (_is_tensor, "Tensor"),
    "Scalar": (_is_number, "Number"),
    "Number": (_is_number, "Number"),
    "int": (_is_int, "int"),
    "SymInt": (_is_int, "int"),
    "float": (_is_float, "float"),
    "bool": (lambda v: isinstance(v, bool), "bool"),
    "str": (lambda v: isinstance(v, str), "str"),
    "int[]": (_is_int_list, "tuple of ints"),
    "SymInt[]": (_is_int_list, "tuple of ints"),
    "Tensor[]": (_is_tensor_list, "tuple of Tensors"),
    "Tensor?[]": (lambda v: isinstance(v, (list, tuple)) and all(x is None or _is_tensor(x) for x in v),
                  "tuple of Tensors or None"),
    "Scalar|Tensor": (lambda v: _is_number(v) or _is_tensor(v), "Tensor or Number"),
    "ScalarType": (_is_dtype, "torch.dtype"),
    "Device": (_is_device, "torch.device"),
}


class Parameter:
    __slots__ = ("name", "type", "optional", "default", "has_default", "keyword_only", "check", "type_name")

    def __init__(self, name, type_, optional, default, has_default, keyword_only):
        self.name, self.type, self.optional = name, type_, optional
        self.default, self.has_default, self.keyword_only = default, has_default, keyword_only
        base = type_.split("(", 1)[0] if type_ else None  # Tensor(a!) -> Tensor
        if base and base.endswith("]") and "[" in base:
            base = base[:base.index("[")] + "[]"  # int[2] -> int[]
        self.check, self.type_name = _TYPES.get(base, (None, base or "object"))

    def __str__(self) -> str:
        text = f"{self.type_name}{'?' if self.optional else ''} {self.name}" if self.type else self.name
        return f"{text} = {self.default!r}" if self.has_default else text

    def accepts(self, value) -> bool:
        if value is None and (self.optional or (self.has_default and self.default is None)):
            return True
        return self.check is None or self.check(value)


def _parse_default(text: str):
    text = text.strip()
    constants = {"None": None, "True": True, "False": False, "[]": (), "inf": float("inf"), "-inf": float("-inf")}
    if text in constants:
        return constants[text]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip("\"'")


def _split_args(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


class Signature:
    """An op's parameters (names, types, defaults, keyword-only), and the check of one call's
    arguments against them: an unknown keyword or an argument of the wrong type raises TypeError
    naming the signature, as PyTorch's argument parser does."""

    __slots__ = ("name", "params", "by_name", "returns")

    def __init__(self, name: str, params: list[Parameter], returns: str = ""):
        self.name, self.params, self.returns = name, params, returns
        self.by_name = {p.name: p for p in params}

    @classmethod
    def parse(cls, schema: str) -> Signature:
        """``name(Tensor self, int dim=0, *, ScalarType? dtype=None) -> Tensor``."""
        head, _, returns = schema.partition("->")
        name, _, args = head.strip().partition("(")
        args = args.rstrip().removesuffix(")")
        params, keyword_only = [], False
        for arg in _split_args(args):
            if arg == "*":
                keyword_only = True
                continue
            decl, eq, default = arg.partition("=")
            type_, _, pname = decl.strip().rpartition(" ")
            optional = type_.endswith("?")
            params.append(Parameter(pname, type_.rstrip("?"), optional, _parse_default(default) if eq else None,
                                    bool(eq), keyword_only))
        return cls(name.strip(), params, returns.strip())

    @classmethod
    def of_function(cls, name: str, fn) -> Signature:
        """Names, defaults and keyword-only parameters from a Python function (no types)."""
        # inspect costs ~10 ms to import and is needed only when a hand-written op's arguments are
        # checked for the first time, so it is imported here rather than with ember.
        import inspect

        params = []
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return cls(name, [])
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            has_default = p.default is not p.empty
            params.append(Parameter(p.name, None, False, p.default if has_default else None, has_default,
                                    p.kind is p.KEYWORD_ONLY))
        return cls(name, params)

    def __str__(self) -> str:
        positional = [str(p) for p in self.params if not p.keyword_only]
        keyword = [str(p) for p in self.params if p.keyword_only]
        return f"({', '.join(positional + (['*'] + keyword if keyword else []))})"

    def _invalid(self, args, kwargs) -> TypeError:
        got = [type(a).__name__ if not _is_tensor(a) else "Tensor" for a in args]
        got += [f"{k}={type(v).__name__ if not _is_tensor(v) else 'Tensor'}" for k, v in kwargs.items()]
        return TypeError(f"{self.name}() received an invalid combination of arguments - got ({', '.join(got)}), "
                         f"but expected {self}")

    def check(self, args: tuple, kwargs: dict) -> None:
        """Raises TypeError unless ``args``/``kwargs`` fit the signature."""
        positional = [p for p in self.params if not p.keyword_only]
        if len(args) > len(positional):
            raise TypeError(f"{self.name}() takes {len(positional)} positional arguments but {len(args)} were "
                            f"given; expected {self}")
        for p, value in zip(positional, args):
            if not p.accepts(value):
                raise self._invalid(args, kwargs)
        given = {p.name for p in positional[:len(args)]}
        for key, value in kwargs.items():
            p = self.by_name.get(key)
            if p is None:
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{key}'; expected {self}")
            if key in given:
                raise TypeError(f"{self.name}() got multiple values for argument '{key}'; expected {self}")
            if not p.accepts(value):
                raise self._invalid(args, kwargs)
        for p in self.params[len(args):]:
            if not p.has_default and p.name not in kwargs and not p.optional:
                raise TypeError(f"{self.name}() missing required argument '{p.name}'; expected {self}")
