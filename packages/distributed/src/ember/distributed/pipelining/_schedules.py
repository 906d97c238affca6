"""Schedules: the order of microbatch forwards and backwards on one stage.

GPipe: all forwards, then all backwards. 1F1B: stage ``s`` of ``S`` runs ``S - s - 1`` warm-up
forwards, then alternates one forward and one backward, then drains the backwards, so at most
``S - s`` microbatches hold activations at once. Sends are asynchronous, receives blocking:
every stage posts its receives in the order its neighbour sends, so no order can deadlock.
"""

from __future__ import annotations

import ember


def _split(value, n: int):
    if isinstance(value, ember.Tensor):
        if value.shape[0] < n:
            raise ValueError(f"a batch of {value.shape[0]} cannot be split into {n} microbatches")
        return list(value.tensor_split(n, 0))
    return [value] * n


class PipelineScheduleSingle:
    """A schedule over one stage per rank."""

    def __init__(self, stage, n_microbatches: int, loss_fn=None, args_chunk_spec=None, kwargs_chunk_spec=None,
                 output_merge_spec=None, scale_grads: bool = True):
        if n_microbatches < 1:
            raise ValueError("n_microbatches must be at least 1")
        self._stage = stage
        self._n_microbatches = n_microbatches
        self._loss_fn = loss_fn
        self.scale_grads = scale_grads

    def _order(self):
        raise NotImplementedError

    def step(self, *args, target=None, losses=None, **kwargs):
        """Runs one batch; on the last stage returns the merged outputs (and fills ``losses``)."""
        stage, n = self._stage, self._n_microbatches
        if stage.is_last and self._loss_fn is not None and target is None:
            raise RuntimeError("the last stage needs target= to compute the loss")
        arg_chunks = list(zip(*[_split(a, n) for a in args])) if args else [()] * n
        kwarg_chunks = [{k: _split(v, n)[i] for k, v in kwargs.items()} for i in range(n)]
        targets = _split(target, n) if target is not None else [None] * n
        state = {}
        outputs = [None] * n
        for kind, i in self._order():
            if kind == "F":
                received, out = stage.forward_one(arg_chunks[i], kwarg_chunks[i])
                loss = None
                if stage.is_last and self._loss_fn is not None:
                    loss = self._loss_fn(out, targets[i])
                    if losses is not None:
                        losses.append(loss.detach())
                outputs[i] = out.detach() if stage.is_last else None
                state[i] = (received, out, loss)
            else:
                received, out, loss = state.pop(i)
                stage.backward_one(received, out, loss)
        stage.wait_sends()
        if self.scale_grads and n > 1:
            with ember.no_grad():
                for p in stage.submod.parameters():
                    if p.grad is not None:
                        p.grad.div_(n)
        if stage.is_last:
            return ember.cat(outputs, 0) if isinstance(outputs[0], ember.Tensor) else outputs
        return None


class ScheduleGPipe(PipelineScheduleSingle):
    def _order(self):
        n = self._n_microbatches
        if self._loss_fn is None:
            return [("F", i) for i in range(n)]
        return [("F", i) for i in range(n)] + [("B", i) for i in range(n)]


class Schedule1F1B(PipelineScheduleSingle):
    def _order(self):
        n = self._n_microbatches
        stage = self._stage
        if self._loss_fn is None:
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
