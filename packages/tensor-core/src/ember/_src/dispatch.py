"""The op registry and the dispatcher (DESIGN.md section 3).

Every op is an ``Op``: its schema and tags, a meta function (shapes and dtypes from
metadata alone) and one kernel per device type. Calling an op routes it through, in order:

0. autocast, for ops in its lists while a region is enabled (casts inputs, then redispatches),
1. the active dispatch modes (a stack; the top mode sees the call first, and runs with
   itself popped so that calling the op again reaches the next layer),
2. tensor subclasses that define ``__torch_dispatch__``,
3. the autograd hook (installed by the ``ember-autograd`` package), when grad mode is on
   and a tensor argument requires grad,
4. the kernel registered for the tensors' device type, or, for a tensor argument whose layout
   is not strided (a sparse tensor), the op's kernel for that layout (``Op.kernels`` keyed by
   ``layout.dispatch_key``: "sparse_cpu" for COO, "sparse_csr_cpu" for the compressed layouts).

Layouts: the layout check runs only once a sparse tensor has ever been made
(``_LAYOUT_DISPATCH[0]``, set by the sparse constructors), so dense programs pay one list read.

Pending work (the hook upper layers use): a lazy tracer (``ember.compile``) records ops
instead of running them, so a tensor's data may not exist yet, or an input may still await an
in-place write. Everything in the core that reads data or random state (``item``, ``tolist``,
``numpy``/``__array__``, ``repr``, ``data_ptr``, ``bool``/``int``/``float``/``index`` through
``item``, pickling, DLPack, ``backward``, the generators' seed/state functions) first calls
``sync_pending(tensor, reason)``, which runs the hook installed with ``set_sync_hook`` when
there is one. With no hook installed it costs one list read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from . import grad_mode
from ._native import _C
from .device import get_backend, to_device


class _OpTable(dict):
    """The op registry. ``ember.ops.<name>`` reads an op as an attribute (as ``torch.ops.aten.<name>``),
    which is how ember.fx's generated code spells op calls; ``ember.ops["<name>"]`` works too."""

    def __getattr__(self, name: str) -> Op:
        try:
            return self[name]
        except KeyError:
            # ``ember.ops.mylib.foo``: a namespace of custom ops (keys ``"mylib::foo"``)
            prefix = name + "::"
            if any(key.startswith(prefix) for key in self):
                return _OpNamespace(self, name)
            if name == "aten":  # ``torch.ops.aten.relu.default``: PyTorch's overload names over ember's ops
                from ember._ops import aten

                return aten
            if name == "higher_order":  # ``torch.ops.higher_order.cond``: graph ops of ember-compile
                from . import plugins

                compiler = plugins.load("compile")
                if compiler is not None:
                    return compiler.higher_order
            raise AttributeError(f"ember.ops has no op named '{name}'") from None

    def __dir__(self):
        return [*super().__dir__(), *(name for name in self if name.isidentifier())]


class _OpNamespace:
    """``ember.ops.<namespace>``: the custom ops ``"<namespace>::<name>"`` as attributes."""

    def __init__(self, table: dict, namespace: str):
        self._table = table
        self._namespace = namespace

    def __getattr__(self, name: str) -> Op:
        try:
            return self._table[f"{self._namespace}::{name}"]
        except KeyError:
            raise AttributeError(f"ember.ops.{self._namespace} has no op named '{name}'") from None

    def __repr__(self) -> str:
        return f"ember.ops.{self._namespace}"


OPS: dict[str, Op] = _OpTable()

# Mutable module state, read on every call.


class _ModeStack(threading.local):
    """Dispatch modes are per thread, as in PyTorch: a mode entered in one thread (a tracer,
    say) never sees, nor reorders, the ops of another."""

    def __init__(self):
        self.stack: list = []


_MODES = _ModeStack()
# Modes entered and not yet exited, over all threads: while 0, calls skip the thread-local
# lookup (the common case costs one list read).
_MODES_ENTERED = [0]
_MODES_LOCK = threading.Lock()
_AUTOGRAD_HOOK: list = [None]  # [hook(op, args, kwargs)], installed by ember-autograd
_SYNC_HOOK: list = [None]  # [hook(tensor or None, reason)]: see "Pending work" above
_EAGER_REGION_HOOK: list = [None]  # [hook(reason) -> context manager]: see eager_region
# Becomes True once a sparse tensor exists (see "Layouts" above): from then on calls take the Python
# dispatcher, which routes by layout (the native fast path steps aside).
_LAYOUT_DISPATCH = [False]
_SUBCLASS_DISPATCH = [False]  # becomes True once a Tensor subclass defines __torch_dispatch__
# Autocast (autocast.py): threads with autocast enabled. While 0 (the common case) an op call
# pays one list read; otherwise ops carrying a cast policy (``Op.amp``) go to _AUTOCAST_CALL.
_AUTOCAST_ON = [0]
_AUTOCAST_CALL: list = [None]
_AUTOCAST_STATE = None  # autocast.STATE (thread-local; .active is False inside an autocast op)

_Tensor = None  # set by tensor.py (avoids an import cycle)
# [bind(op)]: installed by bindings.generate; binds the public forms of an op declared later.
_BIND_HOOK: list = [None]
_GRAD_STATE = grad_mode.STATE
_INFERENCE_USED = grad_mode.INFERENCE_USED


class Op(_C.OpBase):
    """One operator, its record (docs/adding-an-op.md). ``ember.ops.<name>`` is the Op; calling it
    dispatches.

    Calling an Op enters ``_C.OpBase`` (csrc/common/fast_dispatch.cpp): for an op marked fast
    (``_set_fast``) whose call needs none of the layers below (no autocast, mode, subclass,
    autograd, sparse layout; plain CPU tensors of a dtype computed as itself), the native code
    runs the kernel; every other call reaches ``_dispatch``, the reference path. As a class
    attribute an Op binds like a method (``Tensor.__add__ = add_op``). Subclasses must not define
    a Python ``__call__`` or ``__get__`` (the native call path would be bypassed).

    Besides the schema, tags, meta and kernels, the record declares:

    - ``variants``: the public forms generated from the op (optable.py): ``function``
      (``ember.<name>``), ``method`` (``Tensor.<name>``), ``inplace`` (``Tensor.<name>_``), ``out``
      (an ``out=`` keyword); empty for an internal op (a public function in Python wraps it);
    - ``aliases`` (other public names of the same forms) and ``namespaces`` (``{"special": names}``);
    - ``amp``: the autocast policy; ``differentiable``: False for ops autograd never records
      (integer results, factories);
    - ``writes``: the arguments the op mutates: those the schema marks ``(a!)``, plus writes it
      makes without returning them (``native_batch_norm``'s running statistics).
    """

    __slots__ = ("name", "schema", "tags", "meta", "kernels", "amp", "variants", "aliases", "namespaces",
                 "differentiable", "writes", "inplace", "__dict__", "__weakref__")

    def __init__(self, name: str, schema: str, tags: tuple, meta: Callable | None):
        self.name = name
        self.schema = schema
        self.tags = frozenset(tags)
        self.inplace = "inplace" in self.tags  # read by the dispatcher on every call in grad mode
        self.meta = meta
        self.kernels: dict[str, Callable] = {}
        self.amp: str | None = None  # autocast policy: "lower", "fp32", "promote" or None
        self.variants: frozenset = frozenset()
        self.aliases: tuple = ()
        self.namespaces: dict = {}
        self.differentiable = True
        self.writes: tuple = _written_arguments(schema)
        self.__doc__ = schema

    def __repr__(self) -> str:
        return f"ember.ops.{self.name}"

    # An op bound as a function or a method (``Tensor.abs_``) is named like one: programs that
    # wrap every callable of ``torch.Tensor`` read ``fn.__name__`` (the memory-format tutorial).
    @property
    def __name__(self) -> str:
        return self.name

    @property
    def default(self) -> Op:
        """``torch.ops.<namespace>.<op>.default``: an ember op has one overload, itself."""
        return self

    def kernel(self, device_type: str):
        """Decorator registering the kernel for one device type."""

        def register(fn):
            self.kernels[device_type] = fn
            return fn

        return register

    def _dispatch(self, *args, **kwargs):
        """The Python dispatcher (the module docstring's order); the native call falls back here."""
        if _INFERENCE_USED[0] and self.writes and not _GRAD_STATE.inference:
            _check_inference_writes(self, args, kwargs)
        if _AUTOCAST_ON[0] and self.amp is not None and _AUTOCAST_STATE.active:
            return _AUTOCAST_CALL[0](self, args, kwargs)
        if _MODES_ENTERED[0] and _MODES.stack:
            return _call_top_mode(self, args, kwargs)
        if _SUBCLASS_DISPATCH[0]:
            handled, result = _try_subclass_dispatch(self, args, kwargs)
            if handled:
                return result
        if _GRAD_STATE.grad_enabled:
            hook = _AUTOGRAD_HOOK[0]
            if hook is not None and (_any_requires_grad(args, kwargs) or (self.inplace and _writes_grad_view(args))):
                return hook(self, args, kwargs)
        # call_kernel's common case inlined (a plain Tensor first names the device): this runs for
        # every op, so each saved call counts.
        if args and not _LAYOUT_DISPATCH[0]:
            a = args[0]
            if type(a) is _Tensor:
                kernel = self.kernels.get(a._device.type)
                if kernel is not None:
                    try:
                        return kernel(*args, **kwargs)
                    except AttributeError:
                        _raise_for_non_tensor(self, args)
                        raise
        return self.call_kernel(args, kwargs)

    def call_kernel(self, args, kwargs):
        """Runs the device kernel directly (below modes and autograd)."""
        if _LAYOUT_DISPATCH[0]:
            layout = _sparse_layout_of(args, kwargs)
            if layout is not None:
                kernel = self.kernels.get(layout.dispatch_key)
                if kernel is None:
                    raise NotImplementedError(
                        f"Could not run 'aten::{self.name}' with arguments from the '{layout.backend}' backend. "
                        f"This could be because the operator doesn't exist for this backend ({layout})."
                    )
                return kernel(*args, **kwargs)
        if self._fast and not kwargs and not _MODES_ENTERED[0]:
            # The native fast path's kernel (the autograd layer records around it). Not while a mode
            # is entered: a tracer's kernels see every call (compile's recorder relies on it).
            out = _NATIVE_KERNEL(self, args)
            if out is not None:
                return out
        if args:
            a = args[0]
            if type(a) is _Tensor:
                kernel = self.kernels.get(a._device.type)
                if kernel is not None:
                    return kernel(*args, **kwargs)
        device_type = _device_type_of(args, kwargs)
        kernel = self.kernels.get(device_type)
        if kernel is None and device_type not in ("cpu", "meta"):
            # A factory naming a plugin device before any tensor lives there (``randn(3,
            # device="cuda")`` first): loading the device's plugin registers its kernels.
            get_backend(device_type)
            kernel = self.kernels.get(device_type)
        if kernel is None:
            raise NotImplementedError(
                f"ember.ops.{self.name} has no kernel for device '{device_type}'"
            )
        try:
            return kernel(*args, **kwargs)
        except AttributeError:
            _raise_for_non_tensor(self, args)
            raise


def _raise_for_non_tensor(op: Op, args) -> None:
    """PyTorch's TypeError for a positional argument its schema types as Tensor that is not one (a
    list passed to F.relu), raised when a kernel fails reading it; no cost on the normal path."""
    from .optable import Signature

    for position, (param, value) in enumerate(zip(Signature.parse(op.schema).params, args), 1):
        if param.type.split("(", 1)[0] == "Tensor" and not isinstance(value, _Tensor) and not (
                param.optional and value is None):
            name = "input" if param.name == "self" else param.name
            raise TypeError(f"{op.name}(): argument '{name}' (position {position}) must be Tensor, "
                            f"not {type(value).__name__}") from None


def _sparse_layout_of(args, kwargs):
    """The layout of the first non-strided tensor argument, or None when all are strided."""
    Tensor = _Tensor
    for a in args:
        if isinstance(a, Tensor):
            if a._layout.dispatch_key is not None:
                return a._layout
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor) and b._layout.dispatch_key is not None:
                    return b._layout
    for a in kwargs.values():
        if isinstance(a, Tensor) and a._layout.dispatch_key is not None:
            return a._layout
    return None


_C._op_setup(Op, Op._dispatch)
_NATIVE_KERNEL = _C._native_kernel


def _device_type_of(args, kwargs) -> str:
    Tensor = _Tensor
    for a in args:
        if isinstance(a, Tensor):
            return a._device.type
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor):
                    return b._device.type
    for a in kwargs.values():
        if isinstance(a, Tensor):
            return a._device.type
    dev = kwargs.get("device")
    if dev is not None:
        return to_device(dev).type
    return "cpu"


def _iter_tensors(args, kwargs):
    Tensor = _Tensor
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor):
                    yield b
    for a in kwargs.values():
        if isinstance(a, Tensor):
            yield a


def _any_requires_grad(args, kwargs) -> bool:
    # _iter_tensors unrolled: a generator costs more than the loop itself on this hot path. A view
    # whose base requires grad requires grad too (one made without recording has no history of its
    # own, Note [Views made without recording]): an op using it is recorded, its edge carrying
    # nothing, as PyTorch's.
    Tensor = _Tensor
    for a in args:
        if isinstance(a, Tensor):
            if a._requires_grad or (a._base is not None and a._base._requires_grad):
                return True
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor) and (b._requires_grad or (b._base is not None and b._base._requires_grad)):
                    return True
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, Tensor) and (a._requires_grad or (a._base is not None and a._base._requires_grad)):
                return True
    return False


def _writes_grad_view(args) -> bool:
    """Whether an in-place op (no argument requiring grad) writes into a view of a tensor that
    requires grad: a view made without recording (no_grad, inference_mode), which autograd's
    in-place check refuses in grad mode (Note [Views made without recording])."""
    a = args[0] if args else None
    if not isinstance(a, _Tensor):
        return False
    base = a._base
    return base is not None and base._requires_grad


def dispatch_below_modes(op: Op, args, kwargs):
    """Runs ``op`` from the layer under the modes (subclasses, autograd, kernel), for a mode that
    stays entered while the op runs so that it sees the ops the op calls (ember.profiler).
    Follows Op._dispatch after its mode check."""
    if _SUBCLASS_DISPATCH[0]:
        handled, result = _try_subclass_dispatch(op, args, kwargs)
        if handled:
            return result
    if _GRAD_STATE.grad_enabled:
        hook = _AUTOGRAD_HOOK[0]
        if hook is not None and (_any_requires_grad(args, kwargs)
                                 or ("inplace" in op.tags and _writes_grad_view(args))):
            return hook(op, args, kwargs)
    return op.call_kernel(args, kwargs)


def _call_top_mode(op: Op, args, kwargs):
    stack = _MODES.stack
    mode = stack.pop()
    try:
        # A mode that never reads ``types`` (a tracer) sets wants_types = False: saves a pass.
        types = tuple({type(t) for t in _iter_tensors(args, kwargs)}) if mode.wants_types else ()
        return mode.__torch_dispatch__(op, types, args, kwargs)
    finally:
        stack.append(mode)


def _try_subclass_dispatch(op: Op, args, kwargs):
    # Runs for every op once any subclass defines __torch_dispatch__ (ember.func's BatchedTensor):
    # plain tensors are skipped by an exact type check, without a generator or an attribute lookup.
    Tensor = _Tensor
    for a in args:
        ta = type(a)
        if ta is Tensor:
            continue
        if ta is list or ta is tuple:
            for b in a:
                if type(b) is not Tensor and isinstance(b, Tensor):
                    handled, result = _subclass_handler(b, op, args, kwargs)
                    if handled:
                        return True, result
        elif isinstance(a, Tensor):
            handled, result = _subclass_handler(a, op, args, kwargs)
            if handled:
                return True, result
    if kwargs:
        for a in kwargs.values():
            if type(a) is not Tensor and isinstance(a, Tensor):
                handled, result = _subclass_handler(a, op, args, kwargs)
                if handled:
                    return True, result
    return False, None


def _subclass_handler(t, op: Op, args, kwargs):
    handler = getattr(type(t), "__torch_dispatch__", None)
    if handler is None:
        return False, None
    types = tuple({type(x) for x in _iter_tensors(args, kwargs)})
    result = handler(op, types, args, kwargs)
    if result is NotImplemented:
        return False, None
    return True, result


class DispatchMode:
    """Base class for dispatch modes: subclasses override ``__torch_dispatch__``.

    Inside ``with mode:`` every op call reaches ``mode.__torch_dispatch__(op, types, args,
    kwargs)``; calling ``op(*args, **kwargs)`` there continues to the next layer.
    """

    wants_types = True  # False: __torch_dispatch__ gets types=() (it does not read them)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        with _MODES_LOCK:
            _MODES_ENTERED[0] += 1
        _MODES.stack.append(self)
        return self

    def __exit__(self, *exc):
        popped = _MODES.stack.pop()
        with _MODES_LOCK:
            _MODES_ENTERED[0] -= 1
        if popped is not self:
            raise RuntimeError("dispatch modes exited out of order")
        return False


def active_modes() -> tuple:
    return tuple(_MODES.stack)


def set_autograd_hook(hook: Callable | None) -> None:
    """Installs the function that handles ops needing autograd (ember-autograd calls this)."""
    _AUTOGRAD_HOOK[0] = hook


def set_sync_hook(hook: Callable | None) -> None:
    """Installs ``hook(tensor, reason)``, called before data or random state is read (module
    docstring, "Pending work"); ``tensor`` is the tensor read, or None for generator state."""
    _SYNC_HOOK[0] = hook


class _NoRegion:
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_NO_REGION = _NoRegion()


def set_eager_region_hook(hook: Callable | None) -> None:
    """Installs ``hook(reason) -> context manager`` behind ``eager_region`` (a lazy tracer's)."""
    _EAGER_REGION_HOOK[0] = hook


def eager_region(reason: str):
    """A context in which ops run for real even under a lazy tracer: pending work runs first,
    and the tracer passes ops through until the context exits. Code that builds autograd
    history by hand (``autograd.Function.apply``) runs inside one."""
    hook = _EAGER_REGION_HOOK[0]
    return _NO_REGION if hook is None else hook(reason)


def sync_pending(tensor=None, reason: str = "data read") -> None:
    """Makes pending (recorded, not yet run) work visible before ``tensor``'s data is read."""
    hook = _SYNC_HOOK[0]
    if hook is not None:
        hook(tensor, reason)


def get_autograd_hook():
    return _AUTOGRAD_HOOK[0]


_WRITTEN_POSITIONS: dict = {}  # op name -> positions of its written arguments


def _written_positions(op: Op) -> tuple:
    positions = _WRITTEN_POSITIONS.get(op.name)
    if positions is None:
        params = op.schema.split("(", 1)[1].rsplit("->", 1)[0].split(",")
        names = [p.rsplit(" ", 1)[-1].split("=", 1)[0].strip(") ") for p in params]
        names = names[:names.index("*")] if "*" in names else names  # keyword-only: not positional
        positions = _WRITTEN_POSITIONS[op.name] = tuple(i for i, n in enumerate(names) if n in op.writes)
    return positions


def _check_inference_writes(op: Op, args, kwargs) -> None:
    """PyTorch's error for an in-place write to an inference tensor outside inference mode (runs
    only once some thread entered inference mode: until then no inference tensor exists)."""
    written = [args[i] for i in _written_positions(op) if i < len(args)]
    written += [kwargs[name] for name in op.writes if name in kwargs]
    for t in written:
        if isinstance(t, _Tensor) and getattr(t._storage, "inference", False):
            raise RuntimeError(grad_mode.INFERENCE_INPLACE)


def _written_arguments(schema: str) -> tuple:
    """The arguments a schema marks as written (``Tensor(a!) self``)."""
    args = schema.split("(", 1)[1].rsplit("->", 1)[0]
    return tuple(part.rsplit(" ", 1)[-1].split("=", 1)[0].strip(")") for part in args.split(",") if "!)" in part)


def define(schema: str, tags: tuple = (), meta: Callable | None = None, *, variants=(), aliases=(),
           namespaces: dict | None = None, amp: str | None = None, differentiable: bool = True,
           writes=()) -> Op:
    """Declares an op from its schema string ``name(args) -> returns`` (the record's other fields:
    the Op docstring). Ops declared with ``variants`` get their public forms when ember's API is
    generated (api.py), or at once when declared after that (a plugin's op)."""
    name = schema.split("(", 1)[0].strip()
    if name in OPS:
        raise ValueError(f"op {name} is declared twice")
    op = Op(name, schema, tags, meta)
    op.variants = frozenset(variants.split() if isinstance(variants, str) else variants)
    op.aliases = tuple(aliases)
    op.namespaces = dict(namespaces or {})
    op.amp = amp
    op.differentiable = differentiable
    op.writes = tuple(dict.fromkeys(op.writes + tuple(writes)))
    OPS[name] = op
    if op.variants and _BIND_HOOK[0] is not None:
        _BIND_HOOK[0](op)
    return op
