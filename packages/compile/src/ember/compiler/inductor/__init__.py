"""ember's Inductor: compiles captured graphs into fused C++/OpenMP kernels (CPU tensors) or
Triton kernels (CUDA tensors).

``compile_fx(gm, example_inputs)`` is the default backend of ``ember.compile``. The stages,
one module each: ``_graph`` (lowering with ``_lowering*`` rows and the decomposition table),
``_scheduler`` (fusion), ``_cpp`` (C++ source) and ``_codecache`` (g++ and the on-disk cache),
or ``_triton``/``_triton_reduce``/``_triton_ops`` (``@triton.jit`` source) and
``_triton_runtime`` (source cache, block-size tuning, launch through the device plugin),
``_wrapper`` (the Python that runs a compiled graph). ``EMBER_LOGS=output_code`` prints the
generated code.
"""

from . import config
from ._codecache import CompileError, cache_dir
from ._compile_fx import CompiledGraph, compile_fx, lower_and_build

__all__ = ["CompileError", "CompiledGraph", "cache_dir", "compile_fx", "config", "lower_and_build"]
