"""Op family: random."""

from __future__ import annotations

__all__: list = []
