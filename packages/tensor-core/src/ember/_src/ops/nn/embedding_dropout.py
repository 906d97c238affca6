"""Embedding, dropout and distance helpers: embedding, dropout (+ feature/native), cosine_similarity,
pairwise_distance, normalize.

embedding is a native row gather (``_C.embedding``, indices checked in C++) with a native dense
backward; dropout draws its mask from ember's Generator so runs are reproducible under
``ember.manual_seed``; the rest compose native reductions and pointwise ops.
"""

from __future__ import annotations

import operator

from ... import dtypes
from ..._native import _C
from ...composite import define_composite, pre_dispatch_tracing
from ...device import META
from ...dispatch import define
from ...memory_format import preserve_layout
from ...optable import declare
from ...tensor import Tensor, new_empty_tensor
from .._common import check_tensor_args, compute_dtype, convert, type_name, write_out
from ..creation.factories import empty_op, ones, zeros
from ..pointwise.elementwise import where
from ..shape.views import broadcast_tensors

# ----------------------------------------------------------------------------------- embedding

def _embedding_kernel(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    d = weight._shape[1]
    out = new_empty_tensor(tuple(indices._shape) + (d,), weight.dtype, weight._device)
    if weight._device is not META and indices.numel():  # also for zero-width rows: the indices get checked
        if weight._shape[0] == 0:  # PyTorch's lookup is an index_select, which says so for an empty table
            raise RuntimeError("index_select(): self indexing axis dim should be positive")
        idx = convert(indices, dtypes.int64).contiguous()
        _C.embedding(out, weight.contiguous(), idx)
    return out


embedding_op = define("embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, "
                      "bool scale_grad_by_freq=False, bool sparse=False) -> Tensor", ())
embedding_op.kernel("cpu")(_embedding_kernel)
embedding_op.kernels["meta"] = embedding_op.meta = _embedding_kernel


def _dense_backward_kernel(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = grad_output._shape[-1]
    cd = compute_dtype(grad_output.dtype)
    if grad_output._device is META:
        return new_empty_tensor((num_weights, d), grad_output.dtype, META)
    if d == 0:  # a zero-width weight: its gradient is empty too (view(-1, 0) cannot infer the rows)
        return zeros((num_weights, 0), dtype=grad_output.dtype, device=grad_output._device)
    idx = convert(indices, dtypes.int64).contiguous().view(-1)
    grad = convert(grad_output, cd).contiguous().view(-1, d)
    if scale_grad_by_freq and idx.numel():
        counts = zeros((num_weights,), dtype=cd, device=grad._device)
        counts.index_put_((idx,), ones((idx.numel(),), dtype=cd, device=grad._device), accumulate=True)
        grad = (grad / counts.index_select(0, idx).unsqueeze(1)).contiguous()
    gw = zeros((num_weights, d), dtype=cd, device=grad._device)
    _C.embedding_backward(gw, grad, idx, int(padding_idx))
    return convert(gw, grad_output.dtype)


embedding_dense_backward_op = define(
    "embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, "
    "bool scale_grad_by_freq) -> Tensor", ())
embedding_dense_backward_op.kernel("cpu")(_dense_backward_kernel)
embedding_dense_backward_op.kernels["meta"] = embedding_dense_backward_op.meta = _dense_backward_kernel


def _check_indices(indices) -> None:
    if not isinstance(indices, Tensor):
        raise TypeError(f"embedding(): argument 'indices' (position 2) must be Tensor, not {type(indices).__name__}")
    if indices.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got torch.{type_name(indices.dtype)}Tensor instead (while checking "
                           f"arguments for embedding)")


def _renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescales in place the rows that ``indices`` looks up whose norm exceeds max_norm.

    Not recorded by autograd (PyTorch's embedding_renorm_ runs under no_grad): the weight is
    usually a leaf that requires grad.
    """
    from ... import grad_mode

    with grad_mode.no_grad():
        idx = convert(indices, dtypes.int64).reshape(-1)
        rows = weight.index_select(0, idx)
        norms = convert(rows.norm(norm_type, 1, keepdim=True), dtypes.float64)  # the scale in double, as PyTorch
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), norms * 0 + 1)
        weight.index_put_((idx,), rows * convert(scale, weight.dtype))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Looks up rows of ``weight`` (num_embeddings, dim) at the integer indices ``input``."""
    _check_indices(input)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    if padding_idx is not None:
        n = weight._shape[0]
        if padding_idx > 0:
            assert padding_idx < n, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -n, "Padding_idx must be within num_embeddings"
            padding_idx = n + padding_idx
    else:
        padding_idx = -1
    if max_norm is not None:
        _renorm_(weight, input, float(max_norm), float(norm_type))
    return embedding_op(weight, input, padding_idx, scale_grad_by_freq, sparse)


def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    return embedding_dense_backward_op(grad_output, indices, operator.index(num_weights), int(padding_idx),
                                       bool(scale_grad_by_freq))


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: weight first, padding_idx already non-negative or -1."""
    _check_indices(indices)
    if weight.ndim != 2:
        raise RuntimeError("'weight' must be 2-D")
    return embedding_op(weight, indices, int(padding_idx), bool(scale_grad_by_freq), bool(sparse))


# ------------------------------------------------------------------------------------- dropout

def _check_p(p) -> float:
    p = float(p)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return p


def _dropout_mask(input: Tensor, shape, p: float, generator=None) -> Tensor:
    """Keep-mask already scaled by 1/(1-p), drawn from ember's generator."""
    # Through the ``empty`` op, as the random factories allocate: dispatch modes see the mask being
    # made (ember.func.vmap draws one mask per sample under randomness="different").

    mask = empty_op(tuple(shape), dtype=input.dtype, device=input._device)
    if tuple(shape) == tuple(input._shape):
        # PyTorch draws the mask into ``empty_like(input)``: a transposed / channels-last input's
        # mask is filled in that memory order, so the same seed drops the same elements.
        mask = preserve_layout(mask, input, values=False)
    if p == 1.0:
        return mask.zero_()
    mask.bernoulli_(1.0 - p, generator=generator)
    return mask.div_(1.0 - p)


def _apply(input: Tensor, mask: Tensor, inplace: bool) -> Tensor:
    if inplace:
        return input.mul_(mask) if hasattr(input, "mul_") else input.copy_(input * mask)
    return input * mask


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) (identity when not training)."""
    check_tensor_args("dropout", ("input", input))
    p = _check_p(p)
    if not inplace and pre_dispatch_tracing():
        return dropout_op(input, p, training)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    return _apply(input, _dropout_mask(input, input._shape, p), inplace)


dropout_op = define_composite("dropout(Tensor input, float p, bool train) -> Tensor",
                              lambda input, p, train: dropout(input, p, train), tags=("random",))


def feature_dropout(input, p=0.5, training=True, inplace=False):
    """Drops whole channels: one draw per (N, C) plane of an input of at least 2 dims."""
    p = _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input._shape[:2]) + (1,) * (input.ndim - 2)
    return _apply(input, _dropout_mask(input, shape, p), inplace)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """SELU-preserving dropout: dropped elements take the saturation value, then an affine correction."""
    return _alpha_dropout(input, p, training, inplace, feature=False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole (N, C) planes of an input of at least 2 dims."""
    return _alpha_dropout(input, p, training, inplace, feature=True)


def _alpha_dropout(input, p, training, inplace, feature: bool):
    p = _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return input.mul_(0) if inplace and hasattr(input, "mul_") else input * 0
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    alpha = 1.7580993408473766  # SELU scale * alpha: dropped units take its negative saturation, -alpha
    shape = tuple(input._shape[:2]) + (1,) * (input.ndim - 2) if feature else input._shape
    keep = new_empty_tensor(shape, input.dtype, input._device)
    if not feature:
        keep = preserve_layout(keep, input, values=False)  # empty_like(input), as _dropout_mask
    keep.bernoulli_(1.0 - p)
    a = ((1 - p) * (1 + p * alpha ** 2)) ** -0.5
    b = (keep - 1) * (a * alpha) + a * alpha * p
    noise = keep * a
    # mul_/add_ rather than copy_: autograd then needs only the noise, not the overwritten input.
    return input.mul_(noise).add_(b) if inplace else input * noise + b


def native_dropout(input, p, train):
    """(output, keep-mask as bool), as ``torch.native_dropout``."""
    p = _check_p(p)
    if not train or p == 0.0:
        return input.clone(), ones(input._shape, dtype=dtypes.bool, device=input._device)
    keep = preserve_layout(new_empty_tensor(input._shape, input.dtype, input._device), input, values=False)
    keep.bernoulli_(1.0 - p)
    out = input * keep * (1.0 / (1.0 - p)) if p < 1.0 else input * 0
    return out, keep != 0


# ----------------------------------------------------------------------------------- distances

def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1/|x1| * x2/|x2|) along dim, norms clamped below at eps (PyTorch's formulation)."""
    check_tensor_args("cosine_similarity", ("x1", x1), ("x2", x2))

    a, b = broadcast_tensors(x1, x2)
    na = a.norm(2, dim, keepdim=True).clamp_min(eps)
    nb = b.norm(2, dim, keepdim=True).clamp_min(eps)
    return ((a / na) * (b / nb)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """p-norm of x1 - x2 + eps over the last dim."""
    check_tensor_args("pairwise_distance", ("x1", x1), ("x2", x2))
    out_dim = max(x1.ndim, x2.ndim)
    diff = x1 - x2 + eps
    if out_dim == 0:
        return diff.abs() if not keepdim else diff.abs()
    return diff.norm(p, out_dim - 1, keepdim=keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps)."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return write_out(input / denom, out)


def _softmax_backward_data(grad_output, output, dim, input_dtype):
    """Gradient of softmax given its output y: y * (g - sum(g * y, dim))."""
    grad = output * (grad_output - (grad_output * output).sum(dim, keepdim=True))
    return grad if grad.dtype is input_dtype else convert(grad, input_dtype)


def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    """Gradient of log_softmax given its output y: g - exp(y) * sum(g, dim)."""
    grad = grad_output - output.exp() * grad_output.sum(dim, keepdim=True)
    return grad if grad.dtype is input_dtype else convert(grad, input_dtype)


def _torch_dropout(input, p, train):
    return dropout(input, p, train)


def _torch_feature_dropout(input, p, train):
    return feature_dropout(input, p, train)


def _torch_alpha_dropout(input, p, train):
    return alpha_dropout(input, p, train)


for _fn in (alpha_dropout, cosine_similarity, dropout, embedding, feature_dropout, normalize, pairwise_distance,
            embedding_dense_backward):
    _fn.__module__ = "ember.nn.functional"
native_dropout.__module__ = "ember"  # torch.native_dropout: not in nn.functional (pickled by name)
# The torch-level forms (bound as ember.<name> by the table below) carry their public names.
for _fn in (_torch_embedding, _torch_dropout, _torch_feature_dropout, _torch_alpha_dropout,
            _softmax_backward_data, _log_softmax_backward_data):
    _fn.__name__ = _fn.__qualname__ = _fn.__name__.removeprefix("_torch_")
    _fn.__module__ = "ember"


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
alpha_dropout               function fn=_torch_alpha_dropout
cosine_similarity           function
dropout                     function fn=_torch_dropout
embedding                   function fn=_torch_embedding
feature_dropout             function fn=_torch_feature_dropout
_log_softmax_backward_data  function
native_dropout              function
pairwise_distance           function
_softmax_backward_data      function
""")
