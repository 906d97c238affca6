"""Inductor settings (the counterpart of ``torch._inductor.config``); change them before compiling."""

from __future__ import annotations


class cpp:  # noqa: N801 - PyTorch's spelling (config.cpp.<setting>)
    # The kernels are written in the common subset of C and C++: "c" builds them with the C
    # front end (a cold compile takes ~1/5 of the C++ one), "c++" with the C++ one.
    language: str = "c"
    # Appended to the compiler flags (they are part of the kernel cache key).
    extra_flags: tuple = ()
    # Vectorized exp/log/tanh/... from glibc's libmvec where it exists (None: detect).
    vector_math: bool | None = None
    # A row kernel whose output is at least this many bytes writes it with streaming stores (it
    # would not stay in cache for the next kernel anyway); None turns them off.
    streaming_min_bytes: int | None = 8 << 20


# Values used by more consumers than one are recomputed by each below this expression size.
inline_limit = 24
# A graph whose lowering or compilation fails runs eagerly (with a warning) instead of raising.
fallback_on_error = True
# Lowered graphs are kept on disk beside the kernels and reused by later processes (_graphcache.py).
graph_cache = True
