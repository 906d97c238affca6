"""Backward graph objects: ``Node`` (a tensor's ``grad_fn``), ``AccumulateGrad`` and saved tensors.

Ownership follows PyTorch so that a graph dies with its outputs: an output holds its
``grad_fn`` strongly, a node holds its ``next_functions`` (towards the inputs) and its saved
tensors, and nothing points back from a node to the tensors it produced. A saved *output*
is kept as a bare alias of its storage (no ``grad_fn``) and gets its node back when unpacked,
like PyTorch's ``SavedVariable``; leaves hold their ``AccumulateGrad`` only weakly.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import NamedTuple

from ember import _C
from ember._src.grad_mode import INFERENCE_SAVED
from ember._src.grad_mode import INFERENCE_USED as _INFERENCE_USED
from ember._src.grad_mode import STATE as _GRAD_STATE
from ember._src.layouts import strided
from ember._src.tensor import Tensor, copy_layout, make_tensor

__all__ = [
    "Node",
    "AccumulateGrad",
    "RemovableHandle",
    "SavedTensor",
    "AutogradMeta",
    "GradientEdge",
    "get_gradient_edge",
    "saved_tensors_hooks",
    "save_on_cpu",
    "disable_saved_tensors_hooks",
    "increment_version",
    "register_multi_grad_hook",
    "set_warn_on_accumulate_grad_stream_mismatch",
]

_SEQ = itertools.count()
_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if "
    "you need to access saved tensors after calling backward."
)


class AutogradMeta:
    """Per-tensor autograd state kept in ``Tensor._autograd_meta`` (created on first need).

    ``output_nr``: which output of ``grad_fn`` the tensor is; ``hooks``: tensor hooks of a leaf
    (a non-leaf's live on its ``grad_fn``); ``grad_acc``: weak reference to the leaf's
    ``AccumulateGrad``. Other autograd features (forward-mode tangents) may add attributes.
    """

    __slots__ = ("output_nr", "retains_grad", "hooks", "post_acc_hooks", "grad_acc", "__dict__")

    def __init__(self, output_nr: int = 0):
        self.output_nr = output_nr
        self.retains_grad = False
        self.hooks = None
        self.post_acc_hooks = None
        self.grad_acc = None


def get_meta(t: Tensor) -> AutogradMeta:
    meta = t._autograd_meta
    if meta is None:
        meta = t._autograd_meta = AutogradMeta()
    return meta


def output_nr(t: Tensor) -> int:
    meta = t._autograd_meta
    return 0 if meta is None else meta.output_nr


def set_history(t: Tensor, node: Node, nr: int) -> None:
    t.grad_fn = node
    t._requires_grad = True
    meta = t._autograd_meta
    if meta is None:
        if nr:
            t._autograd_meta = AutogradMeta(nr)
    else:
        meta.output_nr = nr
        if meta.retains_grad:  # an in-place op rebased a tensor that retains its grad: follow it
            if node._retained is None:
                node._retained = {}
            node._retained[nr] = weakref.ref(t)
            node._hooked = True


class RemovableHandle:
    """Returned by every ``register_*hook``; ``remove()`` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks_dict: dict, *, extra_dict=None):
        self.id = next(RemovableHandle._ids)
        self._hooks_ref = _ref(hooks_dict)
        # PyTorch's extra_dict: other dicts (one, or a list) keyed by the same id, cleared by remove() too.
        extra = [] if extra_dict is None else [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict)
        self._extra_refs = tuple(_ref(d) for d in extra)

    def remove(self) -> None:
        for ref in (self._hooks_ref, *self._extra_refs):
            hooks = ref()
            if hooks is not None:
                hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(dict):
    """A dict that can be referenced weakly (plain dicts cannot)."""

    __slots__ = ("__weakref__",)


def _weakrefable(obj) -> bool:
    return isinstance(obj, _HookDict)


def _ref(hooks):
    return weakref.ref(hooks) if _weakrefable(hooks) else (lambda: hooks)


def add_hook(hooks: _HookDict, fn) -> RemovableHandle:
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class Node(_C.AutogradNode):
    """A backward function: ``grad_fn`` of a tensor computed by a differentiable op.

    ``apply(grads)`` maps the gradients of the node's outputs to the gradients of its inputs,
    one per entry of ``next_functions`` (``(node, output_nr)`` pairs; ``(None, 0)`` where an
    input needs no gradient).
    """

    # The slots live in the C base ``_C.AutogradNode`` (no per-node dict; the native fast path
    # builds OpNodes without running Python): ``_next, _num_outputs, _pre_hooks, _post_hooks,
    # _tensor_hooks, _retained, _metadata, _released, _hooked, _seq`` and a weak-reference slot,
    # plus OpNode's. ``_tensor_hooks``: {output_nr: hooks} of non-leaf outputs; ``_retained``:
    # {output_nr: weakref} for retain_grad(); ``_hooked``: True once either is set (the engine
    # checks only that).
    __slots__ = ()
    _custom_function = False  # True for the nodes of autograd.Function subclasses (function.py)

    def __init__(self, next_edges: tuple = (), num_outputs: int = 1):
        self._seq = next(_SEQ)
        self._next = next_edges
        self._num_outputs = num_outputs
        self._pre_hooks = self._post_hooks = self._tensor_hooks = self._retained = self._metadata = None
        self._released = self._hooked = False

    def name(self) -> str:
        return type(self).__name__

    @property
    def next_functions(self) -> tuple:
        return self._next

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def _sequence_nr(self) -> int:
        return self._seq

    def register_hook(self, fn) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` runs after the node; it may return new ``grad_inputs``."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        return add_hook(self._post_hooks, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """``fn(grad_outputs)`` runs before the node; it may return new ``grad_outputs``."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return add_hook(self._pre_hooks, fn)

    def _register_tensor_hook(self, nr: int, fn) -> RemovableHandle:
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        hooks = self._tensor_hooks.get(nr)
        if hooks is None:
            hooks = self._tensor_hooks[nr] = _HookDict()
        self._hooked = True
        return add_hook(hooks, fn)

    def _tensor_pre_hooks(self, nr: int):
        hooks = self._tensor_hooks
        return hooks.get(nr) if hooks else None

    def _retain_target(self, nr: int):
        ref = self._retained.get(nr) if self._retained else None
        return None if ref is None else ref()

    def __call__(self, *grads):
        return self.apply(grads)

    def apply(self, grads: tuple):
        raise NotImplementedError

    def _release(self) -> None:
        """Drops saved tensors once the node ran (unless the graph is retained)."""
        self._released = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """The node of a leaf: adds the incoming gradient into ``variable.grad``."""

    __slots__ = ("variable",)

    def __init__(self, variable: Tensor):
        super().__init__()
        self.variable = variable
        self._seq = 1 << 62  # runs as soon as it is ready (highest priority in the engine)
        # The leaf's hooks live on the tensor (meta.hooks): the engine looks them up only once it has had
        # one (register_hook sets _hooked on its accumulator, here for an accumulator made afterwards).
        meta = variable._autograd_meta
        self._hooked = meta is not None and meta.hooks is not None

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"  # PyTorch's C++ name for its native nodes

    def _tensor_pre_hooks(self, nr: int):
        meta = self.variable._autograd_meta
        return None if meta is None else meta.hooks

    def apply(self, grads: tuple):
        if grads[0] is not None:
            # Whether the engine's input buffer holds the gradient's only reference, asked before any
            # frame binds it: a count from inside the callee would include one reference per call level
            # when calls are not inlined (under a PEP 523 frame evaluator, such as torch.compile's).
            owned = type(grads) is list and _C._only_held_by(grads, 0)
            _ACCUMULATE[0](self.variable, grads[0], owned)
            meta = self.variable._autograd_meta
            if meta is not None and meta.post_acc_hooks:
                for hook in list(meta.post_acc_hooks.values()):
                    if hook(self.variable) is not None:
                        raise RuntimeError("Tensor post accumulate grad hooks should return None.")
        return ()


# _engine.accumulate_grad (set by _engine, which imports this module: no import statement per call).
_ACCUMULATE: list = [None]


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf's ``AccumulateGrad``, shared by every graph that uses the leaf while one is alive."""
    meta = get_meta(t)
    acc = meta.grad_acc() if meta.grad_acc is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        meta.grad_acc = weakref.ref(acc)
    return acc


class GradientEdge(NamedTuple):
    """Where a tensor's gradient enters the graph: an input of ``node`` (its ``output_nr``-th output)."""

    node: Node | None
    output_nr: int


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """``(node, output_nr)`` through which gradient reaches ``tensor``; ``(None, 0)`` if none."""
    fn = tensor.grad_fn
    if fn is not None:
        return GradientEdge(fn, output_nr(tensor))
    if tensor._requires_grad:
        return GradientEdge(grad_accumulator(tensor), 0)
    return GradientEdge(None, 0)


class _SavedHooks(threading.local):
    """(pack, unpack) pairs of the active ``saved_tensors_hooks`` contexts, innermost last. Per
    thread, as in PyTorch: hooks entered in one thread never pack another thread's tensors."""

    def __init__(self):
        self.stack: list = []


_SAVED_HOOKS = _SavedHooks()
# Contexts entered and not yet exited, over all threads: while 0, saving skips the
# thread-local lookup.
_SAVED_HOOKS_ENTERED = [0]
_SAVED_HOOKS_LOCK = threading.Lock()


def _push_saved_hooks(pair: tuple) -> None:
    with _SAVED_HOOKS_LOCK:
        _SAVED_HOOKS_ENTERED[0] += 1
    _SAVED_HOOKS.stack.append(pair)


def _pop_saved_hooks() -> None:
    _SAVED_HOOKS.stack.pop()
    with _SAVED_HOOKS_LOCK:
        _SAVED_HOOKS_ENTERED[0] -= 1


class saved_tensors_hooks:  # noqa: N801
    """Inside this context, tensors saved for backward go through ``pack_hook(tensor)`` when saved
    and ``unpack_hook(packed)`` when backward needs them (e.g. to offload or recompute them)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _push_saved_hooks((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _pop_saved_hooks()
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Tensors saved for backward are kept as CPU copies and moved back to their device when backward
    needs them (the saved-tensors tutorial's offloading); with ``pin_memory`` the copy is pinned where
    the device module supports it."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        def pack_to_cpu(tensor):
            return tensor.device, tensor.cpu() if not pin_memory else tensor.detach().to("cpu", copy=True)

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


class disable_saved_tensors_hooks:  # noqa: N801
    """Raises if saved-tensor hooks are used inside the block (as PyTorch's context of that name)."""

    def __init__(self, error_message: str):
        self.error_message = error_message

    def __enter__(self):
        def refuse(*args):
            raise RuntimeError(self.error_message)

        _push_saved_hooks((refuse, refuse))
        return self

    def __exit__(self, *exc):
        _pop_saved_hooks()
        return False


def increment_version(tensor) -> None:
    """Bumps the version counter of a tensor (or of each tensor of an iterable), as PyTorch's; an
    inference tensor has no counter and is left alone."""
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        if not (_INFERENCE_USED[0] and t.is_inference()):
            t._bump_version()


def _forward_name(node_name: str) -> str:
    """The function a node's name stands for in PyTorch's messages: MulBackward0 -> Mul."""
    head, sep, tail = node_name.rpartition("Backward")
    return head if sep and (not tail or tail.isdigit()) else node_name


class SavedTensor(_C.SavedTensorBase):
    """A tensor saved for backward, with the version it had when saved.

    Leaves that require grad are kept as they are; other inputs as an alias holding the
    ``grad_fn`` they had when saved. Outputs of the saving node are kept as a bare alias (no
    ``grad_fn``) so the node does not keep itself alive; ``unpack(node)`` rebuilds them.
    The slots (``data, version, is_output, nr, requires_grad, unpack_hook, origin``) live in the
    C base, so the native fast path saves inputs without running Python.
    """

    __slots__ = ()

    def __init__(self, t: Tensor, is_output: bool, nr: int = 0):
        if _INFERENCE_USED[0] and t._storage.inference and not _GRAD_STATE.inference:
            raise RuntimeError(INFERENCE_SAVED)
        self.version = t._version_value
        self.is_output = is_output
        self.nr = nr
        self.requires_grad = t._requires_grad
        self.unpack_hook = None
        if _SAVED_HOOKS_ENTERED[0] and _SAVED_HOOKS.stack:
            self.data = _run_pack_hook(t, self)
            # What the unpacked tensor must be reconnected to (PyTorch restores it the same way).
            self.origin = None if is_output or not t._requires_grad else (t.grad_fn or t, output_nr(t))
            return
        fn = t.grad_fn
        if is_output or fn is not None or not t._requires_grad:
            # A bare alias: the tensor object itself may later be rebased by an in-place op onto a
            # node that reaches this one (a cycle). Non-outputs keep the grad_fn they had when saved.
            data = _alias(t)
            if not is_output and fn is not None:
                data.grad_fn = fn
                data._requires_grad = True
                meta = t._autograd_meta
                if meta is not None and meta.output_nr:
                    data._autograd_meta = AutogradMeta(meta.output_nr)
            self.data = data
        else:
            self.data = t  # a leaf that requires grad: its identity matters (AccumulateGrad, .grad)

    def unpack(self, node: Node | None = None) -> Tensor:
        data = self.data
        if data is None:
            raise RuntimeError(_FREED)
        if self.unpack_hook is not None:
            return self._unpack_hooked(node)
        if data._version_value != self.version:
            raise RuntimeError(self._version_message(node))
        if not self.is_output:
            return data
        out = _alias(data)
        if self.requires_grad and node is not None:
            set_history(out, node, self.nr)
        return out

    def _unpack_hooked(self, node) -> Tensor:
        t = self.unpack_hook(self.data)
        if not isinstance(t, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(t).__name__}")
        if t.grad_fn is not None or (t._requires_grad and not self.is_output):
            return t
        if self.is_output:
            if self.requires_grad and node is not None:
                t = make_tensor(t._storage, t._shape, t._stride, t._offset, t.dtype, t._device)
                set_history(t, node, self.nr)
            return t
        if self.origin is not None:
            src, nr = self.origin
            t = make_tensor(t._storage, t._shape, t._stride, t._offset, t.dtype, t._device)
            if isinstance(src, Node):
                set_history(t, src, nr)
            else:  # a leaf: route gradients of the unpacked tensor into the leaf's accumulator
                t._requires_grad = True
                get_meta(t).grad_acc = weakref.ref(grad_accumulator(src))
        return t

    def _version_message(self, node) -> str:
        from ember._src.ops._common import type_name

        data = self.data
        desc = f"[torch.{type_name(data.dtype)}Tensor {list(data._shape)}]"
        if self.is_output and node is not None:
            desc += f", which is output {self.nr} of {_forward_name(node.name())},"
        elif not self.is_output and data.grad_fn is not None:
            desc += f", which is output {output_nr(data)} of {_forward_name(data.grad_fn.name())},"
        return (
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"{desc} is at version {data._version_value}; expected version {self.version} instead. Hint: enable "
            "anomaly detection to find the operation that failed to compute its gradient, with "
            "torch.autograd.set_detect_anomaly(True, check_nan=False)."
        )

    def free(self) -> None:
        self.data = None


# Set by forward_ad: links an alias to the tensor whose forward-mode tangent (keyed by identity) it
# shares, so that a saved tensor keeps its tangent (forward over reverse: ember.func's hessian).
_COPY_TANGENT: list = [None]


def _alias(t: Tensor) -> Tensor:
    """A bare alias (no history) of ``t``. A wrapper subclass (ember.func's BatchedTensor) names its
    own ``_autograd_alias``: its data lives in the wrapped tensor, not in its storage."""
    if type(t) is not Tensor and getattr(type(t), "_autograd_alias", None) is not None:
        out = type(t)._autograd_alias(t)
    else:
        out = make_tensor(t._storage, t._shape, t._stride, t._offset, t.dtype, t._device)
        _C._share_version_counter(out, t)
        if t._layout is not strided:
            copy_layout(out, t)  # a sparse tensor's data is in its members, not its storage
    copy = _COPY_TANGENT[0]
    if copy is not None:
        copy(t, out)
    return out


def _run_pack_hook(t: Tensor, saved: SavedTensor):
    """Runs the innermost pack hook with hooks off (no recursion) and without recording."""
    from ember._src import grad_mode

    stack = _SAVED_HOOKS.stack
    pack, saved.unpack_hook = stack[-1]
    _SAVED_HOOKS.stack = []
    try:
        with grad_mode.no_grad():
            return pack(t)
    finally:
        _SAVED_HOOKS.stack = stack


def freed_error() -> RuntimeError:
    return RuntimeError(_FREED)


class _MultiHandle:
    """The handle of ``register_multi_grad_hook``: removes the hook from every tensor."""

    def __init__(self, handles):
        self._handles = handles

    def remove(self) -> None:
        for h in self._handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode: str = "all"):
    """``fn`` sees the gradients of several tensors, once per backward run: with ``mode='all'``,
    ``fn(grads)`` (None for a tensor that gets none) once every tensor this run reaches got its
    gradient; with ``mode='any'``, ``fn(grad)`` with the first of them."""
    from . import _engine

    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    state = {"task": 0, "grads": None, "count": 0, "expected": 0}

    def run_id() -> int:
        task = _engine.current_task()
        return 0 if task is None else task.id

    if mode == "any":
        def any_hook(grad):
            task = run_id()
            if state["task"] != task:
                state["task"] = task
                fn(grad)

        return _MultiHandle([t.register_hook(any_hook) for t in tensors if t.requires_grad])

    nodes = [get_gradient_edge(t).node if t.requires_grad else None for t in tensors]
    count: dict = {}  # per backward run: the calls so far, the gradients so far
    buffer: dict = {}
    expected = [0]

    def all_hook(i):
        # PyTorch's bookkeeping, quirks included: the first call of a run counts the tensors whose
        # node the run will execute (a lone root's node it does not), fn runs when that many calls
        # came, and a later call of the same run starts a new count.
        def hook(grad):
            task = run_id()
            n = count.get(task, 0)
            grads = buffer.setdefault(task, [None] * len(tensors))
            count[task] = n + 1
            if n == 0:
                expected[0] = sum(1 for node in nodes if _engine.will_execute(node))
            grads[i] = grad
            if n == expected[0] - 1:
                del count[task], buffer[task]
                fn(grads)

        return hook

    return _MultiHandle([t.register_hook(all_hook(i)) for i, t in enumerate(tensors) if t.requires_grad])


_WARN_ON_ACCUMULATE_GRAD_STREAM_MISMATCH = [True]


def set_warn_on_accumulate_grad_stream_mismatch(enabled: bool) -> None:
    """Whether to warn when a gradient arrives for accumulation on another CUDA stream than the
    one its leaf's accumulator runs on. ember's backward runs on one stream per device, so there is
    no mismatch to warn about; the switch is kept."""
    if not isinstance(enabled, bool):
        raise TypeError(f"set_warn_on_accumulate_grad_stream_mismatch(): argument 'enabled' must be bool, not "
                        f"{type(enabled).__name__}")
    _WARN_ON_ACCUMULATE_GRAD_STREAM_MISMATCH[0] = enabled
