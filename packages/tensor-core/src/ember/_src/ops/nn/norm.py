"""Normalization layers: batch_norm, layer_norm, group_norm, rms_norm, instance_norm.

The row and channel passes are native (``_C.layer_norm``, ``_C.channel_stats``, ...); only
per-channel vectors of C elements are combined with ordinary ops here. The ``native_*`` ops
return the saved statistics that their ``native_*_backward`` counterparts take, as PyTorch's
do, so autograd can call the fused backward kernels.
"""

from __future__ import annotations

import math

from ... import dtypes
from ... import memory_format as mf
from ..._native import _C
from ...composite import define_composite, pre_dispatch_tracing
from ...device import META
from ...dispatch import define
from ...optable import declare
from ...shapes import numel
from ...tensor import Tensor, new_empty_tensor
from .._common import compute_dtype, convert, type_name
from ..creation.factories import full


def _define(schema: str, fn, writes=()):
    """Declares an op whose kernel also serves the meta device (it allocates before touching data)."""
    op = define(schema, (), writes=writes)
    op.kernel("cpu")(fn)
    op.kernels["meta"] = fn
    op.meta = fn
    return op


def _work(t: Tensor | None) -> Tensor | None:
    """``t`` as a contiguous tensor of the dtype the kernels compute in."""
    if t is None:
        return None
    return convert(t, compute_dtype(t.dtype)).contiguous()


def _back(t: Tensor, dtype) -> Tensor:
    return t if t.dtype is dtype else convert(t, dtype)


def _half_sums(dtype) -> tuple[int, int]:
    """(round_kind, chunks) for the C kernels' weight/bias sums: PyTorch's CPU kernels sum a half-type input's
    rows per thread (one block of rows each) with an accumulator of the half type, then add the blocks in float."""
    kind = {dtypes.float16: 1, dtypes.bfloat16: 2}.get(dtype, 0)
    return kind, (_C.get_num_threads() if kind else 1)


def _check_float(input: Tensor, name: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"{name}\" not implemented for '{type_name(input.dtype)}'")


# ---------------------------------------------------------------------------------- layer_norm

def _mixed_params(input: Tensor, *params) -> bool:
    """Whether a half-type input comes with float32 weight/bias (PyTorch's CPU "mixed type" norms: the
    statistics and the parameters' gradients stay float32). Other dtype combinations raise as PyTorch's."""
    given = [t for t in params if t is not None]
    if not given or given[0].dtype is input.dtype:
        for t in given:
            if t.dtype is not input.dtype:
                raise RuntimeError(f"expected scalar type {type_name(input.dtype)} but found {type_name(t.dtype)}")
        return False
    if any(t.dtype is not dtypes.float32 for t in given):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    if input.dtype not in (dtypes.float16, dtypes.bfloat16):
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")
    return True


def _stats_dtype(input: Tensor, *params):
    """The dtype of batch/group norm's saved statistics and parameter gradients: float32 where a half-type
    input comes with a float32 weight, bias or running stat (PyTorch's CPU "mixed type"), else the input's."""
    if input.dtype in (dtypes.float16, dtypes.bfloat16) and any(
            p is not None and p.dtype is dtypes.float32 for p in params):
        return dtypes.float32
    return input.dtype


def _layer_norm_kernel(input, normalized_shape, weight, bias, eps):
    axis = input.ndim - len(normalized_shape)
    rows = numel(input._shape[:axis])
    stat_shape = tuple(input._shape[:axis]) + (1,) * len(normalized_shape)
    cd = compute_dtype(input.dtype)
    stat_dtype = cd if _mixed_params(input, weight, bias) else input.dtype
    if input._device is META:
        return (new_empty_tensor(input._shape, input.dtype, META), new_empty_tensor(stat_shape, stat_dtype, META),
                new_empty_tensor(stat_shape, stat_dtype, META))
    x, w, b = _work(input), _work(weight), _work(bias)
    out = new_empty_tensor(input._shape, cd, input._device)
    mean = new_empty_tensor(stat_shape, cd, input._device)
    rstd = new_empty_tensor(stat_shape, cd, input._device)
    if input.numel():
        _C.layer_norm(out, mean, rstd, x, w, b, rows, float(eps))
    return _back(out, input.dtype), _back(mean, stat_dtype), _back(rstd, stat_dtype)


native_layer_norm_op = _define(
    "native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) "
    "-> (Tensor, Tensor, Tensor)", _layer_norm_kernel)


def _layer_norm_backward_kernel(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    axis = input.ndim - len(normalized_shape)
    rows = numel(input._shape[:axis])
    nshape = tuple(input._shape[axis:])
    dev = input._device
    mixed = _mixed_params(input, weight, bias)
    param_dtype = (weight if weight is not None else bias).dtype if mixed else input.dtype
    if dev is META:
        return (mf.relayout(new_empty_tensor(input._shape, input.dtype, META), mf.suggest_of(input))
                if output_mask[0] else None,
                new_empty_tensor(nshape, param_dtype, META) if output_mask[1] and weight is not None else None,
                new_empty_tensor(nshape, param_dtype, META) if output_mask[2] and bias is not None else None)
    cd = compute_dtype(input.dtype)
    x, g, w = _work(input), _work(grad_out), _work(weight)
    dx = new_empty_tensor(input._shape, cd, dev) if output_mask[0] else None
    dw = new_empty_tensor(nshape, cd, dev) if output_mask[1] and weight is not None else None
    db = new_empty_tensor(nshape, cd, dev) if output_mask[2] and bias is not None else None
    if input.numel():
        _C.layer_norm_backward(dx, dw, db, g, x, _work(mean), _work(rstd), w, rows, *_half_sums(input.dtype))
    else:
        for t in (dw, db):
            if t is not None:
                t.zero_()
    return (None if dx is None else _back(dx, input.dtype),
            *(None if t is None else _back(t, param_dtype) for t in (dw, db)))


native_layer_norm_backward_op = _define(
    "native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, "
    "Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor?, Tensor?, Tensor?)",
    _layer_norm_backward_kernel)


def _check_normalized(input: Tensor, normalized_shape, weight, bias, star: str = "*, ") -> tuple:
    nshape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    n = len(nshape)
    if n == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
                           "one element, but got normalized_shape = []")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t._shape) != nshape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(t._shape)} and normalized_shape = {list(nshape)}")
    if input.ndim < n or tuple(input._shape[input.ndim - n:]) != nshape:
        raise RuntimeError(f"Given normalized_shape={list(nshape)}, expected input with shape "
                           f"[{star}{', '.join(str(s) for s in nshape)}], but got input of size{list(input._shape)}")
    return nshape


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    nshape = _check_normalized(input, normalized_shape, weight, bias)
    return native_layer_norm_op(input, nshape, weight, bias, float(eps))


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    return native_layer_norm_backward_op(grad_out, input, tuple(normalized_shape), mean, rstd, weight, bias,
                                         tuple(bool(m) for m in output_mask))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalizes over the trailing ``normalized_shape`` dims, then scales and shifts."""
    if pre_dispatch_tracing():
        return layer_norm_op(input, normalized_shape, weight, bias, eps, True)
    _check_float(input, "layer_norm")
    return native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


# ------------------------------------------------------------------------------------ rms_norm

def _rms_norm_kernel(input, normalized_shape, weight, eps):
    axis = input.ndim - len(normalized_shape)
    stat_shape = tuple(input._shape[:axis]) + (1,) * len(normalized_shape)
    if input._device is META:
        return (new_empty_tensor(input._shape, input.dtype, META),
                new_empty_tensor(stat_shape, compute_dtype(input.dtype), META))
    cd = compute_dtype(input.dtype)
    out = new_empty_tensor(input._shape, cd, input._device)
    rstd = new_empty_tensor(stat_shape, cd, input._device)
    if input.numel():
        _C.rms_norm(out, rstd, _work(input), _work(weight), numel(input._shape[:axis]), float(eps))
    # rstd stays in the compute dtype (float32 for half types), as PyTorch's _fused_rms_norm.
    return _back(out, input.dtype), rstd


fused_rms_norm_op = _define(
    "_fused_rms_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, float eps) -> (Tensor, Tensor)",
    _rms_norm_kernel)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps defaults to finfo(dtype).eps."""
    _check_float(input, "rms_norm")
    nshape = _check_normalized(input, normalized_shape, weight, None, "*")  # PyTorch's rms_norm text: [*2]
    if eps is None:  # the compute dtype's eps, as PyTorch (float32's for half types)
        eps = dtypes.finfo(compute_dtype(input.dtype)).eps
    return fused_rms_norm_op(input, nshape, weight, float(eps))[0]


# ---------------------------------------------------------------------------------- batch_norm

def _per_channel(t: Tensor | None, c: int, fill: float, dev) -> Tensor:
    return _work(t) if t is not None else full((c,), fill, dtype=dtypes.float32, device=dev)


def _batch_norm_kernel(input, weight, bias, running_mean, running_var, training, momentum, eps):
    n, c = input._shape[0], input._shape[1]
    dev = input._device
    stat = (c,) if training else (0,)
    sd = _stats_dtype(input, weight, bias, running_mean, running_var)
    if dev is META:
        return (mf.relayout(new_empty_tensor(input._shape, input.dtype, META), mf.suggest_of(input)),
                new_empty_tensor(stat, sd, META), new_empty_tensor(stat, sd, META))
    x = _work(input)
    cd = x.dtype
    if training:
        mean = new_empty_tensor((c,), cd, dev)
        var = new_empty_tensor((c,), cd, dev)
        if c:  # no channels (an empty instance norm): nothing to reduce
            _C.channel_stats(mean, var, x, n, c)
        invstd = (var + eps).rsqrt()
        count = input.numel() // c if c else 0
        if running_mean is not None:
            running_mean.copy_(running_mean * (1 - momentum) + convert(mean, running_mean.dtype) * momentum)
        if running_var is not None:
            unbiased = var * (count / (count - 1)) if count > 1 else var * math.inf
            running_var.copy_(running_var * (1 - momentum) + convert(unbiased, running_var.dtype) * momentum)
    else:
        mean = convert(running_mean, cd)
        invstd = (convert(running_var, cd) + eps).rsqrt()
    scale = invstd if weight is None else _work(weight) * invstd
    shift = -mean * scale if bias is None else _work(bias) - mean * scale
    out = new_empty_tensor(input._shape, cd, dev)
    if c:
        _C.channel_affine(out, x, scale.contiguous(), shift.contiguous(), None, None, n, c)
    if not training:
        mean, invstd = new_empty_tensor((0,), cd, dev), new_empty_tensor((0,), cd, dev)
    # laid out as the input suggests (PyTorch's batch norm keeps channels-last; computed dense here)
    out = mf.relayout(_back(out, input.dtype), mf.suggest_of(input))
    return out, _back(mean, sd), _back(invstd, sd)


native_batch_norm_op = _define(
    "native_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
    "bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)", _batch_norm_kernel,
    writes=("running_mean", "running_var"))  # updated in training; the schema returns neither


def _batch_norm_backward_kernel(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
                                train, eps, output_mask):
    n, c = input._shape[0], input._shape[1]
    dev = input._device
    pd = _stats_dtype(input, weight, running_mean, running_var, save_mean)
    if dev is META:
        return (mf.relayout(new_empty_tensor(input._shape, input.dtype, META), mf.suggest_of(input))
                if output_mask[0] else None,
                new_empty_tensor((c,), pd, META) if output_mask[1] else None,
                new_empty_tensor((c,), pd, META) if output_mask[2] else None)
    x, g = _work(input), _work(grad_out)
    cd = x.dtype
    if train:
        mean, invstd = _work(save_mean), _work(save_invstd)
    else:
        mean, invstd = _work(running_mean), (_work(running_var) + eps).rsqrt()
    sum_dy = new_empty_tensor((c,), cd, dev)
    sum_dy_xmu = new_empty_tensor((c,), cd, dev)
    if c:
        _C.channel_sums(sum_dy, sum_dy_xmu, g, x, mean, n, c)
    w = _per_channel(weight, c, 1.0, dev)
    w = convert(w, cd)
    dx = None
    if output_mask[0]:
        k = w * invstd
        dx = new_empty_tensor(input._shape, cd, dev)
        if train:
            count = input.numel() // c if c else 0
            proj = sum_dy_xmu * invstd * invstd / count
            # dx = k * (dy - mean(dy) - (x - mu) * invstd^2 * mean(dy * (x - mu)))
            a = (-k * proj).contiguous()
            shift = (k * (mean * proj - sum_dy / count)).contiguous()
            if c:
                _C.channel_affine(dx, x, a, shift, g, k.contiguous(), n, c)
        else:
            zero = k * 0
            if c:
                _C.channel_affine(dx, g, k.contiguous(), zero.contiguous(), None, None, n, c)
        dx = mf.relayout(_back(dx, input.dtype), mf.suggest_of(input))
    dw = _back(sum_dy_xmu * invstd, pd) if output_mask[1] else None
    db = _back(sum_dy, pd) if output_mask[2] else None
    return dx, dw, db


native_batch_norm_backward_op = _define(
    "native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, Tensor? running_mean, "
    "Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, bool train, float eps, bool[3] output_mask) "
    "-> (Tensor?, Tensor?, Tensor?)", _batch_norm_backward_kernel)


def _check_channels(input: Tensor, name: str, t: Tensor | None, what: str) -> None:
    c = input._shape[1]
    if t is not None and t.numel() != c:
        raise RuntimeError(f"{what} should contain {c} elements not {t.numel()}")


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    if input.ndim < 2:  # PyTorch fails reading the channel dim
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    for t, what in ((running_mean, "running_mean"), (running_var, "running_var"), (weight, "weight"),
                    (bias, "bias")):
        _check_channels(input, "batch_norm", t, what)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    return native_batch_norm_op(input, weight, bias, running_mean, running_var, bool(training), float(momentum),
                                float(eps))


def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                               eps, output_mask):
    return native_batch_norm_backward_op(grad_out, input, weight, running_mean, running_var, save_mean,
                                         save_invstd, bool(train), float(eps), tuple(bool(m) for m in output_mask))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalizes each channel (dim 1) with batch statistics (training) or the running ones."""
    if pre_dispatch_tracing():
        return batch_norm_op(input, weight, bias, running_mean, running_var, training, momentum, eps, False)
    _check_float(input, "batch_norm")
    if training:
        size = input._shape
        per_channel = numel(size) // size[1] if input.ndim >= 2 and size[1] else 0
        if input.ndim >= 2 and per_channel == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"torch.Size({list(size)})")
    return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """batch_norm of each sample on its own: the (N, C) planes become N*C channels."""
    _check_float(input, "instance_norm")
    n, c = input._shape[0], input._shape[1]
    rm = running_mean.repeat(n) if running_mean is not None else None
    rv = running_var.repeat(n) if running_var is not None else None
    w = weight.repeat(n) if weight is not None else None
    b = bias.repeat(n) if bias is not None else None
    shape = (1, n * c) + tuple(input._shape[2:])
    out = batch_norm(input.reshape(shape), rm, rv, w, b, use_input_stats, momentum, eps)
    # Running stats are shared across the batch: fold the per-sample updates back.
    if running_mean is not None and use_input_stats:
        running_mean.copy_(rm.view(n, c).mean(0))
    if running_var is not None and use_input_stats:
        running_var.copy_(rv.view(n, c).mean(0))
    return out.view(input._shape)


# ---------------------------------------------------------------------------------- group_norm

def _group_norm_kernel(input, weight, bias, n, c, hw, group, eps):
    dev = input._device
    sd = _stats_dtype(input, weight, bias)
    if dev is META:
        return (mf.relayout(new_empty_tensor(input._shape, input.dtype, META), mf.suggest_of(input)),
                new_empty_tensor((n, group), sd, META), new_empty_tensor((n, group), sd, META))
    x = _work(input)
    cd = x.dtype
    mean = new_empty_tensor((n, group), cd, dev)
    rstd = new_empty_tensor((n, group), cd, dev)
    if n * c:  # an empty batch has no groups to normalize
        _C.layer_norm(None, mean, rstd, x, None, None, n * group, float(eps))
    per = c // group
    m_c = mean.unsqueeze(-1).expand(n, group, per).reshape(n, c)
    r_c = rstd.unsqueeze(-1).expand(n, group, per).reshape(n, c)
    scale = r_c if weight is None else r_c * _work(weight)
    shift = -m_c * scale if bias is None else _work(bias) - m_c * scale
    out = new_empty_tensor(input._shape, cd, dev)
    if n * c:
        _C.channel_affine(out, x, scale.contiguous(), shift.contiguous(), None, None, 1, n * c)
    out = mf.relayout(_back(out, input.dtype), mf.suggest_of(input))  # as batch norm's
    return out, _back(mean, sd), _back(rstd, sd)


native_group_norm_op = _define(
    "native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, "
    "float eps) -> (Tensor, Tensor, Tensor)", _group_norm_kernel)


def _group_norm_backward_kernel(grad_out, input, mean, rstd, weight, n, c, hw, group, output_mask):
    dev = input._device
    pd = _stats_dtype(input, weight, mean)
    if dev is META:
        return (mf.relayout(new_empty_tensor(input._shape, input.dtype, META), mf.suggest_of(input))
                if output_mask[0] else None,
                new_empty_tensor((c,), pd, META) if output_mask[1] else None,
                new_empty_tensor((c,), pd, META) if output_mask[2] else None)
    x, g = _work(input), _work(grad_out)
    cd = x.dtype
    per = c // group
    mean, rstd = _work(mean), _work(rstd)
    # Per (n, c) plane: sum(dy) and sum(dy * x).
    ds = new_empty_tensor((n, c), cd, dev)
    db_nc = new_empty_tensor((n, c), cd, dev)
    if n * c:
        _C.channel_sums(db_nc, ds, g, x, None, 1, n * c)
    w = convert(_per_channel(weight, c, 1.0, dev), cd)
    dx = None
    if output_mask[0]:
        # PyTorch's formula: dx = rstd*w*dy + b*x + c2 per (n, c), with per-group b and c2.
        ds_g = (ds * w).view(n, group, per).sum(-1)
        db_g = (db_nc * w).view(n, group, per).sum(-1)
        s = 1.0 / (per * hw)
        b = (db_g * mean - ds_g) * rstd * rstd * rstd * s
        c2 = -b * mean - db_g * rstd * s
        a_nc = (rstd.unsqueeze(-1) * w.view(group, per)).reshape(n, c)
        b_nc = b.unsqueeze(-1).expand(n, group, per).reshape(n, c)
        c_nc = c2.unsqueeze(-1).expand(n, group, per).reshape(n, c)
        dx = new_empty_tensor(input._shape, cd, dev)
        if n * c:
            _C.channel_affine(dx, x, b_nc.contiguous(), c_nc.contiguous(), g, a_nc.contiguous(), 1, n * c)
        dx = mf.relayout(_back(dx, input.dtype), mf.suggest_of(input))
    m_nc = mean.unsqueeze(-1).expand(n, group, per).reshape(n, c)
    r_nc = rstd.unsqueeze(-1).expand(n, group, per).reshape(n, c)
    dw = _back(((ds - db_nc * m_nc) * r_nc).sum(0), pd) if output_mask[1] else None
    db = _back(db_nc.sum(0), pd) if output_mask[2] else None
    return dx, dw, db


native_group_norm_backward_op = _define(
    "native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, "
    "SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor?, Tensor?, Tensor?)",
    _group_norm_backward_kernel)


def _sym_int(value):
    """A SymInt argument: an int (a SymInt under export's symbolic trace) kept as it is; int()
    would turn a symbolic batch size into the example's, silently."""
    return value if isinstance(value, int) else int(value)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    return native_group_norm_op(input, weight, bias, _sym_int(N), _sym_int(C), _sym_int(HxW), int(group), float(eps))


def native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask):
    return native_group_norm_backward_op(grad_out, input, mean, rstd, weight, _sym_int(N), _sym_int(C), _sym_int(HxW),
                                         int(group), tuple(bool(m) for m in output_mask))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each group of ``C / num_groups`` channels per sample, then a per-channel affine."""
    if pre_dispatch_tracing():
        return group_norm_op(input, num_groups, weight, bias, eps, True)
    _check_float(input, "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input._shape[0], input._shape[1]
    if num_groups <= 0 or c % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(input._shape)} and num_groups={num_groups}")
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {what} to be a vector of size equal to the number of channels in input, "
                               f"but got {what} of shape {list(t._shape)} and input of shape {list(input._shape)}")
    hw = numel(input._shape[2:])
    return native_group_norm(input, weight, bias, n, c, hw, num_groups, eps)[0]


# PyTorch's composite ops (``..composite``): one node in an exported graph, in ATen's argument order.
batch_norm_op = define_composite(
    "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
    "bool training, float momentum, float eps, bool cudnn_enabled) -> Tensor",
    lambda input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=False:
    batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps))
layer_norm_op = define_composite(
    "layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
    "float eps=1e-05, bool cudnn_enable=True) -> Tensor",
    lambda input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True:
    layer_norm(input, normalized_shape, weight, bias, eps))
group_norm_op = define_composite(
    "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
    "bool cudnn_enabled=True) -> Tensor",
    lambda input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True:
    group_norm(input, num_groups, weight, bias, eps))


def _torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled):
    """``torch.batch_norm``: the aten argument order (weight and bias before the running stats)."""
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _torch_instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                         cudnn_enabled):
    return instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def _torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return layer_norm(input, normalized_shape, weight, bias, eps)


def _torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return group_norm(input, num_groups, weight, bias, eps)


for _fn in (batch_norm, group_norm, instance_norm, layer_norm, rms_norm, native_layer_norm_backward,
            native_batch_norm_backward, native_group_norm_backward):
    _fn.__module__ = "ember.nn.functional"
# Names torch has at top level, with torch's (aten) signatures (bound by the table below); the
# F-style functions above are for ember.nn.functional. Neither kind is a Tensor method in PyTorch.
for _fn in (_torch_batch_norm, _torch_instance_norm, _torch_layer_norm, _torch_group_norm, rms_norm,
            native_layer_norm, native_batch_norm, native_group_norm):
    _fn.__module__ = "ember"
    _fn.__name__ = _fn.__qualname__ = _fn.__name__.removeprefix("_torch_")


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
batch_norm                  function fn=_torch_batch_norm
group_norm                  function fn=_torch_group_norm
instance_norm               function fn=_torch_instance_norm
layer_norm                  function fn=_torch_layer_norm
native_batch_norm           function
native_group_norm           function
native_layer_norm           function
rms_norm                    function
""")
