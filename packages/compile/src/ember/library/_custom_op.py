"""``custom_op`` and the ``register_*`` functions (PyTorch's ``torch.library`` high-level API).

``@custom_op("mylib::scale", mutates_args=())`` turns a Python function of tensors into an
ember op ``ember.ops.mylib.scale`` whose schema comes from the function's type hints. The
function is its kernel on every device (or those of ``device_types``); ``register_fake`` gives
the shape/dtype rule that tracing needs; ``register_autograd`` its backward.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ._registry import DEVICE_TYPES, OpEntry, create_op, entry_of
from ._schema import parse_schema, schema_of_function


def _device_types(device_types) -> tuple:
    if device_types is None:
        return (None,)
    if isinstance(device_types, str):
        device_types = (device_types,)
    out = []
    for d in device_types:
        d = str(d).split(":")[0]
        if d not in DEVICE_TYPES:
            raise ValueError(f"unsupported device type {d!r} (ember has {', '.join(DEVICE_TYPES)})")
        out.append(d)
    return tuple(out)


class CustomOpDef:
    """A custom op made by :func:`custom_op`: call it like the function it wraps."""

    def __init__(self, entry: OpEntry, fn: Callable | None):
        self._entry = entry
        self._qualname = entry.qualname
        self._init_fn = fn
        self.__name__ = entry.qualname.split("::")[1]
        self.__doc__ = getattr(fn, "__doc__", None)

    @property
    def _opoverload(self):
        """The ember op (PyTorch's OpOverload)."""
        return self._entry.op

    @property
    def _name(self) -> str:
        return self._qualname

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    def __call__(self, *args, **kwargs):
        return self._entry.op(*self._entry.schema.bind(args, kwargs))

    def register_kernel(self, device_types, fn: Callable | None = None):
        return register_kernel(self, device_types, fn)

    def register_fake(self, fn: Callable | None = None, /):
        return register_fake(self, fn)

    def register_autograd(self, backward: Callable, /, *, setup_context: Callable | None = None) -> None:
        register_autograd(self, backward, setup_context=setup_context)

    def register_vmap(self, func: Callable | None = None, /):
        return register_vmap(self, func)


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: str | Iterable[str],
              device_types=None, schema: str | None = None, tags=None):
    """Wraps ``fn`` into a custom op named ``"namespace::name"`` (PyTorch's ``torch.library.custom_op``).

    Args:
        name: ``"namespace::name"``.
        fn: the implementation (or use as a decorator).
        mutates_args: names of the Tensor arguments ``fn`` writes in place (``()`` for none), or
            ``"unknown"`` (every Tensor argument counts as possibly written).
        device_types: the devices ``fn`` serves (default: all).
        schema: the schema text ``"(Tensor x, float a) -> Tensor"``, instead of type hints.

    Example:
        >>> import ember
        >>> from ember.library import custom_op
        >>> @custom_op("doc::twice", mutates_args=())
        ... def twice(x: ember.Tensor) -> ember.Tensor:
        ...     return x * 2
        >>> twice(ember.ones(2))
        tensor([2., 2.])
    """

    def wrap(func):
        if schema is None:
            fn_schema = schema_of_function(func, mutates_args, name)
        else:
            fn_schema = parse_schema(name + schema if schema.lstrip().startswith("(") else schema, name)
        entry = create_op(name, fn_schema, tuple(tags or ()))
        entry.check_aliasing = True
        for d in _device_types(device_types):
            entry.kernels[d] = func
        return CustomOpDef(entry, func)

    if fn is None:
        return wrap
    return wrap(fn)


def register_kernel(op, device_types, fn: Callable | None = None, /, *, lib=None):
    """Registers ``fn`` as the kernel of ``op`` for ``device_types`` (None: every device)."""
    entry = entry_of(op)

    def register(func):
        for d in _device_types(device_types):
            entry.kernels[d] = func
        return func

    return register if fn is None else register(fn)


def register_fake(op, fn: Callable | None = None, /, *, lib=None, _stacklevel: int = 1):
    """Registers the fake (meta) implementation of ``op``: a function of tensors without data that
    returns empty tensors of the output's shapes and dtypes (what tracing and export run)."""
    entry = entry_of(op)

    def register(func):
        entry.fake = func
        from ember.compiler._op_facts import META_CACHE

        META_CACHE.clear()
        return func

    return register if fn is None else register(fn)


register_meta = register_fake  # the older name


def register_autograd(op, backward: Callable, /, *, setup_context: Callable | None = None, lib=None) -> None:
    """Registers ``backward(ctx, *grads) -> grads per input`` and ``setup_context(ctx, inputs, output)``."""
    entry = entry_of(op)
    if not callable(backward):
        raise TypeError("register_autograd: backward must be a callable")
    entry.backward = backward
    entry.setup_context = setup_context


def register_vmap(op, func: Callable | None = None, /, *, lib=None):
    """Registers ``func(info, in_dims, *args) -> (output, out_dims)``, the batching rule of ``op``."""
    entry = entry_of(op)

    def register(rule):
        def run(ember_op, level, args, kwargs):
            from ember.func.batching import batch_size, unwrap, wrap

            full = entry.schema.bind(args, kwargs)
            values, in_dims = [], []
            for a in full:
                value, batched = unwrap(a, level)
                values.append(value)
                in_dims.append(0 if batched else None)  # batched values carry their batch dim first
            info = VmapInfo(batch_size(level))
            out, out_dims = rule(info, tuple(in_dims), *values)

            def put(o, d):
                if d is None:
                    o = o.unsqueeze(0).expand(info.batch_size, *o.shape)
                elif d != 0:
                    o = o.movedim(d, 0)
                return wrap(o, level)

            if isinstance(out, (tuple, list)):
                dims = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(out)
                return type(out)(put(o, d) for o, d in zip(out, dims))
            return put(out, out_dims)

        entry.vmap = run
        return rule

    return register if func is None else register(func)


class VmapInfo:
    """The ``info`` a vmap rule gets: the batch size and the randomness setting."""

    def __init__(self, batch_size: int, randomness: str = "error"):
        self.batch_size = batch_size
        self.randomness = randomness


def get_kernel(op, device_type: str):
    """The kernel registered for ``device_type`` (PyTorch's ``torch.library.get_kernel``)."""
    return entry_of(op).kernel_for(str(device_type))


def impl_abstract(qualname, func=None, *, lib=None, _stacklevel: int = 1):
    """The former name of :func:`register_fake`; warns (FutureWarning) as PyTorch does."""
    import warnings

    warnings.warn("ember.library.impl_abstract is the old name of ember.library.register_fake, which "
                  "should be used instead", FutureWarning, stacklevel=2)
    return register_fake(qualname, func, lib=lib, _stacklevel=_stacklevel + 1)
