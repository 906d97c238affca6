"""``ember.distributed.algorithms``: DDP communication hooks and ``Join`` (uneven inputs)."""

from .join import Join, Joinable, JoinHook

__all__ = ["Join", "JoinHook", "Joinable"]
