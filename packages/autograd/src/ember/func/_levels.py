"""The stack of active transforms, each with a level number (as functorch numbers them).

Every ``vmap`` and every ``grad``-like transform entered pushes one ``Level``; numbers only grow,
so a larger number is a transform entered later (further inside). A BatchedTensor names the
vmap level that batched it; an op on tensors of several levels is batched at the largest
one first, and the rule's own ops on the unwrapped values see the smaller ones.
"""

from __future__ import annotations

import contextlib
import itertools
import threading


class Level:
    __slots__ = ("kind", "number", "batch_size", "randomness", "physical_seen", "start_seq", "state")

    def __init__(self, kind: str, number: int, batch_size: int = 0, randomness: str = "error"):
        self.physical_seen = False  # grad levels: an op inside also recorded history for outer levels
        self.start_seq = 0  # grad levels: the autograd sequence number when the level began
        self.state = None  # grad levels: their _grad.GradLevel
        self.kind = kind
        self.number = number
        self.batch_size = batch_size
        self.randomness = randomness

    def __repr__(self) -> str:
        return f"Level({self.kind}, {self.number})"


class _Stack(threading.local):
    def __init__(self):
        self.levels: list[Level] = []


_STACK = _Stack()
_COUNTER = itertools.count(1)


@contextlib.contextmanager
def entered(kind: str, batch_size: int = 0, randomness: str = "error"):
    level = Level(kind, next(_COUNTER), batch_size, randomness)
    stack = _STACK.levels
    stack.append(level)
    try:
        yield level
    finally:
        stack.remove(level)


def vmap_level(number: int) -> Level:
    for level in reversed(_STACK.levels):
        if level.number == number:
            return level
    raise RuntimeError(f"vmap: a BatchedTensor of level {number} escaped the vmap that created it")


def innermost_grad_level() -> int:
    """The number of the innermost active grad transform (0 when none is active)."""
    level = innermost_grad()
    return 0 if level is None else level.number


def innermost_grad():
    for level in reversed(_STACK.levels):
        if level.kind == "grad":
            return level
    return None


def active() -> tuple:
    return tuple(_STACK.levels)
