"""Inductor settings (the counterpart of ``torch._inductor.config``); change them before compiling."""

from __future__ import annotations


class cpp:  # noqa: N801 - PyTorch's spelling (config.cpp.<setting>)
    # Appended to the compiler flags (they are part of the kernel cache key).
    extra_flags: tuple = ()


# Values used by more consumers than one are recomputed by each below this expression size.
inline_limit = 24
# A graph whose lowering or compilation fails runs eagerly (with a warning) instead of raising.
fallback_on_error = True
