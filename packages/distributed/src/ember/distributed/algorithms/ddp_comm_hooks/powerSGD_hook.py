"""PowerSGD gradient compression (Vogels et al., 2019) as a DDP comm hook, PyTorch's recipe.

Each gradient matrix M (n x m, a parameter's gradient viewed as ``(shape[0], -1)``) worth it
(``(n + m) * rank * min_compression_rate < n * m``) is sent as two thin factors: P = M Q
(all-reduced, then orthonormalised), then Q = M^T P (all-reduced, averaged); M is replaced by
P Q^T. The other gradients of the bucket are all-reduced whole. Q starts random (numpy's
RandomState seeds the torch generator, so every rank draws the same) and, with ``warm_start``,
carries over between steps; with ``use_error_feedback`` what the approximation lost is added to
the next step's gradients. The first ``start_powerSGD_iter`` steps use the plain all-reduce.
"""

from __future__ import annotations

import numpy as np

import ember

from ..._world import resolve
from . import default_hooks

__all__ = ["PowerSGDState", "powerSGD_hook"]


def _gram_schmidt(batch, epsilon) -> None:
    """Orthonormalises the columns of each matrix of ``batch`` (b x n x r) in place."""
    columns = batch.shape[2]
    for i in range(columns):
        col = batch[:, :, i:i + 1]
        norm = ember.norm(col, dim=1, keepdim=True)
        col /= norm if epsilon == 0 else norm + epsilon
        if i + 1 < columns:
            later = batch[:, :, i + 1:]
            later -= ember.sum(col * later, dim=1, keepdim=True) * col


def _orthonormalise(batch, epsilon) -> None:
    rank = batch.shape[2]
    if rank <= 2 or batch.dtype in (ember.float16, ember.bfloat16):
        _gram_schmidt(batch, epsilon)
    else:
        q, _ = ember.linalg.qr(batch)
        batch.copy_(q)


class PowerSGDState:
    """The hook's settings and memory (error feedback, warm-started factors, the step count)."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0,
                 random_seed=0, compression_stats_logging_frequency=10_000,
                 batch_tensors_with_same_shape: bool = False):
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError(
                "Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, "
                "because PowerSGD can only be applied after the first two iterations in DDP.")
        if batch_tensors_with_same_shape:
            raise NotImplementedError("ember's PowerSGD does not batch tensors of the same shape")
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self.error_dict: dict = {}
        self.p_memory_dict: dict = {}
        self.q_memory_dict: dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def maybe_increase_iter(self, bucket) -> None:
        """A step ends with the last bucket (index 0)."""
        if bucket.is_last():
            self.iter += 1

    def compression_stats(self) -> tuple:
        """(before / after, elements before compression, elements after) so far."""
        before, after = self.total_numel_before_compression, self.total_numel_after_compression
        return (before / after if after > 0 else 0, before, after)


def powerSGD_hook(state: PowerSGDState, bucket):
    """Averages the bucket's gradients through rank-``matrix_approximation_rank`` factors."""
    group = resolve(state.process_group)
    world = group.size()
    flat = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return default_hooks.allreduce_hook(state.process_group, bucket)

    index = bucket.index()
    before_compression = None
    if state.use_error_feedback:
        if index in state.error_dict:
            flat.add_(state.error_dict[index])
        else:
            state.error_dict[index] = ember.zeros(flat.shape[0], device=flat.device, dtype=flat.dtype)
        before_compression = flat.detach().clone()

    rank_cap = state.matrix_approximation_rank
    compressed, plain, p_size, q_size = [], [], 0, 0
    for grad in bucket.gradients():
        matrix = grad.view(grad.shape[0], -1)
        n, m = matrix.shape
        r = min(n, m, rank_cap)
        state.total_numel_before_compression += n * m
        if (n + m) * r * state.min_compression_rate < n * m:
            compressed.append((matrix, r))
            p_size, q_size = p_size + n * r, q_size + m * r
            state.total_numel_after_compression += (n + m) * r
        else:
            plain.append(grad)
            state.total_numel_after_compression += n * m

    plain_flat = (ember.cat([g.view(-1) for g in plain]) if plain
                  else ember.tensor([], device=flat.device, dtype=flat.dtype))
    fresh = not state.warm_start or index not in state.p_memory_dict
    if fresh:
        state.p_memory_dict[index] = ember.empty(p_size, device=flat.device, dtype=flat.dtype)
        state.q_memory_dict[index] = ember.empty(q_size, device=flat.device, dtype=flat.dtype)
    matrices, ps, qs = [], [], []
    p_at = q_at = 0
    for matrix, r in compressed:
        n, m = matrix.shape
        matrices.append(matrix.unsqueeze(0))
        ps.append(state.p_memory_dict[index][p_at:p_at + n * r].view(1, n, r))
        qs.append(state.q_memory_dict[index][q_at:q_at + m * r].view(1, m, r))
        p_at, q_at = p_at + n * r, q_at + m * r
    if fresh:
        with ember.random.fork_rng(devices=[]):
            ember.manual_seed(state.rng.randint(1_000_000_000))
            for q in qs:
                q.copy_(ember.randn(*q.shape, device="cpu", dtype=flat.dtype))
                _orthonormalise(q, state.orthogonalization_epsilon)
    else:
        for q in qs:
            _orthonormalise(q, state.orthogonalization_epsilon)
    for matrix, q, p in zip(matrices, qs, ps):
        ember.bmm(matrix, q, out=p)

    from ... import _collectives as C

    def all_reduce(tensor):
        return C.all_reduce(tensor, group=state.process_group, async_op=True).get_future()

    def plain_done_reduce_ps(fut):
        averaged = fut.value()[0].div_(world)
        at = 0
        for grad in plain:
            grad.copy_(averaged[at:at + grad.numel()].view_as(grad))
            at += grad.numel()
        return all_reduce(state.p_memory_dict[index]).wait()[0]

    def ps_done_reduce_qs(fut):
        state.p_memory_dict[index] = fut.value()
        for p in ps:
            _orthonormalise(p, state.orthogonalization_epsilon)
        for matrix, p, q in zip(matrices, ps, qs):
            ember.bmm(matrix.transpose(1, 2), p, out=q)
        return all_reduce(state.q_memory_dict[index]).wait()[0]

    def rebuild(fut):
        state.q_memory_dict[index] = fut.value().div_(world)
        for p, q, matrix in zip(ps, qs, matrices):
            ember.bmm(p, q.transpose(1, 2), out=matrix)
        if state.use_error_feedback:
            state.error_dict[index] = before_compression - flat
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        return flat

    return all_reduce(plain_flat).then(plain_done_reduce_ps).then(ps_done_reduce_qs).then(rebuild)
