"""The exception types of ``torch.distributed``: every one is a ``RuntimeError``."""

from __future__ import annotations


class DistError(RuntimeError):
    """Base of the errors the distributed package raises."""


class DistBackendError(DistError):
    """A collective failed in the engine: a peer exited, or the operation timed out."""


class DistStoreError(DistError):
    """A store operation failed or timed out (e.g. ``get`` of a key nobody set)."""


class DistNetworkError(DistError):
    """A socket could not listen or connect (port in use, no server at the address)."""


class QueueEmptyError(DistStoreError):
    """``queue_pop`` on an empty queue without waiting."""
