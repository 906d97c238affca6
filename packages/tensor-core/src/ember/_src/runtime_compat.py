"""Top-level helpers PyTorch programs call for build facts and older settings: ``has_lapack`` and
kin, ``compiled_with_cxx11_abi``, ``init_num_threads``, ``get_device_module``, the deprecated
``set_default_tensor_type`` and ``get/set_autocast_gpu_dtype``, and the deterministic debug mode."""

from __future__ import annotations

import importlib
import warnings

from . import dtypes
from ._native import _C
from .autocast import get_autocast_dtype, set_autocast_dtype
from .device import device as _device
from .runtime import (
    are_deterministic_algorithms_enabled,
    is_deterministic_algorithms_warn_only_enabled,
    use_deterministic_algorithms,
)
from .tensor import Tensor

# Build facts of ember's native extension: LAPACK and BLAS come from OpenBLAS, threads from OpenMP,
# FFTs from the pocketfft engine; there is no MKL.
has_lapack = True
has_mkl = False
has_openmp = True
has_spectral = True


def compiled_with_cxx11_abi() -> bool:
    """ember._C is built with the default libstdc++ ABI of GCC >= 5 (_GLIBCXX_USE_CXX11_ABI=1)."""
    return True


def init_num_threads() -> None:
    """Applies the intra-op thread count to the calling thread's OpenMP runtime (a new thread's
    OpenMP team starts at the OpenMP default otherwise)."""
    _C.set_num_threads(_C.get_num_threads())


_DEVICE_MODULES = {"cpu": "ember.cpu", "cuda": "ember.cuda"}


def get_device_module(device=None):
    """The module of a device type (``ember.cpu``, ``ember.cuda``); no argument: the current
    accelerator's module, or ``ember.cpu`` when there is none."""
    if device is None:
        from .. import accelerator

        current = accelerator.current_accelerator() if accelerator.is_available() else None
        name = current.type if current is not None else "cpu"
    elif isinstance(device, _device):
        name = device.type
    elif isinstance(device, str):
        name = _device(device).type
    else:
        raise RuntimeError(f"Invalid value of device '{device}', expect torch.device, str, or None")
    if name not in _DEVICE_MODULES:
        raise RuntimeError(f"Device '{name}' does not have a corresponding module registered as 'torch.{name}'.")
    return importlib.import_module(_DEVICE_MODULES[name])


_TYPE_NAMES = {"FloatTensor": dtypes.float32, "DoubleTensor": dtypes.float64, "HalfTensor": dtypes.float16,
               "BFloat16Tensor": dtypes.bfloat16}


def set_default_tensor_type(t, /) -> None:
    """Deprecated: sets the default floating dtype from a legacy type (``ember.DoubleTensor``) or its
    name (``"torch.DoubleTensor"``)."""
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.", UserWarning,
                  stacklevel=2)
    if isinstance(t, str):
        name = t.rsplit(".", 1)[-1]
        if name not in _TYPE_NAMES and not t.startswith(("torch.", "ember.")):
            raise TypeError(f"invalid type: '{t}'")
        if ".cuda." in t:
            raise TypeError("type torch.cuda.FloatTensor not available. Torch not compiled with CUDA enabled.")
        dtype = _TYPE_NAMES.get(name)
    else:
        dtype = getattr(t, "dtype", None) if isinstance(t, type) and not issubclass(t, Tensor) else None
        if dtype is None:
            raise TypeError("invalid type object: only floating-point types are supported as the default type")
    if dtype is None or not dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    dtypes.set_default_dtype(dtype)


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default": off, 1/"warn": warn on nondeterministic ops, 2/"error": raise on them."""
    if isinstance(debug_mode, str):
        names = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in names:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = names[debug_mode]
    if not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not are_deterministic_algorithms_enabled():
        return 0
    return 1 if is_deterministic_algorithms_warn_only_enabled() else 2


def get_autocast_gpu_dtype():
    warnings.warn("torch.get_autocast_gpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cuda') "
                  "instead.", DeprecationWarning, stacklevel=2)
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype) -> None:
    warnings.warn("torch.set_autocast_gpu_dtype(dtype) is deprecated. Please use "
                  "torch.set_autocast_dtype('cuda', dtype) instead.", DeprecationWarning, stacklevel=2)
    set_autocast_dtype("cuda", dtype)


def is_distributed(input: Tensor) -> bool:
    """False: an ember tensor is never a (legacy THD) distributed tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_distributed(): argument 'input' must be Tensor, not {type(input).__name__}")
    return False
