"""Internals laid out as ``torch.utils.data._utils`` (code that extends ``default_collate`` imports
``collate`` and ``default_collate_fn_map`` from ``_utils.collate``)."""

from . import collate, fetch, worker

__all__ = ["collate", "fetch", "worker"]
