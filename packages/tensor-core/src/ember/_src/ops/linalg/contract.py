"""Contractions composed from the matrix-product ops: inner, tensordot, chain_matmul,
multi_dot and einsum.

einsum: the equation is parsed, every operand is viewed over one shared list of labels
(repeated labels become a diagonal view, missing ones a size-1 dim), and the operands are
contracted left to right, each pair as a single bmm (as PyTorch does). Labels used by only
one operand are summed first with a product against a vector of ones.
"""

from __future__ import annotations

import builtins
import itertools

from ... import dtypes
from ...optable import declare
from ...shapes import numel, wrap_dim
from ...tensor import Tensor
from .._common import write_out
from ..creation.factories import ones
from ..pointwise import elementwise
from ..shape import views
from .products import _mm_check, _out, bmm_op, mm_op, mv_op, type_name

_ELL = "..."


def _parse_term(term: str, where: str, positions: list | None = None) -> list:
    """Labels of one subscript term, with '...' as a single token. ``positions``: each of the term's
    characters' index in the equation as written (spaces included), the index an error names."""
    labels, i = [], 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if term[i:i + 3] != _ELL or _ELL in labels:
                raise RuntimeError(f"einsum(): found '.' for {where} that is not part of any ellipsis")
            labels.append(_ELL)
            i += 3
            continue
        if not c.isascii() or not c.isalpha():
            at = positions[i] if positions is not None else i
            raise RuntimeError(f"einsum(): invalid subscript given at index {at} in the equation string, "
                               f"subscripts must be in [a-zA-Z]")
        labels.append(c)
        i += 1
    return labels


def _from_sublists(args) -> tuple:
    """einsum(op1, [0, 1], op2, [1, 2], [0, 2]) as an equation string and operands."""
    def letters(sub):
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append(_ELL)
            elif isinstance(s, int) and 0 <= s < 52:
                out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise RuntimeError("einsum(): subscript in subscript list is not within the valid range [0, 52)")
        return "".join(out)

    args = list(args)
    output = letters(args.pop()) if len(args) % 2 == 1 else None
    operands, terms = args[0::2], [letters(s) for s in args[1::2]]
    eq = ",".join(terms) + ("" if output is None else "->" + output)
    return eq, operands


def einsum(*args) -> Tensor:
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand")
    if isinstance(args[0], Tensor):
        equation, operands = _from_sublists(args)
    else:
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    for op in operands:
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum(): operands must be Tensors, not {type(op).__name__}")
    eq = equation.replace(" ", "")
    where = [i for i, c in enumerate(equation) if c != " "]  # eq's characters' indices in the equation
    lhs, arrow, rhs = eq.partition("->")
    terms, start = [], 0
    for i, t in enumerate(lhs.split(",")):
        terms.append(_parse_term(t, f"operand {i}", where[start:start + len(t)]))
        start += len(t) + 1
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    dtype = operands[0].dtype
    for op in operands[1:]:
        if op.dtype is not dtype:
            raise RuntimeError(f"expected scalar type {type_name(dtype)} but found {type_name(op.dtype)}")

    # Ellipsis dims become labels "#0".."#{n-1}", right-aligned across operands.
    ell_ndims = []
    for i, (term, op) in enumerate(zip(terms, operands)):
        nlab = len(term) - (1 if _ELL in term else 0)
        if _ELL in term:
            if op.ndim < nlab:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nlab}) is more than the "
                                   f"number of dimensions ({op.ndim}) for operand {i}")
            ell_ndims.append(op.ndim - nlab)
        else:
            if op.ndim != nlab:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nlab}) does not match "
                                   f"the number of dimensions ({op.ndim}) for operand {i} and no ellipsis was given")
            ell_ndims.append(0)
    n_ell = max(ell_ndims)
    ell_labels = [f"#{j}" for j in range(n_ell)]

    def expand_term(term, n):
        out = []
        for lab in term:
            out.extend(ell_labels[n_ell - n:] if lab == _ELL else [lab])
        return out

    op_labels = [expand_term(t, n) for t, n in zip(terms, ell_ndims)]
    if arrow:
        out_terms = _parse_term(rhs, "the output", where[len(lhs) + 2:])
        seen = set()
        for lab in out_terms:
            if lab == _ELL:
                continue
            if lab in seen:
                raise RuntimeError(f"einsum(): output subscript {lab} appears more than once in the output")
            if not any(lab in t for t in terms):
                raise RuntimeError(f"einsum(): output subscript {lab} does not appear in the equation for any "
                                   f"input operand")
            seen.add(lab)
        out_labels = expand_term(out_terms, n_ell)
    else:
        counts = {}
        for t in terms:
            for lab in t:
                if lab != _ELL:
                    counts[lab] = counts.get(lab, 0) + 1
        out_labels = ell_labels + sorted(lab for lab, c in counts.items() if c == 1)

    # One label order for all: output labels, then contracted ones in order of appearance.
    order = list(out_labels)
    for labs in op_labels:
        for lab in labs:
            if lab not in order:
                order.append(lab)
    sizes: dict = {}
    aligned, present = [], []
    for i, (labs, op) in enumerate(zip(op_labels, operands)):
        aligned.append(_align(op, labs, order, i, sizes))
        present.append(set(labs))
    for lab in out_labels:
        sizes.setdefault(lab, 1)

    out_set = set(out_labels)
    result, has = None, set()
    for i, op in enumerate(aligned):
        later = set().union(*present[i + 1:]) if i + 1 < len(aligned) else set()
        # Labels only this operand has, and nobody needs afterwards, are summed right away.
        private = [order.index(lab) for lab in present[i] if lab not in out_set and lab not in later
                   and lab not in has]
        if private:
            op = _sum(op, private)
        mine = set(present[i]) - {order[d] for d in private}
        if result is None:
            result, has = op, mine
            continue
        contract = [d for d, lab in enumerate(order) if lab in has and lab in mine
                    and lab not in out_set and lab not in later]
        # Contracted labels only the running result still carries.
        solo = [order.index(lab) for lab in has if lab not in out_set and lab not in later
                and lab not in mine]
        if solo:
            result = _sum(result, solo)
        result = _pair(result, op, contract)
        has = (has | mine) - {order[d] for d in contract + solo}
    leftover = [order.index(lab) for lab in has if lab not in out_set]
    if leftover:
        result = _sum(result, leftover)
    shape = tuple(result._shape[d] for d in range(len(out_labels)))
    return views.reshape(result, shape)


def _sum(t: Tensor, dims: list) -> Tensor:
    """Sums labels out like PyTorch's einsum, with ``sum``'s promotion of integers to int64."""
    if not t.dtype.is_floating_point:
        t = views.to(t, dtypes.int64)
    return _sum_keepdim(t, dims)


def _align(op: Tensor, labs: list, order: list, index: int, sizes: dict) -> Tensor:
    """``op`` viewed with one dim per label of ``order``: repeated labels as a diagonal (strides
    added), absent labels as size 1."""
    size_of, stride_of = {}, {}
    for lab, s, st in zip(labs, op._shape, op._stride):
        if lab in size_of:
            if size_of[lab] != s:
                raise RuntimeError(f"einsum(): subscript {lab} is repeated for operand {index} but the sizes don't "
                                   f"match, {size_of[lab]} != {s}")
            stride_of[lab] += st
        else:
            size_of[lab], stride_of[lab] = s, st
    for lab, s in size_of.items():
        prev = sizes.get(lab)
        if prev is None or prev == 1:
            sizes[lab] = s
        elif s != 1 and s != prev:
            if lab.startswith("#"):
                raise RuntimeError(f"einsum(): operands do not broadcast: dimension covered by ellipsis in operand "
                                   f"{index} has size {s} which does not broadcast with previously seen ellipsis "
                                   f"with size {prev} for the respective dimension")
            raise RuntimeError(f"einsum(): subscript {lab} has size {s} for operand {index} which does not "
                               f"broadcast with previously seen size {prev}")
    shape = tuple(size_of.get(lab, 1) for lab in order)
    stride = tuple(stride_of.get(lab, 0) for lab in order)
    return views.as_strided(op, shape, stride, op._offset)


def _pair(left: Tensor, right: Tensor, contract: list) -> Tensor:
    """Contracts two aligned operands over ``contract`` dims (left as size 1) with one bmm."""
    nd = left.ndim
    for d in contract:  # a contracted dim broadcast on one side is summed on the other first
        if left._shape[d] != right._shape[d]:
            if left._shape[d] == 1:
                right = _sum_keepdim(right, [d])
            else:
                left = _sum_keepdim(left, [d])
    batch, lo, ro = [], [], []
    for d in range(nd):
        if d in contract:
            continue
        ls, rs = left._shape[d], right._shape[d]
        if ls == rs and ls != 1:
            batch.append(d)
        elif rs == 1:
            lo.append(d)
        else:
            ro.append(d)

    def prod(t, dims):
        return numel([t._shape[d] for d in dims])

    nb, nl, nr, nc = prod(left, batch), prod(left, lo), prod(right, ro), prod(left, contract)
    a = views.reshape(views.permute_op(left, tuple(batch + lo + contract + ro)), (nb, nl, nc))
    b = views.reshape(views.permute_op(right, tuple(batch + contract + ro + lo)), (nb, nc, nr))
    out = bmm_op(a, b)
    dims = batch + lo + ro + contract
    shape = tuple(left._shape[d] for d in batch + lo) + tuple(right._shape[d] for d in ro) + (1,) * len(contract)
    out = views.view_op(out, shape)
    inverse = [0] * nd
    for pos, d in enumerate(dims):
        inverse[d] = pos
    return views.permute_op(out, tuple(inverse))


def inner(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor:
    if input.ndim == 0 or other.ndim == 0:
        return write_out(elementwise.mul(input, other), out)
    if input._shape[-1] != other._shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input._shape)} and {list(other._shape)}")
    return tensordot(input, other, ([-1], [-1]), out=out)


def chain_matmul(*matrices, out: Tensor | None = None) -> Tensor:
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return _out(views.clone(matrices[0]), out)
    return _out(_chain(list(matrices)), out)


def _chain(mats: list) -> Tensor:
    """Product of 2-D matrices in the cheapest order (the classic O(n^3) chain-order DP)."""
    n = len(mats)
    if n == 2:
        return mm_op(mats[0], mats[1])
    for x, y in itertools.pairwise(mats):
        if x._shape[1] != y._shape[0]:
            _mm_check(x, y)
    dims = [mats[0]._shape[0]] + [m._shape[1] for m in mats]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def build(i, j):
        if i == j:
            return mats[i]
        s = split[i][j]
        return mm_op(build(i, s), build(s + 1, j))

    return build(0, n - 1)


def multi_dot(tensors, *, out: Tensor | None = None) -> Tensor:
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0], tensors[-1]
    if first.ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first.ndim}D")
    if last.ndim not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last.ndim}D")
    for i, t in enumerate(tensors[1:-1], 1):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
        if t.dtype is not first.dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{type_name(first.dtype)} and tensor {i} is {type_name(t.dtype)}")
    mats = list(tensors)
    if first.ndim == 1:
        mats[0] = views.unsqueeze_op(first, 0)
    if last.ndim == 1:
        mats[-1] = views.unsqueeze_op(last, 1)
    result = _chain(mats)
    if first.ndim == 1:
        result = views.squeeze_op(result, (0,))
    if last.ndim == 1:
        result = views.squeeze_op(result, (-1,))
    return _out(result, out)


def tensordot(a: Tensor, b: Tensor, dims=2, out: Tensor | None = None) -> Tensor:
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int) and not isinstance(dims, builtins.bool):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = dims
        if not isinstance(dims_a, (list, tuple)) or not isinstance(dims_b, (list, tuple)):
            raise TypeError("tensordot(): argument 'dims' must be an int or a pair of lists of ints")
        dims_a, dims_b = list(dims_a), list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    ca, cb = [wrap_dim(d, a.ndim) for d in dims_a], [wrap_dim(d, b.ndim) for d in dims_b]
    presum_a, presum_b = [], []
    for da, db, ra, rb in zip(ca, cb, dims_a, dims_b):
        sa, sb = a._shape[da], b._shape[db]
        if sa == sb:
            continue
        if sb == 1:  # PyTorch sums a broadcast contracted dim on the other side
            presum_a.append(da)
        elif sa == 1:
            presum_b.append(db)
        else:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {sa} in dim {ra} and "
                               f"second has size {sb} in dim {rb}")
    if presum_a:
        a = _sum_keepdim(a, presum_a)
    if presum_b:
        b = _sum_keepdim(b, presum_b)
    free_a = [d for d in range(a.ndim) if d not in ca]
    free_b = [d for d in range(b.ndim) if d not in cb]
    csize = numel([a._shape[d] for d in ca])
    ma = views.reshape(views.permute_op(a, tuple(free_a + ca)), (numel([a._shape[d] for d in free_a]), csize))
    mb = views.reshape(views.permute_op(b, tuple(cb + free_b)), (csize, numel([b._shape[d] for d in free_b])))
    shape = tuple(a._shape[d] for d in free_a) + tuple(b._shape[d] for d in free_b)
    return _out(views.view_op(mm_op(ma, mb), shape), out)


def _sum_keepdim(t: Tensor, dims: list) -> Tensor:
    """Sum over ``dims`` keeping them as size 1, as a product with a vector of ones."""

    dims = sorted(set(dims))
    keep = [d for d in range(t.ndim) if d not in dims]
    rows = numel([t._shape[d] for d in keep])
    red = numel([t._shape[d] for d in dims])
    flat = views.reshape(views.permute_op(t, tuple(keep + dims)), (rows, red))
    summed = mv_op(flat, ones((red,), dtype=t.dtype, device=t._device))
    return views.view_op(summed, tuple(1 if d in dims else s for d, s in enumerate(t._shape)))


# PyTorch has no Tensor.einsum/tensordot/chain_matmul/multi_dot: api.py attaches every function
# defined under ember._src.ops as a method, so these report their public module instead.
for _fn in (einsum, tensordot, chain_matmul):
    _fn.__module__ = "ember"
multi_dot.__module__ = "ember.linalg"


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
chain_matmul                function
einsum                      function
inner                       function method
multi_dot                   linalg=multi_dot
tensordot                   function
""")
