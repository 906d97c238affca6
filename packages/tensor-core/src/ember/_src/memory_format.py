"""Memory formats: ``ember.contiguous_format``, ``channels_last``, ``channels_last_3d``,
``preserve_format`` (and ``legacy_contiguous_format``), as PyTorch's ``torch.memory_format``.

A memory format names an order of strides for a dense tensor. ember's kernels take any strides,
so a format changes where the elements lie (and so the speed of some kernels), never a result.
"""

from __future__ import annotations

__all__ = ["channels_last", "channels_last_3d", "contiguous_format", "legacy_contiguous_format", "memory_format",
           "preserve_format"]


class memory_format:  # noqa: N801 - PyTorch's class name
    """One of the memory-format constants (there is no public constructor)."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"ember.{self._name}"

    def __reduce__(self):
        return self._name  # pickles as the module-level constant

    @classmethod
    def _make(cls, name: str) -> memory_format:
        return cls(name)


contiguous_format = memory_format._make("contiguous_format")
channels_last = memory_format._make("channels_last")
channels_last_3d = memory_format._make("channels_last_3d")
preserve_format = memory_format._make("preserve_format")
legacy_contiguous_format = memory_format._make("legacy_contiguous_format")

# The order in which dims get increasing strides (innermost first) for the channels-last formats.
_ORDERS = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}


def check(fmt, fn: str = "contiguous") -> None:
    if fmt is not None and not isinstance(fmt, memory_format):
        raise TypeError(f"{fn}(): argument 'memory_format' must be torch.memory_format, not {type(fmt).__name__}")


def rank_for(fmt) -> int | None:
    """4 for channels_last, 5 for channels_last_3d, None for the others."""
    return 4 if fmt is channels_last else 5 if fmt is channels_last_3d else None


def require_rank(fmt, ndim: int) -> None:
    rank = rank_for(fmt)
    if rank is not None and ndim != rank:
        name = "channels_last" if rank == 4 else "channels_last_3d"
        raise RuntimeError(f"required rank {rank} tensor to use {name} format")


def strides(shape: tuple, fmt) -> tuple:
    """The dense strides of ``shape`` in a channels-last format (N, spatial..., C innermost)."""
    order = _ORDERS[len(shape)]
    out = [0] * len(shape)
    acc = 1
    for d in order:
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


def is_dense_in(shape: tuple, stride: tuple, fmt) -> bool:
    """PyTorch's is_channels_last_contiguous: size-1 dims may have any stride."""
    if len(shape) != rank_for(fmt):
        return False
    expected = 1
    for d in _ORDERS[len(shape)]:
        if shape[d] == 0:
            return True
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def to_format(t, fmt, copy: bool = False):
    """``t`` with its elements laid out in ``fmt`` (a channels-last format): itself when already so
    (unless ``copy``), otherwise a differentiable copy with exactly the format's strides (a fresh
    contiguous copy of the permuted tensor, permuted back)."""
    from .ops.shape.views import to_dtype_op

    require_rank(fmt, t.ndim)
    if not copy and is_dense_in(t._shape, t._stride, fmt):
        return t
    outer_to_inner = tuple(reversed(_ORDERS[t.ndim]))  # (0, 2, 3, 1) for channels_last
    inverse = tuple(outer_to_inner.index(d) for d in range(t.ndim))
    moved = t.permute(outer_to_inner)
    return to_dtype_op(moved, dtype=moved.dtype).permute(inverse)


def strides_like(shape: tuple, stride: tuple, fmt) -> bool:
    """PyTorch's is_channels_last_strides: the dims' strides increase in the format's order (no
    density required); a trivial channel dim defaults to the contiguous format."""
    if len(shape) != rank_for(fmt) or stride[1] == 0:
        return False
    low = 0
    for d in _ORDERS[len(shape)]:
        if shape[d] == 0 or stride[d] < low:
            return False
        if d == 0 and low == stride[1]:
            return False
        low = stride[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def suggest(t):
    """PyTorch's suggest_memory_format: a channels-last format when the strides are like it."""
    for fmt in (channels_last, channels_last_3d):
        if strides_like(t._shape, t._stride, fmt):
            return fmt
    return contiguous_format


def preserve_layout(t, like, values: bool = True):
    """``t`` (a fresh contiguous tensor of ``like``'s shape) laid out as PyTorch's ``preserve_format``
    lays out a ``*_like`` result: ``like``'s own strides when it is non-overlapping and dense (a
    transposed or channels-last tensor), else the format ``like`` suggests (contiguous for most).
    Returns ``t`` itself when that is already its layout; ``values=False``: ``t``'s values need
    not be kept (empty_like)."""
    from .layouts import strided
    from .shapes import is_contiguous, is_non_overlapping_and_dense

    shape, stride = like._shape, like._stride
    if like._layout is not strided or t._layout is not strided or is_contiguous(shape, stride):
        return t
    if is_non_overlapping_and_dense(shape, stride):
        from .ops.creation.buffers import empty_strided

        out = empty_strided(shape, stride, dtype=t.dtype, device=t._device)
        if values:
            out.copy_(t)
        return out
    fmt = suggest(like)
    return t if fmt is contiguous_format else to_format(t, fmt)


def suggest_of(*tensors):
    """The channels-last format the first of ``tensors`` suggesting one suggests (PyTorch's
    convolution, batch norm, pooling and resampling lay their results out so), else contiguous."""
    for t in tensors:
        if t is not None and t.ndim in (4, 5):
            fmt = suggest(t)
            if fmt is not contiguous_format:
                return fmt
    return contiguous_format


def empty_in(shape: tuple, dtype, device, fmt):
    """A fresh (uninitialised) tensor with exactly ``fmt``'s strides (contiguous for a format of
    another rank)."""
    from .shapes import numel
    from .tensor import make_tensor, new_empty_tensor

    if fmt is contiguous_format or len(shape) != rank_for(fmt):
        return new_empty_tensor(tuple(shape), dtype, device)
    flat = new_empty_tensor((numel(shape),), dtype, device)
    return make_tensor(flat._storage, tuple(shape), strides(shape, fmt), 0, dtype, flat._device)


def relayout(out, fmt):
    """A kernel's fresh result ``out`` with its elements laid out in ``fmt`` (itself when already
    so, or for the contiguous format); no history is recorded (kernels run below autograd)."""
    if fmt is contiguous_format or out.ndim != rank_for(fmt):
        return out
    if tuple(out._stride) == strides(out._shape, fmt):  # exactly (size-1 dims too), as PyTorch allocates
        return out
    from ._native import _C
    from .device import META

    result = empty_in(out._shape, out.dtype, out._device, fmt)
    if out._device is not META:
        _C.copy_(result, out)
    return result
