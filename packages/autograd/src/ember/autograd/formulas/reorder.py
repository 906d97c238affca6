"""Derivatives of the reordering ops (flip): the gradient is reordered back."""

from __future__ import annotations

from ._common import arg
from ._registry import derivative


@derivative("flip")
def _flip(grads, inputs, outputs):
    return (grads[0].flip(arg(inputs, 1, "dims")),)
