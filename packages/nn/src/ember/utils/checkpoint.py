"""Activation checkpointing: keep a segment's inputs, recompute its activations in backward.

``use_reentrant=True``: ``checkpoint(fn, *args)`` runs ``fn`` without recording a graph, so
none of its intermediate activations stay alive. One autograd node stands for the whole
segment; its backward re-runs ``fn`` with grad enabled (and the RNG state the forward saw, so
dropout draws the same mask), then backpropagates through that fresh graph into ``.grad``.

``use_reentrant=False`` (PyTorch's recommended variant, built the same way as PyTorch's): ``fn``
runs with grad enabled, so its graph is recorded as usual, but under ``saved_tensors_hooks`` that
keep a handle in place of every tensor an op saves for backward. The first time backward unpacks
one of them, ``fn`` is re-run (same RNG and autocast state) and the tensors it saves, in the same
order, stand in for the dropped ones. The graph is the ordinary one, so ``autograd.grad`` and
``backward(inputs=...)`` see the parameters used inside, and nothing is accumulated into ``.grad``
that the caller did not ask for.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import warnings
from collections import defaultdict

import ember
from ember import Tensor
from ember.autograd import Function
from ember.dispatch import DispatchMode

__all__ = ["CheckpointError", "checkpoint", "checkpoint_sequential", "set_checkpoint_early_stop",
           "check_backward_validity", "detach_variable", "get_device_states", "set_device_states",
           "noop_context_fn", "DefaultDeviceType", "set_checkpoint_debug_enabled", "CheckpointPolicy",
           "SelectiveCheckpointContext", "create_selective_checkpoint_contexts"]


class CheckpointError(RuntimeError):
    """A non-reentrant checkpoint's recomputation did not save what its forward saved."""


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


_checkpoint_debug_enabled: bool | None = None


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
    def forward(ctx, run_function, preserve_rng_state, kwargs, *args):
        ctx.run_function = run_function
        ctx.kwargs = kwargs
        ctx.rng_state = ember.get_rng_state() if preserve_rng_state else None
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_positions])
        with ember.no_grad():
            outputs = run_function(*args, **kwargs)
        ctx.single = not isinstance(outputs, tuple)
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        if not ember.autograd._is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` "
                "parameter to .backward(). To resolve this error, you can either set use_reentrant=False, or call "
                ".backward() without passing the `inputs` argument.")
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
            with ember.enable_grad():
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
        return (None, None, None, *grads)


_DEBUG_TIP = ("\nTip: To see a more detailed error message, either pass `debug=True` to\n"
              "`torch.utils.checkpoint.checkpoint(...)` or wrap the code block\n"
              "with `with torch.utils.checkpoint.set_checkpoint_debug_enabled(True):` to\n"
              "enable checkpoint-debug mode globally.\n")


_EARLY_STOP = [True]


class _StopRecomputation(Exception):
    pass


class set_checkpoint_early_stop:  # noqa: N801
    """Whether a non-reentrant recomputation stops once it has re-saved every tensor the forward
    saved (on by default, as PyTorch's); off, the whole function re-runs and saving more tensors
    than the forward did is an error."""

    def __init__(self, enable: bool):
        self.enable = enable

    def __enter__(self):
        self.prev, _EARLY_STOP[0] = _EARLY_STOP[0], self.enable
        return self

    def __exit__(self, *exc):
        _EARLY_STOP[0] = self.prev
        return False


# the non-reentrant checkpoints running their function (forward or recomputation), innermost last:
# a selective-checkpoint mode reads the saves of the op it runs from the innermost one
_FRAMES = threading.local()


def _active_frames() -> list:
    return _FRAMES.__dict__.setdefault("stack", [])


def _metadata(t: Tensor) -> dict:
    return {"shape": t.shape, "dtype": t.dtype, "device": t.device}


class _Frame:
    """One non-reentrant checkpointed call: what re-running it needs, and the metadata of the
    tensors its forward saved (in order), checked against the recomputation's."""

    def __init__(self, function, args, kwargs, rng_state, autocast, recompute_ctx, check):
        from ember.autograd.graph import SavedTensor

        # the tensor arguments are kept as saved tensors: one modified in place after the forward is
        # reported (with PyTorch's version-counter message) when the recomputation reads it
        self.function, self.kwargs = function, kwargs
        self.args = [SavedTensor(a, False) if isinstance(a, Tensor) else a for a in args]
        self.rng_state, self.autocast, self.recompute_ctx, self.check = rng_state, autocast, recompute_ctx, check
        self.saved: list = []  # metadata of the forward's saved tensors
        self.recomputed: dict = {}
        self.capture: list | None = None  # the tensors saved meanwhile, while a SAC mode runs an op
        self.repack = None  # during the recomputation: what saves a tensor for the original graph

    def pack(self, t: Tensor) -> int:
        self.saved.append(_metadata(t))
        if self.capture is not None:
            self.capture.append(t)
        return len(self.saved) - 1

    def unpack(self, index: int) -> Tensor:
        if index not in self.recomputed:
            self._recompute()
        if index not in self.recomputed:
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
                "If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please "
                "open an issue with details on your use case.")
        return self.recomputed.pop(index)

    def _recompute(self) -> None:
        from ember.autograd.graph import SavedTensor, saved_tensors_hooks

        recomputed: dict = {}

        def pack(t: Tensor) -> None:
            i = len(recomputed)
            if i >= len(self.saved):
                if _EARLY_STOP[0]:
                    raise _StopRecomputation  # everything backward needs is back: the rest is not run
                raise CheckpointError("torch.utils.checkpoint: trying to save more tensors during recomputation "
                                      "than during the original forward pass.\n" + _DEBUG_TIP)
            recomputed[i] = t.detach() if t.requires_grad else t

        args = [a.unpack() if isinstance(a, SavedTensor) else a for a in self.args]
        args = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in args]
        current_rng = ember.get_rng_state() if self.rng_state is not None else None
        self.repack = pack
        _active_frames().append(self)
        try:
            if self.rng_state is not None:
                ember.set_rng_state(self.rng_state)
            enabled, dtype = self.autocast
            with ember.enable_grad(), ember.autocast("cpu", dtype=dtype, enabled=enabled), self.recompute_ctx, \
                    saved_tensors_hooks(pack, lambda _: None):
                self.function(*args, **self.kwargs)
        except _StopRecomputation:
            pass
        finally:
            _active_frames().pop()
            self.repack = None
            if current_rng is not None:
                ember.set_rng_state(current_rng)
        if len(recomputed) != len(self.saved):
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
                f"recomputation.\nNumber of tensors saved during forward: {len(self.saved)}\nNumber of tensors "
                f"saved during recomputation: {len(recomputed)}.\n" + _DEBUG_TIP)
        if self.check:
            different = [(i, meta, _metadata(recomputed[i])) for i, meta in enumerate(self.saved)
                         if meta != _metadata(recomputed[i])]
            if different:
                listing = "".join(f"tensor at position {i}:\nsaved metadata: {a}\nrecomputed metadata: {b}\n"
                                  for i, a, b in different)
                raise CheckpointError("torch.utils.checkpoint: Recomputed values for the following tensors have "
                                      f"different metadata than during the forward pass.\n{listing}.\n" + _DEBUG_TIP)
        self.recomputed = recomputed


def _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, args, kwargs):
    from ember.autograd.graph import saved_tensors_hooks

    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    forward_ctx, recompute_ctx = context_fn() if context_fn is not None else noop_context_fn()
    frame = _Frame(function, args, kwargs, ember.get_rng_state() if preserve_rng_state else None,
                   (ember.is_autocast_enabled("cpu"), ember.get_autocast_dtype("cpu")), recompute_ctx,
                   determinism_check == "default")
    with forward_ctx, saved_tensors_hooks(frame.pack, frame.unpack):
        _active_frames().append(frame)
        try:
            return function(*args, **kwargs)
        finally:
            _active_frames().pop()


def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=None, determinism_check: str = "default",
               debug: bool = False, preserve_rng_state: bool = True, **kwargs):
    """Runs ``function(*args, **kwargs)`` keeping only its inputs; recomputes in backward."""
    if use_reentrant is None:
        warnings.warn("ember.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Passing "
                      "use_reentrant=False, the recommended value, as PyTorch's default will become.", stacklevel=2)
        use_reentrant = False
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if context_fn is not None and use_reentrant:
        raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
    if not ember.is_grad_enabled():
        return function(*args, **kwargs)
    if not use_reentrant:
        return _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, args,
                                             kwargs)
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
    return _CheckpointFunction.apply(function, preserve_rng_state, kwargs, *args)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None, **kwargs):
    """Splits ``functions`` (a Sequential or list) into ``segments`` checkpointed chunks."""
    if isinstance(functions, ember.nn.Sequential):
        functions = list(functions.children())
    n = len(functions)
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


# ---- selective activation checkpointing ------------------------------------------------------------


class SelectiveCheckpointContext:
    """What a selective-checkpoint policy gets besides the op: ``op_output`` (the op has run when the
    policy is asked) and ``is_recompute`` (always False: the policy is asked in the forward only)."""

    def __init__(self, *, is_recompute, op_output=None) -> None:
        self.is_recompute = is_recompute
        self.op_output = op_output


class CheckpointPolicy(enum.Enum):
    """Whether an op's output is kept from the forward (``*_SAVE``) or recomputed in backward
    (``*_RECOMPUTE``); ``MUST_*`` is not to be overridden by a compiler, ``*_CPU_OFFLOAD`` keeps it
    (on the CPU, where ember's tensors already are)."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


def _policy_from_bool(b):
    return CheckpointPolicy.MUST_SAVE if b else CheckpointPolicy.PREFER_RECOMPUTE


_RECOMPUTE = object()
_CONSUMED = object()
_SAC_MISMATCH_MSG = ("This can happen if the operations in the checkpointed region are nondeterministic or depend on "
                     "global state that changed between forward and backward.")


def _sac_ignored(func) -> bool:
    # PyTorch's checkpoint adds detaches of its own, a different number in forward and recomputation
    return getattr(func, "name", None) in ("detach", "detach_")


class _VersionWrapper:
    """A cached output and its version when cached: a later in-place change is an error."""

    def __init__(self, val) -> None:
        self.val = val
        self.version = val._version if isinstance(val, Tensor) else None

    def get_val(self, allow_cache_entry_mutation):
        if self.version is not None and not allow_cache_entry_mutation and self.val._version != self.version:
            raise RuntimeError("Tensor cached during selective activation checkpoint has been mutated")
        return self.val


class _CachedOp:
    """One cached op call: its outputs (detached, with whether each required grad) and, for the
    tensors it saved for backward in the forward, where each came from (an argument, an output,
    or the tensor itself), so that the recomputation saves the same ones without running it."""

    __slots__ = ("outputs", "requires_grad", "saves")

    def __init__(self, out, captured, args, kwargs) -> None:
        from ember.utils._pytree import tree_leaves, tree_map

        arg_leaves = tree_leaves((args, kwargs))
        out_leaves = tree_leaves(out)
        self.outputs = tree_map(lambda x: _VersionWrapper(x.detach() if isinstance(x, Tensor) else x), out)
        self.requires_grad = [isinstance(x, Tensor) and x.requires_grad for x in out_leaves]
        self.saves = []
        for t in captured:
            where = next((("arg", i) for i, a in enumerate(arg_leaves) if a is t), None) or \
                next((("out", j) for j, o in enumerate(out_leaves) if o is t), None)
            self.saves.append(where or ("keep", t.detach()))

    def replay(self, allow_cache_entry_mutation, args, kwargs):
        from ember.utils._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten

        values = tree_map(lambda w: w.get_val(allow_cache_entry_mutation), self.outputs)
        leaves, spec = tree_flatten(values)
        # the recomputation records a graph as the op would (its ops save what they saved in the
        # forward); only those saved tensors are used, never this graph
        leaves = [x.detach().requires_grad_(True) if rg else x for x, rg in zip(leaves, self.requires_grad)]
        frames = _active_frames()
        if frames and frames[-1].repack is not None and self.saves:
            arg_leaves = tree_leaves((args, kwargs))
            for kind, where in self.saves:
                frames[-1].repack(arg_leaves[where] if kind == "arg" else leaves[where] if kind == "out" else where)
        return tree_unflatten(leaves, spec)


class _CachingTorchDispatchMode(DispatchMode):
    """The forward's side of selective checkpointing: asks the policy about each op it ran and
    keeps the outputs of those to save."""

    def __init__(self, policy_fn, storage) -> None:
        self.policy_fn = policy_fn
        self.storage = storage
        self.func_counter: dict = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if _sac_ignored(func):
            return func(*args, **kwargs)
        frames = _active_frames()
        frame = frames[-1] if frames else None
        outer = frame.capture if frame is not None else None
        if frame is not None:
            frame.capture = []
        try:
            out = func(*args, **kwargs)
        finally:
            captured = frame.capture if frame is not None else []
            if frame is not None:
                frame.capture = outer
                if outer is not None:
                    outer.extend(captured)
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        policy = self.policy_fn(SelectiveCheckpointContext(is_recompute=False, op_output=out), func, *args, **kwargs)
        if isinstance(policy, bool):
            policy = _policy_from_bool(policy)
        if policy in (CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_SAVE):
            self.storage[func][idx] = _CachedOp(out, captured, args, kwargs)
        else:
            self.storage[func][idx] = _RECOMPUTE
        return out


class _CachedTorchDispatchMode(DispatchMode):
    """The recomputation's side: ops the forward saved give their kept outputs instead of running."""

    def __init__(self, policy_fn, storage, allow_cache_entry_mutation=False) -> None:
        self.storage = storage
        self.allow_cache_entry_mutation = allow_cache_entry_mutation
        self.func_counter: dict = defaultdict(int)

    def __enter__(self):
        self.func_counter.clear()  # a second backward then meets "backward an extra time"
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if _sac_ignored(func):
            return func(*args, **kwargs)
        idx = self.func_counter[func]
        self.func_counter[func] += 1
        func_storage = self.storage.get(func)
        if func_storage is None:
            raise RuntimeError(f"{_op_str(func)} encountered during backward but not found in storage. "
                               f"{_SAC_MISMATCH_MSG}")
        entry = func_storage.get(idx)
        if entry is None:
            raise RuntimeError(f"{_op_str(func)} invocation index {idx} encountered during backward but not found "
                               f"in storage. {_SAC_MISMATCH_MSG}")
        if entry is _CONSUMED:
            raise RuntimeError("Trying to backward an extra time. You are only allowed to backward once on any region "
                               "computed under selective activation checkpoint.")
        if entry is _RECOMPUTE:
            return func(*args, **kwargs)
        func_storage[idx] = _CONSUMED
        return entry.replay(self.allow_cache_entry_mutation, args, kwargs)


def _op_str(func) -> str:
    name = getattr(func, "name", None)
    return f"aten.{name}.default" if isinstance(name, str) else str(func)


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """The ``context_fn`` pair of selective activation checkpointing: with
    ``checkpoint(fn, ..., use_reentrant=False, context_fn=lambda: create_selective_checkpoint_contexts(p))``
    the outputs of the ops ``p`` saves (``p(ctx, op, *args, **kwargs)`` returns a ``CheckpointPolicy``
    or a bool; a list of ops means ``MUST_SAVE`` for those, ``PREFER_RECOMPUTE`` for the rest) are
    kept from the forward and not recomputed in backward. ``allow_cache_entry_mutation`` lets a
    kept output be changed in place afterwards (an error otherwise)."""
    if isinstance(policy_fn_or_list, list):
        from ember import _ops as aten
        from ember._src.dispatch import Op

        overloads = (Op, aten.OpOverload)  # ember.ops.aten's overloads and ember's own ops
        for op in policy_fn_or_list:
            if not isinstance(op, overloads):
                extra = ("Please update the OpOverloadPacket to a specific OpOverload.For example, if you have "
                         "`torch.ops.aten.mm`, change it to `torch.ops.aten.mm.default`."
                         if isinstance(op, aten.OpOverloadPacket) else "")
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} of type {type(op)}. "
                                 f"{extra}")

        def policy_fn(ctx, op, *args, **kwargs):
            if op in policy_fn_or_list:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    storage: dict = defaultdict(dict)
    return (_CachingTorchDispatchMode(policy_fn, storage),
            _CachedTorchDispatchMode(None, storage, allow_cache_entry_mutation))
