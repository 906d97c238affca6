"""Reordering and structural ops: flip, roll, rot90, repeat, tile, tril/triu, diag, meshgrid, ...

flip is a native kernel; the rest are written over views, flip, cat and pointwise ops, so
each runs as a handful of native calls.
"""

from __future__ import annotations

import operator

from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import as_shape, broadcast_shapes, numel, size_varargs, wrap_dim, wrap_dims
from ...tensor import Tensor, new_empty_tensor
from .._common import fresh_result, label_as_op, type_name, write_out
from ..creation.factories import arange, zeros
from ..indexing.sorting import bucketize
from ..pointwise.elementwise import where

flip_op = define("flip(Tensor self, int[] dims) -> Tensor", ())


def _flip_meta(self: Tensor, dims):
    wrap_dims(dims, self.ndim)
    return new_empty_tensor(self._shape, self.dtype, META)


flip_op.meta = _flip_meta
flip_op.kernels["meta"] = _flip_meta


@flip_op.kernel("cpu")
def _flip_cpu(self: Tensor, dims):
    dims = wrap_dims(dims, self.ndim) if self.ndim else ()
    out = new_empty_tensor(self._shape, self.dtype, self._device)
    _C.flip(out, self, list(dims))
    return out


def flip(input: Tensor, dims) -> Tensor:
    """Reverses the order of elements along ``dims`` (a copy, as in PyTorch)."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return flip_op(input, dims)


def _flip_method(self: Tensor, *dims, **keyword) -> Tensor:
    """``x.flip(0, 1)``: the method also takes the dims as separate arguments, as PyTorch's does."""
    return flip(self, size_varargs("flip", "dims", dims, keyword))


def fliplr(input: Tensor) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Rotates elements along dims; with dims=None the tensor is flattened first."""
    from .joining import cat

    if dims is None:
        if isinstance(shifts, (tuple, list)) and len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        shift = shifts[0] if isinstance(shifts, (tuple, list)) else shifts
        return label_as_op(roll(input.flatten(), shift, 0).view(input.shape), "roll")
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    result = input
    for shift, dim in zip(shifts, dims):
        d = wrap_dim(dim, input.ndim)
        size = input._shape[d]
        if size == 0:
            continue
        s = operator.index(shift) % size
        if s:
            result = cat([result.narrow(d, size - s, s), result.narrow(d, 0, size - s)], d)
    # grad_fn as PyTorch's roll op: RollBackward0, not the CatBackward0 of the composite
    return label_as_op(result if result is not input else input.clone(), "roll")


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = wrap_dim(dims[0], input.ndim), wrap_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return flip(input, (d1,)).transpose(d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(input, (d0,)).transpose(d0, d1)
    return input.clone()


def repeat(self: Tensor, *sizes, **keyword) -> Tensor:
    """Tiles the tensor ``sizes[i]`` times along each dim (a copy)."""
    sizes = size_varargs("repeat", "repeats", sizes, keyword)
    if len(sizes) < self.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {list(sizes)}")
    shape = (1,) * (len(sizes) - self.ndim) + tuple(self._shape)
    interleaved, expanded, final = [], [], []
    for r, s in zip(sizes, shape):
        interleaved += [1, s]
        expanded += [r, s]
        final.append(r * s)
    if numel(final) * self.element_size() >= 1 << 63:  # before reshape/expand meet the overflow in their words
        raise RuntimeError(f"Storage size calculation overflowed with sizes={final}")
    result = self.reshape(interleaved).expand(*expanded).contiguous().view(*final) if final else self.clone()
    return label_as_op(result, "repeat")  # RepeatBackward0, as PyTorch's repeat op


def tile(input: Tensor, dims) -> Tensor:
    dims = as_shape((dims,))
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + tuple(dims)
    return repeat(input, *dims)


def _tri_mask(input: Tensor, diagonal: int, lower: bool) -> Tensor:
    n, m = input._shape[-2], input._shape[-1]
    rows = arange(n, device=input._device).unsqueeze(-1)
    cols = arange(m, device=input._device)
    offset = cols - rows
    return offset <= diagonal if lower else offset >= diagonal


def tri_diagonal(diagonal, name: str) -> int:
    """tril/triu's ``diagonal`` as an int: PyTorch's parser takes ints (and integer tensors), and
    refuses floats and bools with a TypeError."""
    if isinstance(diagonal, bool) or not hasattr(type(diagonal), "__index__"):
        raise TypeError(f"{name}(): argument 'diagonal' must be int, not {type(diagonal).__name__}")
    try:
        return operator.index(diagonal)
    except TypeError:
        raise TypeError(f"{name}(): argument 'diagonal' must be int, not {type(diagonal).__name__}") from None


def _tri(input: Tensor, diagonal: int, lower: bool, name: str) -> Tensor:
    diagonal = tri_diagonal(diagonal, name)
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    zero = False if input.dtype is dtypes.bool else 0
    return label_as_op(where(_tri_mask(input, diagonal, lower), input, zero), name)  # TrilBackward0 / TriuBackward0


def tril(input: Tensor, diagonal: int = 0, *, out=None) -> Tensor:
    return write_out(_tri(input, diagonal, True, "tril"), out, overlap=False, exact_dtype=True)


def triu(input: Tensor, diagonal: int = 0, *, out=None) -> Tensor:
    return write_out(_tri(input, diagonal, False, "triu"), out, overlap=False, exact_dtype=True)


def diag(input: Tensor, diagonal: int = 0, *, out: Tensor | None = None) -> Tensor:
    """1-D input: a matrix with it on the ``diagonal``; 2-D input: that diagonal as a vector."""
    if out is not None:
        return write_out(diag(input, diagonal), out, exact_dtype=True)

    if input.ndim == 1:
        n = input._shape[0] + abs(diagonal)
        out = zeros(n, n, dtype=input.dtype, device=input._device)
        out.diagonal(diagonal).copy_(input)
        return fresh_result(out)
    if input.ndim == 2:
        return input.diagonal(diagonal).clone()
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    return diag(input.flatten(), offset)


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    ndim = input.ndim + 1
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input._shape[-1] + abs(offset) if input.ndim else 1 + abs(offset)
    rest = list(input._shape[:-1])
    shape = []
    for i in range(ndim):
        if i in (d1, d2):
            shape.append(n)
        else:
            shape.append(rest.pop(0))
    out = zeros(*shape, dtype=input.dtype, device=input._device)
    out.diagonal(offset, d1, d2).copy_(input)
    return fresh_result(out)


def meshgrid(*tensors, indexing: str | None = None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    vectors = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(vectors) >= 2
    if swap:
        vectors[0], vectors[1] = vectors[1], vectors[0]
    shape = tuple(v._shape[0] for v in vectors)
    grids = []
    for i, v in enumerate(vectors):
        view_shape = [1] * len(vectors)
        view_shape[i] = -1
        grids.append(v.view(tuple(view_shape)).expand(tuple(shape)))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@_autocast_composite("fp32")
def trace(input: Tensor) -> Tensor:
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return input.diagonal().sum()


def kron(input: Tensor, other: Tensor) -> Tensor:
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input._shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other._shape))
    a_shape, b_shape = [], []
    for sa, sb in zip(a._shape, b._shape):
        a_shape += [sa, 1]
        b_shape += [1, sb]
    product = a.reshape(a_shape) * b.reshape(b_shape)
    return product.reshape([sa * sb for sa, sb in zip(a._shape, b._shape)])


_CROSS_DIM_WARNED = [False]


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    from .joining import stack

    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = broadcast_shapes(input._shape, other._shape)
    a, b = input.expand(tuple(shape)), other.expand(tuple(shape))
    if dim is None:
        if not _CROSS_DIM_WARNED[0]:  # PyTorch warns once per process
            _CROSS_DIM_WARNED[0] = True
            import warnings

            warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                          "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                          "with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = wrap_dim(dim, len(shape))
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {d} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    ax, ay, az = a.unbind(d)
    bx, by, bz = b.unbind(d)
    return stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], d)


def atleast_1d(*tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    items = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = tuple(t.reshape(1) if t.ndim == 0 else t for t in items)
    return out[0] if single else out


def atleast_2d(*tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    items = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = tuple(t.reshape(1, -1) if t.ndim < 2 else t for t in items)
    return out[0] if single else out


def atleast_3d(*tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    items = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    shaped = []
    for t in items:
        if t.ndim == 0:
            t = t.reshape(1, 1, 1)
        elif t.ndim == 1:
            t = t.reshape(1, -1, 1)
        elif t.ndim == 2:
            t = t.unsqueeze(-1)
        shaped.append(t)
    out = tuple(shaped)
    return out[0] if single else out


def block_diag(*tensors) -> Tensor:
    mats = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    dtype = mats[0].dtype if mats else dtypes.get_default_dtype()
    for m in mats[1:]:
        dtype = dtypes.promote_types(dtype, m.dtype)
    rows = sum(m._shape[0] for m in mats)
    cols = sum(m._shape[1] for m in mats)
    out = zeros(rows, cols, dtype=dtype)
    r = c = 0
    for m in mats:
        out.narrow(0, r, m._shape[0]).narrow(1, c, m._shape[1]).copy_(m)
        r += m._shape[0]
        c += m._shape[1]
    return fresh_result(out)


def cartesian_prod(*tensors) -> Tensor:
    from .joining import stack

    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def _integral_repeats(repeats: Tensor) -> None:
    """PyTorch's kernel is built for int32/int64 repeats only."""
    if repeats.dtype not in (dtypes.int32, dtypes.int64):
        raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for \'{type_name(repeats.dtype)}\'')


def repeat_interleave(input, repeats=None, dim: int | None = None, *, output_size: int | None = None) -> Tensor:
    """Repeats each element ``repeats`` times along ``dim`` (flattened when dim is None).

    ``repeat_interleave(counts)`` with a single int64 tensor returns indices repeated by count.
    Built from native ops: an expand for scalar repeats; cumsum + bucketize + index_select
    for per-element repeats.
    """

    if repeats is None:  # repeat_interleave(repeats): arange(len) repeated by count
        counts = input
        if counts.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        _integral_repeats(counts)
        return repeat_interleave(arange(counts.shape[0], device=counts.device), counts, 0, output_size=output_size)
    if dim is None:
        input = input.flatten()
        dim = 0
    d = wrap_dim(dim, input.ndim)
    size = input.shape[d] if input.ndim else 1
    if isinstance(repeats, Tensor):
        # PyTorch checks a repeats tensor's rank and dtype before looking at its values
        if repeats.ndim > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        _integral_repeats(repeats)
        if repeats.numel() == 1:
            if int(repeats.item()) < 0:
                raise RuntimeError("repeats can not be negative")
            repeats = int(repeats.item())
    if isinstance(repeats, int):
        if repeats < 0:
            raise RuntimeError("Repeats must be non-negative")
        if input.ndim == 0:
            input = input.reshape(1)
        expanded = input.unsqueeze(d + 1)
        shape = list(expanded.shape)
        shape[d + 1] = repeats
        final = list(input.shape)
        final[d] = size * repeats
        return expanded.expand(tuple(shape)).reshape(final)
    if repeats.ndim != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.shape[0] != size:
        raise RuntimeError(
            f"repeats must have the same size as input along dim, but got repeats.size(0) = {repeats.shape[0]} "
            f"and input.size({d}) = {size}"
        )
    if repeats.numel() and bool((repeats < 0).any().item()):
        raise RuntimeError("repeats can not be negative")
    ends = repeats.cumsum(0)
    total = int(ends[-1].item()) if repeats.numel() else 0
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")

    index = bucketize(arange(total, device=input.device), ends, right=True)
    return input.index_select(d, index)


@_autocast_composite("fp32")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between each row of x1 (B, P, M) and each row of x2 (B, R, M).

    Euclidean distances use the matrix-product form ``|a|^2 + |b|^2 - 2 a.b`` when PyTorch
    would (more than 25 rows on either side, or when asked), else the direct difference.
    """
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}"
        )
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {type_name(x.dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist"
                         or (compute_mode == modes[0] and (rows1 > 25 or rows2 > 25)))
    if use_mm:
        sq1 = (x1 * x1).sum(-1, keepdim=True)
        sq2 = (x2 * x2).sum(-1, keepdim=True)
        squared = sq1 - 2 * (x1 @ x2.transpose(-2, -1)) + sq2.transpose(-2, -1)
        return _root_or_zero(squared, 0.5)
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (diff != 0).to(diff.dtype).sum(-1)
    if p == float("inf"):
        return diff.amax(-1)
    if p == 1:
        return diff.sum(-1)
    nonzero = diff > 0
    terms = diff.where(nonzero, 1.0).pow(p).where(nonzero, 0.0)
    return _root_or_zero(terms.sum(-1), 1.0 / p)


def _root_or_zero(x: Tensor, exponent: float) -> Tensor:
    """``x ** exponent`` where x > 0, else 0, through selects so that a zero distance has a zero
    gradient (PyTorch's cdist backward) instead of inf * 0 = NaN."""
    positive = x > 0
    return x.where(positive, 1.0).pow(exponent).where(positive, 0.0)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
atleast_1d                  function method
atleast_2d                  function method
atleast_3d                  function method
block_diag                  function method
cartesian_prod              function method
cdist                       function method
cross                       function method
diag                        function method
diag_embed                  function method
diagflat                    function method
flip                        function method=_flip_method
fliplr                      function method
flipud                      function method
kron                        function method
meshgrid                    function method
repeat                      method
repeat_interleave           function method
roll                        function method
rot90                       function method
tile                        function method
trace                       function method
tril                        function method
triu                        function method
""")
