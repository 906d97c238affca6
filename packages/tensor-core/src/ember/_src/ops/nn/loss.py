"""Loss functions: cross_entropy, nll_loss, the binary cross entropies, regression losses, kl_div.

cross_entropy on class indices is one native pass (``_C.class_nll``: log-softmax and the
weighted pick per sample and position, no log-probabilities materialized, the classes read on
dim 1 where they are, with a stride for (N, C, d1, ...) scores); nll_loss uses the same kernel
on log-probabilities. The elementwise losses are short compositions of native pointwise ops.
"""

from __future__ import annotations

import sys
import warnings

from ... import autocast as _autocast
from ... import dtypes
from ..._native import _C
from ...autocast import composite as _autocast_composite
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...tensor import Tensor, new_empty_tensor
from .._common import check_tensor_args, compute_dtype, convert, label_as_op, type_name
from ..pointwise import elementwise

_REDUCTIONS = ("none", "mean", "sum")
_autocast_file = _autocast.__file__
_REDUCTION_ENUM = {0: "none", 1: "mean", 2: "sum"}  # aten's reduction argument
_REDUCTION_CODE = {name: code for code, name in _REDUCTION_ENUM.items()}


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of a warning raised for the caller of the loss function: past this module
    and the autocast wrapper around the loss functions (PyTorch warns at its F function's caller)."""
    skip = (__file__, _autocast_file)
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename in skip:
        frame, level = frame.f_back, level + 1
    return level


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        if reduction == "elementwise_mean":  # PyTorch's old name for "mean", still accepted
            warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead.",
                          UserWarning, stacklevel=_caller_stacklevel())
            return "mean"
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  f"{'sum' if size_average is False else 'mean'}' instead.", UserWarning,
                  stacklevel=_caller_stacklevel())
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction: str, allowed=_REDUCTIONS) -> None:
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")


# --------------------------------------------------------------------------- class-index losses

def _scores_3d(x):
    """(N, C, d1, ...) class scores as the (N, C, S) the native kernels read (a view where the
    trailing dims merge; the kernels take any strides, so classes stay on dim 1 uncopied)."""
    if x.ndim <= 3:
        return x
    spatial = 1
    for size in x._shape[2:]:
        spatial *= size
    return x.reshape(x._shape[0], x._shape[1], spatial)


def _native_scores(input, cd):
    """The (N, C, S) scores the native kernels take: float16/bfloat16 ones as they are (the
    kernels widen them in registers), except with the classes strided and the positions
    contiguous, where the column kernels need float32 (a converted copy)."""
    x = _scores_3d(input)
    if input.dtype is cd:
        return x
    if x.ndim == 3 and x._shape[2] > 1 and x._shape[1] > 1 and x.stride(2) == 1 and x.stride(1) != 1:
        return convert(x, cd)
    return x


def _class_nll_kernel(input, target, weight, ignore_index, log_probs, smooth):
    loss_shape = (input._shape[0],) + tuple(input._shape[2:])
    dev = input._device
    cd = compute_dtype(input.dtype)
    nll = new_empty_tensor(loss_shape, cd, dev)
    sm = new_empty_tensor(loss_shape, cd, dev) if smooth else None
    wt = new_empty_tensor(loss_shape, cd, dev)
    lse = None if log_probs else new_empty_tensor(loss_shape, cd, dev)
    if dev is not META:
        x = _native_scores(input, cd)
        w = None if weight is None else convert(weight, cd).contiguous()
        _C.class_nll(nll, sm, wt, lse, x, target.contiguous(), w, int(ignore_index), bool(log_probs))
    return (nll, sm if smooth else new_empty_tensor((0,), cd, dev), wt,
            new_empty_tensor((0,), cd, dev) if log_probs else lse)


class_nll_op = define(
    "_class_nll(Tensor input, Tensor target, Tensor? weight, int ignore_index, bool log_probs, bool smooth) "
    "-> (Tensor, Tensor, Tensor, Tensor)", ())
# input (N, C, d1, ...) with the classes on dim 1, target (N, d1, ...): the outputs (nll, the
# label-smoothing term, the target's weight, the log-sum-exp of each row's scores) have the
# target's shape; smooth=False gives an empty second output, log_probs=True an empty fourth.
# The lse (float32, float64 for float64 scores; ignored rows too) exists for the backward
# alone: autograd saves it and hands it to _class_nll_backward, which then reads the scores
# once instead of recomputing each row's max and sum. It is not differentiable (PyTorch's
# _log_softmax output plays its part there; nothing the user sees returns it).
class_nll_op.kernel("cpu")(_class_nll_kernel)
class_nll_op.kernels["meta"] = class_nll_op.meta = _class_nll_kernel


def _class_nll_backward_kernel(grad_nll, grad_smooth, input, target, weight, ignore_index, log_probs, lse=None):
    dev = input._device
    cd = compute_dtype(input.dtype)
    x = None if dev is META else _native_scores(input, cd)
    # The gradient in the scores' dtype where the kernel reads them as they are (half types
    # included), else in the compute dtype and converted.
    out = new_empty_tensor(tuple(input._shape), input.dtype if x is None else x.dtype, dev)
    if x is not None:
        def prep(t):
            return None if t is None else convert(t, cd).contiguous()
        saved = None if lse is None or log_probs else prep(lse)
        _C.class_nll_backward(_scores_3d(out), prep(grad_nll), prep(grad_smooth), x, target.contiguous(),
                              prep(weight), int(ignore_index), bool(log_probs), saved)
    return convert(out, input.dtype)


# The input gradient of _class_nll in one native pass: softmax = exp(x - lse) from the forward's
# saved lse (_class_nll's fourth output), or recomputed per row when lse is None; never stored.
# ember-autograd's formula uses it when no graph of the backward is being recorded.
class_nll_backward_op = define(
    "_class_nll_backward(Tensor? grad_nll, Tensor? grad_smooth, Tensor input, Tensor target, Tensor? weight, "
    "int ignore_index, bool log_probs, Tensor? lse=None) -> Tensor", (), differentiable=False)
class_nll_backward_op.kernel("cpu")(_class_nll_backward_kernel)
class_nll_backward_op.kernels["meta"] = class_nll_backward_op.meta = _class_nll_backward_kernel


def _scores_of(input: Tensor, target: Tensor):
    """(N, C, d1, ...) scores and (N, d1, ...) targets as ``_class_nll`` takes them (a 1-d input
    becomes one row), checked in PyTorch's order: the batch size, then the target's shape (with
    nll_loss2d's messages for 4-d input), then the target's dtype."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions")
    n = input._shape[0]
    shape, expected = list(target._shape), [n] + list(input._shape[2:])
    if input.ndim != 1 and (shape[0] if shape else 0) != n:
        raise ValueError(f"Expected input batch_size ({n}) to match target batch_size ({shape[0] if shape else 0}).")
    if input.ndim <= 2 and target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.ndim == 4 and target.ndim != 3:
        raise RuntimeError(f"only batches of spatial targets supported (3D tensors) but got targets of dimension: "
                           f"{target.ndim}")
    if input.ndim > 2 and input.ndim != 4 and shape != expected:
        raise RuntimeError(f"Expected target size {expected}, got {shape}")
    if target.dtype is dtypes.uint8:  # PyTorch takes Byte class indices as well as Long
        target = convert(target, dtypes.int64)
    if target.dtype is not dtypes.int64:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {type_name(target.dtype)}")
    if input.ndim == 4 and shape != expected:
        raise RuntimeError(f"size mismatch (got input: {list(input._shape)} , target: {shape}")
    if input.ndim == 1:
        if target.ndim == 1 and shape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {shape[0]}")
        return input.unsqueeze(0), target.reshape(1)
    return input, target


def _check_weight(weight, c: int, input=None) -> None:
    if weight is not None and input is not None and weight.dtype is not input.dtype:
        raise RuntimeError(f"expected scalar type {type_name(input.dtype)} but found {type_name(weight.dtype)}")
    if weight is not None and (weight.ndim != 1 or weight.numel() != c):
        raise RuntimeError(f"weight tensor should be defined either for all {c} classes or no classes but got "
                           f"weight tensor of shape: {list(weight._shape)}")


def _class_loss(input, target, weight, ignore_index, reduction, label_smoothing, log_probs):
    scores, target_ = _scores_of(input, target)
    c = scores._shape[1]
    _check_weight(weight, c, input)
    smooth = label_smoothing > 0
    nll, sm, wt, _ = class_nll_op(scores, target_, weight, ignore_index, log_probs, smooth)
    if reduction == "none":
        loss = nll if not smooth else nll * (1 - label_smoothing) + sm * (label_smoothing / c)
        result = loss.reshape(() if input.ndim == 1 else tuple(target._shape))
    else:
        total = nll.sum()
        if smooth:
            total = total * (1 - label_smoothing) + sm.sum() * (label_smoothing / c)
        result = total / wt.sum() if reduction == "mean" else total
    # Half-type inputs: the loss comes back in their dtype through a differentiable cast
    # (a raw convert here cut the graph: bfloat16 cross_entropy had no grad_fn).
    return result if result.dtype is input.dtype else result.to(input.dtype)


def _prob_target_loss(input, target, weight, reduction, label_smoothing):
    from ..reduction.composite import log_softmax

    if tuple(target._shape) != tuple(input._shape):
        raise RuntimeError(f"Expected target size {list(input._shape)}, got {list(target._shape)}")
    class_dim = 0 if input.ndim == 1 else 1
    c = input._shape[class_dim]
    _check_weight(weight, c, input)
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / c
    logp = log_softmax(input, class_dim)
    prod = logp * target
    if weight is not None:
        shape = [1] * input.ndim
        shape[class_dim] = c
        prod = prod * weight.view(shape)
    loss = -prod.sum(class_dim)
    if reduction == "mean":
        return loss.sum() / (input.numel() // c) if input.numel() else loss.sum() / 0.0
    return _reduce(loss, reduction)


@_autocast_composite("fp32")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1 followed by nll_loss; targets are class indices or probabilities."""
    check_tensor_args("cross_entropy_loss", ("input", input), ("target", target))
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"log_softmax_lastdim_kernel_impl\" not implemented for '{type_name(input.dtype)}'")
    if tuple(target._shape) == tuple(input._shape):
        # PyTorch tells the target kinds apart by shape: input's shape means class probabilities.
        if not target.is_floating_point():
            raise RuntimeError(f"Expected floating point type for target with class probabilities, got "
                               f"{type_name(target.dtype)}")
        if ignore_index != -100:
            raise RuntimeError("ignore_index is not supported for floating point target")
        return _prob_target_loss(input, target, weight, reduction, label_smoothing)
    loss = _class_loss(input, target, weight, ignore_index, reduction, label_smoothing, log_probs=False)
    return loss if label_smoothing > 0 else label_as_op(loss, "nll_loss")  # PyTorch's smoothing composes


@_autocast_composite("fp32")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class indices given log-probabilities (dim 1 holds classes)."""
    check_tensor_args("nll_loss_nd", ("input", input), ("target", target))
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not input.is_floating_point():
        raise NotImplementedError(f"\"nll_loss_out_frame\" not implemented for '{type_name(input.dtype)}'")
    return label_as_op(_class_loss(input, target, weight, ignore_index, reduction, 0.0, log_probs=True), "nll_loss",
                       (input,))


# ------------------------------------------------------------------------------ pointwise losses

def _same_size(input: Tensor, target: Tensor, name: str) -> None:
    if tuple(input._shape) != tuple(target._shape):
        warnings.warn(f"Using a target size (torch.Size({list(target._shape)})) that is different to the input "
                      f"size (torch.Size({list(input._shape)})). This will likely lead to incorrect results due "
                      f"to broadcasting. Please ensure they have the same size.", UserWarning,
                      stacklevel=_caller_stacklevel())


def _check_float_kernel(input: Tensor, target: Tensor, kernel: str) -> None:
    """PyTorch's pointwise loss kernels exist for floating (and complex) dtypes only: integer or bool
    operands (after promotion) are its NotImplementedError naming the kernel."""
    dtype = dtypes.promote_types(input.dtype, target.dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(dtype)}'")


def _weighted(loss: Tensor, weight) -> Tensor:
    return loss if weight is None else loss * weight


@_autocast_composite("fp32")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _same_size(input, target, "mse_loss")
    _check_float_kernel(input, target, "mse_cpu")
    # PyTorch weighs with a composite of its own (DivBackward0 / MeanBackward0): edges only unweighted
    return label_as_op(_reduce(_weighted(elementwise.square(input - target), weight), reduction), "mse_loss",
                       (input, target) if weight is None else None)


@_autocast_composite("fp32")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _same_size(input, target, "l1_loss")
    return _reduce(_weighted((input - target).abs(), weight), reduction)


@_autocast_composite("fp32")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _same_size(input, target, "smooth_l1_loss")
    _check_float_kernel(input, target, "smooth_l1_cpu")
    diff = (input - target).abs()
    if beta == 0:
        return label_as_op(_reduce(diff, reduction), "smooth_l1_loss", (input, target))
    loss = elementwise.where(diff < beta, elementwise.square(diff) * (0.5 / beta), diff - 0.5 * beta)
    return label_as_op(_reduce(loss, reduction), "smooth_l1_loss", (input, target))


@_autocast_composite("fp32")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    reduction = _legacy_reduction(None, None, reduction)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _same_size(input, target, "huber_loss")
    _check_float_kernel(input, target, "huber_cpu")
    diff = (input - target).abs()
    loss = elementwise.where(diff < delta, elementwise.square(diff) * 0.5, (diff - 0.5 * delta) * delta)
    return label_as_op(_reduce(_weighted(loss, weight), reduction), "huber_loss",
                       (input, target) if weight is None else None)


@_autocast_composite("fp32")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise KL divergence target * (log target - input); input holds log-probabilities."""
    check_tensor_args("kl_div", ("input", input), ("target", target))
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, _REDUCTIONS + ("batchmean",))
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=_caller_stacklevel())
    if not all(t.is_floating_point() or t.is_complex() for t in (input, target)):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    if log_target:
        loss = elementwise.exp(target) * (target - input)
    else:
        loss = elementwise.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input._shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def _check_async(bad, message: str) -> None:
    """Raises RuntimeError(message) if ``bad`` has a true element: at once on the CPU, at the next
    synchronization on a device whose backend checks asynchronously (no wait for the device now)."""
    check = None
    if bad._device.type != "cpu":
        from ...device import get_backend

        check = get_backend(bad._device.type).assert_async
    if check is not None:
        check(bad, message)
    elif bool(bad.any()):
        raise RuntimeError(message)


def _bce_kernel(input, target, weight=None, reduction=1):
    # Half types compute in float32 and round once, as PyTorch's kernel does.
    if input.numel():
        # Written as "not inside [0, 1]" so that a NaN input fails too, as in PyTorch. In the kernel,
        # which sees the physical values (a check in the function was data-dependent control flow
        # to vmap).
        bad_input = ((input >= 0) & (input <= 1)).logical_not()
        if input._device.type != "cpu":
            _check_async(bad_input, "all elements of input should be between 0 and 1")
        else:
            # PyTorch's CPU kernel checks each element's input, then its target (NaN fails both), so
            # the first bad element names which; a device kernel checks the input only.
            bad_target = ((target >= 0) & (target <= 1)).logical_not()
            bad = (bad_input | bad_target).reshape(-1)
            if bool(bad.any()):
                first = int(bad.int().argmax())
                which = "input" if bool(bad_input.reshape(-1)[first]) else "target"
                raise RuntimeError(f"all elements of {which} should be between 0 and 1")
    cd = compute_dtype(input.dtype)
    x, t = convert(input, cd), convert(target, cd)
    log_x = elementwise.clamp_min(x.log(), -100)
    log_1mx = elementwise.clamp_min(elementwise.log1p(elementwise.neg(x)), -100)
    loss = _weighted((t - 1) * log_1mx - t * log_x, None if weight is None else convert(weight, cd))
    return convert(_reduce(loss, _REDUCTION_ENUM[reduction]), input.dtype)


def _bce_meta(input, target, weight=None, reduction=1):
    return new_empty_tensor(tuple(input._shape) if reduction == 0 else (), input.dtype, input._device)


# An op of its own (not a composite of logs) for PyTorch's gradient (x - t) / max(x (1 - x), 1e-12):
# the logs' chain rule gives 0 * inf = NaN wherever x is exactly 0 or 1 (a saturated sigmoid),
# which stopped a VAE's training. The kernel is a composite of device ops, so it serves every device.
bce_op = define("binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=1) -> Tensor",
                (), _bce_meta)
bce_op.kernels["meta"] = _bce_meta
bce_op.kernel("cpu")(_bce_kernel)


@_autocast_composite("fp32")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w * (t * log(x) + (1 - t) * log(1 - x)), each log clamped at -100 as in PyTorch."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target._shape) != tuple(input._shape):
        raise ValueError(f"Using a target size (torch.Size({list(target._shape)})) that is different to the input "
                         f"size (torch.Size({list(input._shape)})) is deprecated. Please ensure they have the same "
                         f"size.")
    if target.dtype is not input.dtype:
        raise RuntimeError(f"Found dtype {type_name(target.dtype)} but expected {type_name(input.dtype)}")
    if weight is not None:
        # PyTorch's F.binary_cross_entropy broadcasts target's and weight's shapes (its error names them)
        from ..shape.splits import broadcast_shapes

        new_size = tuple(broadcast_shapes(target.size(), weight.size()))
        if new_size != tuple(target._shape):
            raise RuntimeError(f"output with shape {list(target._shape)} doesn't match the broadcast shape "
                               f"{list(new_size)}")
        weight = weight.expand(new_size)
    return bce_op(input, target, weight, _REDUCTION_CODE[reduction])


@_autocast_composite("fp32")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Sigmoid + binary cross entropy in the overflow-free form (1 - t) x + lw (log1p(e^-|x|) + max(-x, 0))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(target._shape) != tuple(input._shape):
        raise ValueError(f"Target size (torch.Size({list(target._shape)})) must be the same as input size "
                         f"(torch.Size({list(input._shape)}))")
    if target.dtype is dtypes.bool:  # PyTorch's kernel computes 1 - target in the target's dtype
        elementwise._check_sub_bool(target, True)
    if dtypes.is_integral(target.dtype) and input.dtype.is_floating_point:
        raise RuntimeError(f"result type {type_name(input.dtype)} can't be cast to the desired output type "
                           f"{type_name(target.dtype)}")
    # softplus(-x) = log(1 + e^-x) without overflow, written so that autograd's derivative is
    # -sigmoid(-x) everywhere, x = 0 included (max(-x, 0) + log1p(e^-|x|) gives 0 or -1 there,
    # a silently wrong gradient at every zero logit). Each branch sees only its own half-line, so
    # the branch where() discards never overflows into a NaN gradient.
    z = elementwise.neg(input)
    z_pos, z_neg = elementwise.clamp_min(z, 0), elementwise.clamp_max(z, 0)
    softplus = elementwise.where(
        z > 0,
        z_pos + elementwise.log1p(elementwise.exp(elementwise.neg(z_pos))),
        elementwise.log1p(elementwise.exp(z_neg)),
    )
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * softplus
    else:
        loss = (1 - target) * input + softplus
    return label_as_op(_reduce(_weighted(loss, weight), reduction), "binary_cross_entropy_with_logits",
                       (input, target))




def _torch_bce_with_logits(input, target, weight=None, pos_weight=None, reduction=0):
    """``torch.binary_cross_entropy_with_logits``: aten order, reduction as the enum int (0 by default there).

    The aten op broadcasts instead of F's same-size check, computing into a tensor of target's shape: a
    broadcast shape other than target's is its RuntimeError."""
    from ...shapes import broadcast_shapes

    shape = tuple(broadcast_shapes(*[t.shape for t in (input, target, weight, pos_weight) if t is not None]))
    if shape != tuple(target.shape):
        raise RuntimeError(f"output with shape {list(target.shape)} doesn't match the broadcast shape {list(shape)}")
    if tuple(input.shape) != shape:
        input = input.expand(shape)
    return binary_cross_entropy_with_logits(input, target, weight, reduction=_REDUCTION_ENUM.get(reduction, reduction),
                                            pos_weight=pos_weight)


def _torch_kl_div(input, target, reduction=0, log_target=False):
    reduction = _REDUCTION_ENUM.get(reduction, reduction)
    if reduction == "mean":  # the aten op does not warn
        return kl_div(input, target, reduction="none", log_target=log_target).mean()
    return kl_div(input, target, reduction=reduction, log_target=log_target)


for _fn in (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss,
            mse_loss, nll_loss, smooth_l1_loss):
    _fn.__module__ = "ember.nn.functional"
# The torch-level forms (bound as ember.<name> by the table below) carry their public names.
for _name, _fn in (("binary_cross_entropy_with_logits", _torch_bce_with_logits), ("kl_div", _torch_kl_div)):
    _fn.__name__ = _fn.__qualname__ = _name
    _fn.__module__ = "ember"


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
binary_cross_entropy_with_logits function fn=_torch_bce_with_logits
kl_div                      function fn=_torch_kl_div
""")
