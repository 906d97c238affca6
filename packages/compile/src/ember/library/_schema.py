"""Op schemas for custom ops: inferred from a function's type hints, or parsed from text.

A schema reads as PyTorch's: ``(Tensor x, Tensor(a!) out, *, float alpha=1.0) -> Tensor``.
``FunctionSchema.bind(args, kwargs)`` turns any call into the full argument list in schema
order (defaults filled in), which is how an ember op records its arguments, so kernels, the
fake implementation and the backward formula all see the same positions.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Sequence
from dataclasses import dataclass

from ember._src.tensor import Tensor

_SCALARS = {int: "SymInt", float: "float", bool: "bool", str: "str"}
ALLOWED_TYPES = ("Tensor", "Tensor?", "Tensor[]", "Tensor?[]", "int", "int?", "int[]", "int[]?", "SymInt", "SymInt?",
                 "SymInt[]", "SymInt[]?", "float", "float?", "float[]", "bool", "bool?", "bool[]", "str", "str?",
                 "Scalar", "Scalar?", "ScalarType", "ScalarType?", "Device", "Device?", "Layout", "Layout?",
                 "MemoryFormat", "MemoryFormat?", "Any")


@dataclass
class Argument:
    name: str
    type: str
    default: object = inspect.Parameter.empty
    mutable: bool = False
    kwarg_only: bool = False

    def text(self, alias: str = "a") -> str:
        type_text = f"Tensor({alias}!)" + self.type[len("Tensor"):] if self.mutable else self.type
        out = f"{type_text} {self.name}"
        if self.default is not inspect.Parameter.empty:
            out += "=" + _default_text(self.default)
        return out


def _default_text(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return repr(value)
    return repr(value)


@dataclass
class FunctionSchema:
    name: str
    arguments: list
    returns: list  # return type strings

    def text(self, with_name: bool = True, numbered_aliases: bool = False) -> str:
        """The schema as text; ``numbered_aliases`` writes PyTorch's ``Tensor(a1!)`` marks (ember's op
        table uses ``Tensor(a!)``, the mark its passes look for)."""
        parts, star, n_alias = [], False, 0
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            if a.mutable:
                n_alias += 1
            parts.append(a.text(f"a{n_alias}" if numbered_aliases else "a"))
        if len(self.returns) == 1 and not self._tuple_return:
            ret = self.returns[0]
        else:
            ret = "(" + ", ".join(self.returns) + ")"
        head = self.name if with_name else ""
        return f"{head}({', '.join(parts)}) -> {ret}"

    _tuple_return: bool = False

    def mutated_positions(self) -> tuple:
        return tuple(i for i, a in enumerate(self.arguments) if a.mutable)

    def bind(self, args: tuple, kwargs: dict) -> list:
        """Every argument in schema order (a TypeError for a call that does not fit, as Python's)."""
        positional = [a for a in self.arguments if not a.kwarg_only]
        if len(args) > len(positional):
            raise TypeError(f"{self.name}() takes {len(positional)} positional arguments but {len(args)} were given")
        out = list(args)
        for a in self.arguments[len(args):]:
            if a.name in kwargs:
                out.append(kwargs[a.name])
            elif a.default is not inspect.Parameter.empty:
                out.append(a.default)
            else:
                raise TypeError(f"{self.name}() missing required argument: '{a.name}'")
        known = {a.name for a in self.arguments}
        for k in kwargs:
            if k not in known:
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{k}'")
            if any(a.name == k for a in self.arguments[:len(args)]):
                raise TypeError(f"{self.name}() got multiple values for argument '{k}'")
        return out

    def split(self, full: list) -> tuple:
        """(positional, keyword-only) parts of a bound argument list, for calling the user's function."""
        pos = [v for v, a in zip(full, self.arguments) if not a.kwarg_only]
        kw = {a.name: v for v, a in zip(full, self.arguments) if a.kwarg_only}
        return pos, kw


def _type_of_hint(hint, where: str) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Tensor or (isinstance(hint, type) and issubclass(hint, Tensor)):
        return "Tensor"
    if hint in _SCALARS:
        return _SCALARS[hint]
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            return _type_of_hint(rest[0], where) + "?"
    if origin in (list, Sequence, tuple) or origin is typing.Sequence:
        if args and args[0] is not Ellipsis:
            inner = _type_of_hint(args[0], where)
            if inner in ("Tensor", "SymInt", "float", "bool", "Tensor?"):
                return inner + "[]"
    import ember

    if hint is ember.dtype:
        return "ScalarType"
    if hint is ember.device:
        return "Device"
    raise ValueError(f"infer_schema(func): Parameter {where} has unsupported type {hint}. The valid types are: "
                     "Tensor, int, float, bool, str, their Optional and list forms, ember.dtype, ember.device.")


def _returns_of_hint(hint) -> tuple:
    if hint is None or hint is type(None):
        return [], True
    origin = typing.get_origin(hint)
    if origin is tuple:
        return [_type_of_hint(a, "return") for a in typing.get_args(hint)], True
    if hint is inspect.Signature.empty:
        raise ValueError("infer_schema(func): No return type annotation was provided. Please add one.")
    return [_type_of_hint(hint, "return")], False


def infer_schema(fn, *, op_name: str | None = None, mutates_args) -> str:
    """The schema text of ``fn`` from its type hints (PyTorch's ``torch.library.infer_schema``)."""
    schema = schema_of_function(fn, mutates_args, op_name or "")
    return schema.text(with_name=op_name is not None, numbered_aliases=True)


def schema_of_function(fn, mutates_args, name: str) -> FunctionSchema:
    sig = inspect.signature(fn)
    # String annotations (``from __future__ import annotations``) may name a closure's variable.
    local = {"Tensor": Tensor}
    code, closure = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is not None and closure:
        for name, cell in zip(code.co_freevars, closure):
            try:
                local[name] = cell.cell_contents
            except ValueError:
                pass
    try:
        hints = typing.get_type_hints(fn, localns=local)
    except Exception:
        hints = {k: p.annotation for k, p in sig.parameters.items()}
        hints["return"] = sig.return_annotation
    if mutates_args == "unknown":
        mutated = None
    elif isinstance(mutates_args, str):
        raise ValueError("mutates_args must be 'unknown' or an iterable of argument names")
    else:
        mutated = set(mutates_args)
    args = []
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError("infer_schema(func): Parameters of kind *args and **kwargs are not supported")
        if p.annotation is inspect.Parameter.empty:
            raise ValueError(f"infer_schema(func): Parameter {pname} must have a type annotation. Got func with "
                             f"signature {sig})")
        type_text = _type_of_hint(hints.get(pname, p.annotation), pname)
        is_mut = type_text.startswith("Tensor") and (mutated is None or pname in mutated)
        if mutated is not None and pname in mutated and not type_text.startswith("Tensor"):
            raise ValueError(f"mutates_args names {pname}, which is not a Tensor argument")
        args.append(Argument(pname, type_text, p.default, is_mut and mutated is not None,
                             p.kind is p.KEYWORD_ONLY))
    if mutated:
        unknown = mutated - {a.name for a in args}
        if unknown:
            raise ValueError(f"mutates_args contains {sorted(unknown)}, which are not arguments of the function")
    returns, is_tuple = _returns_of_hint(hints.get("return", sig.return_annotation))
    schema = FunctionSchema(name, args, returns)
    schema._tuple_return = is_tuple
    return schema


def _split_top(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _parse_default(text: str):
    import ast

    if text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return list(value) if isinstance(value, tuple) else value


def parse_schema(text: str, name: str = "") -> FunctionSchema:
    """A schema from ``name(args) -> returns`` or ``(args) -> returns`` (RuntimeError when malformed)."""
    text = text.strip()
    try:
        head, rest = text.split("(", 1)
        args_text, ret_text = rest.rsplit("->", 1)
        args_text = args_text.strip()
        if not args_text.endswith(")"):
            raise ValueError
        args_text = args_text[:-1]
    except ValueError:
        raise RuntimeError(f"Invalid schema {text!r}: expected 'name(args) -> returns'") from None
    args, kwarg_only = [], False
    for item in _split_top(args_text):
        if item == "*":
            kwarg_only = True
            continue
        default = inspect.Parameter.empty
        if "=" in item:
            item, default_text = item.split("=", 1)
            default = _parse_default(default_text.strip())
        parts = item.split()
        if len(parts) != 2:
            raise RuntimeError(f"Invalid schema {text!r}: cannot read the argument {item!r}")
        type_text, arg_name = parts
        mutable = "!" in type_text
        if "(" in type_text:
            type_text = type_text.split("(")[0] + type_text.split(")", 1)[1]
        if type_text not in ALLOWED_TYPES:
            raise RuntimeError(f"Invalid schema {text!r}: unknown type {type_text!r}")
        args.append(Argument(arg_name, type_text, default, mutable, kwarg_only))
    ret_text = ret_text.strip()
    is_tuple = ret_text.startswith("(")
    inner = ret_text[1:-1] if is_tuple else ret_text
    returns = [r.split()[0] for r in _split_top(inner)] if inner.strip() else []
    schema = FunctionSchema(name or head.strip(), args, returns)
    schema._tuple_return = is_tuple
    return schema


def tensor_positions(schema: FunctionSchema) -> list:
    return [i for i, a in enumerate(schema.arguments) if a.type.startswith("Tensor")]
