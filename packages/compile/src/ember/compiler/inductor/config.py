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


# torch._inductor settings that only tune how fast the generated code runs, or what it logs, in
# PyTorch's generator, and that ember's has no counterpart for: ``torch.compile(options=...)`` and
# ``patch`` accept them (a PyTorch program passing them runs) and leave ember's code as it is
# (docs/deviations.md). Settings that change results (``fallback_random``, ``use_fast_math``,
# ``freezing`` ...) are not here: they raise as unknown.
TORCH_TUNING_OPTIONS = frozenset({
    "epilogue_fusion", "epilogue_fusion_first", "prologue_fusion", "aggressive_fusion", "max_fusion_size",
    "max_autotune_pointwise", "max_autotune_gemm", "max_autotune_gemm_backends", "max_autotune_gemm_search_space",
    "coordinate_descent_tuning", "coordinate_descent_check_all_directions", "coordinate_descent_search_radius",
    "shape_padding", "comprehensive_padding", "benchmark_kernel", "benchmark_fusion", "benchmark_epilogue_fusion",
    "compile_threads", "split_reductions", "loop_ordering_after_fusion", "reorder_for_locality", "permute_fusion",
    "pattern_matcher", "group_fusion", "batch_fusion", "realize_opcount_threshold", "unroll_reductions_threshold",
    "combo_kernels", "cpp_wrapper", "debug", "disable_progress", "verbose_progress",
    "trace.enabled", "trace.graph_diagram", "trace.debug_log", "trace.info_log", "trace.fx_graph",
    "trace.output_code", "trace.upload_tar",
    "triton.unique_kernel_names", "triton.descriptive_names", "triton.cudagraph_trees", "triton.autotune_pointwise",
    "triton.autotune_cublasLt", "triton.max_tiles", "triton.persistent_reductions", "triton.multi_kernel",
    "cpp.simdlen", "cpp.threads", "cpp.enable_kernel_profile", "cpp.min_chunk_size", "cpp.dynamic_threads",
})
# torch._inductor names of ember settings
_ALIASES = {"fx_graph_cache": "graph_cache"}


def patch(arg1=None, arg2=None, **kwargs):
    """These settings (``{"triton.cudagraphs": True, ...}`` as ``torch.compile(options=...)``,
    ``patch("max_autotune", True)`` or ``patch(max_autotune=True)``) for the duration of a ``with``
    block or a decorated call. PyTorch's tuning-only settings (``TORCH_TUNING_OPTIONS``) are taken and
    have no effect; ``fx_graph_cache`` is ``graph_cache``."""
    from .._config_patch import ConfigPatch, changes_of

    changes = {}
    for key, value in changes_of(arg1, arg2, **kwargs).items():
        if key in TORCH_TUNING_OPTIONS and key not in snapshot():
            continue
        changes[_ALIASES.get(key, key)] = value
    return ConfigPatch(__name__, changes, _unknown_option)
