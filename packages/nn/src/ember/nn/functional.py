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
from ember._src.ops import nn_attention as _attention
from ember._src.ops import nn_conv as _conv
from ember._src.ops import nn_loss as _loss
from ember._src.ops import nn_misc as _misc
from ember._src.ops import nn_norm as _norm
from ember._src.ops import nn_pool as _pool
from ember._src.ops import nn_resample as _resample
from ember._src.ops import pointwise as _pointwise
from ember._src.ops._common import type_name as _type_name

# -- kernels with PyTorch's functional signatures, straight from the core ---------------------
conv1d, conv2d, conv3d = _conv.conv1d, _conv.conv2d, _conv.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    _conv.conv_transpose1d, _conv.conv_transpose2d, _conv.conv_transpose3d)
unfold, fold = _conv.im2col, _conv.col2im
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


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _pointwise.threshold(input, threshold, value, inplace=True)


def _implicit_dim(ndim: int) -> int:
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    return ember.softmax(input, _implicit_dim(input.ndim) if dim is None else dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    return ember.log_softmax(input, _implicit_dim(input.ndim) if dim is None else dim, dtype=dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    return ember.softmax(-input, _implicit_dim(input.ndim) if dim is None else dim, dtype=dtype)


def logsigmoid(input: Tensor) -> Tensor:
    # log(sigmoid(x)) = -softplus(-x), stable for large |x|.
    return -softplus(-input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return ember.where(input > lambd, input - lambd, ember.where(input < -lambd, input + lambd, 0.0 * input))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return ember.where((input > lambd) | (input < -lambd), input, 0.0 * input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    if weight.numel() != 1 and (input.ndim < 2 or weight.numel() != input.shape[1]):
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {input.shape[1] if input.ndim > 1 else 1}.")
    w = weight
    if weight.numel() != 1 and input.ndim > 2:
        w = weight.reshape((-1,) + (1,) * (input.ndim - 2))
    return ember.where(input >= 0, input, w * input)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    if training:
        slope = ember.empty_like(input).uniform_(lower, upper)
        out = ember.where(input >= 0, input, input * slope)
    else:
        out = leaky_relu(input, (lower + upper) / 2)
    return input.copy_(out) if inplace else out


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.ndim} is size "
                           f"{input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * ember.sigmoid(b)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    gumbels = -ember.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = ember.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout_nd(input, p, training, inplace, 2)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release.", stacklevel=2)
    return _feature_dropout_nd(input, p, training, inplace, 3)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release.", stacklevel=2)
    return _feature_dropout_nd(input, p, training, inplace, 4)


def _feature_dropout_nd(input: Tensor, p: float, training: bool, inplace: bool, unbatched_ndim: int) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim == unbatched_ndim:
        return _misc.feature_dropout(input.unsqueeze(0), p, training, inplace).squeeze(0)
    return _misc.feature_dropout(input, p, training, inplace)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    alpha = -1.7580993408473766
    keep = 1 - p
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    mask = ember.empty(shape, dtype=input.dtype).bernoulli_(keep)
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * keep)
    b = -a * alpha * p
    out = (input * mask + alpha * (1 - mask)) * a + b
    return input.copy_(out) if inplace else out


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if input.ndim == 2 and bias is not None:
        return ember.addmm(bias, input, weight.t())
    out = ember.matmul(input, weight.t())
    return out + bias if bias is not None else out


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError("bilinear(): input batch dimensions do not match: got "
                           f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input size does not match weight size: got {input1.shape[-1]} and "
                           f"{input2.shape[-1]} but expected {weight.shape[1]} and {weight.shape[2]}")
    out = ember.einsum("...i,oij,...j->...o", input1, weight, input2)
    return out + bias if bias is not None else out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
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
    if max_norm is not None:
        _misc._renorm_(weight, input, float(max_norm), float(norm_type))
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
        bad = (input < 0) | (input >= num_weights)
        if bool(bad.any()):
            raise RuntimeError(f"embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be "
                               f"{input[bad][0].item()}")


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
    _check_adaptive_size(output_size, input)
    return _pool.adaptive_avg_pool2d(input, output_size)


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
    output_size = list(output_size)
    if len(output_size) == k + 2:
        output_size = output_size[2:]
    if len(output_size) != k:
        raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} elements, but it has a length "
                         f"of '{len(output_size)}'")
    for d in range(k):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    return output_size


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
def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def margin_ranking_loss(input1, input2, target, margin: float = 0.0, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    return _reduce(relu(-target * (input1 - input2) + margin), reduction)


def hinge_embedding_loss(input, target, margin: float = 1.0, size_average=None, reduce=None,
                         reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    zeros = ember.zeros_like(input)
    margin_clamp = (margin - input).clamp_min(0)
    output_margin = ember.where(target != 1, margin_clamp, zeros)
    output_self = ember.where(target != -1, input, zeros)
    return _reduce(output_margin + output_self, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce(softplus(-target * input), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(dim=input.ndim - 1) / input.shape[-1]
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                      reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    t = target.reshape(-1, 1)
    correct = x.gather(1, t)
    loss = (margin - correct + x).clamp_min(0)
    if p == 2:
        loss = loss * loss
    if weight is not None:
        loss = loss * weight[t]
    mask = ember.ones_like(x).scatter_(1, t, 0.0)
    loss = (loss * mask).sum(1) / x.shape[1]
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin: float = 0.0, size_average=None, reduce=None,
                          reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    eps = 1e-12
    prod = (input1 * input2).sum(-1)
    mag1 = (input1 * input1).sum(-1) + eps
    mag2 = (input2 * input2).sum(-1) + eps
    cos = prod / (mag1 * mag2).sqrt()
    zeros = ember.zeros_like(cos)
    pos = ember.where(target == 1, 1 - cos, zeros)
    neg = ember.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(pos + neg, reduction)


def triplet_margin_loss(anchor, positive, negative, margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ember.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = ember.minimum(d_neg, dist(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def poisson_nll_loss(input, target, log_input: bool = True, full: bool = False, size_average=None,
                     eps: float = 1e-8, reduce=None, reduction: str = "mean") -> Tensor:
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
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    var = var.clamp(min=eps)
    loss = 0.5 * (ember.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x = input if input.ndim == 2 else input.reshape(1, -1)
    t = target if target.ndim == 2 else target.reshape(1, -1)
    n, c = x.shape
    # Targets are the leading non-negative entries of each row (up to the first -1).
    valid = (t >= 0).long().cumprod(1).bool()
    safe_t = ember.where(valid, t, ember.zeros_like(t))
    is_target = ember.zeros((n, c), dtype=ember.bool).scatter_(1, safe_t, valid)
    x_t = x.gather(1, safe_t)  # (n, c): score of each target slot
    margins = (1 - x_t.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0)  # (n, slot, class)
    mask = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = (margins * mask).sum((1, 2)) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction)
