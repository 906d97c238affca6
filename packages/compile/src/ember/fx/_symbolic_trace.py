"""``Tracer`` and ``symbolic_trace``: a Graph from running a function on Proxies.

The program runs once with Proxies for its inputs. Submodule calls are intercepted by
patching ``Module.__call__`` (a leaf module becomes one ``call_module`` node, any other is
traced through), parameter reads by patching ``Module.__getattr__`` (``get_attr`` nodes),
and ember function calls by the patches of ``_patching``. ``concrete_args`` fixes some
inputs to Python values, which lets the trace take one side of ``if`` statements on them.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from types import CodeType, FunctionType, ModuleType
from typing import Any

from ember import Tensor
from ember.nn import Module, Parameter, Sequential

from . import _patching
from .graph import Graph
from .graph_module import GraphModule
from .node import Argument
from .proxy import ParameterProxy, Proxy, TracerBase, recording_by_patches

__all__ = ["PH", "Tracer", "is_fx_tracing", "symbolic_trace", "wrap"]

_IS_FX_TRACING = [False]


def is_fx_tracing() -> bool:
    """Whether a symbolic trace is running."""
    return _IS_FX_TRACING[0]


class PHBase:
    """Marks a ``concrete_args`` entry that stays a placeholder."""

    def __repr__(self) -> str:
        return "PH"


PH = PHBase()


def _assert_is_none(value: Any, msg: str) -> None:
    """The guard left in a graph for an argument that was traced as None."""
    assert value is None, msg


def _assert_equal(value: Any, expected: Any, msg: str) -> None:
    """The guard left in a graph for an argument traced as a fixed bool/int/float/str."""
    assert value == expected, msg


class Tracer(TracerBase):
    """Builds a Graph by running a Module's forward (or a function) on Proxies.

    Args:
        autowrap_modules: modules whose functions, when the traced code holds them as globals,
            are recorded as ``call_function`` nodes (``math`` by default, as in torch.fx).
        autowrap_functions: single functions recorded the same way.
        param_shapes_constant: a parameter's shape, size(), dim(), numel() read during the trace
            are its real values (constants in the graph) rather than recorded nodes.
    """

    def __init__(self, autowrap_modules: tuple[ModuleType, ...] = (math,),
                 autowrap_functions: tuple[Callable, ...] = (), param_shapes_constant: bool = False) -> None:
        super().__init__()
        self._autowrap_function_ids: set[int] = {
            id(value) for module in autowrap_modules for name, value in vars(module).items()
            if not name.startswith("_") and callable(value)
        }
        self._autowrap_function_ids.update(id(fn) for fn in autowrap_functions)
        self._autowrap_modules = tuple(autowrap_modules)
        self.param_shapes_constant = param_shapes_constant
        self.submodule_paths: dict[Module, str] | None = None
        self.root: Module | None = None
        self.tensor_attrs: dict[int, str] = {}

    # -- hooks subclasses override --------------------------------------------------------
    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """ember.nn's own modules (except Sequential) are leaves; user modules are traced through."""
        module = type(m).__module__ or ""
        return module.startswith("ember.nn") and not isinstance(m, Sequential)

    def path_of_module(self, mod: Module) -> str:
        """The qualified name of ``mod`` inside the root module."""
        if self.submodule_paths is not None:
            path = self.submodule_paths.get(mod)
            if path is None:
                raise NameError("module is not installed as a submodule")
            return path
        for name, candidate in self.root.named_modules():
            if candidate is mod:
                return name
        raise NameError("module is not installed as a submodule")

    def call_module(self, m: Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
        """A leaf module becomes a ``call_module`` node; any other module runs ``forward``."""
        module_qualified_name = self.path_of_module(m)
        if not self.is_leaf_module(m, module_qualified_name):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", module_qualified_name, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Proxy]) -> Any:
        """What a module attribute read returns while tracing: a Proxy for parameters."""
        if isinstance(attr_val, Parameter):
            name = self._parameter_name(attr_val)
            if name is not None:
                if name not in parameter_proxy_cache:
                    factory = None
                    if self.param_shapes_constant:
                        def factory(node, name=name, param=attr_val):
                            return ParameterProxy(self, node, name, param)
                    parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {},
                                                                    proxy_factory_fn=factory)
                return parameter_proxy_cache[name]
        if self.proxy_buffer_attributes and isinstance(attr_val, Tensor):
            for name, buf in self.root.named_buffers():
                if attr_val is buf:
                    if name not in parameter_proxy_cache:
                        parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
                    return parameter_proxy_cache[name]
        return attr_val

    def _parameter_name(self, param: Parameter) -> str | None:
        # A name table built once per trace (a scan per read would make big models quadratic);
        # a parameter added during the trace is found by the scan.
        names = self.__dict__.get("_parameter_names")
        if names is None or id(param) not in names:
            names = {id(p): name for name, p in self.root.named_parameters()}
            self._parameter_names = names
        return names.get(id(param))

    def create_arg(self, a: Any) -> Argument:
        """Also turns parameters, buffers, submodules and tensor constants into ``get_attr`` nodes."""
        if isinstance(a, Parameter):
            name = self._parameter_name(a)
            if name is None:
                raise NameError("parameter is not a member of this module")
            return self.create_node("get_attr", name, (), {})
        if isinstance(a, Module):
            for name, mod in self.root.named_modules():
                if a is mod:
                    return self.create_node("get_attr", name, (), {})
            raise NameError("module is not installed as a submodule")
        if isinstance(a, Tensor):
            qualname = self.tensor_attrs.get(id(a))
            if qualname is None:
                # A constant built during the trace is kept on the root as an attribute.
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                qualname = f"_tensor_constant{i}"
                setattr(self.root, qualname, a)
                self.tensor_attrs[id(a)] = qualname
            return self.create_node("get_attr", qualname, (), {})
        return super().create_arg(a)

    # -- the trace ------------------------------------------------------------------------
    def create_args_for_root(self, root_fn: Callable, is_module: bool,
                             concrete_args: dict[str, Any] | None = None) -> tuple[Callable, list[Any]]:
        """Placeholders for ``root_fn``'s parameters; returns the function to call and its args."""
        fn_for_analysis = inspect.unwrap(root_fn)
        if not isinstance(fn_for_analysis, FunctionType):
            raise AssertionError(f"Expected FunctionType, got {type(fn_for_analysis)}")
        code = fn_for_analysis.__code__
        total_args = code.co_argcount + code.co_kwonlyargcount
        names_iter = iter(code.co_varnames)
        args: list[Any] = []
        skip = 0
        if is_module:
            if total_args == 0:
                raise RuntimeError("``self`` argument cannot be part of *args expansion!")
            skip = 1
            next(names_iter)
            args.append(self.root)
        sig = inspect.signature(fn_for_analysis)
        concrete_args = dict(concrete_args or {})
        arg_names = [next(names_iter) for _ in range(skip, total_args)]
        # Names in concrete_args that are not parameters are ignored, as torch.fx ignores them.
        args += [self._placeholder_for(name, sig, concrete_args) for name in arg_names]
        if code.co_kwonlyargcount > 0 and (code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)):
            raise NotImplementedError("tracing a function with both keyword-only and variadic arguments")
        extra = 0
        if code.co_flags & inspect.CO_VARARGS:
            args.append(self.create_proxy("placeholder", "*" + next(names_iter), (), {}))
            extra += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            args.append(self.create_proxy("placeholder", "**" + next(names_iter), (), {}))
            extra += 1
        if extra:
            root_fn = _flatten_varargs(fn_for_analysis, code, extra)
        elif code.co_kwonlyargcount:
            root_fn = _kwonly_as_positional(fn_for_analysis, code, skip)
        return root_fn, args

    def _placeholder_for(self, name: str, sig: inspect.Signature, concrete_args: dict[str, Any]) -> Any:
        param = sig.parameters[name]
        default: tuple = ()
        if param.default is not inspect.Parameter.empty:
            default = (param.default,)
        if name in concrete_args and not isinstance(concrete_args[name], PHBase):
            # The argument stays in the signature (with its default), guarded to the traced value.
            value = concrete_args[name]
            proxy = self.create_proxy("placeholder", name, default, {})
            msg = f"{name} has been specialized to have value {value} but got another value"
            if value is None:
                self.create_proxy("call_function", _assert_is_none, (proxy, msg), {})
            elif type(value) in (bool, int, float, str):
                self.create_proxy("call_function", _assert_equal, (proxy, value, msg), {})
            return value
        return self.create_proxy("placeholder", name, default, {}, type_expr=(
            param.annotation if param.annotation is not inspect.Parameter.empty else None))

    def trace(self, root: Module | Callable[..., Any], concrete_args: dict[str, Any] | None = None) -> Graph:
        """Runs ``root`` (a Module's forward, or a function) on Proxies; returns the Graph."""
        previous_tracing = _IS_FX_TRACING[0]
        _IS_FX_TRACING[0] = True
        recording = recording_by_patches()  # Note [Proxies and the torch function protocol]
        recording.__enter__()
        try:
            if isinstance(root, Module):
                self.root = root
                fn = type(root).forward
                self.traced_func_name = "forward"
            else:
                self.root = Module()
                fn = root
                self.traced_func_name = getattr(root, "__name__", "forward")
            tracer_cls = getattr(self, "__class__", None)
            self.graph = Graph(tracer_cls=tracer_cls)
            self.tensor_attrs = {}
            for module_name, module in self.root.named_modules():
                for attr_name, value in list(module._buffers.items()) + list(module.__dict__.items()):
                    if isinstance(value, Tensor) and not isinstance(value, Parameter):
                        path = f"{module_name}.{attr_name}" if module_name else attr_name
                        self.tensor_attrs.setdefault(id(value), path)
            fn_globals = getattr(inspect.unwrap(fn), "__globals__", {})
            fn, args = self.create_args_for_root(fn, isinstance(root, Module), concrete_args)
            parameter_proxy_cache: dict[str, Proxy] = {}
            self.submodule_paths = {mod: name for name, mod in self.root.named_modules()}
            self._parameter_names = None
            orig_getattr = Module.__getattr__
            orig_call = Module.__call__
            tracer = self
            function_ids = self._autowrap_function_ids | _patching.ember_function_ids()
            wrapped_globals: set[int] = {id(fn_globals)}

            def module_getattr_wrapper(mod, attr):
                return tracer.getattr(attr, orig_getattr(mod, attr), parameter_proxy_cache)

            def module_call_wrapper(mod, *args, **kwargs):
                def forward(*args, **kwargs):
                    return orig_call(mod, *args, **kwargs)

                forward_globals = getattr(getattr(type(mod), "forward", None), "__globals__", None)
                if forward_globals is not None and id(forward_globals) not in wrapped_globals:
                    wrapped_globals.add(id(forward_globals))
                    _patching.autowrap_globals(patcher, forward_globals, function_ids)
                return tracer.call_module(mod, forward, args, kwargs)

            with _patching.Patcher() as patcher:
                patcher.patch_attr(Module, "__getattr__", module_getattr_wrapper)
                patcher.patch_attr(Module, "__call__", module_call_wrapper)
                _patching.patch_wrapped_functions(patcher)
                _patching.patch_ember_namespaces(patcher)
                _patching.autowrap_globals(patcher, fn_globals, function_ids)
                for module in getattr(self, "_autowrap_modules", ()):
                    # ``math.sqrt(proxy)``: the module's own functions record too, as in torch.fx
                    _patching.autowrap_globals(patcher, vars(module), function_ids)
                result = fn(*args)
                self.create_node("output", "output", (self.create_arg(result),), {},
                                 type_expr=getattr(fn, "__annotations__", {}).get("return", None))
            self.submodule_paths = None
            return self.graph
        finally:
            recording.__exit__(None, None, None)
            _IS_FX_TRACING[0] = previous_tracing


def _flatten_varargs(fn: FunctionType, code: CodeType, extra: int) -> FunctionType:
    # *args/**kwargs become ordinary parameters, so the Proxies pass through as they are.
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    new_code = code.replace(co_flags=flags, co_argcount=code.co_argcount + extra)
    return FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def _kwonly_as_positional(fn: FunctionType, code: CodeType, skip: int) -> Callable:
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    positional = code.co_argcount

    def call(*args):
        return fn(*args[:positional], **dict(zip(names[positional:], args[positional:], strict=True)))

    return call


def wrap(fn_or_name: str | Callable) -> str | Callable:
    """Records calls to a module-level function as ``call_function`` nodes instead of tracing into it.

    Call at module scope, with the function or its name (``wrap('len')`` works for builtins).
    """
    if not callable(fn_or_name) and not isinstance(fn_or_name, str):
        raise AssertionError("Unsupported type for global function! Must be either a callable or string name")
    if callable(fn_or_name):
        if isinstance(fn_or_name, str):
            raise AssertionError("fn_or_name must be a global function or string name")
        fn_name = fn_or_name.__name__
    else:
        fn_name = fn_or_name
    caller = sys._getframe(1)
    if caller.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    # Not checked for existence: as a decorator (``@fx.wrap``), the name is bound only after
    # wrap returns (PyTorch does not check either; tracing looks the name up).
    _patching.WRAPPED_FNS_TO_PATCH[(id(caller.f_globals), fn_name)] = caller.f_globals
    return fn_or_name


def symbolic_trace(root: Module | Callable[..., Any], concrete_args: dict[str, Any] | None = None) -> GraphModule:
    """Traces ``root`` (a Module or a function) into a GraphModule.

    Example:
        >>> import ember, ember.fx
        >>> def f(x):
        ...     return ember.relu(x) + 1
        >>> gm = ember.fx.symbolic_trace(f)
        >>> [n.op for n in gm.graph.nodes]
        ['placeholder', 'call_function', 'call_function', 'output']
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
