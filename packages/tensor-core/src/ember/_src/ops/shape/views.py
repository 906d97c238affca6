"""View ops (sharing storage) and the copies that back them: contiguous, clone, to, copy_.

Every view op is declared with the ``view`` tag; its result shares the input's storage and
therefore its version counter. Meta and CPU kernels are the same function: a view only
computes metadata.
"""

from __future__ import annotations

import operator

from ... import dtypes
from ... import memory_format as mf
from ..._native import _C
from ...composite import define_composite, pre_dispatch_tracing
from ...device import META, copy_across, get_backend, to_device
from ...dispatch import _SYNC_HOOK, define
from ...layouts import strided as _STRIDED
from ...optable import declare
from ...shapes import (
    as_shape,
    broadcast_shapes,
    infer_size,
    insertion_sorted_dims,
    is_contiguous,
    numel,
    size_varargs,
    view_strides,
    wrap_dim,
    wrap_dims,
)
from ...tensor import Tensor, check_view_bounds, copy_layout, make_view, new_empty_tensor
from .._common import check_fill_fits, check_int64_arg, check_scalar_fits, label_as_op, type_name
from .._common import check_internal_overlap as _check_internal_overlap
from .._common import check_write as _check_write
from ..creation.factories import empty, full, ones, tensor, zeros


def _view_op(schema: str):
    op = define(schema, ("view",))

    def register(fn):
        op.kernels["cpu"] = fn
        op.kernels["meta"] = fn
        op.meta = fn
        return op

    return register


@_view_op("view(Tensor(a) self, SymInt[] size) -> Tensor(a)")
def view_op(self: Tensor, shape: tuple) -> Tensor:
    shape = infer_size(shape, numel(self._shape))
    strides = view_strides(self._shape, self._stride, shape)
    if strides is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        )
    return make_view(self, shape, strides, self._offset)


@_view_op("view_dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)")
def view_dtype_op(self: Tensor, dtype) -> Tensor:
    if dtype.itemsize == self.dtype.itemsize:
        out = make_view(self, self._shape, self._stride, self._offset)
        out.dtype = dtype
        return out
    if self.ndim == 0:
        raise RuntimeError(f"self.dim() cannot be 0 to view {type_name(self.dtype)} as {type_name(dtype)} "
                           "(different element sizes)")
    if self._stride[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 to view {type_name(self.dtype)} as {type_name(dtype)} "
                           f"(different element sizes), but got {self._stride[-1]}")
    ratio_num, ratio_den = self.dtype.itemsize, dtype.itemsize
    last = self._shape[-1] * ratio_num
    if last % ratio_den or (self._offset * ratio_num) % ratio_den:
        ratio = ratio_den // ratio_num
        raise RuntimeError(f"self.size(-1) must be divisible by {ratio} to view {type_name(self.dtype)} as "
                           f"{type_name(dtype)} (different element sizes), but got {self._shape[-1]}")
    shape = self._shape[:-1] + (last // ratio_den,)
    stride = tuple(s * ratio_num // ratio_den for s in self._stride[:-1]) + (1,)
    out = make_view(self, shape, stride, self._offset * ratio_num // ratio_den)
    out.dtype = dtype
    return out


def view(self: Tensor, *shape, **keyword) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], dtypes.dtype) and not keyword:
        return view_dtype_op(self, shape[0])
    if keyword.keys() == {"dtype"} and not shape:
        return view_dtype_op(self, keyword["dtype"])
    if not shape and not keyword:
        raise TypeError("view() received an invalid combination of arguments - got (), but expected one of:\n"
                        " * (torch.dtype dtype)\n * (tuple of ints size)\n")
    return view_op(self, size_varargs("view", "size", shape, keyword))


def view_as(self: Tensor, other: Tensor) -> Tensor:
    return view_op(self, other._shape)


def reshape(input: Tensor, *shape, **keyword) -> Tensor:
    shape = infer_size(size_varargs("reshape", "shape", shape, keyword), numel(input._shape))
    if view_strides(input._shape, input._stride, shape) is not None:
        return view_op(input, shape)
    return view_op(contiguous(input), shape)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return reshape(self, other._shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if pre_dispatch_tracing():
        return flatten_op(input, start_dim, end_dim)
    if input.ndim == 0:
        wrap_dim(start_dim, 1), wrap_dim(end_dim, 1)  # a 0-d tensor still takes only dims 0 and -1
        return reshape(input, (1,))
    s = wrap_dim(start_dim, input.ndim)
    e = wrap_dim(end_dim, input.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input if input.ndim else reshape(input, (1,))
    shape = input._shape[:s] + (numel(input._shape[s:e + 1]),) + input._shape[e + 1:]
    return reshape(input, shape)


# PyTorch's composite op (``...composite``): one node in an exported graph.
flatten_op = define_composite("flatten(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)", flatten,
                              tags=("view",))


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    d = wrap_dim(dim, input.ndim)
    sizes = tuple(operator.index(s) for s in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if -1 not in sizes or sizes.count(-1) == 1:  # PyTorch checks the product first, in its own words
        known = numel(tuple(s for s in sizes if s != -1))
        n = input._shape[d]
        if (n != known) if -1 not in sizes else ((known == 0 and n != 0) or (known != 0 and n % known)):
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {d} "
                               f"({n}) in the input tensor")
    sizes = infer_size(sizes, input._shape[d])
    return view_op(input, input._shape[:d] + sizes + input._shape[d + 1:])


@_view_op("permute(Tensor(a) self, int[] dims) -> Tensor(a)")
def permute_op(self: Tensor, dims: tuple) -> Tensor:
    if len(dims) != self.ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
            f"desired ordering of dimensions i.e. input.dim() = {self.ndim} is not equal to len(dims) = {len(dims)}"
        )
    dims = tuple(wrap_dim(d, self.ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return make_view(self, tuple(self._shape[d] for d in dims), tuple(self._stride[d] for d in dims), self._offset)


def permute(input: Tensor, *dims, **keyword) -> Tensor:
    return permute_op(input, size_varargs("permute", "dims", dims, keyword))


@_view_op("transpose(Tensor(a) self, int dim0, int dim1) -> Tensor(a)")
def transpose_op(self: Tensor, dim0: int, dim1: int) -> Tensor:
    if self.ndim == 0:
        wrap_dim(dim0, 0)
        wrap_dim(dim1, 0)
        return make_view(self, (), (), self._offset)
    d0, d1 = wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim)
    dims = list(range(self.ndim))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return make_view(self, tuple(self._shape[d] for d in dims), tuple(self._stride[d] for d in dims), self._offset)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    return transpose_op(input, dim0, dim1)


swapaxes = swapdims = transpose


def t(input: Tensor) -> Tensor:
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    # a 0-D/1-D input gets an identity transpose: an op (autograd and make_fx see it), not a bare
    # view (which had no grad_fn, and which make_fx recorded as a constant of the graph)
    dim1 = 1 if input.ndim == 2 else 0
    return label_as_op(transpose(input, 0, dim1), "t")  # TBackward0, as PyTorch's own t op


def _matrix_transpose(self: Tensor) -> Tensor:
    if self.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(self, -2, -1)


def _full_transpose(self: Tensor) -> Tensor:
    return permute_op(self, tuple(reversed(range(self.ndim))))


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims (a copy for complex tensors: ember has no lazy conj)."""
    result = _matrix_transpose(input)
    if input.dtype.is_complex:
        from ..pointwise.complex import conj_physical_op

        result = conj_physical_op(result)
    return result


def _conj_full_transpose(self: Tensor) -> Tensor:
    result = _full_transpose(self)
    if self.dtype.is_complex:
        from ..pointwise.complex import conj_physical_op

        result = conj_physical_op(result)
    return result


@_view_op("expand(Tensor(a) self, SymInt[] size) -> Tensor(a)")
def expand_op(self: Tensor, size: tuple) -> Tensor:
    if len(size) < self.ndim:
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{list(self._shape)}}}, size=[{', '.join(map(str, size))}]): the number of "
            f"sizes provided ({len(size)}) must be greater or equal to the number of dimensions in the tensor "
            f"({self.ndim})"
        )
    lead = len(size) - self.ndim
    shape, stride = [], []
    for i in range(len(size) - 1, -1, -1):  # last dim first, as PyTorch (which mismatch its error names)
        target = size[i]
        if i < lead:
            if target < 0:
                raise RuntimeError(f"The expanded size of the tensor ({target}) isn't allowed in a leading, "
                                   f"non-existing dimension {i}")
            shape.append(target)
            stride.append(0)
            continue
        cur, st = self._shape[i - lead], self._stride[i - lead]
        if target == -1:
            target = cur
        if cur == target:
            shape.append(cur)
            stride.append(st)
        elif cur == 1:
            if target < 0:
                raise RuntimeError(f"invalid expanded size {target}")
            shape.append(target)
            stride.append(0)
        else:
            raise RuntimeError(
                f"The expanded size of the tensor ({target}) must match the existing size ({cur}) at non-singleton "
                f"dimension {i}.  Target sizes: {list(size)}.  Tensor sizes: {list(self._shape)}"
            )
    shape.reverse()
    stride.reverse()
    if 0 in stride and _numel(shape) > _INT64_MAX:  # only broadcast dims can grow numel past int64
        raise RuntimeError("numel: integer multiplication overflow")
    return make_view(self, tuple(shape), tuple(stride), self._offset)


_INT64_MAX = (1 << 63) - 1


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def expand(self: Tensor, *size, **keyword) -> Tensor:
    return expand_op(self, size_varargs("expand", "size", size, keyword))


def expand_as(self: Tensor, other: Tensor) -> Tensor:
    return expand_op(self, other._shape)


def broadcast_to(input: Tensor, size) -> Tensor:
    return expand_op(input, as_shape((size,)))


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    shape = broadcast_shapes(*[t._shape for t in tensors])
    return tuple(expand_op(t, shape) for t in tensors)


@_view_op("squeeze(Tensor(a) self, int[]? dim=None) -> Tensor(a)")
def squeeze_op(self: Tensor, dims=None) -> Tensor:
    if dims is None:
        keep = [i for i, s in enumerate(self._shape) if s != 1]
    else:
        dims = set(wrap_dims(dims, self.ndim)) if self.ndim else set()
        keep = [i for i, s in enumerate(self._shape) if not (i in dims and s == 1)]
    return make_view(self, tuple(self._shape[i] for i in keep), tuple(self._stride[i] for i in keep), self._offset)


def squeeze(input: Tensor, dim=None) -> Tensor:
    if dim is None:
        return squeeze_op(input, None)
    if input.ndim == 0:
        wrap_dims(dim, 0)
        return squeeze_op(input, None)
    # An int stays an int (not (dim,)): autograd names squeeze.dim's node SqueezeBackward1, a list's 2.
    return squeeze_op(input, dim if isinstance(dim, int) else tuple(dim))


@_view_op("unsqueeze(Tensor(a) self, int dim) -> Tensor(a)")
def unsqueeze_op(self: Tensor, dim: int) -> Tensor:
    d = wrap_dim(dim, self.ndim + 1)
    inner = self._stride[d] * self._shape[d] if d < self.ndim else 1
    return make_view(self, self._shape[:d] + (1,) + self._shape[d:], self._stride[:d] + (inner,) + self._stride[d:],
                     self._offset)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    return unsqueeze_op(input, dim)


@_view_op("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)")
def narrow_op(self: Tensor, dim: int, start: int, length: int) -> Tensor:
    if self.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if not isinstance(length, Tensor) and length < 0:  # checked before dim, as PyTorch does
        raise RuntimeError("narrow(): length must be non-negative.")
    d = wrap_dim(dim, self.ndim)
    size = self._shape[d]
    if isinstance(start, Tensor):
        start = int(start.item())
    if not -size <= start <= size:
        check_int64_arg(start)
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    if start < 0:
        start += size
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    shape = self._shape[:d] + (length,) + self._shape[d + 1:]
    return make_view(self, shape, self._stride, self._offset + start * self._stride[d])


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    return label_as_op(narrow_op(input, dim, start, length), "slice")  # PyTorch's narrow is a slice: SliceBackward0


@_view_op("select(Tensor(a) self, int dim, SymInt index) -> Tensor(a)")
def select_op(self: Tensor, dim: int, index: int) -> Tensor:
    if self.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, self.ndim)
    size = self._shape[d]
    index = operator.index(index)
    if index < -size or index >= size:
        check_int64_arg(index)
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(self._shape)} at "
                         f"dimension {d}")
    if index < 0:
        index += size
    return make_view(self, self._shape[:d] + self._shape[d + 1:], self._stride[:d] + self._stride[d + 1:],
                     self._offset + index * self._stride[d])


def select(input: Tensor, dim: int, index: int) -> Tensor:
    return select_op(input, dim, index)


# compile's ``_unbacked_export.slice_bounds`` (installed by it): (start, stop) of a slice whose
# bound or size is an unbacked symbol of export (``x[:k.item()]``), clamped from the symbols'
# ranges instead of compared; None where no such symbol is involved.
SYMBOLIC_SLICE_BOUNDS: list = [None]


@_view_op("slice(Tensor(a) self, int dim, SymInt start, SymInt end, SymInt step) -> Tensor(a)")
def slice_op(self: Tensor, dim: int, start: int, end: int, step: int) -> Tensor:
    """Basic slicing on one dim; start/end already clamped to [0, size]."""
    d = wrap_dim(dim, self.ndim)
    if step <= 0:
        raise ValueError("step must be greater than zero")
    if SYMBOLIC_SLICE_BOUNDS[0] is not None and not (type(start) is type(end) is type(self._shape[d]) is int):
        # an exported graph's slice of unbacked bounds traced again: the bounds as the ranges prove them
        bounds = SYMBOLIC_SLICE_BOUNDS[0](self._shape[d], start, end)
        if bounds is not None:
            start, end = bounds
    length = (end - start + step - 1) // step
    if length < 0:  # (not max(0, ...): ``length > 0`` of an unbacked size need not be decidable)
        length = 0
    shape = self._shape[:d] + (length,) + self._shape[d + 1:]
    stride = self._stride[:d] + (self._stride[d] * step,) + self._stride[d + 1:]
    return make_view(self, shape, stride, self._offset + start * self._stride[d] if length else self._offset)


# [hook(self, pieces, dim, kind)], installed by ember-autograd: gives the pieces of split/chunk/unbind one
# backward node, which concatenates (stacks) their gradients as PyTorch's SplitBackward0/UnbindBackward0
# do, instead of a node per piece that writes its gradient into full-size zeros (summed at the input).
MULTI_VIEW_HOOK: list = [None]


def _multi_view(self: Tensor, pieces: tuple, dim: int, kind: str) -> tuple:
    hook = MULTI_VIEW_HOOK[0]
    if hook is not None and pieces and getattr(self, "_requires_grad", False):
        hook(self, pieces, dim, kind)
    return pieces


def unbind(input: Tensor, dim: int = 0):
    d = wrap_dim(dim, input.ndim)
    return _multi_view(input, tuple(select_op(input, d, i) for i in range(input._shape[d])), d, "unbind")


def split(tensor: Tensor, split_size_or_sections=None, dim: int = 0, *, split_size=None):
    # ember.split(tensor=, split_size_or_sections=) and Tensor.split(split_size=): PyTorch's names.
    if split_size is not None:
        if split_size_or_sections is not None:
            raise TypeError("split() got multiple values for argument 'split_size'")
        split_size_or_sections = split_size
    if split_size_or_sections is None:
        raise TypeError("split() missing 1 required positional argument: 'split_size_or_sections'")
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, tensor.ndim)
    size = tensor._shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0 or (step == 0 and size != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        if size == 0:
            return (narrow_op(tensor, d, 0, 0),)
        return _multi_view(tensor, tuple(narrow_op(tensor, d, i, min(step, size - i)) for i in range(0, size, step)), d,
                           "split")
    sections = [operator.index(s) for s in split_size_or_sections]
    if sum(sections) != size or any(s < 0 for s in sections):
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), "
            f"but got split_sizes={sections}"
        )
    out, pos = [], 0
    for s in sections:
        out.append(narrow_op(tensor, d, pos, s))
        pos += s
    return _multi_view(tensor, tuple(out), d, "split_with_sizes")


def chunk(input: Tensor, chunks: int, dim: int = 0):
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    d = wrap_dim(dim, input.ndim)
    size = input._shape[d]
    if size == 0:  # PyTorch returns `chunks` empty pieces
        return tuple(narrow_op(input, d, 0, 0) for _ in range(chunks))
    step = max(1, -(-size // chunks))
    return split(input, step, d)


def tensor_split(input: Tensor, indices_or_sections, dim: int = 0):
    d = wrap_dim(dim, input.ndim)
    size = input._shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        base, extra = divmod(size, n)
        out, pos = [], 0
        for i in range(n):
            length = base + (1 if i < extra else 0)
            out.append(narrow_op(input, d, pos, length))
            pos += length
        return tuple(out)
    bounds = [0] + [min(max(i if i >= 0 else i + size, 0), size) for i in indices_or_sections] + [size]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        out.append(narrow_op(input, d, min(a, size), max(0, b - a)))
    return tuple(out)


def movedim(input: Tensor, source, destination) -> Tensor:
    given = []
    for name, dims in (("source", source), ("destination", destination)):
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        # a 0-d tensor takes dims 0 and -1, as in PyTorch
        wrapped = tuple(wrap_dim(d, max(input.ndim, 1)) for d in dims)
        given.append((name, dims, wrapped))
    if len(given[0][1]) == len(given[1][1]):
        for name, dims, wrapped in given:
            if len(set(wrapped)) != len(wrapped):
                raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(dims)})")
    src, dst = given[0][2], given[1][2]
    if input.ndim == 0 and len(src) == len(dst):
        return permute_op(input, ())
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same "
            f"number of dims as destination ({list(dst)} dims)"
        )
    order = [None] * input.ndim
    for s, t_ in zip(src, dst):
        order[t_] = s
    rest = iter(i for i in range(input.ndim) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return permute_op(input, tuple(order))


moveaxis = movedim


@_view_op("diagonal(Tensor(a) self, int offset=0, int dim1=0, int dim2=1) -> Tensor(a)")
def diagonal_op(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    d1, d2 = wrap_dim(dim1, self.ndim), wrap_dim(dim2, self.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if offset >= 0:
        length = max(0, min(self._shape[d1], self._shape[d2] - offset))
        start = offset * self._stride[d2]
    else:
        length = max(0, min(self._shape[d1] + offset, self._shape[d2]))
        start = -offset * self._stride[d1]
    keep = [i for i in range(self.ndim) if i not in (d1, d2)]
    shape = tuple(self._shape[i] for i in keep) + (length,)
    stride = tuple(self._stride[i] for i in keep) + (self._stride[d1] + self._stride[d2],)
    return make_view(self, shape, stride, self._offset + (start if length else 0))


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    return diagonal_op(input, offset, dim1, dim2)


@_view_op("unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)")
def unfold_op(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    d = wrap_dim(dimension, self.ndim)
    dim_size = self._shape[d] if self.ndim else 1
    if size > dim_size:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {dim_size} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if self.ndim == 0:
        return make_view(self, (size,), (1,), self._offset)
    count = (dim_size - size) // step + 1
    shape = self._shape[:d] + (count,) + self._shape[d + 1:] + (size,)
    stride = self._stride[:d] + (self._stride[d] * step,) + self._stride[d + 1:] + (self._stride[d],)
    return make_view(self, shape, stride, self._offset)


def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    return unfold_op(self, dimension, size, step)


@_view_op("as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor(a)")
def as_strided_op(self: Tensor, size, stride, storage_offset=None) -> Tensor:
    size = tuple(_size_int(s) for s in size)
    stride = tuple(_size_int(s) for s in stride)
    offset = self._offset if storage_offset is None else _size_int(storage_offset)
    if all(type(v) is int for v in (*size, *stride, offset)):
        # (symbolic sizes come from a tracer's fake tensors, whose storage is the example's)
        check_view_bounds(self._storage, size, stride, offset, self.dtype)
    return make_view(self, size, stride, offset)


def _size_int(v):
    """An int; an int subclass (compile's symbolic SymInt) keeps its symbolic meaning."""
    return v if isinstance(v, int) and type(v) is not bool else operator.index(v)


def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:
    return as_strided_op(input, size, stride, storage_offset)


@_view_op("alias(Tensor(a) self) -> Tensor(a)")
def alias_op(self: Tensor) -> Tensor:
    return make_view(self, self._shape, self._stride, self._offset)


def detach(self: Tensor) -> Tensor:
    """A view sharing storage that is not part of any autograd graph."""
    out = make_view(self, self._shape, self._stride, self._offset)
    out._base = None  # as in PyTorch: not a differentiable view, so in-place writes never reach self's graph
    if self._layout is not _STRIDED:
        copy_layout(out, self)
    # Subclasses survive detach, except parameters (``_is_param``), whose detached data is a
    # plain tensor, as in PyTorch.
    if type(self) is not Tensor and not getattr(self, "_is_param", False):
        out = out.as_subclass(type(self))
    return out


def detach_(self: Tensor) -> Tensor:
    if self._base is not None:
        raise RuntimeError(
            "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for "
            "training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence "
            "detach_() cannot be called on these gradients. To fix this error, please refer to the "
            "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
    self.grad_fn = None
    self._requires_grad = False
    return self


# -- copies -------------------------------------------------------------------------------------

clone_op = define("clone(Tensor self) -> Tensor", ())
copy_inplace_op = define("copy_(Tensor(a!) self, Tensor src) -> Tensor(a!)", ("inplace",))
to_dtype_op = define("_to_copy(Tensor self, *, ScalarType? dtype=None, Device? device=None) -> Tensor", ())


def _preserved_strides(shape: tuple, stride: tuple) -> tuple:
    """Strides of a dense tensor whose dims are laid out in the same order as ``stride``
    (PyTorch's memory_format=torch.preserve_format); exactly ``stride`` when already dense."""
    ndim = len(shape)

    def should_swap(d0, d1):  # > 0: d0 (placed inner) has the larger stride; stride-0 dims keep their order
        s0, s1 = stride[d0], stride[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return 1 if s0 > s1 else -1
        return 1 if shape[d0] > shape[d1] else 0

    perm = insertion_sorted_dims(ndim, should_swap)
    out = [0] * ndim
    acc = 1
    for d in perm:
        out[d] = acc
        acc *= max(shape[d], 1)
    if all(out[d] == stride[d] for d in range(ndim) if shape[d] != 1):
        return tuple(stride)  # non-overlapping and dense already
    return tuple(out)


def _empty_preserving(self: Tensor) -> Tensor:
    strides = _preserved_strides(self._shape, self._stride)
    flat = new_empty_tensor((numel(self._shape),), self.dtype, self._device)
    out = make_view(flat, self._shape, strides, 0)
    out._base = None  # a fresh tensor, not a view (PyTorch: clone()._base is None)
    return out


@clone_op.kernel("cpu")
def _clone_cpu(self: Tensor) -> Tensor:
    out = _empty_preserving(self)
    _C.copy_(out, self)
    return out


@clone_op.kernel("meta")
def _clone_meta(self: Tensor) -> Tensor:
    return _empty_preserving(self)


clone_op.meta = _clone_meta


def clone(input: Tensor, *, memory_format=None) -> Tensor:
    mf.check(memory_format, "clone")
    out = clone_op(input)
    if memory_format is mf.contiguous_format or memory_format is mf.legacy_contiguous_format:
        return contiguous(out)
    if mf.rank_for(memory_format) is not None:
        return mf.to_format(input, memory_format, copy=True)
    return out


def contiguous(self: Tensor, memory_format=None) -> Tensor:
    mf.check(memory_format)
    if memory_format is mf.preserve_format and not is_contiguous(self._shape, self._stride):
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    if mf.rank_for(memory_format) is not None:
        return mf.to_format(self, memory_format)
    if is_contiguous(self._shape, self._stride):
        return self
    out = to_dtype_op(self, dtype=self.dtype)  # a fresh contiguous copy
    return label_as_op(out, "clone")  # PyTorch's contiguous() is a clone: CloneBackward0


def _copy_check(self: Tensor, src) -> None:
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    broadcast_shapes(self._shape, src._shape)
    if broadcast_shapes(self._shape, src._shape) != self._shape:
        raise RuntimeError(
            f"output with shape {list(self._shape)} doesn't match the broadcast shape "
            f"{list(broadcast_shapes(self._shape, src._shape))}"
        )


@copy_inplace_op.kernel("cpu")
def _copy_cpu(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    if isinstance(src, Tensor) and src._storage is self._storage and src.dtype is self.dtype and \
            src._offset == self._offset and src._stride == self._stride and src._shape == self._shape:
        self._bump_version()  # the very same view: nothing to copy, no overlap check (PyTorch)
        return self
    if isinstance(src, Tensor):
        _check_write(self, (src,))  # before the shape check, as PyTorch
    _copy_check(self, src)
    if src._device.type != "cpu":
        if src._device is META:
            raise NotImplementedError("Cannot copy out of meta tensor; no data!")

        copy_across(self, src, non_blocking)  # the source device's plugin copies to the host
        self._bump_version()
        return self
    if src._storage is self._storage and _overlaps(self, src):
        src = src.clone()  # an overlap PyTorch lets through (not dense): read everything before writing
    _C.copy_(self, src)
    self._bump_version()
    return self


@copy_inplace_op.kernel("meta")
def _copy_meta(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    _copy_check(self, src)
    return self


copy_inplace_op.meta = _copy_meta


def _overlaps(a: Tensor, b: Tensor) -> bool:
    if a._offset == b._offset and a._stride == b._stride and a._shape == b._shape:
        return False  # identical views: elementwise copy is safe
    def extent(t):
        lo = hi = t._offset
        for s, st in zip(t._shape, t._stride):
            if s == 0:
                return (0, -1)
            hi += (s - 1) * st
        return lo, hi
    a0, a1 = extent(a)
    b0, b1 = extent(b)
    return not (a1 < b0 or b1 < a0)


def copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> Tensor:
    return copy_inplace_op(self, src)


@to_dtype_op.kernel("cpu")
def _to_copy_cpu(self: Tensor, *, dtype=None, device=None) -> Tensor:
    dtype = self.dtype if dtype is None else dtype
    device = self._device if device is None else device
    out = new_empty_tensor(self._shape, dtype, device)
    if device.type == "cpu":
        _C.copy_(out, self)
    elif device is not META:
        copy_across(out, self)  # to a plugin device: its backend copies from the host
    return out


@to_dtype_op.kernel("meta")
def _to_copy_meta(self: Tensor, *, dtype=None, device=None) -> Tensor:
    dtype = self.dtype if dtype is None else dtype
    device = self._device if device is None else device
    if device.type != "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    return new_empty_tensor(self._shape, dtype, device)


to_dtype_op.meta = _to_copy_meta


def to(self: Tensor, *args, **kwargs) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``, with copy/non_blocking."""
    if not kwargs and len(args) == 1 and type(args[0]) is dtypes.dtype:
        # to(dtype), the common call (autocast's casts, fix_grad's, mixed precision): what the general
        # path below gives, on the tensor's own device, without parsing arguments.
        dtype = args[0]
        return self if dtype is self.dtype else to_dtype_op(self, dtype=dtype, device=self._device)
    given = tuple(kwargs)
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    memory_format = kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    mf.check(memory_format, "to")
    if memory_format is not None and memory_format is not mf.preserve_format:
        out = to(self, *args, dtype=dtype, device=device, copy=copy)
        if out is self and mf.suggest(self) is memory_format:
            return self  # PyTorch's rule: no copy when the layout already suggests this format
        if mf.rank_for(memory_format) is not None:
            return mf.to_format(out, memory_format, copy=out is self)
        return contiguous(out)
    if args:
        dtype, device, copy = _to_positional(self, args, dtype, device, copy, given)
    dtype = self.dtype if dtype is None else dtypes.to_dtype(dtype)
    device = self._device if device is None else to_device(device)
    if device.type == "cpu" and device.index is not None:
        device = to_device("cpu")
    if device.index is None and device.type == self._device.type:
        device = self._device  # "cuda" names the device a cuda tensor is already on
    if dtype is self.dtype and device == self._device and not copy:
        return self
    if device.type not in ("cpu", "meta"):
        get_backend(device.type)
    return to_dtype_op(self, dtype=dtype, device=device)


_TO_SIGNATURES = (
    " * (ember.device device = None, ember.dtype dtype = None, bool non_blocking = False, bool copy = False, *, "
    "ember.memory_format memory_format = None)\n"
    " * (ember.dtype dtype, bool non_blocking = False, bool copy = False, *, "
    "ember.memory_format memory_format = None)\n"
    " * (Tensor tensor, bool non_blocking = False, bool copy = False, *, ember.memory_format memory_format = None)"
)


def _to_type_name(value) -> str:
    if isinstance(value, Tensor):
        return "Tensor"
    if isinstance(value, dtypes.dtype):
        return "ember.dtype"
    return type(value).__name__


def _to_positional(self: Tensor, args, dtype, device, copy, given):
    """(dtype, device, copy) from Tensor.to's positional arguments, resolved against PyTorch's three
    overloads (device/dtype, dtype, tensor); another combination raises PyTorch's TypeError."""
    def is_dtype(a) -> bool:
        return isinstance(a, dtypes.dtype) or a in (float, int, bool, complex)

    def is_device(a) -> bool:
        return a is None or isinstance(a, (str, type(self._device))) or (type(a) is int)

    first, rest = args[0], list(args[1:])
    ok = True
    if isinstance(first, Tensor) or is_dtype(first):
        # to(tensor, ...) / to(dtype, ...): non_blocking and copy may follow; no device or dtype keyword.
        ok = "device" not in given and "dtype" not in given
        if isinstance(first, Tensor):
            dtype, device = first.dtype, first._device
        else:
            dtype = first
    elif is_device(first):
        ok = "device" not in given
        device = first
        if rest and (rest[0] is None or is_dtype(rest[0])):
            ok = ok and "dtype" not in given
            given_dtype = rest.pop(0)
            dtype = dtype if given_dtype is None else given_dtype
    else:
        ok = False
    flags = ("non_blocking", "copy")
    if len(rest) > 2 or any(type(a) is not bool for a in rest) or any(f in given for f in flags[:len(rest)]):
        ok = False
    if not ok:
        got = ", ".join([_to_type_name(a) for a in args] + list(given))
        raise TypeError(f"to() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n{_TO_SIGNATURES}")
    if len(rest) == 2:
        copy = rest[1]
    return dtype, device, copy


def _cast(dtype):
    def method(self: Tensor, memory_format=None) -> Tensor:
        return to(self, dtype)

    method.__name__ = dtype.name
    return method


def _type_(self: Tensor, dtype=None, non_blocking: bool = False, **kwargs):
    if dtype is None:
        return f"torch.{type_name(self.dtype)}Tensor"
    if isinstance(dtype, str):
        names = {"torch." + v + "Tensor": k for k, v in {
            "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
            "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double"}.items()}
        if dtype not in names:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = getattr(dtypes, names[dtype])
    elif isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), dtypes.dtype):
        dtype = dtype.dtype  # a legacy type: x.type(ember.LongTensor)
    return to(self, dtypes.to_dtype(dtype))


def _new_size(name: str, size: tuple, kwargs: dict) -> tuple:
    """The size of ``new_empty/new_zeros/new_ones``: varargs, one sequence, or ``size=`` by keyword
    (PyTorch's parser takes it so; it was swallowed, giving a 0-d tensor)."""
    extra = set(kwargs) - {"size", "layout", "pin_memory"}
    if extra:
        raise TypeError(f"{name}() got an unexpected keyword argument '{sorted(extra)[0]}'")
    if "size" in kwargs:
        if size:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        return (kwargs["size"],)
    return size


def new_empty(self: Tensor, *size, dtype=None, device=None, requires_grad=False, **kwargs) -> Tensor:
    return empty(*_new_size("new_empty", size, kwargs), dtype=self.dtype if dtype is None else dtype,
                 device=self._device if device is None else device, requires_grad=requires_grad)


def new_zeros(self: Tensor, *size, dtype=None, device=None, requires_grad=False, **kwargs) -> Tensor:
    return zeros(*_new_size("new_zeros", size, kwargs), dtype=self.dtype if dtype is None else dtype,
                 device=self._device if device is None else device, requires_grad=requires_grad)


def new_ones(self: Tensor, *size, dtype=None, device=None, requires_grad=False, **kwargs) -> Tensor:
    return ones(*_new_size("new_ones", size, kwargs), dtype=self.dtype if dtype is None else dtype,
                device=self._device if device is None else device, requires_grad=requires_grad)


def new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, requires_grad=False, **kwargs) -> Tensor:
    return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                device=self._device if device is None else device, requires_grad=requires_grad)


def new_tensor(self: Tensor, data, *, dtype=None, device=None, requires_grad=False, **kwargs) -> Tensor:
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  device=self._device if device is None else device, requires_grad=requires_grad)


fill_inplace_op = define("fill_(Tensor(a!) self, Scalar value) -> Tensor(a!)", ("inplace",))


@fill_inplace_op.kernel("cpu")
def _fill_cpu(self: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        _check_internal_overlap(self)  # PyTorch's fill_(Tensor) refuses an expanded self; fill_(number) writes
        value = value.item()
    elif numel(self._shape) == 1:  # PyTorch's one-element fast path converts float16/bfloat16 unchecked
        check_fill_fits(value, self.dtype)
    else:
        check_scalar_fits(value, self.dtype)
    _C.fill_(self, value)
    self._bump_version()
    return self


@fill_inplace_op.kernel("meta")
def _fill_meta(self: Tensor, value) -> Tensor:
    return self


fill_inplace_op.meta = _fill_meta


def fill_(self: Tensor, value) -> Tensor:
    return fill_inplace_op(self, value)


def zero_(self: Tensor) -> Tensor:
    return fill_inplace_op(self, 0)


def item(self: Tensor):
    if _SYNC_HOOK[0] is not None:
        traced = _SYNC_HOOK[0](self, "Tensor.item()")
        if traced is not None:  # a tracer's symbol for the value (export's unbacked ``u0``)
            return traced
    else:
        # A one-element real CPU tensor read from its storage in C (an optimizer's step counts:
        # one item() per parameter and step); None for anything else.
        v = _C._cpu_item(self)
        if v is not None:
            return v
    if self.numel() != 1:
        raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
    if self._device is META:
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")
    from ...interop import read_scalar

    return read_scalar(self)


def tolist(self: Tensor):
    if _SYNC_HOOK[0] is not None:
        traced = _SYNC_HOOK[0](self, "Tensor.tolist()")
        if traced is not None:  # a tracer's symbols for the values (export's unbacked ``u0``...)
            return traced
    if self._device is META:
        raise RuntimeError("Tensor.tolist() cannot be called on meta tensors")
    from ...interop import to_numpy_copy

    if self.dtype is dtypes.bfloat16:
        return to(self, dtypes.float32).tolist()
    return to_numpy_copy(self).tolist()


# The native fast path (csrc/common/fast_views.cpp, fast_front.cpp): these view ops compute their
# sizes and strides in C, and the public forms read their arguments there, falling back to the
# functions above for anything else (keywords, a dtype view, symbolic sizes, a mode or subclass,
# reshape or flatten that must copy). Kinds: fast_ops.h (op) and fast_front.cpp (front).
view_op._set_fast(4, 0, 0)
transpose_op._set_fast(5, 0, 0)
permute_op._set_fast(6, 0, 0)
unsqueeze_op._set_fast(7, 0, 0)
expand_op._set_fast(8, 0, 0)
select_op._set_fast(14, 0, 0)  # fast_index.cpp, as the three below
slice_op._set_fast(15, 0, 0)
squeeze_op._set_fast(16, 0, 0)
alias_op._set_fast(17, 0, 0)
_C._set_getitem_ops(slice_op, unsqueeze_op, alias_op)  # what x[...] chains besides select (subscripts.py)
view = _C.FastFront(view_op, 3, view)
reshape = _C.FastFront(view_op, 4, reshape)
flatten = _C.FastFront(view_op, 5, flatten)
transpose = _C.FastFront(transpose_op, 6, transpose)
t = _C.FastFront(transpose_op, 7, t)
permute = _C.FastFront(permute_op, 8, permute)
unsqueeze = _C.FastFront(unsqueeze_op, 9, unsqueeze)
expand = _C.FastFront(expand_op, 10, expand)
contiguous = _C.FastFront(view_op, 11, contiguous)
squeeze = _C.FastFront(squeeze_op, 16, squeeze)

# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
adjoint                     function method
as_strided                  function method
broadcast_tensors           function method
broadcast_to                function method
chunk                       function method
clone                       function method
contiguous                  method
copy_                       method
detach_                     function method
diagonal                    function method
expand                      method
expand_as                   method
fill_                       function method
flatten                     function method
H                           property fn=_conj_full_transpose
item                        method
mH                          property fn=adjoint
movedim                     function method alias=moveaxis
mT                          property fn=_matrix_transpose
narrow                      function method
new_empty                   method
new_full                    method
new_ones                    method
new_tensor                  method
new_zeros                   method
permute                     function method
reshape                     function method
reshape_as                  method
select                      function method
split                       function method
squeeze                     function method
T                           property fn=_full_transpose
t                           function method
tensor_split                function method
to                          method
tolist                      method
transpose                   function method alias=swapaxes,swapdims
type                        method fn=_type_
unbind                      function method
unflatten                   function method
unfold                      method
unsqueeze                   function method
view                        method
view_as                     method
zero_                       function method
""")
