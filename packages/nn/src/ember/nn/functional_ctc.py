"""``F.ctc_loss`` (Connectionist Temporal Classification, Graves et al. 2006) and ``nn.CTCLoss``'s
functional core, composed from tensor ops so that autograd differentiates it.

The forward variable alpha runs over the blank-extended target l' (blank, l1, blank, l2, ...,
blank; length 2S+1) in log space: one step per time frame, each vectorized over the batch and
the extended positions; sequences shorter than the longest keep their alpha frozen after their
last frame. The loss of a sequence is -log(alpha[T-1, L'-1] + alpha[T-1, L'-2]). Its gradient
is the autograd of this recursion plus PyTorch's ``exp(log_probs)`` term (``_SoftmaxTerm``); the
log-sum-exp used here gives an exact zero gradient (not NaN) to paths of probability zero, so
``zero_infinity`` can zero the loss and the gradient of impossible alignments.
"""

from __future__ import annotations

import ember
from ember import Tensor

_NEG_INF = float("-inf")


def _lengths(x, name: str, batch: int) -> list[int]:
    if isinstance(x, Tensor):
        if x.dtype.is_floating_point or x.dtype.is_complex:
            raise RuntimeError(f"ctc_loss: {name} must be integral")
        values = [int(v) for v in x.reshape(-1).tolist()]
    else:
        values = [int(v) for v in x]
    if len(values) != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return values


def _one(x):
    # An unbatched call's length: a Python int or a 0-d tensor.
    if isinstance(x, Tensor):
        return x.reshape(1)
    return list(x) if isinstance(x, (list, tuple)) else [int(x)]


def _lse3(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    # log(e^a + e^b + e^c) with -inf everywhere giving -inf and a zero (not NaN) gradient.
    m = ember.maximum(ember.maximum(a, b), c)
    finite = m > _NEG_INF
    m0 = ember.where(finite, m, ember.zeros_like(m)).detach()
    s = (a - m0).exp() + (b - m0).exp() + (c - m0).exp()
    safe = ember.where(finite, s, ember.ones_like(s))
    return ember.where(finite, m0 + safe.log(), ember.full_like(s, _NEG_INF))


class _PoisonGrad(ember.autograd.Function):
    """Identity whose backward writes NaN into the frames of the given sequences: PyTorch's CTC
    gradient of an impossible alignment (infinite loss) is NaN unless ``zero_infinity``."""

    @staticmethod
    def forward(ctx, x, mask):
        ctx.save_for_backward(mask)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g.masked_fill(mask, float("nan")), None


class _SoftmaxTerm(ember.autograd.Function):
    """Zeros of shape (N,) whose backward gives ``log_probs`` the gradient ``exp(log_probs) * g``
    on each sequence's frames: PyTorch's CTC backward returns ``exp(lp) - posterior`` (the
    gradient through a log_softmax it assumes came before), where the recursion's own gradient is
    ``-posterior``; the two agree after a log_softmax, and this term makes them agree without one."""

    @staticmethod
    def forward(ctx, log_probs, frames):
        ctx.save_for_backward(log_probs, frames)
        return log_probs.new_zeros((log_probs.shape[1],))

    @staticmethod
    def backward(ctx, g):
        log_probs, frames = ctx.saved_tensors
        term = log_probs.exp() * g.view(1, -1, 1)
        return ember.where(frames.unsqueeze(2), term, ember.zeros_like(term)), None


def _nan_grad_for_infeasible(log_probs, padded, tg_len, in_len):
    # A target fits in T frames only if T >= its length plus its repeated neighbours (a blank
    # must separate equal consecutive labels).
    if not log_probs.requires_grad:
        return log_probs
    T, N, _ = log_probs.shape
    bad = []
    for b in range(N):
        row = padded[b, :tg_len[b]].tolist() if tg_len[b] else []
        need = len(row) + sum(1 for i in range(1, len(row)) if row[i] == row[i - 1])
        bad.append(in_len[b] < need)
    if not any(bad):
        return log_probs
    frames = ember.arange(T).unsqueeze(1) < ember.tensor(in_len, dtype=ember.int64).unsqueeze(0)
    mask = (frames & ember.tensor(bad, dtype=ember.bool).unsqueeze(0)).unsqueeze(2)
    return _PoisonGrad.apply(log_probs, mask)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        raise TypeError("ctc_loss(): log_probs and targets must be Tensors")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.ndim == 1 else targets
        input_lengths, target_lengths = _one(input_lengths), _one(target_lengths)
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be 2-D (T, C) or 3-D (T, N, C), got {log_probs.ndim}-D")
    if not log_probs.dtype.is_floating_point:
        raise RuntimeError(f"ctc_loss: log_probs must be floating point, got {log_probs.dtype}")
    T, N, C = log_probs.shape
    if not 0 <= blank < C:
        raise RuntimeError("blank must be in label range")
    in_len = _lengths(input_lengths, "input_lengths", N)
    tg_len = _lengths(target_lengths, "target_lengths", N)
    if targets.dtype.is_floating_point or targets.dtype.is_complex:
        raise RuntimeError("ctc_loss: targets must be integral")
    # PyTorch's checks (ctc_loss_allocate_outputs), in its order: target lengths, the targets' size
    # for their layout (exact for concatenated targets), then input lengths.
    where = "(while checking arguments for ctc_loss_allocate_outputs)"
    for b in range(N):
        if tg_len[b] < 0:
            raise RuntimeError(f"Expected target_lengths to have value at least 0, but got value {tg_len[b]} {where}")
    S = max(tg_len) if tg_len else 0
    dim0 = sum(tg_len) if targets.ndim == 1 else N
    if targets.ndim == 0 or targets.shape[0] != dim0:
        got = targets.shape[0] if targets.ndim else 1
        raise RuntimeError(f"Expected tensor to have size {dim0} at dimension 0, but got size {got} for argument #2 "
                           f"'targets' {where}")
    if targets.ndim != 1 and S > targets.shape[1]:
        raise RuntimeError(f"Expected tensor to have size at least {S} at dimension 1, but got size "
                           f"{targets.shape[1]} for argument #2 'targets' {where}")
    for b in range(N):
        if in_len[b] < 0:
            raise RuntimeError(f"Expected input_lengths to have value at least 0, but got value {in_len[b]} {where}")
        if in_len[b] > T:
            raise RuntimeError(f"Expected input_lengths to have value at most {T}, but got value {in_len[b]} {where}")
    # Padded (N, S) targets from either layout: padded 2-D or concatenated 1-D.
    if targets.ndim != 1:
        padded = targets[:, :S].long()
    else:
        flat = targets.reshape(-1).long()
        rows, start = [], 0
        for b in range(N):
            row = flat[start:start + tg_len[b]]
            start += tg_len[b]
            if tg_len[b] < S:
                row = ember.cat([row, ember.full((S - tg_len[b],), blank, dtype=ember.int64)])
            rows.append(row)
        padded = ember.stack(rows) if rows else ember.zeros(0, S, dtype=ember.int64)
    L = 2 * S + 1
    ext = ember.full((N, L), blank, dtype=ember.int64)
    if S:
        ext[:, 1::2] = padded
    # Whether position s may be reached from s - 2 (a label differing from the one two back).
    skip = ember.zeros(N, L, dtype=ember.bool)
    if L > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    if not zero_infinity:
        log_probs = _nan_grad_for_infeasible(log_probs, padded, tg_len, in_len)
    lp = log_probs.gather(2, ext.unsqueeze(0).expand(T, N, L))  # (T, N, L)
    valid = ember.arange(L).unsqueeze(0) < (2 * ember.tensor(tg_len, dtype=ember.int64) + 1).unsqueeze(1)
    neg = ember.full((N, L), _NEG_INF, dtype=log_probs.dtype)
    start_mask = ember.arange(L).unsqueeze(0) < 2
    alpha = ember.where(start_mask & valid, lp[0], neg) if T else neg
    pad1 = ember.full((N, 1), _NEG_INF, dtype=log_probs.dtype)
    pad2 = ember.full((N, 2), _NEG_INF, dtype=log_probs.dtype)
    lengths = ember.tensor(in_len, dtype=ember.int64).unsqueeze(1)
    for t in range(1, T):
        prev1 = ember.cat([pad1, alpha[:, :-1]], 1)
        prev2 = ember.where(skip, ember.cat([pad2, alpha[:, :-2]], 1), neg) if L > 2 else neg
        step = ember.where(valid, _lse3(alpha, prev1, prev2) + lp[t], neg)
        alpha = ember.where(lengths > t, step, alpha)
    last = 2 * ember.tensor(tg_len, dtype=ember.int64)  # index L' - 1 of each sequence
    end1 = alpha.gather(1, last.unsqueeze(1)).squeeze(1)
    end2 = alpha.gather(1, (last - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    end2 = ember.where(last > 0, end2, ember.full_like(end2, _NEG_INF))
    # A sequence with no frames has probability 0 (infinite loss), as in PyTorch.
    none_left = ember.tensor([n == 0 for n in in_len], dtype=ember.bool)
    ll = _lse3(end1, end2, ember.full_like(end1, _NEG_INF))
    loss = -ember.where(none_left, ember.full_like(ll, _NEG_INF), ll)
    if log_probs.requires_grad:
        frames = ember.arange(T).unsqueeze(1) < ember.tensor(in_len, dtype=ember.int64).unsqueeze(0)
        loss = loss + _SoftmaxTerm.apply(log_probs, frames)
    if zero_infinity:
        loss = ember.where(ember.isinf(loss), ember.zeros_like(loss), loss)
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    divisor = ember.tensor(tg_len, dtype=loss.dtype).clamp(min=1)
    return (loss / divisor).mean()
