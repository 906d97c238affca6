"""Inductor settings (the counterpart of ``torch._inductor.config``); change them before compiling."""

from __future__ import annotations

import os
import sys


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
    # Column sums (bias and layer_norm weight gradients) run inside the kernel that produces their
    # input, as per-thread partial sums combined when it ends, not as kernels of their own.
    fuse_column_sums: bool = True


# Values used by more consumers than one are recomputed by each below this expression size.
inline_limit = 24
# A graph whose lowering or compilation fails runs eagerly (with a warning) instead of raising.
fallback_on_error = True
# A compiled backward (AOT autograd) takes its saved activations in a list it empties and frees each
# after its last read, and the autograd node drops its own references first unless the graph is
# retained; False: they live until the backward returns (the peak-memory comparison's "before").
release_saved_tensors = True
# Lowered graphs are kept on disk beside the kernels and reused by later processes (_graphcache.py).
graph_cache = True


# The code generator for graphs on CPU tensors: "cpp" (C++/OpenMP) or "triton" (Triton kernels run
# by Triton's interpreter: slow, for testing the GPU code generator without a GPU). Graphs on CUDA
# tensors always get Triton kernels.
cpu_backend: str = "cpp"


class triton:  # noqa: N801 - PyTorch's spelling (config.triton.<setting>)
    # Graphs whose inputs are CUDA tensors replay as CUDA graphs (mode="reduce-overhead").
    cudagraphs: bool = False
    # Time the block-size candidates of each kernel on its first launch and keep the fastest
    # (False: take the first candidate, which saves the candidates' compiles).
    autotune: bool = True
    # The wrappers of CUDA graphs launch their kernels through native launch sites and allocate their
    # buffers through the device's native allocation front (one C call each) where the device plugin and
    # the core have them; False (or EMBER_INDUCTOR_NATIVE_LAUNCH=0): the Python launch path.
    native_launch: bool = os.environ.get("EMBER_INDUCTOR_NATIVE_LAUNCH", "1") not in ("0", "")


# Try several kernel configurations and keep the fastest (mode="max-autotune").
max_autotune: bool = False


def snapshot() -> dict:
    """Every setting as ``patch`` takes them ({"triton.cudagraphs": ..., "cpp.language": ...}): a
    compile deferred past the ``patch`` block of its ``mode=`` (a backward graph compiled at its
    first call) applies them again."""
    module = sys.modules[__name__]
    out = {}
    for prefix, owner in (("", module), ("cpp.", cpp), ("triton.", triton)):
        for name, value in vars(owner).items():
            if not name.startswith("_") and isinstance(value, (bool, int, float, str, tuple, type(None))):
                out[prefix + name] = value
    return out


def _unknown_option(module_name: str, key: str) -> RuntimeError:
    return RuntimeError(f"Unexpected optimization option {key}, known options are triton.cudagraphs, "
                        "max_autotune, cpu_backend, inline_limit, fallback_on_error, cpp.*")


def patch(arg1=None, arg2=None, **kwargs):
    """These settings (``{"triton.cudagraphs": True, ...}`` as ``torch.compile(options=...)``,
    ``patch("max_autotune", True)`` or ``patch(max_autotune=True)``) for the duration of a ``with``
    block or a decorated call."""
    from .._config_patch import ConfigPatch, changes_of

    return ConfigPatch(__name__, changes_of(arg1, arg2, **kwargs), _unknown_option)
