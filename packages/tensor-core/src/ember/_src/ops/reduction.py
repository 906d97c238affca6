"""Op family: reduction."""

from __future__ import annotations

__all__: list = []
