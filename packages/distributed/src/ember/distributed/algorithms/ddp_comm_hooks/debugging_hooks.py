"""``noop_hook``: a DDP comm hook that communicates nothing (for measuring all-reduce headroom)."""

from __future__ import annotations

from ember.futures import Future

__all__ = ["noop_hook"]


def noop_hook(_state, bucket):
    """A future already holding the bucket's own buffer: gradients stay local, unaveraged."""
    future = Future()
    future.set_result(bucket.buffer())
    return future
