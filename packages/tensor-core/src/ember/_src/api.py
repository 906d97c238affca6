"""The top-level ``ember`` namespace: every public name, re-exported from private modules."""

from __future__ import annotations

from ._native import _C
from . import dispatch as _dispatch
from .device import device
from .generator import (Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state,
                        thread_safe_generator)
from .dtypes import (
    bfloat16, can_cast, complex64, complex128, dtype, finfo, float16, float32, float64, get_default_dtype, iinfo,
    int8, int16, int32, int64, promote_types, set_default_dtype, uint8,
)
from .dtypes import bool  # noqa: A004
from .dtypes import ALIASES as _ALIASES
from .interop import export_dlpack as to_dlpack
from .interop import from_dlpack
from .grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from .memory_format import (
    channels_last, channels_last_3d, contiguous_format, legacy_contiguous_format, memory_format, preserve_format,
)
from .printing import set_printoptions
from .torch_function import DisableTorchFunction, DisableTorchFunctionSubclass
from .runtime import (
    are_deterministic_algorithms_enabled, get_float32_matmul_precision, get_num_interop_threads,
    is_anomaly_check_nan_enabled, is_anomaly_enabled, is_deterministic_algorithms_warn_only_enabled, is_nonzero,
    is_warn_always_enabled, set_anomaly_enabled, set_float32_matmul_precision, set_flush_denormal,
    set_num_interop_threads, set_warn_always, typename, use_deterministic_algorithms,
)
from .runtime_compat import (
    compiled_with_cxx11_abi, get_autocast_gpu_dtype, get_deterministic_debug_mode, get_device_module, has_lapack,
    has_mkl, has_openmp, has_spectral, init_num_threads, is_distributed, set_autocast_gpu_dtype,
    set_default_tensor_type, set_deterministic_debug_mode,
)
from .shapes import Size
from .checks import (  # noqa: F401 - PyTorch's private-looking top-level names, exported below
    _assert, _assert_async, _check, _check_index, _check_is_size, _check_not_implemented, _check_tensor_all,
    _check_type, _check_value, _check_with,
)
from .tensor import Tensor, is_tensor
from .storage import (  # noqa: F401
    BFloat16Storage, BoolStorage, ByteStorage, CharStorage, ComplexDoubleStorage, ComplexFloatStorage,
    DoubleStorage, FloatStorage, HalfStorage, IntStorage, LongStorage, ShortStorage, TypedStorage, UntypedStorage,
)
from .dtypes import result_type_of as _result_type_of
from .interop import from_numpy as _from_numpy

half, float, double = _ALIASES["half"], _ALIASES["float"], _ALIASES["double"]  # noqa: A001
short, int, long = _ALIASES["short"], _ALIASES["int"], _ALIASES["long"]  # noqa: A001
cfloat, cdouble = complex64, complex128

from .legacy_types import *  # noqa: E402,F401,F403
from . import ops as _ops  # noqa: E402,F401  (declares every op and its record)
from . import methods as _methods  # noqa: E402,F401  (the records of operators, casts, ...)
from . import random_factories as _random_factories  # noqa: E402,F401  (rand, randn, ...)
from . import tensor_compat as _tensor_compat  # noqa: E402,F401  (is_set_to, resize, module_load, ...)


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op on the two operands produces (tensors or Python scalars)."""

    return _result_type_of(tensor1, tensor2)


def get_num_threads() -> int:
    return _C.get_num_threads()


def set_num_threads(n: int) -> None:
    _C.set_num_threads(n)


def numel(input: Tensor) -> int:
    return input.numel()


def is_floating_point(input: Tensor) -> bool:
    return input.is_floating_point()


def from_numpy(ndarray):
    return _from_numpy(ndarray)


ops = _dispatch.OPS


# Autocast: the switches torch exposes at top level; install() marks the listed ops (all defined by now).
from . import autocast as _autocast  # noqa: E402
from .autocast import (  # noqa: E402,F401
    autocast, autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache, get_autocast_cpu_dtype,
    get_autocast_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
    is_autocast_enabled, set_autocast_cache_enabled, set_autocast_cpu_dtype, set_autocast_cpu_enabled,
    set_autocast_dtype, set_autocast_enabled,
)

_autocast.install()

# Sparse layouts (after every op exists: their kernels register on the op table).
from .layouts import (  # noqa: E402,F401
    _mkldnn, jagged, layout, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc, sparse_csr, strided,
)
from .sparse import (  # noqa: E402,F401
    sparse_bsc_tensor, sparse_bsr_tensor, sparse_compressed_tensor, sparse_coo_tensor, sparse_csc_tensor,
    sparse_csr_tensor,
)
from .ops.linalg.products import mm as spmm  # noqa: E402,F401  (torch.spmm: mm with a sparse first operand)
from .sparse._products import hspmm, smm, sspaddmm  # noqa: E402,F401

# Every public function, Tensor method and in-place variant of an op comes from the op table.
from .bindings import generate as _generate  # noqa: E402

_generate(globals())

# torch._C._get_tracing_state(): programs (timm, detectron2) ask it whether a jit trace is recording.
from .jit_tracing import _get_tracing_state  # noqa: E402

_C._get_tracing_state = _get_tracing_state

# torch._C's executor switches, _log_api_usage_once, _GLIBCXX_USE_CXX11_ABI and _C._nn._parse_to.
from .c_compat import install as _install_c_compat  # noqa: E402

_install_c_compat(_C)

# torch._foreach_* (list-of-tensors forms of pointwise ops and norms).
from .foreach import FOREACH as _FOREACH  # noqa: E402

globals().update(_FOREACH)

# ``import *`` also exports the private-looking names PyTorch has at top level.
__all__ = [n for n in dir() if not n.startswith("_") or n in (
    "_softmax_backward_data", "_log_softmax_backward_data", "_fused_adam_", "_fused_adamw_", "_fused_sgd_",
    "_standard_gamma", "_assert", "_assert_async", "_check", "_check_index", "_check_is_size", "_check_not_implemented",
    "_check_tensor_all", "_check_type", "_check_value", "_check_with") or n in _FOREACH]
