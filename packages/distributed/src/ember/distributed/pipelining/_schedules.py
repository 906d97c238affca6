"""Schedules: the order of microbatch forwards and backwards on the stages of one rank.

One stage per rank: GPipe runs all forwards, then all backwards. 1F1B: stage ``s`` of ``S`` runs
``S - s - 1`` warm-up forwards, then alternates one forward and one backward, then drains the
backwards, so at most ``S - s`` microbatches hold activations at once.

Several stages per rank (rank ``r`` of ``P`` holds stages ``r``, ``r + P``, ...):
``ScheduleInterleaved1F1B`` (Megatron's interleaving, "depth first"): microbatches go round the
ranks in rounds of ``n // max(1, n // P)``; rank ``r`` warms up with ``(L - 1) * round + 2 (P - 1 - r)``
forwards (``L`` local stages), then alternates, running forwards from its first local stage to its
last and backwards from the last to the first, one round at a time. ``ScheduleLoopedBFS``
("breadth first"): every microbatch through each local stage in turn, then all backwards in
reverse. These are PyTorch's orders, so both give the same steps as its schedules.

Sends are asynchronous, receives blocking, each message tagged with its receiving stage: every
stage posts its receives in the order its neighbour sends, so these orders cannot deadlock.
"""

from __future__ import annotations

import ember


def _split(value, n: int):
    if isinstance(value, ember.Tensor):
        if value.shape[0] < n:
            raise ValueError(f"a batch of {value.shape[0]} cannot be split into {n} microbatches")
        return list(value.tensor_split(n, 0))
    return [value] * n


class _PipelineSchedule:
    """Runs ``_order()`` ((kind "F"/"B", stage index, microbatch) triples) over this rank's stages."""

    def __init__(self, stages, n_microbatches: int, loss_fn=None, scale_grads: bool = True):
        if n_microbatches < 1:
            raise ValueError("n_microbatches must be at least 1")
        self._stages = {s.stage_index: s for s in stages}
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads
        self._forward_only = False  # ``eval()``
        any_stage = stages[0]
        self._num_stages = any_stage.num_stages

    def _order(self) -> list:
        raise NotImplementedError

    def _has_backward(self) -> bool:
        return self._loss_fn is not None and not self._forward_only

    def eval(self, *args, target=None, losses=None, **kwargs):
        """``step`` with forwards only (no backward, gradients untouched): the last stage's merged
        outputs, and the microbatches' losses in ``losses`` where ``target`` is given."""
        self._forward_only = True
        try:
            return self.step(*args, target=target, losses=losses, **kwargs)
        finally:
            self._forward_only = False

    def step(self, *args, target=None, losses=None, **kwargs):
        """Runs one batch; where this rank holds the last stage, returns the merged outputs (and
        fills ``losses``)."""
        n = self._n_microbatches
        last = self._stages.get(self._num_stages - 1)
        if last is not None and self._has_backward() and target is None:
            raise RuntimeError("the last stage needs target= to compute the loss")
        arg_chunks = list(zip(*[_split(a, n) for a in args])) if args else [()] * n
        kwarg_chunks = [{k: _split(v, n)[i] for k, v in kwargs.items()} for i in range(n)]
        targets = _split(target, n) if target is not None else [None] * n
        state = {}
        outputs = [None] * n
        for kind, index, i in self._order():
            stage = self._stages[index]
            if kind == "F":
                received, out = stage.forward_one(arg_chunks[i], kwarg_chunks[i])
                loss = None
                if stage.is_last and self._loss_fn is not None and targets[i] is not None:
                    loss = self._loss_fn(out, targets[i])
                    if losses is not None:
                        losses.append(loss.detach())
                if stage.is_last:
                    outputs[i] = out.detach() if isinstance(out, ember.Tensor) else out
                state[index, i] = (received, out, loss)
            else:
                received, out, loss = state.pop((index, i))
                stage.backward_one(received, out, loss)
        for stage in self._stages.values():
            stage.wait_sends()
        if self.scale_grads and n > 1 and self._has_backward():
            with ember.no_grad():
                for stage in self._stages.values():
                    for p in stage.submod.parameters():
                        if p.grad is not None:
                            p.grad.div_(n)
        if last is not None:
            return ember.cat(outputs, 0) if isinstance(outputs[0], ember.Tensor) else outputs
        return None


class PipelineScheduleSingle(_PipelineSchedule):
    """A schedule over one stage per rank."""

    def __init__(self, stage, n_microbatches: int, loss_fn=None, args_chunk_spec=None, kwargs_chunk_spec=None,
                 output_merge_spec=None, scale_grads: bool = True):
        super().__init__([stage], n_microbatches, loss_fn, scale_grads)
        self._stage = stage

    def _order(self):
        return [(kind, self._stage.stage_index, i) for kind, i in self._single_order()]

    def _single_order(self):
        raise NotImplementedError


class ScheduleGPipe(PipelineScheduleSingle):
    def _single_order(self):
        n = self._n_microbatches
        if not self._has_backward():
            return [("F", i) for i in range(n)]
        return [("F", i) for i in range(n)] + [("B", i) for i in range(n)]


class Schedule1F1B(PipelineScheduleSingle):
    def _single_order(self):
        n = self._n_microbatches
        stage = self._stage
        if not self._has_backward():
            return [("F", i) for i in range(n)]
        warmup = min(stage.num_stages - stage.stage_index - 1, n)
        order = [("F", i) for i in range(warmup)]
        forward, backward = warmup, 0
        while forward < n:
            order.append(("F", forward))
            forward += 1
            order.append(("B", backward))
            backward += 1
        order.extend(("B", i) for i in range(backward, n))
        return order


class PipelineScheduleMulti(_PipelineSchedule):
    """A schedule over several stages per rank (``stages``: this rank's, in stage order)."""

    def __init__(self, stages, n_microbatches: int, loss_fn=None, args_chunk_spec=None, kwargs_chunk_spec=None,
                 output_merge_spec=None, scale_grads: bool = True):
        stages = list(stages)
        if not stages:
            raise ValueError("a multi-stage schedule needs at least one stage")
        ranks = {s.group_rank for s in stages}
        if len(ranks) != 1:
            raise ValueError("every stage handed to a schedule must belong to this rank")
        super().__init__(stages, n_microbatches, loss_fn, scale_grads)
        self.pp_group_size = stages[0].group_size
        self.rank = stages[0].group_rank
        self.n_local_stages = len(stages)
        if self._num_stages != self.pp_group_size * self.n_local_stages:
            raise ValueError(f"{self._num_stages} stages over {self.pp_group_size} ranks: every rank must hold "
                             f"{self._num_stages // self.pp_group_size} stages, this one holds {self.n_local_stages}")

    def _local_stages(self) -> list:
        return list(range(self.rank, self._num_stages, self.pp_group_size))

    def _order(self):
        order = self._full_order()
        if not self._has_backward():
            return [op for op in order if op[0] == "F"]
        return order

    def _full_order(self):
        raise NotImplementedError


class ScheduleLoopedBFS(PipelineScheduleMulti):
    def _full_order(self):
        n, local = self._n_microbatches, self._local_stages()
        forwards = [("F", s, i) for s in local for i in range(n)]
        backwards = [("B", s, i) for s in reversed(local) for i in reversed(range(n))]
        return forwards + backwards


class ScheduleInterleaved1F1B(PipelineScheduleMulti):
    def __init__(self, stages, n_microbatches: int, loss_fn=None, args_chunk_spec=None, kwargs_chunk_spec=None,
                 output_merge_spec=None, scale_grads: bool = True):
        super().__init__(stages, n_microbatches, loss_fn, args_chunk_spec, kwargs_chunk_spec, output_merge_spec,
                         scale_grads)
        self.number_of_rounds = max(1, n_microbatches // self.pp_group_size)
        self.microbatches_per_round = n_microbatches // self.number_of_rounds
        if n_microbatches % self.number_of_rounds != 0:
            raise ValueError("Interleaved 1F1B requires the number of microbatches to be a multiple of the number "
                             f"of rounds ({self.number_of_rounds}), but got {n_microbatches}.")

    def _full_order(self):
        n, size, rank, local = self._n_microbatches, self.pp_group_size, self.rank, self.n_local_stages
        per_round = self.microbatches_per_round
        ops = local * n
        warmup = min((local - 1) * per_round + 2 * (size - 1 - rank), ops)
        steady = ops - warmup

        def forward_stage(step):
            return ((step // per_round) % local) * size + rank

        def backward_stage(step):
            return (local - 1 - ((step - warmup) // per_round) % local) * size + rank

        next_forward: dict = {}
        next_backward: dict = {}
        order = []

        def add(kind, stage, counters):
            counters[stage] = counters.get(stage, 0) + 1
            order.append((kind, stage, counters[stage] - 1))

        for step in range(warmup + steady + warmup):
            if step < warmup + steady:
                add("F", forward_stage(step), next_forward)
            if step >= warmup:
                add("B", backward_stage(step), next_backward)
        return order
