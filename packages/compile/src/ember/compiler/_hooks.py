"""How the capture meets code outside the dispatcher: the core's hooks, and Python calls.

``sync_hook``: the core calls it before reading data or generator state (``item``,
``print``, ``backward`` ...); it flushes the pending segment when that read needs it.
``eager_region_hook``: code that builds autograd history by hand (``autograd.Function.apply``)
runs after a flush with the capture passing ops through. ``record_python_call``: a Python
function over tensors (``detach``) recorded as a node of its own.
"""

from __future__ import annotations

import sys

from ember._src import dispatch
from ember._src.tensor import Tensor

from ._break_reasons import DATA_DEPENDENT_BRANCH
from ._exc import Unsupported
from ._lazy import LazyTensor
from ._recorder import current, overlaps
from ._user_frames import user_frame

# Reasons that only read a value (no alias escapes through which the caller could write).
_PURE_READS = frozenset({"Tensor.item()", "Tensor.tolist()", "printing a tensor", "formatting a tensor"})


def sync_hook(tensor, reason: str) -> None:
    rec = current()
    if rec is None or rec.suspended:
        return
    rec.synced = True  # Python reads data: a replay of this call would not
    fullgraph = rec.owner.fullgraph
    if reason == "Tensor.tolist()" and fullgraph and (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise Unsupported(f"Tensor.tolist() with non-integer tensor\n\nfrom user code:\n   {user_frame()}")
    if not rec.nodes:
        return
    if reason == "Tensor.backward()" or reason == "ember.save":
        pass  # backward accumulates into .grad eagerly; save walks containers: run everything
    elif tensor is None:
        if not rec.has_random:
            return  # generator state: only pending random ops care
    elif reason == "Tensor.item()" and type(tensor) is LazyTensor:
        if _called_from_bool():
            reason = DATA_DEPENDENT_BRANCH  # ``if tensor:`` (a break even under fullgraph=True)
        elif fullgraph:
            # PyTorch 2.13 keeps ``.item()`` (and float()/int() of a tensor) in a fullgraph=True
            # graph instead of breaking; the value is data-dependent (``_unbacked``).
            rec.flush(None)
            return
    elif reason == "Tensor.tolist()" and fullgraph and type(tensor) is LazyTensor:
        rec.flush(None)  # integer items are unbacked symbols in PyTorch's graph
        return
    elif type(tensor) is not LazyTensor:
        # A real tensor: its data is current unless a pending op writes it; an alias that
        # escapes (numpy, data_ptr) could also be written by the caller while ops read it.
        storage = tensor._storage
        if not overlaps(rec.written, storage) and (reason in _PURE_READS or not overlaps(rec.input_ranges, storage)):
            return
    rec.flush(reason)


def _called_from_bool() -> bool:
    f = sys._getframe(2)  # sync_hook <- Tensor.item <- (LazyTensor.item <- item_of) <- its caller
    for _ in range(5):
        if f is None:
            return False
        if f.f_code is _BOOL_CODE:
            return True
        f = f.f_back
    return False


_BOOL_CODE = Tensor.__bool__.__code__


class _Suspended:
    """The capture passes ops through (they run for real) until exit."""

    __slots__ = ("rec", "prev")

    def __init__(self, rec):
        self.rec = rec

    def __enter__(self):
        self.prev = self.rec.suspended
        self.rec.suspended = True

    def __exit__(self, *exc):
        self.rec.suspended = self.prev
        return False


def eager_region_hook(reason: str):
    rec = current()
    if rec is None or rec.suspended:
        return dispatch._NO_REGION
    rec.flush(reason)
    rec.went_eager = True
    return _Suspended(rec)


class _PythonOp:
    """A Python callable recorded as a node (as torch.fx records ``operator.getitem``): looks
    enough like an Op for the recorder (name, schema, tags, call_kernel on meta tensors)."""

    __slots__ = ("fn", "name", "schema", "tags")

    _CACHE: dict = {}

    def __new__(cls, fn, name):
        self = cls._CACHE.get(fn)
        if self is None:
            self = object.__new__(cls)
            self.fn, self.name, self.schema, self.tags = fn, name, f"{name}(Tensor self) -> Tensor", frozenset()
            cls._CACHE[fn] = self
        return self

    def call_kernel(self, args, kwargs):
        return self.fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


def record_python_call(fn, args, what: str):
    rec = current()
    if rec is None or rec.suspended:
        return fn(*args)
    return rec.record_call(fn, args, what)
