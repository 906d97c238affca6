"""``Proxy``: a stand-in value that records what is done to it as graph nodes.

Operators on a Proxy become ``call_function`` nodes on the ``operator`` functions, attribute
reads become ``getattr`` nodes (created lazily: an attribute that is only called becomes a
``call_method`` node instead), and calling an ember function with a Proxy becomes a
``call_function`` node on that function: inside a trace or transform through the tracer's
patches (``_patching``), anywhere through ``Proxy.__torch_function__`` (Note [Proxies and the
torch function protocol]).
Using a Proxy where Python needs a concrete value (``if proxy:``, ``for _ in proxy``,
``len(proxy)``) raises, as torch.fx does.
"""

from __future__ import annotations

import dis
import linecache
import operator
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ember import Tensor
from ember._src import torch_function

from . import traceback as fx_traceback
from .graph import Graph
from .node import Argument, Node, Target

__all__ = ["Attribute", "GraphAppendingTracer", "ParameterProxy", "Proxy", "TraceError", "TracerBase"]


class TraceError(ValueError):
    """Raised when a traced program needs a concrete value from a Proxy."""


class TracerBase:
    """What a Proxy needs from its tracer: node creation and the answers to concrete questions."""

    graph: Graph
    record_stack_traces: bool = False
    check_mutable_operations: bool = False
    trace_asserts: bool = False
    proxy_buffer_attributes: bool = False
    traced_func_name: str = "forward"

    def create_node(self, kind: str, target: Target, args: tuple, kwargs: dict, name: str | None = None,
                    type_expr: Any | None = None) -> Node:
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node: Node) -> Proxy:
        return Proxy(node, self)

    def create_proxy(self, kind: str, target: Target, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr: Any | None = None,
                     proxy_factory_fn: Callable[[Node], Proxy] | None = None) -> Proxy:
        """Creates a node from arguments that may hold Proxies, and returns its Proxy."""
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        if not isinstance(args_, tuple) or not isinstance(kwargs_, dict):
            raise AssertionError("create_arg must keep the tuple/dict shape of args/kwargs")
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        fx_traceback.copy_preserved_meta(node)
        if self.record_stack_traces and not node.stack_trace:
            node.stack_trace = _user_stack_trace()
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def create_arg(self, a: Any) -> Argument:
        """Turns a value that may hold Proxies into a graph argument (Proxies -> their Nodes)."""
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, tuple) and hasattr(a, "_fields"):
            return type(a)(*(self.create_arg(elem) for elem in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.create_arg(elem) for elem in a)
        if isinstance(a, dict):
            result = {}
            for k, v in a.items():
                key = self.create_arg(k)
                if isinstance(key, Node):
                    raise RuntimeError("Keys for dictionaries used as an argument cannot contain a "
                                       f"Node. Got key: {k}")
                result[key] = self.create_arg(v)
            return result
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, Node) or a is None or a is ... or isinstance(a, (str, int, float, bool, complex)):
            return a
        if callable(a) or _is_ember_value(a):
            return a
        raise NotImplementedError(f"argument of type: {type(a)}")

    def to_bool(self, obj: Proxy) -> bool:
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def iter(self, obj: Proxy) -> Iterator:
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a "
                         "loop or as a *args or **kwargs function argument. See the ember.fx docs for a more "
                         "detailed explanation of what types of control flow can be traced, and check out "
                         "the Proxy docstring for help troubleshooting Proxy iteration errors")

    def keys(self, obj: Proxy) -> Any:
        return Attribute(obj, "keys")()


def _is_ember_value(a: Any) -> bool:
    module = type(a).__module__ or ""
    return module == "ember" or module.startswith("ember.")


class GraphAppendingTracer(TracerBase):
    """The tracer of a Proxy made directly on a graph: appends nodes to that graph."""

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        self.graph = graph


def _user_stack_trace() -> str | None:
    # The innermost frame outside ember.fx and ember's own modules is the user's line.
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not (module.startswith("ember.") or module == "ember" or module == "operator"):
            filename, lineno = frame.f_code.co_filename, frame.f_lineno
            code = linecache.getline(filename, lineno).strip()
            trace = f'  File "{filename}", line {lineno}, in {frame.f_code.co_name}\n'
            return trace + (f"    {code}\n" if code else "")
        frame = frame.f_back
    return None


# Note [Proxies and the torch function protocol]
# A Proxy takes part in ``__torch_function__`` as a tensor-like, so ``ember.relu(proxy)``,
# ``F.linear(proxy, w)`` or ``real_tensor + proxy`` record nodes wherever they are called. The
# protocol is off until something needs it, and switching it on makes every public call of the
# process pay an argument scan (ember._src.torch_function), so a trace or transform, whose patches
# already record ember's functions, leaves it off; a Proxy made outside one (``Proxy(node)`` on a
# graph, the way graphs are built or inlined by hand) switches it on.
_PATCHED_RECORDING = [0]  # > 0 while a trace or transform records through its patches


class _RecordingByPatches:
    """The context of a trace or transform: Proxies made inside leave the protocol off."""

    def __enter__(self) -> None:
        _PATCHED_RECORDING[0] += 1

    def __exit__(self, *exc) -> None:
        _PATCHED_RECORDING[0] -= 1


def recording_by_patches() -> _RecordingByPatches:
    return _RecordingByPatches()


class Proxy:
    """A traced value: operations on it become nodes of ``tracer.graph``.

    Args:
        node: the node whose value this proxy stands for.
        tracer: the tracer recording operations (a GraphAppendingTracer on ``node.graph`` if None).
    """

    def __init__(self, node: Node, tracer: TracerBase | None = None) -> None:
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node
        if not _PATCHED_RECORDING[0] and not torch_function.is_enabled():
            torch_function.enable()  # Note [Proxies and the torch function protocol]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """Records ``func(*args, **kwargs)``: a ``call_method`` node when ``func`` is a Tensor method
        called on a real tensor (``tensor + proxy`` reaches here as ``Tensor.add``), otherwise a
        ``call_function`` node on ``func``."""
        kwargs = kwargs or {}
        tracers: list = []

        def find_tracers(value: Any) -> None:
            if isinstance(value, Proxy):
                if all(value.tracer is not t for t in tracers):
                    tracers.append(value.tracer)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    find_tracers(item)
            elif isinstance(value, dict):
                for item in value.values():
                    find_tracers(item)

        find_tracers(args)
        find_tracers(kwargs)
        if not tracers:
            return NotImplemented
        if len(tracers) > 1:
            raise RuntimeError(f"Found multiple different tracers {tracers} while trying to trace operations "
                               f"{func}")
        tracer = tracers[0]
        method = _tensor_method_name(func)
        if method is not None and args and isinstance(args[0], Tensor):
            return tracer.create_proxy("call_method", method, args, kwargs)
        return tracer.create_proxy("call_function", torch_function.native_of(func), args, kwargs)

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> Attribute:
        # Called only for names not found normally: a tensor attribute or method of the value.
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __deepcopy__(self, memo: dict) -> Proxy:
        return self

    def __getstate__(self) -> dict:
        return self.__dict__

    def __setstate__(self, d: dict) -> None:
        self.__dict__ = d

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self, *args), kwargs)

    def __iter__(self) -> Iterator[Proxy]:
        # `a, b = proxy` is allowed: the caller's bytecode says how many values it unpacks.
        frame = sys._getframe(1)
        count = _unpack_count(frame)
        if count is not None:
            return (self[i] for i in range(count))
        return self.tracer.iter(self)

    def __bool__(self) -> bool:
        return self.tracer.to_bool(self)

    def __len__(self) -> int:
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to "
                           "be recorded, please call ember.fx.wrap('len') at module scope")

    def keys(self) -> Any:
        return self.tracer.keys(self)

    def __abs__(self) -> Proxy:
        return self.tracer.create_proxy("call_function", operator.abs, (self,), {})


def _tensor_method_name(func: Any) -> str | None:
    # ember.add and Tensor.add are one callable; the caller's first argument tells them apart.
    name = getattr(func, "__name__", None)
    if isinstance(name, str) and Tensor.__dict__.get(name) is func:
        return name
    return None


def _unpack_count(frame) -> int | None:
    # The instruction at f_lasti (a byte offset, Python 3.10 to 3.13) asked for the iterator.
    for instruction in dis.get_instructions(frame.f_code):
        if instruction.offset == frame.f_lasti:
            return instruction.argval if instruction.opname == "UNPACK_SEQUENCE" else None
    return None


class Attribute(Proxy):
    """``proxy.attr``: becomes a ``getattr`` node when used as a value, a ``call_method`` when called."""

    def __init__(self, root: Proxy, attr: str) -> None:
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        # The getattr node exists only once the attribute is used as a value.
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


class ParameterProxy(Proxy):
    """A parameter's Proxy under ``Tracer(param_shapes_constant=True)``: its shape questions
    (``shape``, ``size()``, ``dim()``, ``ndim``, ``numel()``, ``nelement()``) answer with the real
    parameter's values instead of recording nodes."""

    def __init__(self, tracer: TracerBase, node: Node, name: str, param: Any) -> None:
        super().__init__(node, tracer)
        self.param = param
        self.name = name

    def __repr__(self) -> str:
        return f"ParameterProxy({self.name})"

    @property
    def shape(self):
        return self.param.shape

    def size(self, dim: int | None = None):
        return self.param.size() if dim is None else self.param.size(dim)

    def dim(self) -> int:
        return self.param.dim()

    @property
    def ndim(self) -> int:
        return self.param.ndim

    def numel(self) -> int:
        return self.param.numel()

    def nelement(self) -> int:
        return self.param.numel()


_BINARY_MAGIC = ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift", "and", "or",
                 "xor", "matmul")
_COMPARISON_MAGIC = ("eq", "ne", "lt", "gt", "le", "ge")
_UNARY_MAGIC = ("neg", "pos", "invert")


def _install_magic_methods() -> None:
    def binary(name: str):
        fn = getattr(operator, name + "_" if name in ("and", "or") else name)

        def impl(self, other):
            return self.tracer.create_proxy("call_function", fn, (self, other), {})

        def reflected(self, other):
            return self.tracer.create_proxy("call_function", fn, (other, self), {})

        return impl, reflected

    for name in _BINARY_MAGIC:
        impl, reflected = binary(name)
        setattr(Proxy, f"__{name}__", impl)
        setattr(Proxy, f"__r{name}__", reflected)
    Proxy.__div__ = Proxy.__truediv__  # type: ignore[attr-defined]
    Proxy.__rdiv__ = Proxy.__rtruediv__  # type: ignore[attr-defined]
    for name in _COMPARISON_MAGIC:
        setattr(Proxy, f"__{name}__", binary(name)[0])
    for name in _UNARY_MAGIC:
        fn = getattr(operator, name)
        setattr(Proxy, f"__{name}__", lambda self, fn=fn: self.tracer.create_proxy("call_function", fn, (self,), {}))

    def getitem(self, key):
        return self.tracer.create_proxy("call_function", operator.getitem, (self, key), {})

    Proxy.__getitem__ = getitem  # type: ignore[attr-defined]
    Proxy.__hash__ = object.__hash__  # __eq__ is overridden; proxies stay usable as dict keys


_install_magic_methods()
