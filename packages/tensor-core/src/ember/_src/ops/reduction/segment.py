"""``torch.segment_reduce``: reduce consecutive segments of ``data`` along ``axis``, the segments given
by their ``lengths`` (or ``offsets``), batched over the leading dims of ``lengths``.

Composed from searchsorted (each position's segment), scatter_reduce (one pass over the data,
differentiable: ties of max/min share the gradient, as PyTorch's kernel) and a few pointwise ops for
``initial`` and the empty segments (sum 0, prod 1, max -inf, min +inf, mean NaN; ``initial`` when
given, which also takes part in every segment's reduction).
"""

from __future__ import annotations

from ...optable import declare
from ...tensor import Tensor
from .._common import type_name

_REDUCE = {"sum": "sum", "prod": "prod", "mean": "mean", "max": "amax", "min": "amin"}


def _check(data, reduce, lengths, indices, offsets, axis):
    if not isinstance(data, Tensor):
        raise TypeError(f"segment_reduce(): argument 'data' must be Tensor, not {type(data).__name__}")
    if reduce not in _REDUCE:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(f"\"_segment_reduce_cpu\" not implemented for '{type_name(data.dtype)}'")
    given = lengths if lengths is not None else offsets
    if given.dtype.is_floating_point or given.dtype.is_complex:
        raise NotImplementedError(f"\"_segment_reduce_lengths_cpu_kernel1\" not implemented for "
                                  f"'{type_name(given.dtype)}'")
    if data.ndim < given.ndim:
        raise RuntimeError("Expected data.dim() >= lengths_value.dim() to be true, but got false.")
    axis = axis + data.ndim if axis < 0 else axis
    if axis != given.ndim - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of lengths but got {axis}.")
    return axis


def segment_reduce(data: Tensor, reduce: str, *, lengths: Tensor | None = None, indices: Tensor | None = None,
                   offsets: Tensor | None = None, axis: int = 0, unsafe: bool = False, initial=None) -> Tensor:
    from ... import api as E

    axis = _check(data, reduce, lengths, indices, offsets, axis)
    if lengths is None:
        lengths = offsets[..., 1:] - offsets[..., :-1]
    lengths = lengths.to(E.int64)
    if not unsafe:
        if bool((lengths < 0).any()):
            raise RuntimeError("lengths contains negative value!")
        if bool((lengths.sum(-1) != data.shape[axis]).any()):
            raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                               "data.size(lengths.dim()-1) when !unsafe.")
    segments = lengths.shape[-1]
    # Each position's segment: positions past the last segment (possible only with unsafe) go to an
    # extra slot, dropped below; empty segments get no position.
    ends = E.cumsum(lengths, -1)
    # The segment ids come from the lengths' values, on the lengths' device (the data may be on "meta").
    positions = E.arange(data.shape[axis], device=lengths.device).expand(*lengths.shape[:-1], data.shape[axis])
    seg = E.searchsorted(ends, positions.contiguous(), right=True).clamp_max(segments).to(data.device)
    trailing = data.ndim - axis - 1
    seg = seg.reshape(seg.shape + (1,) * trailing).expand(data.shape)
    out_shape = data.shape[:axis] + (segments + 1,) + data.shape[axis + 1:]
    kind = _REDUCE[reduce]
    fill = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "amax": float("-inf"), "amin": float("inf")}[kind]
    base = E.full(out_shape, fill, dtype=data.dtype, device=data.device)
    out = base.scatter_reduce(axis, seg, data, "sum" if kind == "mean" else kind, include_self=True)
    out = out.narrow(axis, 0, segments)
    counts = lengths.reshape(lengths.shape + (1,) * trailing).to(data.device, data.dtype)
    if initial is not None:
        if kind == "sum":
            out = out + initial
        elif kind == "prod":
            out = out * initial
        elif kind == "amax":  # a tie with initial leaves the gradient to the data, as PyTorch's
            out = E.where(out >= initial, out, E.full_like(out, initial))
        elif kind == "amin":
            out = E.where(out <= initial, out, E.full_like(out, initial))
    if kind == "mean":
        if initial is not None:
            out = out + initial
        out = out / counts
        empty = E.full_like(out, float("nan") if initial is None else initial)
        out = E.where(counts == 0, empty, out)
    return out


declare(__name__, """
segment_reduce              function
""")
