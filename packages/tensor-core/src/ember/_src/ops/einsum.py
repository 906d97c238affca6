"""einsum: the equation is parsed, every operand is viewed over one shared list of labels
(repeated labels become a diagonal view, missing ones a size-1 dim), and the operands are
contracted left to right, each pair as a single bmm (as PyTorch does). Labels used by only
one operand are summed first with a product against a vector of ones.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..shapes import numel
from ..tensor import Tensor
from . import views as vw
from .linalg import _sum_keepdim, bmm_op, type_name

__all__ = ["einsum"]

_ELL = "..."


def _parse_term(term: str, where: str) -> list:
    """Labels of one subscript term, with '...' as a single token."""
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
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation string, "
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
    lhs, arrow, rhs = eq.partition("->")
    terms = [_parse_term(t, f"operand {i}") for i, t in enumerate(lhs.split(","))]
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
        out_terms = _parse_term(rhs, "the output")
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
    return vw.reshape(result, shape)


def _sum(t: Tensor, dims: list) -> Tensor:
    """Sums labels out like PyTorch's einsum, with ``sum``'s promotion of integers to int64."""
    if not t.dtype.is_floating_point:
        t = vw.to(t, dt.int64)
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
    return vw.as_strided(op, shape, stride, op._offset)


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
    a = vw.reshape(vw.permute_op(left, tuple(batch + lo + contract + ro)), (nb, nl, nc))
    b = vw.reshape(vw.permute_op(right, tuple(batch + contract + ro + lo)), (nb, nc, nr))
    out = bmm_op(a, b)
    dims = batch + lo + ro + contract
    shape = tuple(left._shape[d] for d in batch + lo) + tuple(right._shape[d] for d in ro) + (1,) * len(contract)
    out = vw.view_op(out, shape)
    inverse = [0] * nd
    for pos, d in enumerate(dims):
        inverse[d] = pos
    return vw.permute_op(out, tuple(inverse))
