"""ember._inductor: PyTorch's ``torch._inductor`` entry points for ahead-of-time compilation.

``aoti_compile_and_package(ep)`` compiles an exported program into a ``.pt2`` package (a shared
library of generated C kernels with the call plan and the weights embedded); ``aoti_load_package``
loads and runs it without the model's Python source. The compiler itself is
``ember.compiler.inductor`` (its settings are ``config``, PyTorch's ``torch._inductor.config``); the
packaging lives in ``ember.export._aoti``. ``utils.fresh_inductor_cache`` gives a block a new compile
cache directory; ``cudagraph_mark_step_begin`` is ``ember.compiler``'s (no CUDA graphs on the CPU).
"""

import sys

from ember.compiler import cudagraph_mark_step_begin
from ember.compiler.inductor import config
from ember.export._aoti import AOTICompileError, aoti_compile_and_package
from ember.export._aoti_runtime import AOTICompiledModel, aoti_load_package

# ``import torch._inductor.config as c`` (PyTorch's spelling) finds the same settings module
sys.modules[__name__ + ".config"] = config

__all__ = ["AOTICompileError", "AOTICompiledModel", "aoti_compile_and_package", "aoti_load_package", "config",
           "cudagraph_mark_step_begin"]
