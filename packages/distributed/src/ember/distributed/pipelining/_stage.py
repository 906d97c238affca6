"""``PipelineStage``: one piece of the model on this rank, with the messages to its neighbours.

Stage ``i`` runs on rank ``i % group_size`` of the stage group (one stage per rank, or several in
a loop for the interleaved schedules: rank ``r`` holds stages ``r``, ``r + size``, ...).
Activations go to stage ``i + 1``, the gradients of the stage's inputs back to stage ``i - 1``;
each message's tag names the receiving stage and direction, so messages between two ranks that
hold several stages never mix. The first message between two stages carries a small int64 header
(rank, dtype, sizes) so the receiver can allocate; later microbatches reuse it. Stages on the same
rank (a group of one) hand tensors over directly.
"""

from __future__ import annotations

import ember

from .. import _collectives as C
from .. import _world

_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"]
_HEADER = 10  # ndim, dtype code, up to 8 sizes
_LOCAL: dict = {}  # (id(group), tag) -> tensors handed between stages of this rank


class PipelineStage:
    """Stage ``stage_index`` of ``num_stages``, running ``submodule`` on this rank."""

    def __init__(self, submodule, stage_index: int, num_stages: int, device=None, input_args=None,
                 output_args=None, group=None, dw_builder=None):
        if not 0 <= stage_index < num_stages:
            raise ValueError(f"Stage index {stage_index} is out of range of {num_stages}")
        self.submod = submodule
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group = group
        size = _world.get_world_size(group)
        self.group_size = size
        self.group_rank = _world.get_rank(group)
        if num_stages < size:
            raise ValueError(f"num_stages {num_stages} must be at least the size of the stage group ({size})")
        if stage_index % size != self.group_rank:
            raise ValueError(f"stage {stage_index} belongs to rank {stage_index % size} of the stage group "
                             f"(stage i runs on rank i % {size}), not to rank {self.group_rank}")
        self._in_meta = None  # (dtype, shape) of what arrives from the previous stage
        self._grad_meta = None  # (dtype, shape) of the gradient arriving from the next stage
        self._pending: list = []  # sends not yet completed

    @property
    def is_first(self) -> bool:
        return self.stage_index == 0

    @property
    def is_last(self) -> bool:
        return self.stage_index == self.num_stages - 1

    # -- messages ---------------------------------------------------------------------

    def _rank_of(self, stage: int) -> int:
        return stage % self.group_size

    def _send(self, tensors: list, to_stage: int, with_header: bool, backward: bool = False) -> None:
        """Sends a list of tensors; the first time, a count and one header per tensor go first."""
        tensors = [t.detach().contiguous() for t in tensors]
        tag = 2 * to_stage + int(backward)
        peer = self._rank_of(to_stage)
        if peer == self.group_rank:  # a stage of this rank: no message
            _LOCAL.setdefault((id(self.group), tag), []).append([t.clone() for t in tensors])
            return
        if with_header:
            header = ember.zeros(1 + _HEADER * len(tensors), dtype=ember.int64)
            header[0] = len(tensors)
            for k, t in enumerate(tensors):
                if t.ndim > _HEADER - 2:
                    raise ValueError(f"pipelining: activations of {t.ndim} dims are not supported "
                                     f"(at most {_HEADER - 2})")
                base = 1 + _HEADER * k
                header[base] = t.ndim
                header[base + 1] = _DTYPES.index(str(t.dtype).split(".")[-1])
                for i, n in enumerate(t.shape):
                    header[base + 2 + i] = n
            count = ember.tensor([len(tensors)], dtype=ember.int64)
            self._pending.append((C.isend(count, group=self.group, group_dst=peer, tag=tag), count))
            self._pending.append((C.isend(header, group=self.group, group_dst=peer, tag=tag), header))
        for t in tensors:
            self._pending.append((C.isend(t, group=self.group, group_dst=peer, tag=tag), t))

    def _recv(self, from_stage: int, meta, backward: bool = False):
        """Receives the list of tensors ``_send`` sent, and its metadata (kept for later microbatches)."""
        tag = 2 * self.stage_index + int(backward)
        peer = self._rank_of(from_stage)
        if peer == self.group_rank:
            queue = _LOCAL.get((id(self.group), tag))
            if not queue:
                raise RuntimeError(f"pipelining: stage {self.stage_index} expected a tensor from stage {from_stage} "
                                   "of this rank, which did not run first (schedule order)")
            ts = queue.pop(0)
            return ts, [(t.dtype, tuple(t.shape)) for t in ts]
        if meta is None:
            count = ember.zeros(1, dtype=ember.int64)
            C.recv(count, group=self.group, group_src=peer, tag=tag)
            n = int(count.item())
            header = ember.zeros(1 + _HEADER * n, dtype=ember.int64)
            C.recv(header, group=self.group, group_src=peer, tag=tag)
            values = header.tolist()
            meta = []
            for k in range(n):
                base = 1 + _HEADER * k
                meta.append((getattr(ember, _DTYPES[values[base + 1]]),
                             tuple(values[base + 2:base + 2 + values[base]])))
        bufs = []
        for dtype, shape in meta:
            buf = ember.empty(shape, dtype=dtype)
            C.recv(buf, group=self.group, group_src=peer, tag=tag)
            bufs.append(buf)
        return bufs, meta

    def wait_sends(self) -> None:
        for work, _ in self._pending:
            if work is not None:
                work.wait()
        self._pending.clear()

    # -- one microbatch ----------------------------------------------------------------

    def forward_one(self, args, kwargs):
        """Runs this stage on one microbatch: (the tensors received or None, the tensors sent on or
        the last stage's output)."""
        route = getattr(self, "_route", None)
        if self.is_first:
            received = None
        else:
            received, self._in_meta = self._recv(self.stage_index - 1, self._in_meta)
            for t in received:
                if t.is_floating_point() or t.is_complex():
                    t.requires_grad_(True)
        if route is not None:  # a stage pipeline() cut from a traced graph
            if received is None:
                values = _model_values(route.model_inputs, args, kwargs)
            else:  # model inputs come along from the first stage; this rank's step(**kwargs) may give them too
                values = dict(zip(route.receives, received))
                values.update((name, value) for name, value in (kwargs or {}).items() if name in values)
            route.run(self.submod, values)
            if self.is_last:
                return received, route.unflatten([values[name] for name in route.outputs])
            sends = [values[name] for name in route.sends]
        else:
            out = self.submod(*args, **kwargs) if self.is_first else self.submod(*received, **(kwargs or {}))
            if self.is_last:
                return received, out
            sends = list(out) if isinstance(out, (tuple, list)) else [out]
        first = not getattr(self, "_sent_forward_header", False)
        self._send(sends, self.stage_index + 1, first)
        self._sent_forward_header = True
        return received, sends

    def backward_one(self, received, out, loss=None):
        """Backward of one microbatch: from the loss (last stage) or the gradients the next stage
        sends for the floating-point tensors this stage sent it."""
        if self.is_last:
            loss.backward()
        else:
            floats = [t for t in out if t.is_floating_point() or t.is_complex()]
            grads, self._grad_meta = self._recv(self.stage_index + 1, self._grad_meta, backward=True)
            pairs = [(t, g) for t, g in zip(floats, grads) if t.requires_grad]
            if pairs:
                ember.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])
        if not self.is_first and received is not None:
            grads = [t.grad if t.grad is not None else ember.zeros_like(t) for t in received
                     if t.is_floating_point() or t.is_complex()]
            first = not getattr(self, "_sent_backward_header", False)
            self._send(grads, self.stage_index - 1, first, backward=True)
            self._sent_backward_header = True


def _model_values(model_inputs, args, kwargs) -> dict:
    from ._split import _model_values as values

    return values(model_inputs, args, kwargs)
