"""BatchedTensor: a tensor that stands for a batch of tensors inside ``vmap`` (functorch's design).

A BatchedTensor wraps a *physical* value whose dim 0 is the batch dim of one vmap level; the
wrapper itself has the *logical* shape (the physical shape without that dim), which is all the
function under ``vmap`` ever sees. The physical value may itself be a BatchedTensor of an outer
(smaller) level: nested ``vmap`` stacks wrappers, innermost level outermost.

Every op reaching a BatchedTensor goes to ``__torch_dispatch__``, which runs the op's batching
rule (``batching.BATCH_RULES``, keyed by op name) at the largest level among the arguments. When
a ``grad`` transform was entered inside this vmap and an argument requires grad, the op is first
recorded on the autograd tape at the logical level (so that its backward runs batched, as in
functorch), with the rule as the kernel.
"""

from __future__ import annotations

from ember import _C
from ember._src import grad_mode
from ember._src.dispatch import DispatchMode
from ember._src.shapes import contiguous_strides
from ember._src.tensor import Tensor, _init_fields
from ember._src.torch_function import _disabled_torch_function_impl
from ember.autograd._recording import record

from . import _levels

_GRAD = grad_mode.STATE

ITEM_ERROR = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling "
              ".item() on a Tensor, please try to rewrite what you're doing with other operations. If error is "
              "occurring somewhere inside PyTorch internals, please file a bug report.")
CONTROL_FLOW_ERROR = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
                      "flow. We don't support that yet, please file an issue at "
                      "https://github.com/pytorch/pytorch/issues .")


class BatchedTensor(Tensor):
    """The logical view of a physical tensor batched (along its dim 0) at one vmap level."""

    __torch_function__ = _disabled_torch_function_impl  # not dispatched on (ember.overrides)

    # No slots of its own: ``_value`` and ``_level`` live in the instance dict, so a fresh plain
    # tensor filled by a random op under randomness="different" can become batched in place.
    __slots__ = ()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        level = top_level(args, kwargs)
        _levels.vmap_level(level)  # raises for a BatchedTensor that outlived its vmap call
        if _GRAD.grad_enabled and _levels.innermost_grad_level() > level and _any_requires_grad(args, kwargs):
            physical = _physical_grad(level, args, kwargs)
            if physical:
                _levels.innermost_grad().physical_seen = True
            return record(_LogicalOp(func, level, physical), args, kwargs)
        return run_rule(func, level, args, kwargs)

    @staticmethod
    def _autograd_alias(t: BatchedTensor) -> BatchedTensor:
        # Saved for backward: shares the physical value, the storage and the version counter.
        out = make_batched(t._value, t._level)
        out._storage = t._storage
        _C._share_version_counter(out, t)
        return out

    def detach(self) -> BatchedTensor:
        # Cuts the history of every level: the logical one and the physical value's.
        return make_batched(self._value.detach(), self._level)

    @property
    def data(self) -> BatchedTensor:
        return self.detach()

    # -- factories "like" a batched tensor are batched (as functorch's new_* are) ---------------------
    def _new_batched(self, factory, size, kwargs):
        from ember._src.shapes import as_shape

        requires_grad = kwargs.pop("requires_grad", False)
        kwargs.setdefault("dtype", self.dtype)
        physical = factory(self._value, (self._value.shape[0],) + tuple(as_shape(size)), **kwargs)
        out = make_batched(physical, self._level)
        return out.requires_grad_(True) if requires_grad else out

    def new_zeros(self, *size, **kwargs):
        return self._new_batched(Tensor.new_zeros, size, kwargs)

    def new_ones(self, *size, **kwargs):
        return self._new_batched(Tensor.new_ones, size, kwargs)

    def new_empty(self, *size, **kwargs):
        return self._new_batched(Tensor.new_empty, size, kwargs)

    def new_full(self, size, fill_value, **kwargs):
        return self._new_batched(lambda v, s, **kw: Tensor.new_full(v, s, fill_value, **kw), (size,), kwargs)

    # -- what a batch of values cannot answer ---------------------------------------------------
    def item(self):
        raise RuntimeError(ITEM_ERROR)

    def tolist(self):
        raise RuntimeError(ITEM_ERROR)

    def numpy(self, *, force: bool = False):
        raise RuntimeError(ITEM_ERROR)

    def __bool__(self):
        raise RuntimeError(CONTROL_FLOW_ERROR)

    def __float__(self):
        raise RuntimeError(CONTROL_FLOW_ERROR)

    def __int__(self):
        raise RuntimeError(CONTROL_FLOW_ERROR)

    def __index__(self):
        raise RuntimeError(CONTROL_FLOW_ERROR)

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"BatchedTensor(lvl={self._level}, bdim=0, value=\n{self._value!r}\n)"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return self.__repr__()


def make_batched(value: Tensor, level: int) -> BatchedTensor:
    """Wraps ``value`` (batch dim first) as a BatchedTensor of ``level``."""
    out = object.__new__(BatchedTensor)
    become_batched(out, value, level)
    return out


def become_batched(t: Tensor, value: Tensor, level: int) -> None:
    """Turns ``t`` (a fresh BatchedTensor, or a plain tensor nobody else has seen yet) into the
    logical view of ``value`` at ``level``."""
    shape = value._shape[1:]
    if type(t) is not BatchedTensor:
        t.__class__ = BatchedTensor
    _init_fields(t, _C.Storage.meta(0), shape, contiguous_strides(shape), 0, value.dtype, value._device)
    t._value = value
    t._level = level


def is_batched_at(t, level: int) -> bool:
    return type(t) is BatchedTensor and t._level == level


def unwrap(t, level: int):
    """(physical value, batched?) of a tensor at ``level``; unbatched tensors come back as they are."""
    if type(t) is BatchedTensor and t._level == level:
        return t._value, True
    return t, False


def top_level(args, kwargs) -> int:
    level = 0
    for a in args:
        if type(a) is BatchedTensor:
            if a._level > level:
                level = a._level
        elif type(a) in (list, tuple):
            for b in a:
                if type(b) is BatchedTensor and b._level > level:
                    level = b._level
    for a in kwargs.values():
        if type(a) is BatchedTensor and a._level > level:
            level = a._level
    return level


def _iter_tensors(args, kwargs):
    for a in args:
        if isinstance(a, Tensor):
            yield a
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Tensor):
                    yield b
    for a in kwargs.values():
        if isinstance(a, Tensor):
            yield a


def _any_requires_grad(args, kwargs) -> bool:
    return any(t._requires_grad for t in _iter_tensors(args, kwargs))


def _physical_grad(level: int, args, kwargs) -> bool:
    """Whether the rule's physical ops must be recorded too: some physical value requires grad for
    a transform (or plain autograd) outside ``level``. A plain tensor that the innermost grad level
    made (a fresh input, tagged ``_func_grad_level``, or a result recorded after the level began)
    only needs the logical record."""
    if not _GRAD.grad_enabled:
        return False
    inner = _levels.innermost_grad()
    start = inner.start_seq if inner is not None else 0
    for t in _iter_tensors(args, kwargs):
        if type(t) is BatchedTensor and t._level == level:
            if t._value._requires_grad:
                return True
            continue
        if not t._requires_grad:
            continue
        fn = t.grad_fn
        if fn is None:
            if getattr(t, "_func_grad_level", 0) < level:
                return True
        elif fn._seq < start or inner.state.plain_reaches_outside(t):
            return True
    return False


class _LogicalOp:
    """What the autograd recorder sees for an op on BatchedTensors: the op's name and tags, with
    the batching rule as its kernel."""

    __slots__ = ("op", "level", "physical_grad")

    def __init__(self, op, level: int, physical_grad: bool):
        self.op = op
        self.level = level
        self.physical_grad = physical_grad

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def tags(self):
        return self.op.tags

    @property
    def differentiable(self) -> bool:  # read by the recorder for ops without a formula of their own (relu_)
        return self.op.differentiable

    def call_kernel(self, args, kwargs):
        prev = _GRAD.grad_enabled
        _GRAD.grad_enabled = self.physical_grad
        try:
            return run_rule(self.op, self.level, args, kwargs)
        finally:
            _GRAD.grad_enabled = prev

    def __call__(self, *args, **kwargs):
        return self.call_kernel(args, kwargs)


def _is_fresh_arg(level, args) -> bool:
    return bool(args) and batching.fresh.is_fresh(level.number, args[0])


def _promote_fresh_self(func, level: int, args, kwargs) -> None:
    """An in-place op writing batched values into a fresh tensor (Note [Fresh tensors]) makes it
    batched first."""
    target = args[0] if args else None
    if type(target) is Tensor and batching.fresh.is_fresh(level, target):
        size = _levels.vmap_level(level).batch_size
        value = target.unsqueeze(0).expand(size, *target.shape).contiguous()
        become_batched(target, value, level)


def run_rule(func, level: int, args, kwargs):
    if "inplace" in func.tags:
        _promote_fresh_self(func, level, args, kwargs)
    rule = batching.BATCH_RULES.get(func.name)
    if rule is not None:
        return rule(func, level, args, kwargs)
    if func.name in batching.FALLBACK or "batch_loop" in func.tags:
        return batching.loop_fallback(func, level, args, kwargs)
    raise NotImplementedError(f"vmap: ember.ops.{func.name} has no batching rule and no listed fallback")


class VmapMode(DispatchMode):
    """Active for the duration of one vmap call: sees the random ops (including those without a
    tensor argument, which never reach a BatchedTensor) and applies the ``randomness`` setting."""

    def __init__(self, level):
        self.level = level

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tags = func.tags
        random = batching.random
        if "random" in tags or func.name in random.UNTAGGED_RANDOM:
            return random.random_rule(func, self.level, args, kwargs)
        out = func(*args, **kwargs)
        if "factory" in tags or (func.name == "clone" and _is_fresh_arg(self.level, args)):
            batching.fresh.track_fresh(self.level, out)
        return out

    def __exit__(self, *exc):
        batching.fresh.forget_level(self.level)
        return super().__exit__(*exc)


# The rule table imports this module (for BatchedTensor): it is read as ``batching.<name>`` at call
# time, so either module may be imported first.
from . import batching  # noqa: E402
