"""``ember.backends``: the switches PyTorch programs set (``backends.cudnn.benchmark = True``).

There is no cuDNN, MPS or MKL in this build; the flags are kept so programs that set them
run, and ``is_available()`` answers False.
"""

from __future__ import annotations

import sys
import types


def _flags_module(name: str, **flags) -> types.ModuleType:
    module = types.ModuleType(f"{__name__}.{name}")
    module.is_available = lambda: False
    for key, value in flags.items():
        setattr(module, key, value)
    # Registered as a module, so `import ember.backends.cudnn` works as well as the attribute.
    sys.modules[module.__name__] = module
    return module


cudnn = _flags_module("cudnn", enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
                      version=lambda: None, is_acceptable=lambda tensor: False)
mps = _flags_module("mps", is_built=lambda: False)
mkldnn = _flags_module("mkldnn", enabled=False)
mkl = _flags_module("mkl")
openmp = _flags_module("openmp")
openmp.is_available = lambda: True
cuda = _flags_module("cuda", is_built=lambda: False)
cuda.matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                                    allow_bf16_reduced_precision_reduction=True)
