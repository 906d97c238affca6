"""``Join``: the context manager for training on uneven inputs across ranks
(``torch.distributed.algorithms.join``)."""

from __future__ import annotations

import contextlib


class JoinHook:
    """What a joinable runs while others still train (``main_hook``) and once all joined
    (``post_hook``). ember's DDP keeps its own (``DistributedDataParallel.join``)."""

    def main_hook(self) -> None:
        pass

    def post_hook(self, is_last_joiner: bool) -> None:
        pass


class Joinable:
    """An object ``Join`` can shadow: ember's ``DistributedDataParallel`` (its ``join()``)."""

    def join_hook(self, **kwargs) -> JoinHook:
        return JoinHook()

    @property
    def join_device(self):
        raise NotImplementedError

    @property
    def join_process_group(self):
        raise NotImplementedError


class Join:
    """``with Join([ddp_model]):`` - a rank that runs out of inputs keeps answering the others'
    collectives until every rank is done; each joinable's own ``join()`` context does the work
    (``enable``, ``throw_on_early_termination`` passed on)."""

    def __init__(self, joinables, enable: bool = True, throw_on_early_termination: bool = False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        for joinable in joinables:
            if not callable(getattr(joinable, "join", None)):
                raise TypeError(f"{type(joinable).__name__} cannot join: it has no join() context")
        self._joinables = list(joinables)
        self._enable = enable
        self._throw = throw_on_early_termination
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self):
        stack = contextlib.ExitStack()
        try:
            for joinable in self._joinables:
                stack.enter_context(joinable.join(enable=self._enable, throw_on_early_termination=self._throw))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc):
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc) if stack is not None else False

    @staticmethod
    def notify_join_context(joinable):
        """PyTorch's per-iteration announcement; ember's DDP announces inside its forward."""
        return None
