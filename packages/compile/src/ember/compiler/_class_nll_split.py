"""cross-entropy's op pair as AOT autograd records it in a training graph: ``_class_nll`` with a fifth
output, the rounding error of its log-sum-exp, and a backward that reads it.

``_class_nll``'s fourth output, ``lse = max + log(sum(exp(x - max)))``, is rounded to the scores'
compute dtype: with |lse| ~ 1e4 it is off by ~1e-3 (float32) and ``exp(x - lse)``, the backward's
softmax, by as much relative; at 1e30 ``log(sum)`` is lost altogether (every probability 1). Eager's
backward recomputes such a row (``lse_exact_enough`` in tensor-core's loss.cpp); a compiled kernel
cannot branch on a row, so the joint graph (``_aot_joint``) records these two ops instead:

- ``_class_nll_split(...) -> (nll, smooth, weight, lse, lo)``: ``lo = (max - lse) + log(sum)``, the
  error of the rounded sum (Fast2Sum: exact where |max| >= log(sum), which is where it matters), 0
  where the max is infinite. Its decomposition (``decompositions/_losses.py``) is ``_class_nll``'s
  plus that one row expression; its eager kernel is ``_class_nll``'s and ``lo`` from float64.
- ``_class_nll_split_backward(..., lse, lo)``: its decomposition forms ``exp((x - lse) - lo)``,
  where ``x - lse`` is exact for every score within a factor 2 of ``lse`` (Sterbenz) — all that
  contribute once |lse| is large — so the softmax is eager's to rounding; its eager kernel is
  ``_class_nll_backward``'s (``lo`` unread: eager recomputes the rows it must).

Either side may run eagerly while the other is compiled (a graph falling back): each reads the
other's outputs correctly. Neither is differentiable (they exist only inside partitioned graphs).
"""

from __future__ import annotations

from ember._src import dtypes
from ember._src.device import META
from ember._src.dispatch import define
from ember._src.ops.nn.loss import _class_nll_backward_kernel, _class_nll_kernel
from ember._src.tensor import new_empty_tensor

from .._higher_order_ops._subgraph import without_modes


def _residual(input, lse):
    """``lo`` of rows of (N, C, d1, ...) scores given their rounded ``lse``, from float64."""
    x = input.to(dtypes.float64)
    top = x.amax(1)
    log_total = (x - top.unsqueeze(1)).exp().sum(1).log()
    lo = (top - lse.to(dtypes.float64)) + log_total
    return lo.nan_to_num(0.0, 0.0, 0.0).to(lse.dtype)


def _split_kernel(input, target, weight, ignore_index, log_probs, smooth):
    nll, sm, wt, lse = _class_nll_kernel(input, target, weight, ignore_index, log_probs, smooth)
    if log_probs or input._device is META:
        return nll, sm, wt, lse, new_empty_tensor(tuple(lse.shape), lse.dtype, input._device)
    return nll, sm, wt, lse, without_modes(_residual, input, lse)


def _split_backward_kernel(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse, lo):
    return _class_nll_backward_kernel(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse)


CLASS_NLL_SPLIT = define(
    "_class_nll_split(Tensor input, Tensor target, Tensor? weight, int ignore_index, bool log_probs, bool smooth) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)", ("batch_loop",), differentiable=False)
CLASS_NLL_SPLIT.kernel("cpu")(_split_kernel)
CLASS_NLL_SPLIT.kernels["meta"] = CLASS_NLL_SPLIT.meta = _split_kernel
CLASS_NLL_SPLIT.__module__ = __name__

CLASS_NLL_SPLIT_BACKWARD = define(
    "_class_nll_split_backward(Tensor? grad_nll, Tensor? grad_smooth, Tensor input, Tensor target, Tensor? weight, "
    "int ignore_index, bool log_probs, Tensor lse, Tensor lo) -> Tensor", ("batch_loop",), differentiable=False)
CLASS_NLL_SPLIT_BACKWARD.kernel("cpu")(_split_backward_kernel)
CLASS_NLL_SPLIT_BACKWARD.kernels["meta"] = CLASS_NLL_SPLIT_BACKWARD.meta = _split_backward_kernel
CLASS_NLL_SPLIT_BACKWARD.__module__ = __name__
