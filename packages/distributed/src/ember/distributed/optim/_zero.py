"""``ZeroRedundancyOptimizer``: each rank keeps the optimizer state of its share of the parameters,
steps that share, and broadcasts the updated values to the others (ZeRO stage 1)."""

from __future__ import annotations

import ember
from ember.optim import Optimizer

from .. import _collectives as C
from .. import _groups
from .. import _object_collectives as O

_NOT_CONSOLIDATED = ("Optimizer state has not been consolidated on this rank. Please call "
                     "`consolidate_state_dict(to=...)` on all ranks beforehand if you meant to save the global state.")


class ZeroRedundancyOptimizer(Optimizer):
    """``optimizer_class(**defaults)`` over this rank's share of ``params``. Shares: every
    parameter group's parameters, largest first, each to the rank with the fewest elements so far.
    ``param_groups`` are the whole groups (schedulers change them; ``step`` passes their options on)."""

    def __init__(self, params, optimizer_class, process_group=None, parameters_as_bucket_view=False,
                 overlap_with_ddp=False, **defaults):
        if overlap_with_ddp:
            raise NotImplementedError("ZeroRedundancyOptimizer(overlap_with_ddp=True) is not supported by ember")
        super().__init__(params, defaults)
        self.process_group = process_group
        self.world_size = _groups.get_world_size(process_group)
        self.rank = _groups.get_rank(process_group)
        self._ranks = _groups.get_process_group_ranks(process_group) if process_group is not None else list(
            range(self.world_size))
        self._optim_constructor = optimizer_class
        self._optim_defaults = defaults
        self._consolidated = None
        self._build()

    def _build(self) -> None:
        sizes = [0] * self.world_size
        self._owner = {}
        local_groups = []
        for group in self.param_groups:
            mine = []
            for p in sorted(group["params"], key=lambda t: t.numel(), reverse=True):
                owner = min(range(self.world_size), key=lambda r: sizes[r])
                sizes[owner] += p.numel()
                self._owner[p] = owner
                if owner == self.rank:
                    mine.append(p)
            local_groups.append({**{k: v for k, v in group.items() if k != "params"},
                                 "params": [p for p in group["params"] if p in set(mine)]})
        self.optim = self._optim_constructor(local_groups, **self._optim_defaults)
        for group, local in zip(self.param_groups, self.optim.param_groups):  # the local optimizer's defaults
            for key, value in local.items():
                group.setdefault(key, value)

    def add_param_group(self, param_group) -> None:
        super().add_param_group(param_group)
        if hasattr(self, "_optim_constructor"):  # after construction: share everything again
            state = {p: s for p, s in self.optim.state.items()}
            self._build()
            for p, s in state.items():
                if self._owner.get(p) == self.rank:
                    self.optim.state[p] = s

    def _sync_options(self) -> None:
        for group, local in zip(self.param_groups, self.optim.param_groups):
            for key, value in group.items():
                if key != "params":
                    local[key] = value

    def step(self, closure=None):
        from ..algorithms.join import Join

        Join.notify_join_context(self)
        self._sync_options()
        loss = self.optim.step(closure) if closure is not None else self.optim.step()
        with ember.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    C.broadcast(p.data if hasattr(p, "data") else p, src=self._ranks[self._owner[p]],
                                group=self.process_group)
        return loss

    # -- Joinable (``Join([ddp_model, zero_optimizer])``) ------------------------------------

    def join_hook(self, **kwargs):
        """A rank that ran out of inputs keeps stepping (its share's broadcasts match the
        others'), as PyTorch's ZeRO join hook."""
        from ..algorithms.join import JoinHook

        zero = self

        class _ZeROJoinHook(JoinHook):
            def main_hook(self) -> None:
                zero.step()

        return _ZeROJoinHook()

    @property
    def join_device(self):
        params = [p for group in self.param_groups for p in group["params"]]
        return params[0].device if params else ember.device("cpu")

    @property
    def join_process_group(self):
        return self.process_group

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)

    @property
    def state(self):
        return self.optim.state if hasattr(self, "optim") else self._early_state

    @state.setter
    def state(self, value):
        self._early_state = value

    def _index(self) -> dict:
        order = [p for group in self.param_groups for p in group["params"]]
        return {p: i for i, p in enumerate(order)}

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Collects every rank's share of the state on rank ``to`` (a collective)."""
        index = self._index()
        mine = {index[p]: {k: (v.detach().clone() if isinstance(v, ember.Tensor) else v) for k, v in s.items()}
                for p, s in self.optim.state.items()}
        gathered = [None] * self.world_size if self.rank == to else None
        O.gather_object(mine, gathered, dst=self._ranks[to], group=self.process_group)
        self._consolidated = None
        if gathered is not None:
            state = {}
            for part in gathered:
                state.update(part)
            self._consolidated = dict(sorted(state.items()))

    def state_dict(self) -> dict:
        if self._consolidated is None:
            raise RuntimeError(_NOT_CONSOLIDATED)
        index = self._index()
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[p] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": dict(self._consolidated), "param_groups": groups}

    def load_state_dict(self, state_dict) -> None:
        order = [p for group in self.param_groups for p in group["params"]]
        for group, saved in zip(self.param_groups, state_dict["param_groups"]):
            for key, value in saved.items():
                if key != "params":
                    group[key] = value
        self._sync_options()
        for i, s in state_dict["state"].items():
            p = order[int(i)]
            if self._owner[p] == self.rank:
                self.optim.state[p] = {k: (v.clone() if isinstance(v, ember.Tensor) else v) for k, v in s.items()}
