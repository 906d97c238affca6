"""``Join``: the context manager for training on uneven inputs across ranks
(``torch.distributed.algorithms.join``), with PyTorch's ``Joinable``/``JoinHook`` protocol.

A rank that leaves the block early keeps matching the others' collectives: each iteration it
runs every joinable's ``main_hook`` until all ranks have left, then every ``post_hook``. An
ember ``DistributedDataParallel`` among the joinables drives that loop through its own
``join()`` context (its forward announces "still training" and whether its backward syncs), and
the other joinables' hooks run in each of its shadow iterations; without one, the loop is
PyTorch's: the first joinable's ``Join.notify_join_context`` all-reduces a 1 per iteration on
ranks still training, the context's exit all-reduces 0s.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass


class JoinHook:
    """What a joinable runs while others still train (``main_hook``) and once all joined
    (``post_hook``)."""

    def main_hook(self) -> None:
        pass

    def post_hook(self, is_last_joiner: bool) -> None:
        pass


@dataclass
class _JoinConfig:
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config():
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable:
    """An object ``Join`` can shadow: it gives a ``join_hook``, its device and process group, and
    calls ``Join.notify_join_context(self)`` once per iteration."""

    def __init__(self):
        self._join_config = _JoinConfig.construct_disabled_join_config()

    def join_hook(self, **kwargs) -> JoinHook:
        raise NotImplementedError

    @property
    def join_device(self):
        raise NotImplementedError

    @property
    def join_process_group(self):
        raise NotImplementedError


def _is_ddp(joinable) -> bool:
    from .._ddp import DistributedDataParallel

    return isinstance(joinable, DistributedDataParallel)


class Join:
    """``with Join([ddp_model, zero_optimizer, ...]):`` - see the module's docstring."""

    def __init__(self, joinables, enable: bool = True, throw_on_early_termination: bool = False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._enable = enable
        self._throw = throw_on_early_termination
        ddps = [j for j in self._joinables if _is_ddp(j)]
        if len(ddps) > 1:
            # PyTorch's joined rank shadows them in list order while the others reduce in backward
            # order, and fails (measured with torch 2.13: "Connection reset by peer")
            raise RuntimeError("Join shadows one DistributedDataParallel model: pass one (several DDP "
                               "models under one Join mismatch their collectives, in PyTorch too)")
        self._ddp = ddps[0] if ddps else None
        self._hooks = [j.join_hook(**kwargs) for j in self._joinables if j is not self._ddp]
        for i, joinable in enumerate(self._joinables):
            first = joinable is self._ddp if self._ddp is not None else i == 0
            joinable._join_config = _JoinConfig(enable, throw_on_early_termination, first)
        groups = {id(j.join_process_group): j.join_process_group for j in self._joinables if not _is_ddp(j)}
        if self._ddp is not None:
            groups.setdefault(id(self._ddp.process_group), self._ddp.process_group)
        if len(groups) > 1 and None not in groups.values():
            raise ValueError("Using join context manager with multiple process groups")
        self._group = next(iter(groups.values()))
        self._device = None if self._ddp is not None else self._joinables[0].join_device
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self):
        if self._ddp is None:
            return self
        stack = contextlib.ExitStack()
        stack.enter_context(self._ddp.join(enable=self._enable, throw_on_early_termination=self._throw,
                                           _other_hooks=self._hooks))
        self._stack = stack
        return self

    def __exit__(self, exc_type, exc, traceback):
        try:
            if self._ddp is not None:
                stack, self._stack = self._stack, None
                return stack.__exit__(exc_type, exc, traceback) if stack is not None else False
            if not self._enable or exc_type is not None:
                return False
            self._shadow()
            return False
        finally:
            for joinable in self._joinables:
                joinable._join_config = _JoinConfig.construct_disabled_join_config()

    def _shadow(self) -> None:
        import ember

        from .. import _collectives as C

        is_last_joiner = True
        while True:
            still = ember.zeros(1, device=self._device)
            C.all_reduce(still, group=self._group)
            if still.item() == 0:
                break
            if self._throw:
                C.all_reduce(ember.ones(1, device=self._device), group=self._group)
                from .. import _groups

                raise RuntimeError(f"Rank {_groups.get_rank(self._group)} exhausted all inputs.")
            for hook in self._hooks:
                hook.main_hook()
            is_last_joiner = False
        for hook in self._hooks:
            hook.post_hook(is_last_joiner)

    @staticmethod
    def notify_join_context(joinable):
        """Called by a joinable once per iteration: the first joinable of an enabled ``Join``
        (other than ember's DDP, which announces in its forward) all-reduces a 1 for the ranks
        that left; returns that async work, or None."""
        config = getattr(joinable, "_join_config", None)
        if config is None or not config.enable or not config.is_first_joinable or _is_ddp(joinable):
            return None
        import ember

        from .. import _collectives as C

        device, group = joinable.join_device, joinable.join_process_group
        work = C.all_reduce(ember.ones(1, device=device), group=group, async_op=True)
        if config.throw_on_early_termination:
            zeros = ember.zeros(1, device=device)
            C.all_reduce(zeros, group=group)
            if zeros.item():
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work
