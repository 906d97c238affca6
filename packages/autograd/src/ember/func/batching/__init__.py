"""The batching-rule table: ``BATCH_RULES[op_name] = rule`` for every op of ``ember.dispatch.ops``.

Rules are written per op family (one module each) and keyed by op name, beside the derivative
formulas (``ember.autograd.formulas``). Ops whose rule is a per-sample loop are listed, by name,
in ``FALLBACK``, or carry the op tag ``batch_loop`` (ops other packages define, e.g. ember-compile's
``_class_nll_split``: a tag, so that defining them imports nothing of ember.func, whose BatchedTensor
would switch the dispatcher's subclass path on); running one warns, as PyTorch does.
``test_func_vmap_coverage`` fails for any op that has neither a rule nor a place in ``FALLBACK``.
"""

from __future__ import annotations

import warnings

from ember._src.dispatch import OPS
from ember._src.tensor import Tensor

from .._levels import vmap_level
from . import dims, fresh, indexing, linalg, nn, pointwise, views
from ._common import batch_size, finish_inplace, inplace_error, unwrap, wrap
from .random import RANDOM_OPS, random_rule

# Ops batched by running the op once per sample (their rule would cost more code than their use).
# One rule also loops, for one argument pattern only: ``_class_nll`` with per-sample (batched)
# class weights (nn.fold_rule's ``fixed_args``); it warns the same way.
FALLBACK = frozenset({
    "_class_nll_backward",  # the one-pass cross_entropy backward; vmapped backward takes the composite
    "_scaled_dot_product_attention_math_backward",  # likewise for attention's native backward
    "_softmax_backward_data",  # likewise for softmax's
    "_log_softmax_backward_data",
    "_gru_cell_fused",
    "_gru_cell_fused_backward",
    "_gru_layer",
    "_gru_layer_backward",
    "_lstm_cell_fused",
    "_lstm_cell_fused_backward",
    "_lstm_layer",
    "_lstm_layer_backward",
    "gelu_backward",  # likewise for gelu's native backward
    "histc",
    "linalg_lstsq",
    "masked_scatter_",
    "native_channel_shuffle",  # torch.native_channel_shuffle: no derivative, rarely called
    "searchsorted",
})


def factory_rule(op, level, args, kwargs):
    """Factories take no tensor to batch: the result is the same for every sample."""
    return op(*args, **kwargs)


def _random_rule(op, level, args, kwargs):
    return random_rule(op, vmap_level(level), args, kwargs)


def loop_fallback(op, level, args, kwargs):
    """Runs ``op`` once per sample and stacks the results (with PyTorch's performance warning)."""
    warnings.warn(
        f"There is a performance drop because we have not yet implemented the batching rule for ember.ops.{op.name}. "
        "Please file us an issue on GitHub so that we can prioritize its implementation.", UserWarning, stacklevel=4)
    size = batch_size(level)
    inplace = "inplace" in op.tags
    if inplace and not unwrap(args[0], level)[1]:
        raise inplace_error(op.name)
    results = []
    for b in range(size):
        sample_args = [_sample(a, level, b) for a in args]
        sample_kwargs = {k: _sample(v, level, b) for k, v in kwargs.items()}
        results.append(op(*sample_args, **sample_kwargs))
    if inplace:
        finish_inplace(args[0])
        return args[0]
    first = results[0]
    if isinstance(first, Tensor):
        return wrap(_stack(results), level)
    if isinstance(first, (tuple, list)):
        columns = []
        for i, item in enumerate(first):
            if item is None:
                columns.append(None)
            elif isinstance(item, Tensor):
                columns.append(wrap(_stack([r[i] for r in results]), level))
            else:
                raise RuntimeError(f"vmap: ember.ops.{op.name} returned a non-tensor, which cannot be batched")
        return type(first)(columns)
    raise RuntimeError(f"vmap: ember.ops.{op.name} returned a non-tensor, which cannot be batched")


def _sample(a, level, b):
    if isinstance(a, Tensor):
        value, batched = unwrap(a, level)
        return value.select(0, b) if batched else a
    if isinstance(a, (list, tuple)):
        return type(a)(_sample(x, level, b) for x in a)
    return a


def _stack(tensors):
    return OPS["cat"]([t.unsqueeze(0) for t in tensors], 0)


BATCH_RULES: dict = {}
for _family in (pointwise, dims, views, linalg, indexing, nn):
    BATCH_RULES.update(_family.RULES)
for _name, _op in OPS.items():
    if "factory" in _op.tags and "random" not in _op.tags:
        BATCH_RULES[_name] = factory_rule
for _name in RANDOM_OPS:
    BATCH_RULES[_name] = _random_rule


def sparse_rule(op, level, args, kwargs):
    """The ops that build or convert sparse layouts: a batched (BatchedTensor) sparse tensor does
    not exist, in PyTorch's vmap either, so these raise instead of looping."""
    raise RuntimeError(f"vmap: ember.ops.{op.name} works on sparse layouts, which vmap does not support "
                       "(as in PyTorch); call it outside vmap")


for _name in ("coalesce", "_to_dense", "_to_sparse", "sparse_mask", "_sparse_mm", "_sparse_coo_tensor_unsafe",
              "_sparse_compressed_tensor_unsafe"):
    if _name in OPS:
        BATCH_RULES[_name] = sparse_rule

__all__ = ["BATCH_RULES", "FALLBACK", "loop_fallback"]
