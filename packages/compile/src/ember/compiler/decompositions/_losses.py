"""Decompositions of cross-entropy's two native ops, ``_class_nll`` and ``_class_nll_backward``.

Both become row reductions over the (rows, classes) logits that the scheduler fuses into one kernel a row: the
max, the sum of exponentials and the target's logit are reductions of the same row (the target is picked by a
one-hot compare with an iota, so a row is read once), and everything per row after them is its epilogue. The
arithmetic follows the eager kernels (``csrc/cpu/loss.cpp``): ``lse = max + log(sum(exp(x - max)))`` (NaN
where the max is infinite, as PyTorch's log_softmax), ``nll = -w[t] * ((x[t] - max) - log(sum))``; ``smooth =
sum(w * (max - x)) + sum(w) * log(sum)`` (eager's ``-(sum(w * x) - sum(w) * lse)`` cancels to its rounding for
huge scores; this is PyTorch's value); rows whose target is ``ignore_index`` give 0. The forward's fourth
output is that lse per row (ignored rows included), which the backward takes back: given it, the backward is
``exp(x - lse)`` scaled, a pointwise pass with only the target pick and the weight sum as reductions (no max,
no sum of exponentials over the logits again). An out-of-range target, which eager rejects with an error
before computing anything, gives a NaN loss for its row here (a kernel cannot raise).

They are not *core* decompositions: export's ``run_decompositions()`` keeps ``_class_nll`` as one op, as
PyTorch's core ATen set keeps ``nll_loss_forward``; the inductor uses them all.
"""

from __future__ import annotations

from ember._src import dtypes as dt

from .. import _class_nll_split  # noqa: F401 - declares the two ops decomposed below
from ._composites import _compute
from ._registry import ops, register_decomposition


def _per_class(v, ndim):
    """A (C,) vector shaped (1, C, 1, ...) to broadcast against (N, C, d1, ...) scores."""
    v = ops.unsqueeze(v, 0)
    for _ in range(ndim - 2):
        v = ops.unsqueeze(v, -1)
    return v


def _rows(x, target, ignore_index):
    """(valid rows, one-hot of each row's target over the classes, out-of-range targets). A row
    is one sample and position of (N, C, d1, ...) scores, its classes along dim 1."""
    classes = x.shape[1]
    valid = ops.ne(target, ignore_index)
    # compared in int32 (one instruction an element on a GPU, not two): a target that wraps
    # around picks a wrong column, but it is out of range, so its row is NaN anyway
    narrow = dt.int32 if classes < 2 ** 31 else dt.int64
    column = ops.arange_affine(classes, 0, 1, dtype=narrow, device=x.device)
    onehot = ops.eq(ops.unsqueeze(ops._to_copy(target, dtype=narrow), 1), _per_class(column, x.ndim))
    inside = ops.logical_and(ops.ge(target, 0), ops.lt(target, classes))
    bad = ops.logical_and(valid, ops.logical_not(inside))
    return valid, onehot, bad


def _pick(onehot, values):
    """``values[r, target[r]]`` per row as a reduction of the row (0 for a target out of range)."""
    return ops.sum(ops.where(onehot, values, 0.0), [1])


def _row_max_and_sum(x):
    """(max, sum(exp(x - max))) of each row, the max kept as a (rows, 1) column."""
    top = ops.amax(x, [1], True)
    return top, ops.sum(ops.exp(ops.sub(x, top)), [1])


@register_decomposition("_class_nll", core=False)
def class_nll(input, target, weight, ignore_index, log_probs, smooth):
    return _class_nll(input, target, weight, ignore_index, log_probs, smooth)[:4]


@register_decomposition("_class_nll_split", core=False)
def class_nll_split(input, target, weight, ignore_index, log_probs, smooth):
    """``_class_nll`` and ``lo``, the rounding error of its lse (``compiler/_class_nll_split.py``)."""
    return _class_nll(input, target, weight, ignore_index, log_probs, smooth)


def _class_nll(input, target, weight, ignore_index, log_probs, smooth):
    x = _compute(input)
    classes = x.shape[1]
    valid, onehot, bad = _rows(x, target, ignore_index)
    w = None if weight is None else _per_class(_compute(weight), x.ndim)
    picked = _pick(onehot, x)
    w_target = 1.0 if w is None else _pick(onehot, w)
    lse = None
    if not log_probs:
        top_col, total = _row_max_and_sum(x)
        top = ops.squeeze(top_col, [1])
        log_total = ops.log(total)
        lse = ops.where(ops.isinf(top), float("nan"), ops.add(top, log_total))
        # lse's rounding error, (max - lse) + log(sum) (Fast2Sum, exact where |max| >= log(sum))
        lo = ops.where(ops.isinf(top), 0.0, ops.add(ops.sub(top, lse), log_total))
        # x[t] - lse as (x[t] - max) - log(sum), not through lse: for huge scores lse rounds to the
        # max and x[t] - lse to 0 (eager's loss.cpp forms the loss from the same parts)
        picked = ops.where(ops.isinf(top), float("nan"), ops.sub(ops.sub(picked, top), log_total))
    nll = ops.where(valid, ops.neg(ops.mul(w_target, picked)), 0.0)
    nll = ops.where(bad, float("nan"), nll)
    wt = ops._to_copy(valid, dtype=x.dtype) if w is None else ops.where(valid, w_target, 0.0)
    if smooth:
        if lse is None:
            total_x = ops.neg(ops.sum(x if w is None else ops.mul(w, x), [1]))
        else:
            # sum(w * (lse - x)) as sum(w * (max - x)) + sum(w) * log(sum), not sum(w) * lse - sum(w * x):
            # for huge scores the two terms cancel to their rounding (PyTorch sums w * log_softmax)
            gap = ops.sub(top_col, x)
            w_sum = float(classes) if w is None else ops.sum(w, [1])
            total_x = ops.add(ops.sum(gap if w is None else ops.mul(w, gap), [1]), ops.mul(w_sum, log_total))
            total_x = ops.where(ops.isinf(top), float("nan"), total_x)
        sm = ops.where(valid, total_x, 0.0)
    else:
        sm = ops.full((0,), 0.0, dtype=x.dtype, device=x.device)
    lse_out = ops.full((0,), 0.0, dtype=x.dtype, device=x.device) if lse is None else lse
    return nll, sm, wt, lse_out, (lse_out if lse is None else lo)


@register_decomposition("_class_nll_split_backward", core=False)
def class_nll_split_backward(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse, lo):
    """``_class_nll_backward`` with the softmax ``exp((x - lse) - lo)``: exact to rounding for huge lse."""
    return class_nll_backward(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse, lo)


@register_decomposition("_class_nll_backward", core=False)
def class_nll_backward(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse=None, lo=None):
    """dx[r, i] = exp(x[r, i] - lse[r]) * (a + s * sum(w)) - s * w[i] - (i == t) * a, with
    a = g_nll * w[t], s = g_smooth (as eager's one-pass kernel); lse is the forward's saved
    one, or without it recomputed: e[r, i] / sum(e[r]) with e = exp(x - max). An ignored row
    has a = s = 0, so its gradient is 0 * softmax: 0, or NaN where its lse is (PyTorch's)."""
    x = _compute(input)
    classes = x.shape[1]
    valid, onehot, _ = _rows(x, target, ignore_index)
    w = None if weight is None else _per_class(_compute(weight), x.ndim)
    zero = ops.full((), 0.0, dtype=x.dtype, device=x.device)
    a = zero
    if grad_nll is not None:
        a = _compute(grad_nll)
        if w is not None:
            a = ops.mul(a, _pick(onehot, w))
    a = ops.where(valid, a, 0.0)
    s = None if grad_smooth is None else ops.where(valid, _compute(grad_smooth), 0.0)
    a_col = ops.unsqueeze(a, 1)
    s_col = None if s is None else ops.unsqueeze(s, 1)
    grad = zero
    if not log_probs:
        scale = a
        if s is not None:
            w_sum = float(classes) if w is None else ops.sum(w, [1])
            scale = ops.add(a, ops.mul(s, w_sum))
        if lse is not None:
            shifted = ops.sub(x, ops.unsqueeze(_compute(lse), 1))
            if lo is not None:
                shifted = ops.sub(shifted, ops.unsqueeze(_compute(lo), 1))
            grad = ops.mul(ops.exp(shifted), ops.unsqueeze(scale, 1))
        else:
            top, total = _row_max_and_sum(x)
            grad = ops.mul(ops.exp(ops.sub(x, top)), ops.unsqueeze(ops.div(scale, total), 1))
    if s_col is not None:
        grad = ops.sub(grad, s_col if w is None else ops.mul(s_col, w))
    grad = ops.sub(grad, ops.where(onehot, a_col, 0.0))
    return ops._to_copy(grad, dtype=input.dtype) if grad.dtype is not input.dtype else grad
