"""``ember.autograd.grad_mode``: the context managers that switch gradient recording, as
``torch.autograd.grad_mode`` (``no_grad`` and kin live in the core; these are re-exported), plus
the engine switch ``set_multithreading_enabled``."""

from __future__ import annotations

from ember._src.grad_mode import (
    _DecoratorContextManager,
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)

__all__ = ["enable_grad", "inference_mode", "no_grad", "set_grad_enabled", "set_multithreading_enabled"]

_MULTITHREADING = [True]


def is_multithreading_enabled() -> bool:
    return _MULTITHREADING[0]


class set_multithreading_enabled(_DecoratorContextManager):  # noqa: N801 - PyTorch's name
    """Whether backward may run device queues on worker threads. As in PyTorch on the CPU, ember's
    engine runs backward on the calling thread, so both settings compute the same; the setting is
    kept and reported by ``is_multithreading_enabled``."""

    def __init__(self, mode: bool) -> None:
        self.prev = _MULTITHREADING[0]
        self.mode = bool(mode)
        _MULTITHREADING[0] = self.mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _MULTITHREADING[0] = self.prev

    def clone(self):
        return self.__class__(self.mode)


# Thread-local, as PyTorch's: one thread relaxing the contract does not change another's backward.
_LAYOUT_POLICY = __import__("threading").local()


def _grad_layout_enforced() -> bool:
    return getattr(_LAYOUT_POLICY, "enabled", True)


class enforce_grad_layout_policy(_DecoratorContextManager):  # noqa: N801 - PyTorch's name
    """Whether AccumulateGrad holds a leaf's first gradient to the gradient layout contract (the
    leaf's strides when it is non-overlapping and dense, row-major otherwise; see Note [Gradient
    layout contract] in _engine.py). With ``False`` a gradient nobody else holds is kept with its
    own strides (no reordering copy); copies are still laid out by the contract. Works as a
    function, a context manager or a decorator; thread-local."""

    def __init__(self, enable: bool = True) -> None:
        self.prev = _grad_layout_enforced()
        self.mode = bool(enable)
        _LAYOUT_POLICY.enabled = self.mode

    def __call__(self, orig_func):
        _LAYOUT_POLICY.enabled = self.prev  # as a decorator it applies inside the calls only
        return super().__call__(orig_func)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _LAYOUT_POLICY.enabled = self.prev

    def clone(self):
        return self.__class__(self.mode)
