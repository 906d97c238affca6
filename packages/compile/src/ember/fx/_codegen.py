"""Python source from a Graph: the ``forward`` a GraphModule runs and shows as ``.code``.

One statement per node, in graph order. After the last use of a value the statement also
sets it to None (``;  x = None``), so intermediates die as early as in eager code; that is
what keeps a long graph's peak memory equal to eager's.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import operator
import re
from typing import Any

from ember._C import FastFront

from . import _naming
from ._naming import snake_case as snake
from .node import Node, _type_repr, map_arg

__all__ = ["CodeGen", "PythonCode"]

# operator functions written with their infix/prefix syntax.
_BINARY = {
    "add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "floordiv": "{} // {}", "truediv": "{} / {}",
    "mod": "{} % {}", "pow": "{} ** {}", "lshift": "{} << {}", "rshift": "{} >> {}", "and_": "{} & {}",
    "or_": "{} | {}", "xor": "{} ^ {}", "getitem": "{}[{}]", "matmul": "{} @ {}", "eq": "{} == {}",
    "ne": "{} != {}", "lt": "{} < {}", "gt": "{} > {}", "le": "{} <= {}", "ge": "{} >= {}",
}
_UNARY = {"neg": "-{}", "pos": "+{}", "invert": "~{}"}


@dataclasses.dataclass
class PythonCode:
    """Source of a generated ``forward`` and the globals it needs to run."""

    src: str
    globals: dict[str, Any]
    _lineno_map: dict[int, int | None] | None = None


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _format_target(base: str, target: str) -> str:
    """``self.a.b``, falling back to ``getattr(self.a, "0")`` for non-identifier atoms."""
    expr = base
    for atom in target.split("."):
        expr = f"{expr}.{atom}" if atom.isidentifier() else f'getattr({expr}, "{atom}")'
    return expr


_FRAME_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')


def _summarize_stack_trace(trace: str) -> str | None:
    """``File: path:line in fn, code: source`` for the innermost frame of a stack trace."""
    lines = trace.rstrip().splitlines()
    for index in range(len(lines) - 1, -1, -1):
        match = _FRAME_LINE.search(lines[index])
        if match:
            code = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"File: {match['file']}:{match['line']} in {match['name']}, code: {code}"
    return None


# Short dtype names of print_readable's annotations ("f32[3, 4]"), as PyTorch writes them.
_DTYPE_ABBREVIATIONS = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "b8", "complex64": "c64", "complex128": "c128", "complex32": "c32",
}


def _value_annotation(node: Node, include_stride: bool, include_device: bool) -> str | None:
    """``f32[3, 4]`` (+ ``[4, 1]`` strides, + device) for a node whose meta['val'] is a tensor."""
    val = node.meta.get("val")
    if val is None or not all(hasattr(val, a) for a in ("shape", "dtype", "stride")):
        return None
    dtype = str(val.dtype).split(".")[-1]
    text = f"{_DTYPE_ABBREVIATIONS.get(dtype, dtype)}[{', '.join(str(d) for d in val.shape)}]"
    if include_stride:
        text += f"[{', '.join(str(s) for s in val.stride())}]"
    if include_device:
        text += str(val.device)
    return text


class CodeGen:
    """Turns a graph's nodes into the source of ``def forward(self, ...)``.

    A subclass may change how the function takes its inputs and returns its outputs (export's
    pytree codegen flattens structured arguments and rebuilds the outputs' structure); then
    ``process_inputs`` / ``process_outputs`` do the same for code that runs the graph node by node
    (``Interpreter.run``), and ``module_attributes`` names what the code reads from its module."""

    def process_inputs(self, *args: Any) -> Any:
        """The placeholders' values from the arguments the generated function takes."""
        return args

    def process_outputs(self, outputs: Any) -> Any:
        """What the generated function returns, from the output node's value."""
        return outputs

    def module_attributes(self) -> dict[str, Any]:
        """Attributes the generated code reads from its module (set by ``GraphModule.recompile``)."""
        return {}

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str) -> str:
        if not free_vars or free_vars[0] != "self":
            free_vars.insert(0, "self")
        return f"def forward({', '.join(free_vars)}){maybe_return_annotation}:"

    def generate_output(self, output_repr: str) -> str:
        return f"return {output_repr}"

    def _gen_python_code(self, nodes, root_module: str, namespace: _naming.Namespace, *,
                         verbose: bool = False, include_stride: bool = False,
                         include_device: bool = False) -> PythonCode:
        globals_: dict[str, Any] = {"inf": float("inf"), "nan": float("nan"), "NoneType": type(None)}
        import ember

        globals_["ember"] = ember
        free_vars: list[str] = []
        body: list[str] = []
        return_annotation = [""]

        def add_global(name_hint: str, obj: Any) -> str:
            # An object reachable from `ember` is spelled by its path; anything else is bound.
            path = _naming.ember_path(obj)
            if path is not None:
                return path
            if namespace_globals.get(name_hint) is obj:
                return name_hint
            name = namespace.create_name(name_hint, obj)
            globals_[name] = obj
            namespace_globals[name] = obj
            return name

        namespace_globals: dict[str, Any] = {}

        def type_repr(o: Any) -> str:
            if isinstance(o, type) and o.__module__ == "builtins":
                return o.__qualname__
            return add_global(_type_repr(o).replace(".", "_"), o)

        def arg_repr(arg: Any) -> str:
            if isinstance(arg, Node):
                return arg.name
            special = _naming.constant_repr(arg)
            if special is not None:
                return special
            if isinstance(arg, tuple) and hasattr(arg, "_fields"):  # a NamedTuple: rebuild it
                qualified = add_global(type(arg).__name__, type(arg))
                return f"{qualified}({', '.join(arg_repr(a) for a in arg)})"
            if isinstance(arg, tuple):
                inner = ", ".join(arg_repr(a) for a in arg)
                return f"({inner},)" if len(arg) == 1 else f"({inner})"
            if isinstance(arg, list):
                return "[" + ", ".join(arg_repr(a) for a in arg) + "]"
            if isinstance(arg, dict):
                return "{" + ", ".join(f"{arg_repr(k)}: {arg_repr(v)}" for k, v in arg.items()) + "}"
            if isinstance(arg, slice):
                return f"slice({arg_repr(arg.start)}, {arg_repr(arg.stop)}, {arg_repr(arg.step)})"
            if (_naming.is_op(arg) or inspect.isfunction(arg) or inspect.isbuiltin(arg)
                    or isinstance(arg, (type, FastFront))):
                return add_global(_naming.qualified_name(arg).replace(".", "_"), arg)
            if type(arg).__name__ == "dtype" and type(arg).__module__.startswith("ember"):
                return f"ember.{arg}" if not str(arg).startswith("ember.") else str(arg)
            if type(arg).__name__ == "device" and type(arg).__module__.startswith("ember"):
                return add_global("device", type(arg)) + f"({str(arg)!r})"
            if arg is ...:
                return "Ellipsis"  # as torch.fx prints it
            if isinstance(arg, range):
                return repr(arg)  # range(a, b[, c]) reads as the builtin call
            text = repr(arg)
            if not _is_literal(text):
                # A value without a source spelling (a tensor constant put in a graph by hand, a
                # symbolic size, ...): bind it as a global rather than print code that breaks.
                return add_global(f"_{snake(type(arg).__name__)}_constant", arg)
            return text

        def args_repr(args: tuple, kwargs: dict) -> str:
            parts = [arg_repr(a) for a in args]
            parts += [f"{k} = {arg_repr(v)}" for k, v in kwargs.items()]
            return ", ".join(parts)

        # Which values die at which node: walk backwards, the first use seen is the last.
        last_use: dict[Node, Node] = {}
        dies_at: dict[Node, list[Node]] = {}
        for node in reversed(list(nodes)):
            def register(n: Node, user: Node = node) -> Node:
                if n not in last_use:
                    last_use[n] = user
                    dies_at.setdefault(user, []).append(n)
                return n

            map_arg(node.args, register)
            map_arg(node.kwargs, register)

        def free_values(user: Node) -> None:
            if user.op == "placeholder":
                return
            if user.op == "output":
                body.append("\n")
                return
            to_delete = list(dies_at.get(user, []))
            if not user.users:
                to_delete.append(user)
            if to_delete:
                body.append(f';  {" = ".join(n.name for n in to_delete)} = None\n')
            else:
                body.append("\n")

        no_trace_yet = object()
        prev_trace: list[Any] = [no_trace_yet]

        def annotate(node: Node) -> None:
            # print_readable shows, before each run of nodes, the user line they came from.
            if not verbose:
                return
            trace = node.meta.get("stack_trace")
            if trace == prev_trace[0]:
                return
            first = prev_trace[0] is no_trace_yet
            prev_trace[0] = trace
            summary = _summarize_stack_trace(trace) if trace else None
            separator = "" if first else "\n"
            if summary:
                body.append(f"{separator}# {summary}\n")
            elif not trace:
                body.append(f"{separator}# No stacktrace found for following nodes\n")

        for node in nodes:
            if node.op not in ("placeholder", "output"):
                annotate(node)
            value_annotation = _value_annotation(node, include_stride, include_device) if verbose else None
            self._emit(node, body, free_vars, return_annotation, root_module, arg_repr, args_repr,
                       add_global, type_repr, value_annotation)
            free_values(node)

        if not any(line.strip() for line in body):
            body = ["pass\n"]
        fn_code = "".join(body)
        code = "\n".join("    " + line for line in fn_code.split("\n"))
        fn_def = self.gen_fn_def(free_vars, return_annotation[0])
        # A function made a leaf with fx.wrap stays one when the GraphModule is traced again:
        # its code registers the global it calls (as torch.fx's does)
        wrapped: list[str] = []
        for node in nodes:
            if node.op == "call_function" and node.meta.get("is_wrapped"):
                for name, value in globals_.items():
                    if value is node.target and name not in wrapped:
                        wrapped.append(name)
        if wrapped:
            stmts = "\n".join(f'ember.fx._symbolic_trace.wrap("{name}")' for name in wrapped)
            src = f"\n{stmts}\n\n{fn_def}\n{code}"
        else:
            src = f"\n\n\n{fn_def}\n{code}"
        return PythonCode(src, globals_, None)

    def _emit(self, node, body, free_vars, return_annotation, root_module, arg_repr, args_repr,
              add_global, type_repr, value_annotation=None) -> None:
        annotation = f": {type_repr(node.type)}" if node.type is not None else ""
        if not annotation and value_annotation:
            annotation = f': "{value_annotation}"'
        if node.op == "placeholder":
            target = node.target
            default = f" = {arg_repr(node.args[0])}" if node.args else ""
            free_vars.append(f"{target}{annotation}{default}")
            raw_name = target.replace("*", "")
            if raw_name != node.name:
                body.append(f"{node.name} = {raw_name}\n")
            return
        if node.op == "call_method":
            body.append(f"{node.name}{annotation} = {_format_target(arg_repr(node.args[0]), node.target)}"
                        f"({args_repr(node.args[1:], node.kwargs)})")
            return
        if node.op == "call_function":
            target = node.target
            if (getattr(target, "__module__", None) == "_operator" and not node.kwargs
                    and getattr(operator, target.__name__, None) is target):
                name = target.__name__
                if name in _BINARY and len(node.args) == 2:
                    lhs, rhs = (arg_repr(a) for a in node.args)
                    if name == "getitem":
                        body.append(f"{node.name}{annotation} = {lhs}[{rhs}]")
                    else:
                        body.append(f"{node.name}{annotation} = {_BINARY[name].format(lhs, rhs)}")
                    return
                if name in _UNARY and len(node.args) == 1:
                    body.append(f"{node.name}{annotation} = {_UNARY[name].format(arg_repr(node.args[0]))}")
                    return
            if (target is getattr and len(node.args) == 2 and not node.kwargs
                    and isinstance(node.args[1], str) and node.args[1].isidentifier()):
                body.append(f"{node.name}{annotation} = {arg_repr(node.args[0])}.{node.args[1]}")
                return
            hint = _naming.qualified_name(target)
            global_name = add_global(hint if hint.isidentifier() else hint.replace(".", "_"), target)
            args, kwargs = _naming.without_defaults(target, node.args, node.kwargs)
            body.append(f"{node.name}{annotation} = {global_name}({args_repr(args, kwargs)})")
            return
        if node.op == "call_module":
            body.append(f"{node.name}{annotation} = {_format_target(root_module, node.target)}"
                        f"({args_repr(node.args, node.kwargs)})")
            return
        if node.op == "get_attr":
            body.append(f"{node.name}{annotation} = {_format_target(root_module, node.target)}")
            return
        if node.op == "output":
            if node.type is not None:
                return_annotation[0] = f" -> {type_repr(node.type)}"
            body.append(self.generate_output(arg_repr(node.args[0])))
            return
        raise NotImplementedError(f"node: {node.op} {node.target}")
