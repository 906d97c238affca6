"""``ember.cuda.nvtx``: NVTX range annotations. ember has no NVTX library, so each call raises
PyTorch's CPU-build RuntimeError (the ``range`` context manager raises on entry)."""

from __future__ import annotations

import contextlib

__all__ = ["range_push", "range_pop", "range_start", "range_end", "mark", "range"]


def _unavailable(*args, **kwargs):
    raise RuntimeError("NVTX functions not installed. Are you sure you have a CUDA build?")


def range_push(msg):
    """Pushes a range onto the stack of nested ranges."""
    return _unavailable(msg)


def range_pop():
    return _unavailable()


def range_start(msg) -> int:
    return _unavailable(msg)


def range_end(range_id) -> None:
    return _unavailable(range_id)


def mark(msg):
    return _unavailable(msg)


@contextlib.contextmanager
def range(msg, *args, **kwargs):  # noqa: A001 - PyTorch's name
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
