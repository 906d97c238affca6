"""Derivatives of the view ops and copies (view, expand, permute, select, slice, as_strided...).

A view's gradient is the gradient of the viewed elements placed back into the input's
shape: reshaped, permuted back, or written into zeros at the region the view selected.
Views that repeat elements (expand, overlapping unfold/as_strided) sum the repeats.
"""

from __future__ import annotations

import ember

from ._common import arg, embed
from ._registry import derivative

OPS = ember.ops


def _reshape_back(grads, inputs, outputs):
    return (grads[0].reshape(inputs.args[0].shape),)


for _name in ("view", "squeeze", "unsqueeze"):
    derivative(_name, meta_only=True)(_reshape_back)


def _identity(grads, inputs, outputs):
    return (grads[0],)


# expand: the engine sums the broadcast gradient down to the input's shape.
for _name in ("alias", "clone", "expand"):
    derivative(_name)(_identity)


@derivative("_to_copy", meta_only=True)
def _to_copy(grads, inputs, outputs):
    # The engine casts the gradient back to the input's dtype; the device is this formula's
    # job: a CPU leaf moved with .to("cuda") gets its gradient on the CPU, as in PyTorch.
    g = grads[0]
    src = inputs.args[0]
    device = getattr(src, "_src_device", src._device)  # a stand-in, or the input itself (complex formulas)
    return (g if g._device is device or g._device == device else g.to(device),)


@derivative("permute")
def _permute(grads, inputs, outputs):
    dims = arg(inputs, 1, "dims")
    ndim = len(dims)
    inverse = [0] * ndim
    for i, d in enumerate(dims):
        inverse[d % ndim if ndim else 0] = i
    return (grads[0].permute(inverse),)


@derivative("select", meta_only=True)
def _select(grads, inputs, outputs):
    dim, index = arg(inputs, 1, "dim"), arg(inputs, 2, "index")
    return (embed(inputs.args[0].shape, grads[0], lambda z: OPS["select"](z, dim, index)),)


@derivative("slice", meta_only=True)
def _slice(grads, inputs, outputs):
    dim, start, end, step = (arg(inputs, i, n) for i, n in ((1, "dim"), (2, "start"), (3, "end"), (4, "step")))
    return (embed(inputs.args[0].shape, grads[0], lambda z: OPS["slice"](z, dim, start, end, step)),)


@derivative("narrow", meta_only=True)
def _narrow(grads, inputs, outputs):
    dim, start, length = arg(inputs, 1, "dim"), arg(inputs, 2, "start"), arg(inputs, 3, "length")
    return (embed(inputs.args[0].shape, grads[0], lambda z: OPS["narrow"](z, dim, start, length)),)


@derivative("diagonal", meta_only=True)
def _diagonal(grads, inputs, outputs):
    offset = arg(inputs, 1, "offset", 0)
    dim1, dim2 = arg(inputs, 2, "dim1", 0), arg(inputs, 3, "dim2", 1)
    return (embed(inputs.args[0].shape, grads[0], lambda z: OPS["diagonal"](z, offset, dim1, dim2)),)


def _scatter_positions(n: int, g, positions, dtype):
    """A length-``n`` vector holding the sum of ``g``'s elements at each of ``positions``."""
    flat = g.new_zeros((n,), dtype=dtype)
    return ember.index_put(flat, (positions.reshape(-1),), g.reshape(-1), accumulate=True)


@derivative("unfold", meta_only=True)
def _unfold(grads, inputs, outputs):
    # Windows may overlap: each input element gets the sum over the windows that hold it.
    x = inputs.args[0]
    dimension, size, step = arg(inputs, 1, "dimension"), arg(inputs, 2, "size"), arg(inputs, 3, "step")
    n = x.numel()
    positions = OPS["unfold"](ember.arange(n).reshape(x.shape), dimension, size, step)
    return (_scatter_positions(n, grads[0], positions, grads[0].dtype).reshape(x.shape),)


@derivative("as_strided", meta_only=True)
def _as_strided(grads, inputs, outputs):
    # Works in storage coordinates: scatter the gradient to the memory locations the output
    # read, then gather at the locations of the input's elements (averaging over inputs that
    # share a location, as an expanded input does).
    x = inputs.args[0]
    g = grads[0]
    size, stride = arg(inputs, 1, "size"), arg(inputs, 2, "stride")
    offset = arg(inputs, 3, "storage_offset", None)
    if offset is None:
        offset = x.storage_offset()
    extent = max(_extent(size, stride, offset), _extent(x.shape, x.stride(), x.storage_offset()))
    locations = ember.arange(extent)
    out_pos = locations.as_strided(size, stride, offset)
    in_pos = locations.as_strided(x.shape, x.stride(), x.storage_offset())
    memory = _scatter_positions(extent, g, out_pos, g.dtype)
    result = OPS["index"](memory, [in_pos])
    if any(s == 0 and n > 1 for s, n in zip(x.stride(), x.shape)):
        ones = ember.ones(x.shape, dtype=g.dtype)
        count = _scatter_positions(extent, ones, in_pos, g.dtype)
        result = result / OPS["index"](count, [in_pos])
    return (result,)


def _extent(shape, stride, offset) -> int:
    if any(n == 0 for n in shape):
        return offset
    return offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1


@derivative("copy_")
def _copy(grads, inputs, outputs):
    # self is overwritten (no gradient); src gets the gradient, summed to its shape by the engine.
    # The zeros take the gradient's shape (self's): self is not unpacked, so that a later in-place
    # op on it (x.copy_(y); x.mul_(2)) leaves this node valid, as in PyTorch.
    g = grads[0]
    return ember.zeros_like(g), g


@derivative("fill_")
def _fill(grads, inputs, outputs):
    # fill_ overwrites every element: the old values get no gradient. Shaped from the gradient, not
    # from self: self is not unpacked, so a later write to it (another view's fill_) keeps this valid.
    return ember.zeros_like(grads[0]), None


@derivative("transpose")
def _transpose(grads, inputs, outputs):
    args = inputs.args
    if len(args) == 3 and isinstance(args, tuple):  # the dims (ints, never saved tensors): no arg or _SavedArgs frames
        return (grads[0].transpose(tuple.__getitem__(args, 1), tuple.__getitem__(args, 2)),)
    return (grads[0].transpose(arg(inputs, 1, "dim0"), arg(inputs, 2, "dim1")),)
