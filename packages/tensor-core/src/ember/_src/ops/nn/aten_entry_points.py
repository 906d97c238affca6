"""Top-level nn entry points PyTorch exposes beside ``nn.functional`` (``torch.hardshrink``,
``torch.prelu``, ``torch.channel_shuffle``, the losses with an integer ``reduction`` (0 none,
1 mean, 2 sum; 0 by default at top level, as there), the single-step RNN cells, and
``torch.adaptive_max_pool1d``), as composites of existing ops, so autograd and every backend come
with them."""

from __future__ import annotations

import math

from ...device import META
from ...dispatch import define
from ...optable import declare
from ...tensor import Tensor, new_empty_tensor
from . import embedding_dropout, pool

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _check(x, fn: str, arg: str = "input", pos: int = 1) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not {type(x).__name__}")


def _reduce(loss: Tensor, reduction: int) -> Tensor:
    if isinstance(reduction, bool) or not isinstance(reduction, int) or reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == 1:
        return loss.mean()
    return loss.sum() if reduction == 2 else loss


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """0 where -lambd <= x <= lambd, x elsewhere (NaN passes through)."""
    _check(input, "hardshrink")
    inside = (input >= -lambd) & (input <= lambd)
    return input.masked_fill(inside, 0)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """max(0, x) + weight * min(0, x), one weight per channel (dim 1) or one for all."""
    _check(input, "prelu")
    _check(weight, "prelu", "weight", 2)
    if input.dtype is not weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_name(input.dtype)} and {_name(weight.dtype)}")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    channels = input.shape[1] if input.ndim >= 2 else 1
    n = weight.numel()
    if n != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        if n != channels:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{n} and channel size = {channels}.")
        weight = weight.reshape((channels,) + (1,) * (input.ndim - 2))
    return input.where(input > 0, weight * input)


def _name(dtype) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}.get(
        str(dtype).split(".")[-1], str(dtype))


def _shuffle_checks(input: Tensor, groups: int, fn: str = "channel_shuffle") -> None:
    _check(input, fn)
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, C, *) -> (N, g, C/g, *) -> swap the group dims -> (N, C, *)."""
    _shuffle_checks(input, groups)
    n, c, rest = input.shape[0], input.shape[1], tuple(input.shape[2:])
    return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)


def _native_channel_shuffle_meta(self, groups):
    _shuffle_checks(self, groups, "native_channel_shuffle")
    return new_empty_tensor(self._shape, self.dtype, META)


# An op of its own (not the composite above): PyTorch gives it no derivative, and its backward
# must refuse as there (ember-autograd's formula raises).
native_channel_shuffle_op = define("native_channel_shuffle(Tensor self, SymInt groups) -> Tensor", (),
                                   _native_channel_shuffle_meta)
native_channel_shuffle_op.kernels["meta"] = _native_channel_shuffle_meta


@native_channel_shuffle_op.kernel("cpu")
def _native_channel_shuffle_cpu(self, groups):
    return channel_shuffle(self, groups).contiguous()


def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:
    _shuffle_checks(input, groups, "native_channel_shuffle")
    return native_channel_shuffle_op(input, groups)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 0) -> Tensor:
    _check(input, "hinge_embedding_loss")
    _check(target, "hinge_embedding_loss", "target", 2)
    margin_clamp = (margin - input).clamp_min(0)
    loss = margin_clamp.masked_fill(target == 1, 0) + input.masked_fill(target == -1, 0)
    return _reduce(loss, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    for i, (x, name) in enumerate(((input1, "input1"), (input2, "input2"), (target, "target"))):
        _check(x, "margin_ranking_loss", name, i + 1)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 0) -> Tensor:
    for i, (x, name) in enumerate(((input1, "input1"), (input2, "input2"), (target, "target"))):
        _check(x, "cosine_embedding_loss", name, i + 1)
    targ_dim = target.ndim
    if targ_dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != input2.ndim or input1.ndim != targ_dim + 1:
        kind = "0D target tensor expects 1D" if targ_dim == 0 else "1D target tensor expects 2D"
        raise RuntimeError(f"{kind} input tensors, but found inputs with sizes {list(input1.shape)} and "
                           f"{list(input2.shape)}.")
    eps = 1e-12
    prod_sum = (input1 * input2).sum(targ_dim)
    denom = (((input1 * input1).sum(targ_dim) + eps) * ((input2 * input2).sum(targ_dim) + eps)).sqrt()
    cos = prod_sum / denom
    loss = (1 - cos).masked_fill(target != 1, 0) + (cos - margin).clamp_min(0).masked_fill(target != -1, 0)
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, reduction: int = 0) -> Tensor:
    for i, (x, name) in enumerate(((anchor, "anchor"), (positive, "positive"), (negative, "negative"))):
        _check(x, "triplet_margin_loss", name, i + 1)
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not (a_dim == p_dim == n_dim):
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a_dim}D, positive {p_dim}D, and negative {n_dim}D inputs")
    dist_pos = embedding_dropout.pairwise_distance(anchor, positive, p, eps)
    dist_neg = embedding_dropout.pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = dist_neg.minimum(embedding_dropout.pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    _check(input, "poisson_nll_loss")
    _check(target, "poisson_nll_loss", "target", 2)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        # Stirling's approximation of log(target!), counted only where target > 1.
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def _linear(x: Tensor, w: Tensor, b) -> Tensor:
    out = x.matmul(w.t())
    return out if b is None else out + b


def _cell_args(fn: str, input, hx, w_ih, w_hh):
    _check(input, fn)
    _check(w_ih, fn, "w_ih", 3)
    _check(w_hh, fn, "w_hh", 4)


def rnn_tanh_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
    _cell_args("rnn_tanh_cell", input, hx, w_ih, w_hh)
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).tanh()


def rnn_relu_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
    _cell_args("rnn_relu_cell", input, hx, w_ih, w_hh)
    return (_linear(input, w_ih, b_ih) + _linear(hx, w_hh, b_hh)).relu()


def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None):
    """One LSTM step: ``hx`` is (h, c); returns (h', c'). Gates in PyTorch's order i, f, g, o."""
    _cell_args("lstm_cell", input, hx, w_ih, w_hh)
    if not isinstance(hx, (list, tuple)) or len(hx) != 2:
        raise RuntimeError("lstm_cell: Expected hx to be a list of two tensors (h, c)")
    h, c = hx
    i, f, g, o = (_linear(input, w_ih, b_ih) + _linear(h, w_hh, b_hh)).chunk(4, 1)
    cy = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * cy.tanh(), cy


def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
    """One GRU step with PyTorch's gate order r, z, n (the reset gate scales the hidden term)."""
    _cell_args("gru_cell", input, hx, w_ih, w_hh)
    i_r, i_z, i_n = _linear(input, w_ih, b_ih).chunk(3, 1)
    h_r, h_z, h_n = _linear(hx, w_hh, b_hh).chunk(3, 1)
    r, z = (i_r + h_r).sigmoid(), (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (hx - n)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size):
    """``torch.adaptive_max_pool1d``: (values, indices) always."""
    return pool.adaptive_max_pool1d(input, output_size, return_indices=True)


declare(__name__, """
hardshrink                  function method
prelu                       function method
channel_shuffle             function
native_channel_shuffle      function
hinge_embedding_loss        function
margin_ranking_loss         function
cosine_embedding_loss       function
triplet_margin_loss         function
poisson_nll_loss            function
rnn_tanh_cell               function
rnn_relu_cell               function
lstm_cell                   function
gru_cell                    function
adaptive_max_pool1d         function fn=adaptive_max_pool1d_with_indices
""")
