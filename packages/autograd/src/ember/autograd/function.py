"""Custom differentiable functions: ``ember.autograd.Function``.

A subclass defines ``forward`` and ``backward`` as static methods, either
``forward(ctx, *args)`` or ``forward(*args)`` plus ``setup_context(ctx, inputs, output)``,
and is called through ``apply``. The ctx *is* the backward node (a ``<Name>Backward``
instance, as in PyTorch), so what it saves lives exactly as long as the graph.
"""

from __future__ import annotations

import functools

from ember._src import grad_mode
from ember._src.dispatch import _EAGER_REGION_HOOK, eager_region
from ember._src.tensor import Tensor, make_view
from ember.func import _levels

from . import anomaly_mode
from ._engine import fix_grad
from ._recording import check_inplace
from .graph import Node, SavedTensor, freed_error, get_gradient_edge, set_history

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "InplaceFunction", "once_differentiable"]

_STATE = grad_mode.STATE


class FunctionCtx:
    """What ``forward``/``setup_context`` may record for ``backward``."""

    materialize_grads = True
    to_save = ()
    dirty_tensors = ()
    non_differentiable = ()

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        self.saved_for_forward = tensors

    def mark_dirty(self, *args) -> None:
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args) -> None:
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The backward node of one ``Function.apply`` call; also the ``ctx`` its methods get."""

    _forward_cls = None
    _saved = None
    _custom_function = True  # in-place writes into its view outputs are refused (_recording.check_inplace)

    def __init__(self):
        super().__init__()
        self.needs_input_grad = ()
        self._layout = ()
        self._input_meta = []
        self._output_meta = []

    @property
    def saved_tensors(self) -> tuple:
        saved = self._saved
        if saved is None:
            if self._released:
                raise freed_error()
            return tuple(self.to_save)
        return tuple(None if s is None else s.unpack(self) for s in saved)

    saved_variables = saved_tensors

    def apply(self, grads):
        grads = list(grads)
        if self.materialize_grads:
            from ember._src.ops.creation.factories import zeros

            for i, g in enumerate(grads):
                meta = self._output_meta[i]
                if g is None and meta is not None:
                    grads[i] = zeros(meta[0], dtype=meta[1], device=meta[2])
        res = self._forward_cls.backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self._layout)
        if len(res) != n:
            if len(res) > n and all(r is None for r in res[n:]):
                res = res[:n]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of gradients (expected {n}, got {len(res)})"
                )
        out = [None] * len(self._next)
        for i, spec in enumerate(self._layout):
            g = res[i]
            if spec is None:
                if g is not None and not self._is_tensor_arg[i]:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at position {i + 1}, but "
                        "the corresponding forward input was not a Variable"
                    )
                continue
            if g is not None:
                out[spec] = fix_grad(g, self._input_meta[spec], self, i)
        return out

    def maybe_clear_saved_tensors(self) -> None:
        """Frees the saved tensors now, inside ``backward``, unless the backward run in progress
        retains the graph (PyTorch's ``ctx.maybe_clear_saved_tensors``): a backward that has
        taken what it needs lets each value go after its last use instead of at the node's end."""
        from ._engine import current_task

        task = current_task()
        if task is not None and not task.keep_graph:
            self._release()

    def _release(self):
        self._released = True
        if self._saved is not None:
            for s in self._saved:
                if s is not None:
                    s.free()


class FunctionMeta(type):
    """Gives every Function subclass its own backward node class, ``<Name>Backward``."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Base class of custom differentiable operations (see the module docstring)."""

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @staticmethod
    def vjp(ctx, *grad_outputs):
        raise NotImplementedError

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it "
                                  "with forward mode AD.")

    generate_vmap_rule = False

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError("To use autograd.Function with vmap, you must either override the vmap "
                                  "staticmethod or set generate_vmap_rule=True.")

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use new-"
                           "style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @classmethod
    def apply(cls, *args, **kwargs):
        if _EAGER_REGION_HOOK[0] is not None:  # a lazy tracer (ember.compile) lets this call run for real
            with eager_region(f"autograd.Function {cls.__name__}.apply"):
                return cls._apply_now(*args, **kwargs)
        return cls._apply_now(*args, **kwargs)

    @classmethod
    def _apply_now(cls, *args, **kwargs):
        ctx = cls._backward_cls()
        grad_on = _STATE.grad_enabled
        layout, edges, meta, is_tensor = [], [], [], []
        for a in args:
            tensor = isinstance(a, Tensor)
            is_tensor.append(tensor)
            if tensor and a._requires_grad and grad_on:
                layout.append(len(edges))
                edges.append(get_gradient_edge(a))
                meta.append((a._shape, a.dtype))
            else:
                layout.append(None)
                if tensor:
                    edges.append((None, 0))
                    meta.append(None)
        ctx.needs_input_grad = tuple(s is not None for s in layout)
        ctx._layout, ctx._next, ctx._input_meta, ctx._is_tensor_arg = tuple(layout), tuple(edges), meta, is_tensor
        setup_style = cls.setup_context is not Function.setup_context
        if _levels._STACK.levels:
            _check_transformable(cls, setup_style)
        _STATE.grad_enabled = False
        try:
            if setup_style:
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            _STATE.grad_enabled = grad_on
        if not any(ctx.needs_input_grad):
            return outputs
        if anomaly_mode.is_enabled():
            anomaly_mode.store_forward_trace(ctx)
        return _wrap_outputs(ctx, args, outputs)


def _check_transformable(cls, setup_style: bool) -> None:
    """PyTorch's conditions for a Function inside torch.func transforms: the setup_context form,
    and under vmap a vmap staticmethod or generate_vmap_rule. (ember then batches the forward with
    its own rules, as generate_vmap_rule=True would: a vmap staticmethod is not called.)"""
    if not setup_style:
        raise RuntimeError("In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, "
                           "jacrev, ...), it must override the setup_context staticmethod. For more details, please "
                           "see https://pytorch.org/docs/main/notes/extending.func.html")
    if (any(level.kind == "vmap" for level in _levels._STACK.levels) and not cls.generate_vmap_rule
            and cls.vmap is Function.vmap):
        raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it does not have vmap support. Please "
                           "override and implement the vmap staticmethod or set generate_vmap_rule=True. For more "
                           "details, please see https://pytorch.org/docs/main/notes/extending.func.html")


def _wrap_outputs(ctx, args, outputs):
    single = not isinstance(outputs, tuple)
    outs = (outputs,) if single else outputs
    dirty = {id(t) for t in ctx.dirty_tensors}
    nondiff = {id(t) for t in ctx.non_differentiable}
    inputs = {id(a) for a in args if isinstance(a, Tensor)}
    result = []
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            result.append(o)
            continue
        differentiable = id(o) not in nondiff and (o.dtype.is_floating_point or o.dtype.is_complex)
        if id(o) in dirty:
            check_inplace(o)
        elif id(o) in inputs:
            if not differentiable and o._requires_grad:
                # PyTorch returns a detached alias of an input marked non-differentiable (the
                # input itself keeps requiring grad)
                result.append(o.detach())
                continue
            o = make_view(o, o._shape, o._stride, o._offset)  # keep the input's own history intact
        if not differentiable:
            o._requires_grad = False if o.grad_fn is None else o._requires_grad
        else:
            set_history(o, ctx, i)
        result.append(o)
    ctx._num_outputs = len(outs)
    ctx._output_meta = [(o._shape, o.dtype, o._device) if isinstance(o, Tensor) else None for o in result]
    saved = []
    for t in ctx.to_save:
        if t is None:
            saved.append(None)
            continue
        nr = next((j for j, o in enumerate(result) if o is t), None)
        saved.append(SavedTensor(t, nr is not None, nr or 0))
    ctx._saved = tuple(saved)
    ctx.to_save = ()
    return result[0] if single else tuple(result)


class InplaceFunction(Function):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class DelayedError(Node):
    """Stands in for the backward of a ``once_differentiable`` backward: raises if reached."""

    __slots__ = ("_msg",)

    def __init__(self, msg: str, num_outputs: int):
        super().__init__((), num_outputs)
        self._msg = msg

    def apply(self, grads):
        raise RuntimeError(self._msg)


def once_differentiable(fn):
    """Marks a ``backward`` as not differentiable itself: it runs without recording, and trying to
    differentiate its result (``create_graph=True``) raises when that second backward runs."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with grad_mode.no_grad():
            outputs = fn(ctx, *args)
        if not _STATE.grad_enabled:
            return outputs
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        err = DelayedError("trying to differentiate twice a function that was marked with @once_differentiable",
                           len(outs))
        wrapped = []
        for i, o in enumerate(outs):
            if isinstance(o, Tensor):
                o = make_view(o, o._shape, o._stride, o._offset)
                set_history(o, err, i)
            wrapped.append(o)
        return wrapped[0] if single else tuple(wrapped)

    return wrapper
