"""The "dtensor" kernel: runs any op on DTensors by running it on their local pieces.

For one call: (1) the op runs on data-less meta tensors of the global shapes, which gives the
global result shapes and raises PyTorch's errors for bad input before any communication;
(2) the op's sharding rule (``_rules``) picks, per mesh dimension, the placement each input must
have and the placement of each result (a rule that does not apply falls back to replicating that
mesh dimension, which is always correct); (3) inputs are redistributed, the op runs on the local
pieces with the CPU kernel, and the results are wrapped as DTensors. In-place ops write into the
local piece of ``self`` and return ``self``.
"""

from __future__ import annotations

import functools

import ember
from ember import _C
from ember._src import dispatch
from ember._src.device import META, Backend, register_backend
from ember._src.tensor import Tensor, make_tensor

from ._dtensor import DTensor
from ._layout import (
    contiguous_strides,
    dtensor_device,
    layout_of_device,
    local_device_of,
    local_shape,
    redistribute_local,
)
from ._placements import Partial, Replicate, Shard
from ._rules import plan_for

_NO_DATA = _C.Storage.meta(0)
# Inside ``loss_parallel()``: plain tensors (the targets, weights of a loss) are replicated
LOSS_PARALLEL = [0]
MIXED = ("{}: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor before calling "
         "distributed operators!")


def _no_storage(nbytes, zero=False, dev=None):
    raise RuntimeError("a DTensor has no storage of its own: its data lives in its local tensor")


def _to_dtensor_device(cpu_kernel):
    """``plain.to(dtensor.device)`` (how the core puts a scalar beside a tensor): a DTensor laid out
    like that one, the plain tensor being the same on every rank."""

    def kernel(self, *, dtype=None, device=None):
        if device is None or getattr(device, "type", None) != "dtensor":
            return cpu_kernel(self, dtype=dtype, device=device)
        mesh, placements = layout_of_device(device)
        local = cpu_kernel(self, dtype=dtype, device=local_device_of(device))
        placements = [Replicate() if isinstance(p, Partial) or (isinstance(p, Shard) and p.dim >= local.ndim)
                      else p for p in placements]
        piece = redistribute_local(local, local._shape, mesh, [Replicate()] * mesh.ndim, placements)
        return DTensor._wrap(piece, mesh, placements, local._shape)

    kernel.wrapped_for_dtensor = True
    return kernel


def _like_device(dev, requested):
    """``empty_like(dtensor, device="cpu")`` (``Module.to_empty`` after a meta-device
    ``fully_shard``): a DTensor of the same layout whose pieces live on ``requested``."""
    if requested.type == "dtensor":
        return requested
    mesh, placements = layout_of_device(dev)
    return dtensor_device(mesh, placements, requested)


def install() -> None:
    """Registers the kernel for every op (later ops get it on first use, in ``mix_plain_tensors``)."""
    backend = Backend("dtensor", _no_storage)
    backend.like_device = _like_device
    register_backend(backend)
    to_copy = dispatch.OPS["_to_copy"]
    if not getattr(to_copy.kernels["cpu"], "wrapped_for_dtensor", False):
        to_copy.kernels["cpu"] = _to_dtensor_device(to_copy.kernels["cpu"])
    for op in list(dispatch.OPS.values()):
        if "dtensor" not in op.kernels:
            op.kernels["dtensor"] = functools.partial(run, op)


def _map(value, fn):
    if isinstance(value, Tensor):
        return fn(value)
    if type(value) in (list, tuple):
        return type(value)(_map(v, fn) for v in value)
    return value


def _tensors(args, kwargs) -> list:
    found = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            found.append(a)
        elif type(a) in (list, tuple):
            found.extend(b for b in a if isinstance(b, Tensor))
    return found


def mix_plain_tensors(op, args, kwargs):
    """Before autograd: all-DTensor calls continue (NotImplemented); 0-d plain tensors become
    replicated DTensors; other plain tensors raise PyTorch's RuntimeError while grad mode is on.
    With grad mode off (autograd's backward formulas, optimizer steps) they are taken to be the
    same on every rank and replicated: ember's formulas build helper tensors (class weights,
    masks) as plain tensors, where PyTorch's run below the DTensor layer."""
    if "dtensor" not in op.kernels:
        op.kernels["dtensor"] = functools.partial(run, op)
    tensors = _tensors(args, kwargs)
    mesh = next((t.device_mesh for t in tensors if isinstance(t, DTensor)), None)
    if mesh is None or all(isinstance(t, DTensor) for t in tensors):
        return NotImplemented

    def convert(t):
        if isinstance(t, DTensor):
            return t
        if t.dim() != 0 and ember.is_grad_enabled() and not LOSS_PARALLEL[0]:
            raise RuntimeError(MIXED.format(f"ember.ops.{op.name}"))
        return DTensor.from_local(t, mesh, [Replicate()] * mesh.ndim)

    return op(*_map(args, convert), **{k: _map(v, convert) for k, v in kwargs.items()})


def _meta(t):
    return make_tensor(_NO_DATA, t._shape, contiguous_strides(t._shape), 0, t.dtype, META)


def _meta_device(v):
    return META if isinstance(v, ember.device) and v.type == "dtensor" else v


def run(op, *args, **kwargs):
    inputs = [t for t in _tensors(args, kwargs) if isinstance(t, DTensor)]
    if not inputs:
        return _factory(op, args, kwargs)
    mesh = inputs[0].device_mesh
    for t in inputs[1:]:
        if t.device_mesh != mesh:
            raise RuntimeError(f"ember.ops.{op.name}: DTensor does not support cross-mesh operation")
    if "random" in op.tags and "inplace" in op.tags:
        return _random_inplace(op, args, kwargs)
    if any(_other_partial(t) for t in inputs):
        # The rules propagate sums only: a partial max, avg, ... is reduced first.
        if "inplace" in op.tags and _other_partial(inputs[0]):
            _relayout(inputs[0], _reduced(inputs[0].placements))

        def reduced(t):
            if not (isinstance(t, DTensor) and _other_partial(t)):
                return t
            placements = _reduced(t.placements)
            local = redistribute_local(t._local, t._shape, mesh, t.placements, placements)
            return DTensor._wrap(local, mesh, placements, t._shape)

        args = _map(args, reduced)
        kwargs = {k: _map(v, reduced) for k, v in kwargs.items()}
        inputs = [t for t in _tensors(args, kwargs) if isinstance(t, DTensor)]
    try:
        meta_out = op.call_kernel(_map(args, _meta), {k: _meta_device(_map(v, _meta)) for k, v in kwargs.items()})
    except NotImplementedError:
        meta_out = None
    outs_meta = [meta_out] if isinstance(meta_out, Tensor) else list(meta_out or ())
    plan = plan_for(op, args, kwargs, inputs, outs_meta, mesh)
    targets, out_placements, rewrite = plan
    inplace = "inplace" in op.tags
    if inplace and tuple(targets[0]) != inputs[0].placements:
        _relayout(inputs[0], targets[0])  # self must change layout first (e.g. Partial -> Replicate)
    pieces = iter([redistribute_local(t._local, t._shape, mesh, t.placements, target)
                   for t, target in zip(inputs, targets)])

    def local_of(t):
        return next(pieces) if isinstance(t, DTensor) else t

    local_args = _map(args, local_of)
    local_kwargs = {k: _map(v, local_of) for k, v in kwargs.items()}
    local_kwargs = {k: (inputs[0]._local._device if isinstance(v, ember.device) and v.type == "dtensor" else v)
                    for k, v in local_kwargs.items()}
    if rewrite is not None:
        local_args, local_kwargs = rewrite(local_args, local_kwargs, out_placements)
    result = op.call_kernel(local_args, local_kwargs)
    if inplace:
        return args[0]
    if meta_out is None:  # no meta kernel: the rule replicated everything, the local result is global
        meta_out = _map(result, _meta)
        outs_meta = [meta_out] if isinstance(meta_out, Tensor) else list(meta_out)
    if isinstance(result, Tensor):
        return _wrap(result, outs_meta[0], mesh, out_placements[0], op)
    wrapped = []
    for i, r in enumerate(result):
        wrapped.append(_wrap(r, outs_meta[i], mesh, out_placements[i], op) if isinstance(r, Tensor) else r)
    return type(result)(wrapped) if type(result) in (list, tuple) else tuple(wrapped)


def _other_partial(t) -> bool:
    return any(isinstance(p, Partial) and p.reduce_op != "sum" for p in t.placements)


def _reduced(placements) -> tuple:
    return tuple(Replicate() if isinstance(p, Partial) and p.reduce_op != "sum" else p for p in placements)


def _wrap(local, meta, mesh, placements, op):
    expected = local_shape(meta._shape, mesh, placements)
    if tuple(local._shape) != expected:
        raise RuntimeError(f"DTensor: the sharding rule of ember.ops.{op.name} gave a local result of shape "
                           f"{tuple(local._shape)} where {expected} was expected (placements {placements})")
    return DTensor._wrap(local, mesh, placements, meta._shape)


def _relayout(dt, placements) -> None:
    """Changes a DTensor's own layout in place (an in-place op whose self must be redistributed)."""
    local = redistribute_local(dt._local, dt._shape, dt.device_mesh, dt.placements, placements)
    dt._local, dt.placements = local, tuple(placements)
    dt._storage, dt._device = local._storage, dtensor_device(dt.device_mesh, placements, local.device)


def _factory(op, args, kwargs):
    """A factory op called with a DTensor's device: a new DTensor laid out like that one."""
    dev = kwargs.get("device")
    mesh, source = layout_of_device(dev)
    local_device = local_device_of(dev)
    size = args[0] if args and type(args[0]) in (list, tuple) else None
    placements = []
    for p in source:
        keep = isinstance(p, Shard) and size is not None and p.dim < len(size) and "random" not in op.tags
        placements.append(p if keep else Replicate())
    kwargs = {**kwargs, "device": local_device}
    if size is not None:
        args = (tuple(local_shape(size, mesh, placements)), *args[1:])
        local = op.call_kernel(args, kwargs)
        return DTensor._wrap(local, mesh, placements, size)
    local = op.call_kernel(args, kwargs)
    return DTensor._wrap(local, mesh, [Replicate()] * mesh.ndim, local._shape)


def _random_inplace(op, args, kwargs):
    """Fills the whole tensor on every rank, keeps this rank's piece: the values do not depend on
    the layout (given the same seed on every rank, as PyTorch's random ops on DTensors)."""
    self = args[0]
    if any(isinstance(p, Partial) for p in self.placements):
        _relayout(self, [Replicate() if isinstance(p, Partial) else p for p in self.placements])
    full = ember.empty(self._shape, dtype=self.dtype, device=self._local.device)
    rest = _map(args[1:], lambda t: t.full_tensor() if isinstance(t, DTensor) else t)
    op.call_kernel((full, *rest), kwargs)
    piece = redistribute_local(full, self._shape, self.device_mesh, [Replicate()] * self.device_mesh.ndim,
                               self.placements)
    self._local.copy_(piece)
    return self
