"""PyTorch's ``__torch_function__`` protocol (``ember.overrides``).

A call of a public function (``ember.add``, ``ember.nn.functional.relu``, ``ember.special.*``,
...), Tensor method, operator or Python property goes to the ``__torch_function__`` of an argument
whose type defines one (a Tensor subclass, or any "tensor-like" object), and to the entered
``TorchFunctionMode``s, before it runs.

Cost (Note [Torch function switch]): nothing is checked until the protocol is switched on
(``enable``): when a Tensor subclass with an active ``__torch_function__`` is defined (every
subclass but those that set ``_disabled_torch_function_impl``, as nn.Parameter does), when a
``TorchFunctionMode`` is entered, or when ``ember.overrides`` is imported (so that a tensor-like
class, which ember cannot see being defined, is dispatched to). Switching on puts a gate in front
of every public callable, once for the process:

- a Python function keeps its identity (``from ember import relu`` taken earlier is gated too): its
  code is replaced by a small gate, and the original code runs from a copy (``__wrapped__``);
- a native callable (an ``Op``, a ``FastFront``, an operator method) is replaced where it is bound
  by a Python function that gates it; a reference taken before the switch bypasses the protocol.

Until then plain-tensor calls pay nothing; afterwards every public call pays a scan of its
arguments, as ``dispatch._SUBCLASS_DISPATCH`` makes every op pay once a dispatch subclass exists.
"""

from __future__ import annotations

import threading
import types

_ON = [False]  # the switch (module docstring)


class _State(threading.local):
    """Per thread, as PyTorch's: the disable flags and the TorchFunctionMode stack."""

    def __init__(self):
        self.subclasses_disabled = False  # DisableTorchFunctionSubclass (tensor-likes too)
        self.all_disabled = False  # DisableTorchFunction (modes too)
        self.modes: list = []


_STATE = _State()
# Types no argument scan needs to look at twice.
_SIMPLE_TYPES = frozenset({int, float, bool, complex, str, type(None), slice, type(Ellipsis), list, tuple, dict})


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """Set as a class's ``__torch_function__`` (``nn.Parameter``), it opts the class out of the
    protocol: its instances are not dispatched on. Called, it runs ``func`` with subclass handling off."""
    with DisableTorchFunctionSubclass():
        return func(*args, **(kwargs or {}))


# -- the context managers ---------------------------------------------------------------------------


class DisableTorchFunctionSubclass:
    """Inside, no argument's ``__torch_function__`` is called (modes still are)."""

    __slots__ = ("_previous",)

    def __enter__(self):
        self._previous = _STATE.subclasses_disabled
        _STATE.subclasses_disabled = True
        return self

    def __exit__(self, *exc):
        _STATE.subclasses_disabled = self._previous
        return False


class DisableTorchFunction:
    """Inside, neither arguments' ``__torch_function__`` nor modes are called."""

    __slots__ = ("_previous",)

    def __enter__(self):
        self._previous = (_STATE.subclasses_disabled, _STATE.all_disabled)
        _STATE.subclasses_disabled = _STATE.all_disabled = True
        return self

    def __exit__(self, *exc):
        _STATE.subclasses_disabled, _STATE.all_disabled = self._previous
        return False


class TorchFunctionMode:
    """A context that sees every public call made inside it: subclasses override
    ``__torch_function__(self, func, types, args=(), kwargs=None)``. Modes stack; while one runs
    it is popped, so that calling ``func`` there reaches the next mode (or the arguments' handlers)."""

    def __init__(self) -> None:  # PyTorch's signature: a subclass's __init__ may call super().__init__()
        pass

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise NotImplementedError

    def __enter__(self):
        enable()
        _STATE.modes.append(self)
        return self

    def __exit__(self, *exc):
        modes = _STATE.modes
        if not modes or modes[-1] is not self:
            raise RuntimeError("TorchFunctionMode exited out of order")
        modes.pop()
        return False

    @classmethod
    def push(cls, *args, **kwargs):
        instance = cls(*args, **kwargs)
        instance.__enter__()
        return instance


def _get_current_function_mode():
    return _STATE.modes[-1] if _STATE.modes else None


def _get_current_function_mode_stack() -> list:
    return list(_STATE.modes)


def is_torch_function_mode_enabled() -> bool:
    return bool(_STATE.modes) and not _STATE.all_disabled


def _is_torch_function_enabled() -> bool:
    return not _STATE.subclasses_disabled


# -- finding the arguments that overload ------------------------------------------------------------


def _overloads(value) -> bool:
    """Whether ``value``'s type takes part: it defines __torch_function__ and has not opted out."""
    kind = type(value)
    if kind is _Tensor or kind in _SIMPLE_TYPES:
        return False
    handler = getattr(kind, "__torch_function__", None)
    return handler is not None and handler is not _disabled_torch_function_impl and not isinstance(value, type)


def _add_overloaded(found: list, value) -> None:
    kind = type(value)
    for other in found:
        if type(other) is kind:
            return
    # PyTorch's order: arguments left to right, a subclass before its base classes.
    for i, other in enumerate(found):
        if issubclass(kind, type(other)):
            found.insert(i, value)
            return
    found.append(value)


def _overloaded_args(args, kwargs) -> list:
    found: list = []
    for a in args:
        if type(a) in (list, tuple):
            for b in a:
                if _overloads(b):
                    _add_overloaded(found, b)
        elif _overloads(a):
            _add_overloaded(found, a)
    if kwargs:
        for a in kwargs.values():
            if type(a) in (list, tuple):
                for b in a:
                    if _overloads(b):
                        _add_overloaded(found, b)
            elif _overloads(a):
                _add_overloaded(found, a)
    return found


def _name_of(func) -> str:
    return getattr(func, "__name__", None) or repr(func)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """Calls the handlers for ``public_api(*args, **kwargs)`` (modes first, then the overloaded
    arguments among ``relevant_args``); TypeError when every one returns NotImplemented."""
    state = _STATE
    overloaded = [] if state.subclasses_disabled else _overloaded_args(relevant_args, None)
    types_ = tuple(type(a) for a in overloaded)
    result = _run_handlers(state.modes and not state.all_disabled, public_api, types_, overloaded, args, kwargs)
    if result is not NotImplemented:
        return result
    raise TypeError(f"no implementation found for '{_qualified_name(public_api)}' on types that implement "
                    f"__torch_function__: {list(types_)}")


def _run_handlers(use_mode: bool, public, types_, overloaded, args, kwargs):
    """The innermost mode (popped while it runs) when ``use_mode``, then each overloaded argument's
    type, until one returns something other than NotImplemented; NotImplemented if none does."""
    if use_mode:
        modes = _STATE.modes
        mode = modes.pop()
        try:
            result = mode.__torch_function__(public, types_, args, kwargs)
        finally:
            modes.append(mode)
        if result is not NotImplemented:
            return result
    for a in overloaded:
        result = type(a).__torch_function__(public, types_, args, kwargs)
        if result is not NotImplemented:
            return result
    return NotImplemented


def _qualified_name(func) -> str:
    module = getattr(func, "__module__", None) or ""
    module = "ember" if module.startswith("ember._src") else module
    return f"{module}.{_name_of(func)}" if module else _name_of(func)


def _call(public, impl, args, kwargs):
    """The gate's check (module docstring): ``impl`` runs unless a mode or an argument handles it."""
    state = _STATE
    if state.all_disabled:
        return impl(*args, **kwargs)
    if state.modes:
        overloaded = [] if state.subclasses_disabled else _overloaded_args(args, kwargs)
    elif state.subclasses_disabled:
        return impl(*args, **kwargs)
    else:
        overloaded = _overloaded_args(args, kwargs)
        if not overloaded:
            return impl(*args, **kwargs)
    public = _PUBLIC_FOR.get(public, public)
    types_ = tuple(type(a) for a in overloaded)
    result = _run_handlers(bool(state.modes), public, types_, overloaded, args, kwargs)
    if result is not NotImplemented:
        return result
    kinds = "".join(f"  - {'tensor subclass' if isinstance(a, _Tensor) else 'tensor-like'} {type(a)}\n"
                    for a in overloaded)
    raise TypeError(f"{_DISPATCH_FAILED} '{_qualified_name(public)}'; all __torch_function__ handlers returned "
                    f"NotImplemented:\n\n{kinds}")


_DISPATCH_FAILED = "Multiple dispatch failed for"


# -- Tensor's default handler -----------------------------------------------------------------------


def default_torch_function(cls, func, types, args=(), kwargs=None):
    """``Tensor.__torch_function__``: runs ``func`` with subclass handling off and returns its
    tensors as ``cls`` instances (so that a subclass's type survives ops), except for functions
    whose result must stay as it is (``get_default_nowrap_functions``)."""
    if kwargs is None:
        kwargs = {}
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with DisableTorchFunctionSubclass():
        result = func(*args, **kwargs)
        if func in _NOWRAP:
            return result
        return _convert(result, cls)


def _convert(value, cls):
    if cls is _Tensor:
        return value
    if isinstance(value, _Tensor) and not isinstance(value, cls):
        return value.as_subclass(cls)
    if isinstance(value, (tuple, list)):
        items = [_convert(v, cls) for v in value]
        if hasattr(value, "_make"):  # a namedtuple (return_types)
            return type(value)._make(items)
        return type(value)(items)
    return value


_NOWRAP: set = set()


def get_default_nowrap_functions() -> set:
    """Functions whose result the default handler returns unconverted."""
    return set(_NOWRAP)


# -- the gates (module docstring) -------------------------------------------------------------------

_Tensor = None  # set by tensor.py
_GATE_CODES: dict = {}  # number of free variables -> the gate's code object
_GATED: dict = {}  # id(original callable) -> its gate (a function swapped in place, or a wrapper)
_KEEP: list = []  # originals whose ids key _GATED
_PUBLIC_FOR: dict = {}  # gate -> the callable handlers receive (Tensor.__add__ -> Tensor.add, as PyTorch)
_NAMESPACES: list = []  # modules whose public callables are gated (register_namespace)
_GATE_PARAM = "_ember_torch_function"


def _gate_code(free: int):
    """A code object ``(*args, _ember_torch_function, **kwargs)`` with ``free`` free variables (a
    function's code can only be swapped for one with as many as its closure holds)."""
    code = _GATE_CODES.get(free)
    if code is None:
        names = [f"_free{i}" for i in range(free)]
        lines = ["def _outer():", *(f"    {n} = None" for n in names),
                 f"    def gate(*args, {_GATE_PARAM}=None, **kwargs):"]
        if names:
            lines.append(f"        if False: ({', '.join(names)},)")
        lines += [f"        call, public, impl = {_GATE_PARAM}", "        return call(public, impl, args, kwargs)",
                  "    return gate.__code__"]
        scope: dict = {}
        exec("\n".join(lines), scope)  # noqa: S102 - a fixed template
        code = _GATE_CODES[free] = scope["_outer"]()
        assert len(code.co_freevars) == free
    return code


def _gate_function(fn: types.FunctionType, public=None):
    """Swaps ``fn``'s code for the gate in place; returns ``fn``."""
    if id(fn) in _GATED:
        return _GATED[id(fn)]
    if fn.__code__.co_flags & (0x20 | 0x80 | 0x200):  # generator, coroutine, async generator: left as is
        return fn
    impl = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    impl.__kwdefaults__ = fn.__kwdefaults__
    impl.__qualname__ = fn.__qualname__
    impl.__dict__.update(fn.__dict__)
    impl.__doc__ = fn.__doc__
    impl.__module__ = fn.__module__
    fn.__code__ = _gate_code(len(fn.__closure__ or ()))
    fn.__defaults__ = None
    fn.__kwdefaults__ = {_GATE_PARAM: (_call, fn if public is None else public, impl)}
    fn.__wrapped__ = impl  # inspect.signature and help() read the original
    _GATED[id(fn)] = fn
    _KEEP.append(fn)
    return fn


class _NativeGate:
    """The gate of a native callable (an Op, a FastFront, an operator method): it compares and
    hashes equal to the callable, so that handler tables keyed by ``ember.mean`` before the switch
    still find it, and binds as a method as the callable did."""


    def __init__(self, obj, name: str):
        self._obj = obj
        self.__name__ = self.__qualname__ = name
        self.__doc__ = getattr(obj, "__doc__", None)
        self.__module__ = getattr(obj, "__module__", None) or "ember"
        self.__wrapped__ = obj  # inspect.signature reads the original

    def __call__(self, *args, **kwargs):
        return _call(self, self._obj, args, kwargs)

    def __get__(self, instance, owner=None):
        return self if instance is None else types.MethodType(self, instance)

    def __eq__(self, other):
        return other is self or other is self._obj or (isinstance(other, _NativeGate) and other._obj is self._obj)

    def __hash__(self):
        return hash(self._obj)

    def __repr__(self):
        return repr(self._obj)

    def __reduce__(self):
        return _gate_of, (self._obj,)  # the callable pickles by reference; unpickled, it finds its gate


def _gate_of(obj):
    return _GATED.get(id(obj), obj)


_CHECK_CODES = frozenset({_call.__code__, _run_handlers.__code__, _NativeGate.__call__.__code__})


def original_code(fn: types.FunctionType) -> types.CodeType:
    """The code a Python function runs: its own, or, once its code was swapped for a gate, the
    original's (``__wrapped__``) that the gate calls."""
    if _GATED.get(id(fn)) is fn and fn.__code__ in _GATE_CODES.values():
        return fn.__wrapped__.__code__
    return fn.__code__


def caller_of_gate(frame):
    """``frame``, or when it is a gate's (the gate of a public function, or its check) the first
    frame above the gates: the code that called the public function."""
    while frame is not None and (frame.f_code in _GATE_CODES.values() or frame.f_code in _CHECK_CODES):
        frame = frame.f_back
    return frame


def is_gate(obj) -> bool:
    """Whether ``obj`` is the gate put where a native callable was bound (``ember.add`` once on)."""
    return type(obj) is _NativeGate


def native_of(obj):
    """The native callable behind a gate; anything else as it is. ember.fx records this one, so
    that a graph's targets are the same whether the protocol is on or not (the gate equals it)."""
    return obj._obj if type(obj) is _NativeGate else obj


def _gate_callable(obj, name: str):
    """A gate in front of a native callable (_NativeGate)."""
    gated = _GATED.get(id(obj))
    if gated is not None:
        return gated
    gate = _NativeGate(obj, name)
    fallback = getattr(obj, "__wrapped__", None)
    if isinstance(fallback, types.FunctionType):  # a FastFront: a reference kept to it is gated too
        _gate_function(fallback, gate)
    _GATED[id(obj)] = gate
    _KEEP.append(obj)
    return gate


def _gate(obj, name: str):
    if isinstance(obj, types.FunctionType):
        return _gate_function(obj)
    return _gate_callable(obj, name)


def _gate_namespace(module, names=None) -> None:
    """Gates the public callables of ``module`` (those named in ``names`` when given)."""
    namespace = module.__dict__ if isinstance(module, types.ModuleType) else module
    for name, value in list(namespace.items()):
        if names is not None and name not in names:
            continue
        if name.startswith("_") or isinstance(value, (type, types.ModuleType)) or not callable(value):
            continue
        if names is None and not (getattr(value, "__module__", None) or "").startswith("ember"):
            continue
        gated = _gate(value, name)
        if gated is not value:
            namespace[name] = gated


# Tensor attributes the protocol leaves alone (construction, the protocol itself, pickling, hashing).
_TENSOR_SKIP = frozenset({
    "__new__", "__init__", "__init_subclass__", "__torch_function__", "__torch_dispatch__", "__hash__",
    "__iter__", "__reduce_ex__", "__reduce__", "__getstate__", "__setstate__", "__class_getitem__", "__dir__",
    "as_subclass", "__dlpack__", "__dlpack_device__", "__array_priority__", "__array_wrap__", "__weakref__",
    "__dict__", "__slots__", "__module__", "__doc__", "__annotations__", "__deepcopy__", "__copy__",
})
# Operators whose handlers receive a method, as PyTorch's do (``x + y`` reaches them as Tensor.add).
_OPERATOR_FUNCS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_", "__sub__": "sub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_", "__truediv__": "div", "__itruediv__": "div_",
    "__ifloordiv__": "floor_divide_", "__mod__": "remainder", "__imod__": "remainder_", "__pow__": "pow",
    "__ipow__": "pow_", "__matmul__": "matmul", "__rand__": "bitwise_and", "__ror__": "bitwise_or",
    "__rxor__": "bitwise_xor", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__ne__": "ne",
    "__neg__": "neg", "__abs__": "abs", "__pos__": "positive",
}
_BINARY_OPERATORS = frozenset(
    f"__{p}{n}__" for n in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
                            "lshift", "rshift") for p in ("", "r", "i")) | {"__lt__", "__le__", "__gt__", "__ge__",
                                                                             "__eq__", "__ne__"}


def _gate_property(prop: property, name: str) -> property:
    getter = prop.fget

    def get(self):
        return _call(gated.__get__, getter, (self,), {})

    get.__name__ = get.__qualname__ = name
    gated = property(get, prop.fset, prop.fdel, prop.__doc__)
    return gated


def _gate_operator(obj, name: str):
    """A binary operator: NotImplemented (not TypeError) when no handler takes the call, so that
    Python tries the other operand's reflected method. Returns (the operator, the gate inside it)."""
    inner = _gate_callable(obj, name)

    def operator(self, other):
        try:
            return inner(self, other)
        except TypeError as e:
            if str(e).startswith(_DISPATCH_FAILED):
                return NotImplemented
            raise

    operator.__name__ = operator.__qualname__ = name
    operator.__wrapped__ = obj
    return operator, inner


# Tensor's readers that _C.TensorBase defines natively (tensor.py): gated as Tensor's own, as when they
# were Python (a property's getter reaches handlers as ``__get__``, as in PyTorch).
_NATIVE_TENSOR_READERS = ("shape", "ndim", "data_ptr", "numel", "is_contiguous")


def _gate_tensor(tensor_class) -> None:
    publics = {}  # attribute name -> the callable _call receives as public for it
    for name in _NATIVE_TENSOR_READERS:
        if name not in tensor_class.__dict__:
            value = getattr(tensor_class, name)  # a getset descriptor or a method descriptor of the C base
            if isinstance(value, types.GetSetDescriptorType):
                setattr(tensor_class, name, property(value.__get__, None, None, value.__doc__))
            else:
                setattr(tensor_class, name, value)
    for name, value in list(tensor_class.__dict__.items()):
        if name in _TENSOR_SKIP or (name.startswith("_") and not name.endswith("__")):
            continue
        if isinstance(value, property):
            setattr(tensor_class, name, _gate_property(value, name))
        elif isinstance(value, (staticmethod, classmethod, type)) or not callable(value):
            continue
        elif name in _BINARY_OPERATORS and not isinstance(value, types.FunctionType):
            operator, publics[name] = _gate_operator(value, name)
            setattr(tensor_class, name, operator)
        else:
            publics[name] = gated = _gate(value, name)
            if gated is not value:
                setattr(tensor_class, name, gated)
    for name, target in _OPERATOR_FUNCS.items():
        if name in publics and target in tensor_class.__dict__:
            _PUBLIC_FOR[publics[name]] = tensor_class.__dict__[target]


def register_namespace(module) -> None:
    """Makes ``module``'s public functions take part in the protocol (ember.nn.functional calls this);
    gates them at once when the protocol is on."""
    _NAMESPACES.append(module)
    if _ON[0]:
        _gate_namespace(module)


_TABLE_NAMESPACES: list = [None]  # [() -> [(namespace dict, names or None)]]: set by api.py


def enable() -> None:
    """Switches the protocol on for this process (module docstring); idempotent."""
    if _ON[0]:
        return
    _ON[0] = True
    for namespace, names in _TABLE_NAMESPACES[0]():
        _gate_namespace(namespace, names)
    for module in _NAMESPACES:
        _gate_namespace(module)
    _gate_tensor(_Tensor)


def is_enabled() -> bool:
    return _ON[0]


def _install_c_names(c_module) -> None:
    """The names PyTorch's ``torch._C`` gives the protocol."""
    c_module.DisableTorchFunctionSubclass = DisableTorchFunctionSubclass
    c_module.DisableTorchFunction = DisableTorchFunction
    c_module._disabled_torch_function_impl = _disabled_torch_function_impl
    c_module._is_torch_function_enabled = _is_torch_function_enabled
    c_module._is_torch_function_mode_enabled = is_torch_function_mode_enabled
