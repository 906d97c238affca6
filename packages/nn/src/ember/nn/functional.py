"""``ember.nn.functional``: the functional form of every layer, activation and loss.

The kernels live in the tensor core (``ember/_src/ops/nn_*.py``, already written with
PyTorch's ``nn.functional`` signatures); this module gathers them under their public names
and adds what is composed from other ops (``linear``, ``glu``, the margin losses, ...).
"""

from __future__ import annotations

import math
import warnings

import ember
from ember import Tensor
from ember._src import torch_function as _torch_function
from ember._src.autocast import composite as _autocast_composite
from ember._src.composite import define_composite as _define_composite
from ember._src.composite import pre_dispatch_tracing as _pre_dispatch_tracing
from ember._src.ops._common import check_tensor_args as _check_tensor_args
from ember._src.ops._common import label_as_op as _label_as_op
from ember._src.ops._common import type_name as _type_name
from ember._src.ops.nn import attention as _attention
from ember._src.ops.nn import conv as _conv
from ember._src.ops.nn import embedding_dropout as _misc
from ember._src.ops.nn import loss as _loss
from ember._src.ops.nn import norm as _norm
from ember._src.ops.nn import pool as _pool
from ember._src.ops.nn import resample as _resample
from ember._src.ops.pointwise import elementwise as _pointwise

from . import functional_pool3d as _pool3d
from . import functional_vision as _vision

# -- kernels with PyTorch's functional signatures, straight from the core ---------------------
conv1d, conv2d, conv3d = _conv.conv1d, _conv.conv2d, _conv.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    _conv.conv_transpose1d, _conv.conv_transpose2d, _conv.conv_transpose3d)
unfold, fold = _conv.im2col, _conv.col2im
pdist = ember.pdist
max_pool3d, max_pool3d_with_indices, avg_pool3d, lp_pool3d = (
    _pool3d.max_pool3d, _pool3d.max_pool3d_with_indices, _pool3d.avg_pool3d, _pool3d.lp_pool3d)
adaptive_avg_pool3d, adaptive_max_pool3d = _pool3d.adaptive_avg_pool3d, _pool3d.adaptive_max_pool3d
adaptive_max_pool3d_with_indices, max_unpool3d = _pool3d.adaptive_max_pool3d_with_indices, _pool3d.max_unpool3d
affine_grid, grid_sample = _vision.affine_grid, _vision.grid_sample
max_pool1d, max_pool2d = _pool.max_pool1d, _pool.max_pool2d
max_pool1d_with_indices, max_pool2d_with_indices = _pool.max_pool1d_with_indices, _pool.max_pool2d_with_indices
avg_pool1d, avg_pool2d = _pool.avg_pool1d, _pool.avg_pool2d
adaptive_avg_pool1d, adaptive_max_pool1d = _pool.adaptive_avg_pool1d, _pool.adaptive_max_pool1d
batch_norm, layer_norm, rms_norm = _norm.batch_norm, _norm.layer_norm, _norm.rms_norm
embedding, dropout, alpha_dropout = _misc.embedding, _misc.dropout, _misc.alpha_dropout
cosine_similarity, pairwise_distance, normalize = _misc.cosine_similarity, _misc.pairwise_distance, _misc.normalize
pad, interpolate, one_hot = _resample.pad, _resample.interpolate, _resample.one_hot
pixel_shuffle, pixel_unshuffle = _resample.pixel_shuffle, _resample.pixel_unshuffle
scaled_dot_product_attention = _attention.scaled_dot_product_attention
cross_entropy, nll_loss, mse_loss, l1_loss = _loss.cross_entropy, _loss.nll_loss, _loss.mse_loss, _loss.l1_loss
smooth_l1_loss, huber_loss, kl_div = _loss.smooth_l1_loss, _loss.huber_loss, _loss.kl_div
binary_cross_entropy = _loss.binary_cross_entropy
binary_cross_entropy_with_logits = _loss.binary_cross_entropy_with_logits

relu, relu6, gelu, silu, mish = _pointwise.relu, _pointwise.relu6, _pointwise.gelu, _pointwise.silu, _pointwise.mish
hardswish, hardsigmoid, hardtanh = _pointwise.hardswish, _pointwise.hardsigmoid, _pointwise.hardtanh
leaky_relu, elu, selu, celu = _pointwise.leaky_relu, _pointwise.elu, _pointwise.selu, _pointwise.celu
softplus, softsign, threshold, tanhshrink = (
    _pointwise.softplus, _pointwise.softsign, _pointwise.threshold, _pointwise.tanhshrink)
relu_ = _pointwise.relu_


def sigmoid(input: Tensor) -> Tensor:
    return ember.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return ember.tanh(input)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    return hardtanh(input, min_val, max_val, inplace=True)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return elu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    return leaky_relu(input, negative_slope, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _pointwise.threshold(input, threshold, value, inplace=True)


def _implicit_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    dim = _implicit_dim("softmax", input.ndim, _stacklevel) if dim is None else dim
    return ember.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    dim = _implicit_dim("log_softmax", input.ndim, _stacklevel) if dim is None else dim
    return ember.log_softmax(input, dim, dtype=dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    dim = _implicit_dim("softmin", input.ndim, _stacklevel) if dim is None else dim
    return ember.softmax(-input, dim, dtype=dtype)


def logsigmoid(input: Tensor) -> Tensor:
    # log(sigmoid(x)) = -softplus(-x), stable for large |x|. PyTorch's log_sigmoid allocates a contiguous
    # result whatever the input's strides.
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(f"\"log_sigmoid_cpu\" not implemented for '{_type_name(input.dtype)}'")
    return -softplus(-input.contiguous())


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    if lambd < 0:
        raise RuntimeError(f"lambda must be in range [0, {_max_of(input.dtype)}] for input dtype "
                           f"{_type_name(input.dtype)}, but found to be {lambd}.")
    return ember.where(input > lambd, input - lambd, ember.where(input < -lambd, input + lambd, 0.0 * input))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    # The band test is written as PyTorch's kernel, so nan passes through and the band gives +0.
    band = (input >= -lambd) & (input <= lambd)
    return ember.where(band, ember.zeros_like(input), input)


def _max_of(dtype) -> str:
    return f"{ember.finfo(dtype).max:g}" if dtype.is_floating_point else "inf"


@_autocast_composite("lower")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for '{_type_name(input.dtype)}'")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    if input.dtype != weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_type_name(input.dtype)} and "
                           f"{_type_name(weight.dtype)}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {channels}.")
    if weight.numel() == 1:
        w = weight.reshape(())  # broadcasting a (1,) weight would turn a 0-d input into (1,)
    else:
        w = weight.reshape((-1,) + (1,) * (input.ndim - 2))
    # Slope at exactly 0, as PyTorch's kernel (x > 0 ? x : w * x).
    return ember.where(input > 0, input, w * input)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not inplace:
        # PyTorch's rrelu allocates a contiguous result whatever the input's strides.
        input = input.contiguous()
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    # One slope per element for x <= 0, as PyTorch's noise tensor; the product needs only the noise in
    # backward, so the in-place form does not invalidate what autograd saved. As PyTorch, only the
    # elements x <= 0 draw (in order, one float64 uniform each, scaled unfused), so seeded runs match.
    with ember.no_grad():
        nonpositive = input.detach() <= 0
        count = int(nonpositive.sum())
        u = ember.empty(count, dtype=ember.float64, device=input.device).uniform_()
        # The bounds are first rounded to the input's compute type (float32 below float64).
        bounds = ember.tensor([lower, upper], dtype=ember.float64 if input.dtype is ember.float64 else ember.float32)
        lo, hi = (float(v) for v in bounds.tolist())
        slopes = (u * (hi - lo)).add_(lo).to(input.dtype)
        noise = ember.ones_like(input)
        noise[nonpositive] = slopes
    return input.mul_(noise) if inplace else input * noise


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if not -input.ndim <= dim < input.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], "
                         f"but got {dim})")
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size "
                           f"{input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * ember.sigmoid(b)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    # Contiguous noise whatever the logits' layout, as PyTorch: a transposed input draws in logical order.
    gumbels = -ember.empty_like(logits, memory_format=ember.contiguous_format).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = ember.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, batched: bool) -> Tensor:
    """Channel dropout; an unbatched input is seen as a batch of one, as PyTorch does."""
    if batched:
        return _misc.feature_dropout(input, p, training, inplace)
    result = _misc.feature_dropout(input.unsqueeze(0), p, training, inplace)
    return input if inplace else result.squeeze(0)  # in place, the view wrote into ``input``


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      "inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        # PyTorch still reads a 3D input as (N, C, L), not as an unbatched (C, H, W).
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, True)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout3d exists to provide channel-wise dropout on "
                      "inputs with 3 spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, input.ndim == 5)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole (N, C) planes: dropped planes take SELU's saturation, then an affine fix-up."""
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        return input.mul_(0.0) if inplace else input * 0.0
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    alpha = 1.7580993408473766  # SELU scale * alpha
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    keep = ember.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p)
    # kept: a * x + alpha * a * p; dropped: -alpha * a + alpha * a * p (PyTorch's noise and shift).
    b = (keep - 1) * (alpha * a) + alpha * a * p
    noise = keep * a
    return input.mul_(noise).add_(b) if inplace else input * noise + b


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, g * k, *) -> (N, k * g, *): channel i of group j moves to position i * g + j."""
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = tuple(input.shape[2:])
    x = input.reshape((n, groups, c // groups) + rest).transpose(1, 2)
    return x.reshape((n, c) + rest)


native_channel_shuffle = channel_shuffle


@_autocast_composite("lower")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if _pre_dispatch_tracing():
        return _linear_op(input, weight, bias)
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)):  # (the check alone: per-call cost)
        _check_tensor_args("linear", ("input", input), ("weight", weight))
    shape = input.shape
    if not shape or not weight.ndim:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are {input.ndim}D and "
                           f"{weight.ndim}D")
    if bias is not None:
        *lead, in_features = shape
        if len(lead) == 1:
            return ember.addmm(bias, input, weight.t())
        if bias.ndim == 1 and input.is_contiguous():
            # As PyTorch: a contiguous input is viewed as (rows, in_features), one addmm adds the
            # bias in the product (no mm + add pass), and the result is viewed back. Backward is
            # addmm's (two mm and a bias sum) and two views: no copies.
            rows = 1
            for size in lead:
                rows *= size
            out = ember.addmm(bias, input.view(rows, in_features), weight.t())
            *_, out_features = out.shape
            return out.view(*lead, out_features)
    out = ember.matmul(input, weight.t())
    return out + bias if bias is not None else out


# PyTorch's composite op (``ember._src.composite``): one node in an exported graph.
_linear_op = _define_composite("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", linear)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError("bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    for k, x in ((1, input1), (2, input2)):  # PyTorch checks (and names) each input in turn
        if x.shape[-1] != weight.shape[k]:
            raise RuntimeError(f"bilinear(): input{k} size does not match weight size: got {x.shape[-1]} but "
                               f"expected {weight.shape[k]}")
    out = ember.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out + bias if bias is not None else out


def _upsample_deprecated(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _upsample_deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    _upsample_deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    _upsample_deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """1-d convolution of a (time, batch, channels) sequence with a (width, in, out) weight."""
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.ndim != 1 or bias.shape[0] != weight.shape[2]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    return conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad).permute(2, 0, 1)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, averages or maxes the embeddings of each bag: a row of a 2-d ``input``, or a slice
    ``input[offsets[b]:offsets[b + 1]]`` of a 1-d one. Composed of native gathers and index reductions."""
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        offsets = ember.arange(0, input.numel(), max(input.shape[1], 1), dtype=input.dtype, device=input.device)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    for t in (input, offsets):
        if t.dtype not in (ember.int64, ember.int32):
            raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                               f"Long, Int; but got torch.{_type_name(t.dtype)}Tensor instead (while checking "
                               f"arguments for embedding_bag)")
    if max_norm is not None:
        _misc._renorm_(weight, input, float(max_norm), float(norm_type))
    if per_sample_weights is not None and mode == "sum" and per_sample_weights.dtype is not weight.dtype:
        raise RuntimeError(f"Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                           f"'per_sample_weights'; but type {ember.typename(weight)} does not equal "
                           f"{ember.typename(per_sample_weights)} (while checking arguments for embedding_bag)")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  f"GitHub.")
    n, num_weights = input.shape[0], weight.shape[0]
    _check_bag_indices(input, offsets, num_weights, n)
    if padding_idx is not None:
        if not -num_weights <= padding_idx < num_weights:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{num_weights} through "
                               f"{num_weights - 1}, but got {padding_idx}")
        padding_idx %= num_weights
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    if bags <= 0:  # include_last_offset with one offset: no bags, as PyTorch
        return weight[:0].clone()
    # Bag of each position: how many bag starts are at or before it; padding goes to an extra bag.
    starts = ember.zeros(n + 1, dtype=ember.int64, device=input.device)
    starts = starts.index_add(0, offsets[:bags].long(), ember.ones(bags, dtype=ember.int64, device=input.device))
    bag = starts[:n].cumsum(0) - 1
    if padding_idx is not None:
        bag = ember.where(input == padding_idx, bags, bag)
    emb = embedding(input, weight, None, None, 2.0, scale_grad_by_freq, sparse)
    dim = weight.shape[1]
    if mode == "max":
        expanded = bag.unsqueeze(1).expand(n, dim)
        with ember.no_grad():  # which element wins each (bag, column); the first one on ties
            best = ember.zeros((bags + 1, dim), dtype=weight.dtype, device=weight.device).scatter_reduce(
                0, expanded, emb, "amax", include_self=False)
            pos = ember.arange(n, device=input.device).unsqueeze(1).expand(n, dim)
            cand = ember.where(emb == best.index_select(0, bag), pos, n)
            first = ember.full((bags + 1, dim), n, dtype=ember.int64, device=input.device).scatter_reduce(
                0, expanded, cand, "amin")
            winner = (pos == first.index_select(0, bag)).to(weight.dtype)
        emb = emb * winner
    elif per_sample_weights is not None:
        emb = emb * per_sample_weights.unsqueeze(1).to(emb.dtype)
    out = ember.zeros((bags + 1, dim), dtype=emb.dtype, device=emb.device).index_add(0, bag, emb)[:bags]
    if mode == "mean":
        counts = ember.zeros(bags + 1, dtype=emb.dtype, device=emb.device)
        counts = counts.index_add(0, bag, ember.ones(n, dtype=emb.dtype, device=emb.device))[:bags]
        out = out / counts.clamp_min(1).unsqueeze(1)
    return out


def _check_bag_indices(input: Tensor, offsets: Tensor, num_weights: int, n: int) -> None:
    if offsets.numel() and offsets[0].item() != 0:
        raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {offsets[0].item()}")
    if offsets.numel() and offsets[-1].item() > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of "
                           f"{offsets[-1].item()}")
    if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any()):
        raise RuntimeError("offsets must be non-decreasing")
    if n:
        bad = ((input < 0) | (input >= num_weights)).nonzero()
        if bad.numel():
            i = bad[0, 0].item()
            raise RuntimeError(f"Index {i} of input takes value {input[i].item()} which is not in the valid range "
                               f"[0, {num_weights})")


def _verify_batch_size(size) -> None:
    prod = size[0]
    for s in size[2:]:
        prod *= s
    if prod == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    # PyTorch refuses groups of one value with the batch-norm message (sizes as it forms them; and
    # num_groups=0 is its ZeroDivisionError).
    _verify_batch_size([input.shape[0] * input.shape[1] // num_groups, num_groups] + list(input.shape[2:]))
    return _norm.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    if use_input_stats:
        spatial = 1
        for s in input.shape[2:]:
            spatial *= s
        if spatial == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    return _norm.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def _check_adaptive_size(output_size, input: Tensor) -> None:
    # PyTorch checks a tuple output_size against the input's rank before the kernel does.
    if not isinstance(output_size, int) and input.ndim <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    if _pre_dispatch_tracing():
        return _adaptive_avg_pool2d_op(input, output_size)
    _check_adaptive_size(output_size, input)
    return _pool.adaptive_avg_pool2d(input, output_size)


_adaptive_avg_pool2d_op = _define_composite("adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor",
                                            adaptive_avg_pool2d)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    _check_adaptive_size(output_size, input)
    return _pool.adaptive_max_pool2d(input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    return _pool.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    return adaptive_max_pool2d(input, output_size, True)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride=None, ceil_mode: bool = False) -> Tensor:
    if norm_type == math.inf:
        return max_pool1d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool1d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (ember.sign(out) * relu(out.abs())).mul(k).pow(1.0 / norm_type)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    if norm_type == math.inf:
        return max_pool2d(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool2d(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (ember.sign(out) * relu(out.abs())).mul(kh * kw).pow(1.0 / norm_type)


def _unpool_output_size(input: Tensor, kernel_size, stride, padding, output_size) -> list:
    """The unpooled spatial size: MaxPool's input size, or ``output_size`` if it is one MaxPool could map from."""
    k = len(kernel_size)
    default = [(input.shape[-k + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(k)]
    if output_size is None:
        return default
    if len(output_size) == k + 2:
        output_size = output_size[2:]
    if len(output_size) != k:
        raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(k):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    return list(output_size)


def _max_unpool2d(input: Tensor, indices: Tensor, output_size: list) -> Tensor:
    """Scatters each value of ``input`` to its flat index in an (oH, oW) plane of zeros."""
    if indices.dtype is not ember.int64:
        raise RuntimeError(f"elements in indices should be type int64 but got: {_type_name(indices.dtype)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if len(output_size) != 2:
        raise RuntimeError(f"There should be exactly two elements (height, width) in output_size, but got "
                           f"{len(output_size)} elements.")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with "
                           f"{input.ndim} dimensions.")
    oh, ow = output_size
    lead = tuple(input.shape[:-2])
    flat_idx = indices.reshape(lead + (-1,))
    bad = (flat_idx < 0) | (flat_idx >= oh * ow)
    if bool(bad.any()):
        raise RuntimeError(f"Found an invalid max index: {flat_idx[bad][-1].item()} (output volumes are of size "
                           f"{oh}x{ow})")
    out = ember.zeros(lead + (oh * ow,), dtype=input.dtype, device=input.device)
    return out.scatter(-1, flat_idx, input.reshape(lead + (-1,))).reshape(lead + (oh, ow))


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    kernel_size = _ntuple(kernel_size, 1)
    stride = _ntuple(stride, 1) if stride is not None else kernel_size
    size = _unpool_output_size(input, kernel_size, stride, _ntuple(padding, 1), output_size) + [1]
    return _max_unpool2d(input.unsqueeze(-1), indices.unsqueeze(-1), size).squeeze(-1)


@_autocast_composite("fp32")
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    kernel_size = _ntuple(kernel_size, 2)
    stride = _ntuple(stride, 2) if stride is not None else kernel_size
    size = _unpool_output_size(input, kernel_size, stride, _ntuple(padding, 2), output_size)
    return _max_unpool2d(input, indices, size)


def _ntuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    div = (input * input).unsqueeze(1)
    if input.ndim == 3:
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = input.shape
        div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
        div = pad(div, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        # A (size, 1, 1) average over channels: avg_pool2d over (channels, flattened space).
        n, _, c, h, w = div.shape
        div = avg_pool2d(div.reshape(n, 1, c, h * w), (size, 1), stride=1).reshape(n, 1, -1, h, w).squeeze(1)
        div = div.reshape(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div


# -- losses composed from other ops ---------------------------------------------------------
# The core's loss helpers: apply a reduction, and map the deprecated (size_average, reduce)
# pair with PyTorch's warning.
_reduce = _loss._reduce
_legacy_reduction = _loss._legacy_reduction


def _check_class_target(input: Tensor, target: Tensor, dim: int, low: int) -> None:
    """Class indices must be int64 and within [low, dim)."""
    if target.dtype is not ember.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target.dtype)}")
    if target.numel() and (int(target.min()) < low or int(target.max()) >= dim):
        raise RuntimeError("target out of range")


@_autocast_composite("fp32")
def margin_ranking_loss(input1, input2, target, margin: float = 0.0, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _reduce(relu(-target * (input1 - input2) + margin), reduction)


@_autocast_composite("fp32")
def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zeros = ember.zeros_like(input)
    margin_clamp = (margin - input).clamp_min(0)
    output_margin = ember.where(target != 1, margin_clamp, zeros)
    output_self = ember.where(target != -1, input, zeros)
    return _reduce(output_margin + output_self, reduction)


@_autocast_composite("fp32")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _label_as_op(_reduce(softplus(-target * input), reduction), "soft_margin_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(dim=input.ndim - 1) / input.shape[-1]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


@_autocast_composite("fp32")
def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                      reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim > 1:
        raise ValueError(f"weight must be one-dimensional, but got {weight.ndim}D")
    ndim = input.ndim
    if not ((input.numel() > 0 and ndim <= 1) or (ndim == 2 and input.shape[1] > 0)):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    nframe, dim = (1, 1 if ndim == 0 else input.shape[0]) if ndim <= 1 else tuple(input.shape)
    if target.ndim > 1 or target.numel() != nframe:
        raise RuntimeError(f"multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{nframe}], but got {list(target.shape)}. "
                           f"Input has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != dim:
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got {list(weight.shape)}")
    _check_class_target(input, target, dim, 0)
    x = input.reshape(nframe, dim)
    t = target.reshape(-1, 1)
    correct = x.gather(1, t)
    loss = (margin - correct + x).clamp_min(0)
    if p == 2:
        loss = loss * loss
    if weight is not None:
        loss = loss * weight[t]
    # The target class itself contributes nothing.
    mask = ember.ones_like(x).scatter_(1, t, 0.0)
    loss = (loss * mask).sum(1) / dim
    if ndim < 2:
        loss = loss.reshape(())
    return _label_as_op(_reduce(loss, reduction), "multi_margin_loss")


@_autocast_composite("fp32")
def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, size_average=None, reduce=None,
                          reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    want = target.ndim + 1
    if input1.ndim != want or input2.ndim != want:
        raise RuntimeError(f"{target.ndim}D target tensor expects {want}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12
    prod = (input1 * input2).sum(-1)
    mag1 = (input1 * input1).sum(-1) + eps
    mag2 = (input2 * input2).sum(-1) + eps
    cos = prod / (mag1 * mag2).sqrt()
    zeros = ember.zeros_like(cos)
    pos = ember.where(target == 1, 1 - cos, zeros)
    neg = ember.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(pos + neg, reduction)


def _check_triplet(anchor, positive, negative, margin: float) -> None:
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")


@_autocast_composite("fp32")
def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_triplet(anchor, positive, negative, margin)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ember.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    _check_triplet(anchor, positive, negative, margin)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = ember.minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


@_autocast_composite("fp32")
def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
    if size_average is None and reduce is None and reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")  # no legacy name here
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_input:
        loss = ember.exp(input) - target * input
    else:
        loss = input - target * ember.log(input + eps)
    if full:
        stirling = target * ember.log(target) - target + 0.5 * ember.log(2 * math.pi * target)
        loss = loss + ember.where(target > 1, stirling, ember.zeros_like(stirling))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ember.ones_like(input)
    elif not isinstance(var, Tensor):
        raise TypeError(f"gaussian_nll_loss(): var must be a Tensor or a float, got {type(var).__name__}")
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:  # one variance per row: homoscedastic in the last dim
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim
                  and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            # Otherwise exactly one dim may differ, where var has size 1 (heteroscedastic).
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # Clamped without autograd seeing it, as PyTorch: the gradient reaches var even where eps wins.
    var = var.clone()
    with ember.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (ember.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@_autocast_composite("fp32")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    ndim = input.ndim
    if not ((ndim == 2 and input.shape[1] != 0) or (ndim == 1 and input.shape[0] != 0) or ndim == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if ndim <= 1:
        dim = 1 if ndim == 0 else input.shape[0]
        ok = target.ndim <= 1 and target.numel() == dim
    else:
        dim = input.shape[1]
        ok = target.ndim == 2 and tuple(target.shape) == tuple(input.shape)
    if not ok:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    _check_class_target(input, target, dim, -1)
    x = input.reshape(-1, dim)
    t = target.reshape(-1, dim)
    n, c = x.shape
    # Targets are the leading non-negative entries of each row (up to the first -1).
    valid = (t >= 0).long().cumprod(1).bool()
    safe_t = ember.where(valid, t, ember.zeros_like(t))
    # Class c is a target of row n if some valid slot names it (a scatter would let the padding slots,
    # which point at class 0, overwrite a real target 0).
    classes = ember.arange(c, device=input.device)
    is_target = ((safe_t.unsqueeze(2) == classes) & valid.unsqueeze(2)).any(1)
    x_t = x.gather(1, safe_t)  # (n, c): score of each target slot
    margins = (1 - x_t.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)  # (n, slot, class)
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (margins * mask).sum((1, 2)) / c
    if ndim < 2:
        loss = loss.reshape(())
    return _label_as_op(_reduce(loss, reduction), "multilabel_margin_loss")


# Defined beside nn.MultiheadAttention; imported last because it uses the functions above.
from .modules._attention_functional import multi_head_attention_forward  # noqa: E402,F401

# grid_sample's mode and padding_mode names, with the codes of the aten grid_sampler entry points.
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}

from . import grad  # noqa: E402,F401  (torch.nn.functional.grad is the torch.nn.grad module)
from .functional_ctc import ctc_loss  # noqa: E402,F401  (composed from the kernels above)
from .functional_fractional import (  # noqa: E402,F401
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from .functional_linear_cross_entropy import linear_cross_entropy  # noqa: E402,F401

# Every public function here takes part in the __torch_function__ protocol (ember.overrides).
_torch_function.register_namespace(__import__("sys").modules[__name__])
