"""Activation checkpointing: keep a segment's inputs, recompute its activations in backward.

``checkpoint(fn, *args)`` runs ``fn`` without recording a graph, so none of its
intermediate activations stay alive. One autograd node stands for the whole segment; its
backward re-runs ``fn`` with grad enabled (and the RNG state the forward saw, so dropout
draws the same mask), then backpropagates through that fresh graph. Both of PyTorch's
variants go through this node; for ``use_reentrant=False`` a private input that requires
grad keeps the node in the graph even when no argument requires grad, so parameters used
inside ``fn`` still receive gradients, as PyTorch's non-reentrant variant guarantees; it is
left out when nothing ``fn`` can reach requires grad (``_may_need_grad``), where PyTorch's
output does not require grad either.
"""

from __future__ import annotations

import contextlib
import functools
import types
import warnings

import ember
from ember import Tensor
from ember.autograd import Function

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "check_backward_validity", "detach_variable",
           "get_device_states", "set_device_states", "noop_context_fn", "set_checkpoint_early_stop",
           "DefaultDeviceType", "set_checkpoint_debug_enabled"]


class CheckpointError(RuntimeError):
    """The recomputation in backward did not reproduce the forward (PyTorch's class)."""


def noop_context_fn():
    """The default ``context_fn``: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs):
    """The tuple with each tensor detached, keeping its ``requires_grad``."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for inp in inputs:
        if not isinstance(inp, Tensor):
            out.append(inp)
            continue
        x = inp.detach()
        x.requires_grad = inp.requires_grad
        out.append(x)
    return tuple(out)


def check_backward_validity(inputs) -> None:
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


def get_device_states(*args):
    """The accelerator devices the tensors in ``args`` live on and their RNG states (none on the CPU)."""
    devices = []
    for arg in args:
        if isinstance(arg, Tensor) and arg.device.type not in ("cpu", "meta") and arg.get_device() not in devices:
            devices.append(arg.get_device())
    states = []
    if devices:
        module = ember.get_device_module(DefaultDeviceType.get_device_type())
        states = [module.get_rng_state(d) for d in devices]
    return devices, states


def set_device_states(devices, states, *, device_type=None) -> None:
    if not devices:
        return
    module = ember.get_device_module(device_type or DefaultDeviceType.get_device_type())
    for device, state in zip(devices, states):
        module.set_rng_state(state, device)


class DefaultDeviceType:
    """The device type whose RNG state checkpointing saves when no argument names one."""

    _default_device_type: str | None = None

    @staticmethod
    def set_device_type(device: str = "cuda") -> None:
        DefaultDeviceType._default_device_type = device

    @staticmethod
    def get_device_type() -> str:
        if not DefaultDeviceType._default_device_type:
            accelerator = ember.accelerator.current_accelerator(True)
            DefaultDeviceType._default_device_type = accelerator.type if accelerator else "cpu"
        return DefaultDeviceType._default_device_type


_enable_checkpoint_early_stop = True
_checkpoint_debug_enabled: bool | None = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Whether non-reentrant checkpoints stop recomputing once every saved tensor is back. ember's
    recomputation always runs the whole function (the flag is kept and restored)."""
    global _enable_checkpoint_early_stop
    prev = _enable_checkpoint_early_stop
    _enable_checkpoint_early_stop = enable
    try:
        yield
    finally:
        _enable_checkpoint_early_stop = prev


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None):
    """Overrides ``checkpoint(debug=...)`` inside the block (None defers to the call's flag)."""
    global _checkpoint_debug_enabled
    prev = _checkpoint_debug_enabled
    _checkpoint_debug_enabled = enabled
    try:
        yield
    finally:
        _checkpoint_debug_enabled = prev


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, kwargs, _anchor, context_fn, *args):
        ctx.run_function = run_function
        ctx.kwargs = kwargs
        forward_context, ctx.recompute_context = context_fn()
        ctx.rng_state = ember.get_rng_state() if preserve_rng_state else None
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_positions])
        with ember.no_grad(), forward_context:
            outputs = run_function(*args, **kwargs)
        ctx.single = not isinstance(outputs, tuple)
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        saved = ctx.saved_tensors
        args = list(ctx.inputs)
        detached = []
        for i, t in zip(ctx.tensor_positions, saved):
            d = t.detach()
            d.requires_grad_(t.requires_grad)
            args[i] = d
            detached.append(d)
        current_rng = ember.get_rng_state() if ctx.rng_state is not None else None
        try:
            if ctx.rng_state is not None:
                ember.set_rng_state(ctx.rng_state)
            with ember.enable_grad(), ctx.recompute_context:
                outputs = ctx.run_function(*args, **ctx.kwargs)
        finally:
            if current_rng is not None:
                ember.set_rng_state(current_rng)
        outputs = (outputs,) if ctx.single else outputs
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            ember.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        grads = [None] * len(args)
        for i, d in zip(ctx.tensor_positions, detached):
            grads[i] = d.grad if d.requires_grad else None
        return (None, None, None, None, None, *grads)


_INERT = (int, float, complex, str, bytes, bool, type(None), type, types.ModuleType, types.BuiltinFunctionType)


def _may_need_grad(function, args, kwargs) -> bool:
    """Whether the checkpointed output may require grad: an argument or a tensor ``function``
    can reach (its module's parameters, its closure, the globals it names) requires grad. The
    non-reentrant output requires grad only then, as PyTorch's (which records ``function`` with
    grad enabled); anything this cannot see through counts as needing grad, so no gradient is lost."""
    if not ember.is_grad_enabled():
        return False
    leaves = [a for a in list(args) + list(kwargs.values())]
    seen: set = set()

    def reaches(obj, depth: int) -> bool:
        if id(obj) in seen or isinstance(obj, _INERT):
            return False
        seen.add(id(obj))
        if isinstance(obj, Tensor):
            return obj.requires_grad
        if isinstance(obj, ember.nn.Module):
            return any(p.requires_grad for p in obj.parameters())
        if depth > 4:
            return True
        if isinstance(obj, (list, tuple, set, frozenset)):
            return any(reaches(o, depth + 1) for o in obj)
        if isinstance(obj, dict):
            return any(reaches(o, depth + 1) for o in obj.values())
        if isinstance(obj, functools.partial):
            return reaches(obj.func, depth + 1) or reaches(obj.args, depth + 1) or reaches(obj.keywords, depth + 1)
        if isinstance(obj, types.MethodType):
            return reaches(obj.__self__, depth + 1) or reaches(obj.__func__, depth + 1)
        if isinstance(obj, types.FunctionType):
            cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
            names = [obj.__globals__[n] for n in obj.__code__.co_names if n in obj.__globals__]
            return any(reaches(o, depth + 1) for o in cells + names + list(obj.__defaults__ or ()))
        return True  # an object this does not know: assume it holds parameters

    return reaches(leaves, 0) or reaches(function, 0)


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # a closure variable not assigned yet
        return False
    return True


def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs):
    """Runs ``function(*args, **kwargs)`` keeping only its inputs; recomputes in backward."""
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Passing "
                      "use_reentrant=False, the recommended value, as PyTorch's default will become.", stacklevel=2)
        use_reentrant = False
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if ((context_fn is not None and context_fn is not noop_context_fn) or debug) and use_reentrant:
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if context_fn is None:
        context_fn = noop_context_fn
    if not ember.is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
    anchor = ember.empty(0, requires_grad=not use_reentrant and _may_need_grad(function, args, kwargs))
    return _CheckpointFunction.apply(function, preserve_rng_state, kwargs, anchor, context_fn, *args)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Splits ``functions`` (a Sequential or list) into ``segments`` checkpointed chunks."""
    if isinstance(functions, ember.nn.Sequential):
        functions = list(functions.children())
    n = len(functions)
    if segments <= 0:
        raise ValueError(f"segments must be positive, got {segments}")
    segment_size = n // segments
    end = -1

    def run(start, stop, fns):
        def forward(x):
            for j in range(start, stop + 1):
                x = fns[j](x)
            return x

        return forward

    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run(start, end, functions), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, n - 1, functions)(input)
