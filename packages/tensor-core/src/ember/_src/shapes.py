"""Shape arithmetic shared by meta functions: sizes, strides, broadcasting, dim wrapping."""

from __future__ import annotations

import operator


class Size(tuple):
    """The shape of a tensor: a tuple of ints, printed as ``ember.Size([2, 3])``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ember.Size({list(self)!r})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, item):
        result = tuple.__getitem__(self, item)
        return Size(result) if isinstance(item, slice) else result

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __reduce__(self):
        return (Size, (tuple(self),))


def as_shape(args) -> tuple:
    """Accepts ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and ``f(Size)``; returns a tuple of ints."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    out = []
    for s in args:
        if type(s) is not int and isinstance(s, int) and type(s) is not bool:
            out.append(s)  # an int subclass (compile's SymInt) keeps its symbolic meaning
            continue
        try:
            v = operator.index(s)
        except TypeError:
            raise TypeError(
                f"expected a sequence of integers for the size, but got an element of type {type(s).__name__}"
            ) from None
        out.append(v)
    return tuple(out)


def size_varargs(name: str, param: str, args: tuple, keyword: dict) -> tuple:
    """The sizes of ``x.expand(2, 3)``-style methods: given positionally, or as one sequence by
    keyword (``x.expand(size=(2, 3))``); none at all is PyTorch's "missing argument" TypeError."""
    if keyword:
        if args or set(keyword) != {param}:
            bad = sorted(set(keyword) - {param}) or [param]
            raise TypeError(f"{name}() got an unexpected keyword argument '{bad[0]}'")
        return as_shape((keyword[param],))
    if not args:
        raise TypeError(f'{name}() missing 1 required positional arguments: "{param}"')
    return as_shape(args)


def check_sizes(shape: tuple) -> None:
    for s in shape:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(shape)}")


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def contiguous_strides(shape) -> tuple:
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def is_contiguous(shape, stride) -> bool:
    expected = 1
    for size, st in zip(reversed(shape), reversed(stride)):
        if size == 0:
            return True
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def is_non_overlapping_and_dense(shape, stride) -> bool:
    """Whether the elements fill one block of memory exactly once, in some order of the dims
    (PyTorch's rule: dims of size 0 or 1 constrain nothing)."""
    dims = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: stride[d])
    expected = 1
    for d in dims:
        if stride[d] != expected:
            return False
        expected *= shape[d]
    return True


# Note [Pointwise result layout]: a pointwise op's result is laid out as PyTorch's TensorIterator
# lays it out, so channels-last (or transposed) inputs give results of the same layout:
# - inputs all of the result's shape: all contiguous -> contiguous; all channels-last dense ->
#   channels-last; all non-overlapping and dense with the same strides -> those strides;
# - otherwise the dims are ordered by the inputs' strides (the first input that tells two dims
#   apart decides; broadcast dims tell nothing; equal strides put the smaller dim inner) and the
#   result is dense in that order.
# Number operands take no part. csrc/common/fast_pointwise.cpp implements the same rule.
def pointwise_strides(shape, operands) -> tuple | None:
    """The result strides for ``shape`` given the tensor operands' ``(shape, stride)`` pairs; None
    when the result is contiguous (the common case, decided first)."""
    ndim = len(shape)
    if ndim < 2:
        return None
    for s, st in operands:
        if not is_contiguous(s, st):
            break
    else:
        return None
    if numel(shape) == 0:
        return None
    if all(len(s) == ndim and tuple(s) == tuple(shape) for s, _ in operands):
        if ndim in (4, 5):
            order = (1, 3, 2, 0) if ndim == 4 else (1, 4, 3, 2, 0)
            if all(_dense_in_order(s, st, order) for s, st in operands):
                return _dense_strides(shape, order)
        first = tuple(operands[0][1])
        if all(tuple(st) == first for _, st in operands) and is_non_overlapping_and_dense(shape, first):
            return first
    rows = []
    for s, st in operands:
        off = ndim - len(s)
        rows.append([0] * off + [0 if s[i] == 1 and shape[off + i] != 1 else st[i] for i in range(len(s))])

    def should_swap(d0, d1):
        for row in rows:
            s0, s1 = row[d0], row[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = insertion_sorted_dims(ndim, should_swap)
    if perm == list(range(ndim - 1, -1, -1)):
        return None
    return _dense_strides(shape, perm)


def insertion_sorted_dims(ndim: int, should_swap) -> list:
    """PyTorch's layout permutation, innermost dim first: starting from the logical order reversed,
    an insertion sort that moves a dim inwards while ``should_swap(outer, inner) > 0`` and stops at
    the first pair that compares < 0 (ties, 0, keep scanning). Stable where strides do not decide."""
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


def _dense_in_order(shape, stride, order) -> bool:
    expected = 1
    for d in order:
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def _dense_strides(shape, order) -> tuple:
    out = [0] * len(shape)
    acc = 1
    for d in order:
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


def wrap_dim(dim: int, ndim: int) -> int:
    """Wraps a possibly negative dim; a 0-d tensor accepts dims -1 and 0 (PyTorch's rule)."""
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TypeError(f"dim must be an int, got {type(dim).__name__}") from None
    n = max(ndim, 1)
    if dim < -n or dim >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def wrap_dims(dims, ndim: int) -> tuple:
    if isinstance(dims, int):
        dims = (dims,)
    wrapped = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        seen = set()
        for d in wrapped:
            if d in seen:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
            seen.add(d)
    return wrapped


def broadcast_shapes(*shapes) -> tuple:
    """The shape all of ``shapes`` broadcast to, or RuntimeError naming the mismatch."""
    if len(shapes) == 2:
        a, b = shapes
        if a == b:
            return tuple(a)
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        offset = ndim - len(shape)
        for i in reversed(range(len(shape))):  # from the last dim, as PyTorch reports the first mismatch
            size = shape[i]
            j = offset + i
            current = result[j]
            if size == current or size == 1:
                continue
            if current == 1:
                result[j] = size
            else:
                raise RuntimeError(
                    f"The size of tensor a ({current}) must match the size of tensor b ({size}) "
                    f"at non-singleton dimension {j}"
                )
    return tuple(result)


def infer_size(shape, total: int) -> tuple:
    """Resolves one -1 entry of a view/reshape shape."""
    shape = list(shape)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if unknown:
        if known == 0 and total == 0:
            raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                               "unspecified dimension size -1 can be any value and is ambiguous")
        if known == 0 or total % known != 0:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
        shape[unknown[0]] = total // known
    elif known != total:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
    return tuple(shape)


def view_strides(old_shape, old_stride, new_shape):
    """Strides for viewing (old_shape, old_stride) as new_shape without copying, or None.

    Groups of old dimensions that are contiguous among themselves can be re-split freely.
    """
    if numel(old_shape) == 0:
        return contiguous_strides(new_shape)
    # Drop size-1 dims from the old layout; they constrain nothing.
    old = [(s, st) for s, st in zip(old_shape, old_stride) if s != 1]
    new_stride = [0] * len(new_shape)
    oi = 0
    ni = 0
    n_new = len(new_shape)
    while ni < n_new:
        if new_shape[ni] == 1:
            new_stride[ni] = 1 if not old or oi >= len(old) else old[oi][1] * old[oi][0]
            ni += 1
            continue
        if oi >= len(old):
            return None
        # Take a chunk of old dims that is contiguous within itself.
        chunk_size = old[oi][0]
        chunk_inner_stride = old[oi][1]
        oj = oi
        while oj + 1 < len(old) and old[oj][1] == old[oj + 1][1] * old[oj + 1][0]:
            oj += 1
        chunk_total = 1
        for k in range(oi, oj + 1):
            chunk_total *= old[k][0]
        chunk_inner_stride = old[oj][1]
        # Consume new dims until they multiply to this chunk.
        acc = 1
        start = ni
        while ni < n_new and acc < chunk_total:
            acc *= new_shape[ni]
            ni += 1
        if acc != chunk_total:
            return None
        st = chunk_inner_stride
        for k in range(ni - 1, start - 1, -1):
            new_stride[k] = st
            st *= new_shape[k]
        oi = oj + 1
        del chunk_size
    if oi != len(old):
        return None
    return tuple(new_stride)
