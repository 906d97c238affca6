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

# Scaled-dot-product-attention backend switches (ember has one CPU implementation: they are
# recorded, reported back, and select nothing).
_SDP = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _sdp_switches(kind: str):
    def enable(enabled: bool) -> None:
        _SDP[kind] = bool(enabled)

    def enabled() -> bool:
        return _SDP[kind]

    return enable, enabled


cuda.enable_flash_sdp, cuda.flash_sdp_enabled = _sdp_switches("flash")
cuda.enable_mem_efficient_sdp, cuda.mem_efficient_sdp_enabled = _sdp_switches("mem_efficient")
cuda.enable_math_sdp, cuda.math_sdp_enabled = _sdp_switches("math")
cuda.enable_cudnn_sdp, cuda.cudnn_sdp_enabled = _sdp_switches("cudnn")
cuda.is_flash_attention_available = lambda: False
