"""A graph as JSON and back, resolving targets only from ember's op table and an allow-list.

Values are JSON literals where JSON has them (null, bools, ints, finite floats, strings,
lists) and one-key objects otherwise: ``{"node": name}``, ``{"tuple": [...]}``,
``{"dtype": "float32"}``, ``{"device": "cpu"}``, ``{"sym": "s0 + 1"}``, ``{"float": "inf"}``,
``{"slice": [start, stop, step]}``, ``{"ellipsis": true}``, ``{"enum": "contiguous_format"}``.
Symbolic sizes are parsed with ``ast.parse`` and a walk over an allow-list of node kinds
and functions: nothing is evaluated.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
from typing import NamedTuple

import sympy

import ember
from ember._src.dispatch import OPS, Op

from ._ranges import as_expr


class TensorMeta(NamedTuple):
    """Metadata of a tensor node of a loaded graph (shape entries are ints or sympy exprs)."""

    shape: tuple
    dtype: object
    requires_grad: bool


# Python callables a graph may name besides ember ops: symbolic-size arithmetic and getitem.
ALLOWED_FUNCTIONS = {
    f"_operator.{name}": getattr(operator, name)
    for name in ("getitem", "add", "sub", "mul", "floordiv", "truediv", "mod", "neg", "pow", "eq", "ne", "lt",
                 "le", "gt", "ge", "and_", "or_", "not_")
}
ALLOWED_FUNCTIONS.update({"math.ceil": math.ceil, "math.floor": math.floor, "math.sqrt": math.sqrt,
                          "builtins.max": builtins.max, "builtins.min": builtins.min, "builtins.round": builtins.round,
                          "builtins.getattr": builtins.getattr})
_NAME_OF = {id(fn): name for name, fn in ALLOWED_FUNCTIONS.items()}
_EXTRA_TARGETS: dict[str, object] = {}  # graph ops registered by other modules (cond, while_loop)


def register_graph_function(name: str, fn) -> None:
    """Allows ``fn`` as a call_function target in saved graphs under ``name``."""
    _EXTRA_TARGETS[name] = fn
    _NAME_OF[id(fn)] = name


class SerializationError(RuntimeError):
    """A file that is not an ember exported program, or one this version cannot read or trust."""


def target_name(target) -> str:
    if isinstance(target, Op):
        return f"ember.ops.{target.name}"
    name = _NAME_OF.get(id(target))
    if name is None:
        raise SerializationError(
            f"cannot serialize the call_function target {getattr(target, '__qualname__', target)!r}: a saved graph "
            "may call only ember ops and the allow-listed Python operators")
    return name


def resolve_target(name: str):
    if name.startswith("ember.ops."):
        op = OPS.get(name[len("ember.ops."):])
        if op is None:
            raise SerializationError(f"the saved graph calls {name}, which is not an op of this ember (a custom op "
                                     "must be registered before loading)")
        return op
    fn = ALLOWED_FUNCTIONS.get(name) or _EXTRA_TARGETS.get(name)
    if fn is None:
        raise SerializationError(f"the saved graph calls {name!r}, which is not on the allow-list")
    return fn


# ------------------------------------------------------------------ symbolic sizes

def _round_to_int(x):
    from ember.compiler.symbolic_shapes import RoundToInt

    return RoundToInt(x)


_SYMPY_FUNCS = {"floor": sympy.floor, "ceiling": sympy.ceiling, "Mod": sympy.Mod, "Max": sympy.Max,
                "Min": sympy.Min, "FloorDiv": lambda a, b: sympy.floor(a / b),
                "CeilDiv": lambda a, b: sympy.ceiling(a / b), "RoundToInt": _round_to_int}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: lambda a, b: sympy.floor(a / b), ast.Mod: sympy.Mod, ast.Pow: operator.pow}


def make_symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, positive=True)


_MAX_EXPR_TEXT = 4096  # a size expression of a saved program; far longer ones are not ember's
_MAX_POW = 64


def sym_from_text(text: str, symbols: dict | None = None):
    """Parses a size expression written by ``str(expr)``; only arithmetic is accepted."""
    symbols = symbols if symbols is not None else {}
    if not isinstance(text, str) or len(text) > _MAX_EXPR_TEXT:
        raise SerializationError(f"a size expression must be a string of at most {_MAX_EXPR_TEXT} characters, "
                                 f"got {type(text).__name__} {str(text)[:60]!r}")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise SerializationError(f"the size expression {text[:60]!r} does not parse: {exc}") from None

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return sympy.Integer(node.value)
        if isinstance(node, ast.Constant) and type(node.value) is float:  # a guard on n ** 0.5
            return sympy.Float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in symbols:
                symbols[node.id] = make_symbol(node.id)
            return symbols[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and not (right.is_Number and abs(right) <= _MAX_POW):
                # sizes' powers are small constants (n ** 2, n ** 0.5); 9**9**9 would never finish
                raise SerializationError(f"unsupported power {right} in the size expression {text[:60]!r}")
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _SYMPY_FUNCS
                and not node.keywords):
            return _SYMPY_FUNCS[node.func.id](*[walk(a) for a in node.args])
        raise SerializationError(f"unsupported construct in the size expression {text!r}")

    return walk(tree)


# ------------------------------------------------------------------ values


def _is_sym(x) -> bool:
    return not isinstance(x, (bool, int, float)) and (isinstance(x, sympy.Basic) or hasattr(x, "node"))


def encode(value, syms: set):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if hasattr(value, "op") and hasattr(value, "users"):  # an fx Node
        return {"node": value.name}
    if isinstance(value, list):
        return [encode(v, syms) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode(v, syms) for v in value]}
    if isinstance(value, ember.dtype):
        return {"dtype": str(value).split(".")[-1]}
    if isinstance(value, ember.device):
        return {"device": str(value)}
    if isinstance(value, slice):
        return {"slice": [encode(value.start, syms), encode(value.stop, syms), encode(value.step, syms)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if _is_sym(value):
        expr = as_expr(value)
        if isinstance(expr, int):
            return expr
        syms.update(str(s) for s in expr.free_symbols)
        return {"sym": str(expr)}
    for name in ("contiguous_format", "channels_last", "preserve_format", "strided"):
        if getattr(ember, name, object()) is value:
            return {"enum": name}
    raise SerializationError(f"cannot serialize the graph argument {value!r} of type {type(value).__name__}")


def decode(obj, nodes: dict, symbols: dict):
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, list):
        return [decode(v, nodes, symbols) for v in obj]
    (key, val), = obj.items()
    if key == "node":
        return nodes[val]
    if key == "tuple":
        return tuple(decode(v, nodes, symbols) for v in val)
    if key == "dtype":
        dtype = getattr(ember, val, None)
        if not isinstance(dtype, ember.dtype):
            raise SerializationError(f"unknown dtype {val!r}")
        return dtype
    if key == "device":
        return ember.device(val)
    if key == "float":
        return float(val)
    if key == "slice":
        return slice(*(decode(v, nodes, symbols) for v in val))
    if key == "ellipsis":
        return Ellipsis
    if key == "sym":
        return sym_from_text(val, symbols)
    if key == "enum" and val in ("contiguous_format", "channels_last", "preserve_format", "strided"):
        return getattr(ember, val)
    raise SerializationError(f"unknown value record {obj!r}")


def _val_to_json(val, syms: set):
    if val is None:
        return None
    if hasattr(val, "shape") and hasattr(val, "dtype"):
        return {"tensor": {"shape": [encode(s, syms) for s in val.shape], "dtype": encode(val.dtype, syms),
                           "requires_grad": bool(getattr(val, "requires_grad", False))}}
    if isinstance(val, (list, tuple)):
        return {"list": [_val_to_json(v, syms) for v in val]}
    if isinstance(val, TensorMeta):
        return {"tensor": {"shape": [encode(s, syms) for s in val.shape], "dtype": encode(val.dtype, syms),
                           "requires_grad": val.requires_grad}}
    try:
        return {"value": encode(val, syms)}
    except SerializationError:
        return None


def _val_from_json(obj, symbols: dict):
    if obj is None:
        return None
    if "tensor" in obj:
        t = obj["tensor"]
        shape = tuple(as_expr(decode(s, {}, symbols)) for s in t["shape"])
        return TensorMeta(shape, decode(t["dtype"], {}, symbols), t["requires_grad"])
    if "list" in obj:
        return [_val_from_json(v, symbols) for v in obj["list"]]
    return decode(obj["value"], {}, symbols)


# ------------------------------------------------------------------ graphs


def _symbolic_val(node, val):
    """``val`` with the symbolic shapes export recorded in ``meta["sym_shape"]``."""
    sym = node.meta.get("sym_shape")
    if sym is None or val is None:
        return val
    if hasattr(val, "shape"):
        return TensorMeta(tuple(sym), val.dtype, bool(getattr(val, "requires_grad", False)))
    if isinstance(val, (list, tuple)):
        return [TensorMeta(tuple(s), v.dtype, bool(getattr(v, "requires_grad", False))) if s is not None else v
                for s, v in zip(sym, val)]
    return val


def graph_to_json(graph, owner=None, syms: set | None = None) -> tuple[dict, list[str]]:
    """The graph as JSON; ``owner`` (its GraphModule) lets the subgraphs of ``cond``/``while_loop``
    nodes be written inside their ``get_attr`` records (schema 1.1)."""
    syms = set() if syms is None else syms
    nodes = []
    for node in graph.nodes:
        rec = {"name": node.name, "op": node.op}
        if node.op == "call_function":
            rec["target"] = target_name(node.target)
        elif node.op in ("get_attr", "call_module", "call_method"):
            rec["target"] = str(node.target)
            sub = getattr(owner, str(node.target), None) if node.op == "get_attr" and owner is not None else None
            if sub is not None and hasattr(sub, "graph") and hasattr(sub.graph, "nodes"):
                rec["subgraph"] = graph_to_json(sub.graph, sub, syms)[0]
        rec["args"] = encode(list(node.args), syms)
        rec["kwargs"] = {k: encode(v, syms) for k, v in node.kwargs.items()}
        meta = {}
        val = node.meta.get("val", node.meta.get("tensor_meta"))
        if node.op != "output":
            encoded = _val_to_json(_symbolic_val(node, val), syms)
            if encoded is not None:
                meta["val"] = encoded
        if "sym_expr" in node.meta:
            meta["sym_expr"] = encode(node.meta["sym_expr"], syms)
        if node.meta.get("stack_trace"):
            meta["stack_trace"] = str(node.meta["stack_trace"])
        if node.meta.get("nn_module_stack"):
            meta["nn_module_stack"] = {k: [str(x) for x in v] if isinstance(v, (tuple, list)) else str(v)
                                       for k, v in node.meta["nn_module_stack"].items()}
        rec["meta"] = meta
        nodes.append(rec)
    return {"nodes": nodes}, sorted(syms)


def graph_from_json(obj: dict, symbols: dict):
    from ember.fx import Graph

    graph = Graph()
    nodes: dict = {}
    for rec in obj["nodes"]:
        op = rec["op"]
        args = tuple(decode(rec.get("args", []), nodes, symbols))
        kwargs = {k: decode(v, nodes, symbols) for k, v in rec.get("kwargs", {}).items()}
        name = rec["name"]
        if op == "placeholder":
            node = graph.create_node("placeholder", name, name=name)
            if node.name != name:  # a builtin's name (``input``): export's placeholders keep it
                from ._trace import _rename

                _rename(node, name)
        elif op == "call_function":
            node = graph.create_node("call_function", resolve_target(rec["target"]), args, kwargs, name=name)
        elif op == "output":
            node = graph.output(args[0] if args else None)
        elif op == "get_attr":
            node = graph.create_node("get_attr", rec["target"], name=name)
        else:
            raise SerializationError(f"a saved graph may not hold {op} nodes")
        meta = rec.get("meta", {})
        if "val" in meta:
            val = _val_from_json(meta["val"], symbols)
            node.meta["tensor_meta" if isinstance(val, TensorMeta) else "val"] = val
        if "sym_expr" in meta:
            node.meta["sym_expr"] = decode(meta["sym_expr"], {}, symbols)
        if "stack_trace" in meta:
            node.meta["stack_trace"] = meta["stack_trace"]
        if "nn_module_stack" in meta:
            node.meta["nn_module_stack"] = meta["nn_module_stack"]
        nodes[rec["name"]] = node
    graph.lint()
    return graph


def module_from_json(obj: dict, symbols: dict):
    """A GraphModule of a saved graph, with the subgraphs its ``get_attr`` records hold."""
    from ember import nn
    from ember.fx import GraphModule

    root = nn.Module()
    for rec in obj["nodes"]:
        if rec["op"] == "get_attr" and "subgraph" in rec:
            target = rec["target"]
            if not target.isidentifier() or hasattr(nn.Module, target):
                raise SerializationError(f"invalid subgraph name {target!r}")
            setattr(root, target, module_from_json(rec["subgraph"], symbols))
    return GraphModule(root, graph_from_json(obj, symbols))
