"""The state of one graph translation: value names, emitted nodes, constants, symbolic sizes.

Translation functions (``_translations.py``) read an fx node and call ``emit`` to add ONNX
nodes through ``onnx.helper``; ``value`` turns an argument (a node, a Python number, a
symbolic size) into the name of an ONNX value. A symbolic size (a sympy expression over the
dynamic dims) is computed inside the model from ``Shape`` of the input that carries each
symbol, so reshapes and factories stay correct at every batch size.
"""

from __future__ import annotations

import operator

import numpy as np
import sympy

import ember
import onnx
from ember.export._ranges import as_expr
from onnx import TensorProto, helper, numpy_helper

ONNX_DTYPES = {
    ember.float32: TensorProto.FLOAT, ember.float64: TensorProto.DOUBLE, ember.float16: TensorProto.FLOAT16,
    ember.bfloat16: TensorProto.BFLOAT16, ember.int64: TensorProto.INT64, ember.int32: TensorProto.INT32,
    ember.int16: TensorProto.INT16, ember.int8: TensorProto.INT8, ember.uint8: TensorProto.UINT8,
    ember.bool: TensorProto.BOOL,
}
NUMPY_DTYPES = {
    ember.float32: np.float32, ember.float64: np.float64, ember.float16: np.float16, ember.int64: np.int64,
    ember.int32: np.int32, ember.int16: np.int16, ember.int8: np.int8, ember.uint8: np.uint8, ember.bool: np.bool_,
}


class UnsupportedOp(RuntimeError):
    """Raised at export time for an op (or a use of it) with no ONNX translation."""


def onnx_dtype(dtype) -> int:
    if dtype not in ONNX_DTYPES:
        raise UnsupportedOp(f"dtype {dtype} has no ONNX equivalent")
    return ONNX_DTYPES[dtype]


class Builder:
    """Accumulates ONNX nodes and initializers for one exported graph."""

    def __init__(self, opset: int, symbol_sources: dict):
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict = {}  # fx node -> ONNX value name (or list of names)
        self._counter = 0
        self._consts: dict = {}
        self.symbol_sources = symbol_sources  # sympy symbol -> (onnx input name, dim)
        self._sym_cache: dict = {}
        self.folds: dict = {}  # folded initializer -> (source initializer, transpose perm)
        self.unfoldable: set = set()  # initializers that become graph inputs (export_params=False)

    def child(self, owner) -> Builder:
        """A builder for a subgraph (If/Loop bodies): fresh names, constants and initializers are
        shared with this one (ONNX names are unique over all scopes); sizes computed out here are
        visible in there, not the other way round."""
        c = Builder(self.opset, self.symbol_sources)
        c.initializers = self.initializers
        c._consts = self._consts
        c.folds = self.folds
        c.unfoldable = self.unfoldable
        c._sym_cache = dict(self._sym_cache)
        c.fresh = self.fresh
        c.owner = owner
        return c

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}_{self._counter}"

    def emit(self, op_type: str, inputs: list, n_out: int = 1, hint: str | None = None, **attrs):
        outs = [self.fresh(hint or op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, [i if i is not None else "" for i in inputs], outs,
                                           name=self.fresh(f"node_{op_type}"), **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=None) -> str:
        """An initializer holding ``value`` (a number or nested list); reused when identical."""
        np_dtype = NUMPY_DTYPES.get(dtype, dtype) if dtype is not None else None
        arr = np.asarray(value, dtype=np_dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        name = self._consts.get(key)
        if name is None:
            name = self.fresh("const")
            self.initializers.append(numpy_helper.from_array(arr, name))
            self._consts[key] = name
        return name

    def ints(self, values) -> str:
        """A 1-D int64 tensor of sizes, each an int or a symbolic size computed at run time."""
        exprs = [as_expr(v) if not isinstance(v, int) else v for v in values]
        if all(isinstance(e, int) for e in exprs):
            return self.const(np.array(exprs, dtype=np.int64))
        parts = [self.const(np.array([e], dtype=np.int64)) if isinstance(e, int) else self.sym(e) for e in exprs]
        return self.emit("Concat", parts, axis=0)

    def sym(self, expr) -> str:
        """A 1-element int64 tensor holding the value of a symbolic size."""
        expr = sympy.sympify(expr)
        if expr in self._sym_cache:
            return self._sym_cache[expr]
        if expr.is_Integer:
            out = self.const(np.array([int(expr)], dtype=np.int64))
        elif expr.is_Symbol:
            if expr not in self.symbol_sources:
                raise UnsupportedOp(f"the size {expr} is not the size of any graph input nor computed by the graph")
            src, dim = self.symbol_sources[expr]
            shape = self.emit("Shape", [src], start=dim, end=dim + 1)
            out = shape
        elif expr.is_Add:
            terms = [self.sym(t) for t in expr.args]
            out = terms[0]
            for t in terms[1:]:
                out = self.emit("Add", [out, t])
        elif expr.is_Mul:
            terms = [self.sym(t) for t in expr.args]
            out = terms[0]
            for t in terms[1:]:
                out = self.emit("Mul", [out, t])
        elif isinstance(expr, (sympy.Min, sympy.Max)):  # a slice bound clamped to a size (x[:k.item()])
            out = self.emit("Min" if isinstance(expr, sympy.Min) else "Max", [self.sym(a) for a in expr.args])
        elif isinstance(expr, sympy.floor) and expr.args[0].is_Mul:
            num, den = expr.args[0].as_numer_denom()
            out = self.emit("Div", [self.sym(num), self.sym(den)])  # int64 Div truncates; sizes are >= 0
        else:
            raise UnsupportedOp(f"cannot compute the symbolic size {expr} in ONNX")
        self._sym_cache[expr] = out
        return out

    def folded_transpose(self, name: str, perm: list) -> str | None:
        """A transposed copy of initializer ``name`` (constant folding), or None if it is not one."""
        init = next((t for t in self.initializers if t.name == name), None)
        if init is None or name in self.unfoldable:
            return None
        key = ("transpose", name, tuple(perm))
        if key not in self._consts:
            arr = np.ascontiguousarray(np.transpose(numpy_helper.to_array(init), perm))
            out = self.fresh(f"{name}_t")
            self.initializers.append(numpy_helper.from_array(arr, out))
            self._consts[key] = out
            self.folds[out] = (name, [int(p) for p in perm])
        return self._consts[key]

    def where(self, cond: str, x: str, y: str, dtype) -> str:
        """``Where``, written with And/Or/Not for bool data (ONNX Runtime has no bool Where kernel)."""
        if dtype is not ember.bool:
            return self.emit("Where", [cond, x, y])
        both = self.emit("And", [cond, x])
        other = self.emit("And", [self.emit("Not", [cond]), y])
        return self.emit("Or", [both, other])

    def _scalar_float(self, arg) -> str:
        """A 0-d float32 tensor holding a number, a size node or float arithmetic of them."""
        if isinstance(arg, (bool, int, float)):
            return self.const(np.array(arg, dtype=np.float32))
        if hasattr(arg, "op") and "sym_expr" in arg.meta:
            size = self.emit("Reshape", [self.sym(as_expr(arg)), self.const(np.array([], dtype=np.int64))])
            return self.emit("Cast", [size], to=int(onnx.TensorProto.FLOAT))
        if hasattr(arg, "op") and arg.op == "call_function" and arg.target in _FLOAT_ARITHMETIC:
            a, b = (self._scalar_float(x) for x in arg.args)
            return self.emit(_FLOAT_ARITHMETIC[arg.target], [a, b])
        raise UnsupportedOp(f"cannot compute the number {getattr(arg, 'name', arg)!r} in ONNX")

    def value(self, arg, dtype=None) -> str:
        """The ONNX name of an fx argument; Python numbers become constants of ``dtype``."""
        if hasattr(arg, "op") and hasattr(arg, "users") and "sym_expr" in arg.meta:
            return self.emit("Reshape", [self.sym(as_expr(arg)), self.const(np.array([], dtype=np.int64))])
        if hasattr(arg, "op") and arg.op == "call_function" and arg.target in _FLOAT_ARITHMETIC \
                and arg not in self.names:
            # a symbolic float of sizes (n / 2, n ** 0.5): computed in float from the sizes
            out = self._scalar_float(arg)
            want = NUMPY_DTYPES.get(dtype, np.float32)
            if want != np.float32:
                out = self.emit("Cast", [out], to=int(onnx.helper.np_dtype_to_tensor_dtype(np.dtype(want))))
            return out
        if hasattr(arg, "op") and hasattr(arg, "users"):
            name = self.names.get(arg)
            if name is None:
                raise UnsupportedOp(f"the value {arg.name} has no ONNX translation")
            if isinstance(name, list):
                raise UnsupportedOp(f"{arg.name} is a tuple; index it first")
            return name
        if isinstance(arg, (bool, int, float)):
            return self.const(np.array(arg, dtype=NUMPY_DTYPES.get(dtype, np.float32)))
        if isinstance(arg, sympy.Basic) or hasattr(arg, "node"):
            return self.emit("Reshape", [self.sym(as_expr(arg)), self.const(np.array([], dtype=np.int64))])
        raise UnsupportedOp(f"cannot translate the argument {arg!r}")


_FLOAT_ARITHMETIC = {operator.truediv: "Div", operator.pow: "Pow", operator.add: "Add", operator.mul: "Mul",
                     operator.sub: "Sub"}


def value_info(name: str, dtype, shape, dim_names: dict):
    dims = []
    for s in shape:
        e = as_expr(s)
        dims.append(e if isinstance(e, int) else dim_names.get(e, str(e)))
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), dims)


def node_inputs(node) -> set:
    """The values ``node`` reads: its inputs and, for If/Loop, what its subgraphs read from outside."""
    names = {i for i in node.input if i}
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            inner = set()
            produced = {i.name for i in attr.g.input} | {t.name for t in attr.g.initializer}
            for n in attr.g.node:
                inner |= node_inputs(n)
                produced.update(n.output)
            names |= inner - produced
    return names


def _prune(nodes: list, outputs: list) -> list:
    """Drops nodes none of whose results reach a graph output (e.g. a transpose folded into Gemm)."""
    live = {o.name for o in outputs}
    kept = []
    for node in reversed(nodes):
        if any(o in live for o in node.output):
            kept.append(node)
            live.update(node_inputs(node))
    return kept[::-1]


def make_model(builder: Builder, inputs: list, outputs: list, graph_name: str = "main_graph"):
    builder.nodes = _prune(builder.nodes, outputs)
    used = {name for node in builder.nodes for name in node_inputs(node)}
    initializers = [t for t in builder.initializers if t.name in used]
    graph = helper.make_graph(builder.nodes, graph_name, inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", builder.opset)],
                              producer_name="ember", producer_version="0.1.0")
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    return model
