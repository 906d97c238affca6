"""The top-level ``ember`` namespace: every public name, re-exported from private modules."""

from __future__ import annotations

from .. import _C
from . import dispatch as _dispatch
from . import methods as _methods
from .device import device
from .dtypes import (
    bfloat16, can_cast, complex64, complex128, dtype, finfo, float16, float32, float64, get_default_dtype, iinfo,
    int8, int16, int32, int64, promote_types, set_default_dtype, uint8,
)
from .dtypes import bool  # noqa: A004
from .dtypes import ALIASES as _ALIASES
from .interop import from_dlpack
from .grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from .ops import creation as _creation
from .ops import pointwise as _pointwise
from .ops import views as _views
from .ops import reduction as _reduction
from .ops import linalg as _linalg
from .ops import indexing as _indexing
from .ops import random as _random
from .ops import comparison as _comparison
from .ops import reorder as _reorder
from .ops import lapack as _lapack
from .ops import scatter as _scatter
from .ops import sorting as _sorting
from .ops import complex as _complex
from .printing import set_printoptions
from .runtime import (
    are_deterministic_algorithms_enabled, get_float32_matmul_precision, get_num_interop_threads,
    is_anomaly_check_nan_enabled, is_anomaly_enabled, is_deterministic_algorithms_warn_only_enabled, is_nonzero,
    is_warn_always_enabled, set_anomaly_enabled, set_float32_matmul_precision, set_flush_denormal,
    set_num_interop_threads, set_warn_always, typename, use_deterministic_algorithms,
)
from .shapes import Size
from .tensor import Tensor, is_tensor
from ..serialization import load, save

half, float, double = _ALIASES["half"], _ALIASES["float"], _ALIASES["double"]  # noqa: A001
short, int, long = _ALIASES["short"], _ALIASES["int"], _ALIASES["long"]  # noqa: A001
cfloat, cdouble = complex64, complex128

from .ops.pointwise import *  # noqa: E402,F401,F403
from .ops.reduction import *  # noqa: E402,F401,F403
from .ops.linalg import *  # noqa: E402,F401,F403
from .ops.indexing import *  # noqa: E402,F401,F403
from .ops.random import *  # noqa: E402,F401,F403
from .ops.comparison import *  # noqa: E402,F401,F403
from .ops.joining import *  # noqa: E402,F401,F403
from .ops.reorder import *  # noqa: E402,F401,F403
from .ops.nn_conv import *  # noqa: E402,F401,F403
from .ops.nn_pool import *  # noqa: E402,F401,F403
from .ops.nn_resample import *  # noqa: E402,F401,F403
from .ops.lapack import *  # noqa: E402,F401,F403
from .ops import nn_loss as _nn_loss, nn_misc as _nn_misc, nn_norm as _nn_norm  # noqa: E402

# Neural-network kernels torch exposes at top level (with aten signatures); the rest of the
# family is for ember.nn.functional.
globals().update({**_nn_norm.TOP_LEVEL, **_nn_misc.TOP_LEVEL, **_nn_loss.TOP_LEVEL})
from .ops import optim_fused as _optim_fused  # noqa: E402

globals().update(_optim_fused.TOP_LEVEL)
from .ops.scatter import *  # noqa: E402,F401,F403
from .ops.sorting import *  # noqa: E402,F401,F403
from .ops.complex import *  # noqa: E402,F401,F403
from .ops.view_copies import *  # noqa: E402,F401,F403
from .ops.scatter_views import *  # noqa: E402,F401,F403
from .ops.index_utils import *  # noqa: E402,F401,F403
from .ops.shape_utils import *  # noqa: E402,F401,F403
from .ops.tensor_utils import *  # noqa: E402,F401,F403
from .ops.creation_extra import *  # noqa: E402,F401,F403
from .ops import creation_extra as _creation_extra, index_utils as _index_utils  # noqa: E402
from .ops import scatter_views as _scatter_views, shape_utils as _shape_utils  # noqa: E402
from .ops import tensor_utils as _tensor_utils, view_copies as _view_copies  # noqa: E402
from .ops.statistics import *  # noqa: E402,F401,F403
from .ops.number_theory import *  # noqa: E402,F401,F403
from .ops.special_fns import *  # noqa: E402,F401,F403
from .ops.integration import *  # noqa: E402,F401,F403
from .ops.combinatorics import *  # noqa: E402,F401,F403
from .ops.signal import *  # noqa: E402,F401,F403
from .ops.lapack_extra import *  # noqa: E402,F401,F403
from .ops.sampling import *  # noqa: E402,F401,F403
from .legacy_types import *  # noqa: E402,F401,F403
from .ops.creation import (  # noqa: E402
    arange, as_tensor, asarray, empty, empty_like, eye, full, full_like, linspace, logspace, ones, ones_like,
    scalar_tensor, tensor, zeros, zeros_like,
)
from .ops.views import (  # noqa: E402
    adjoint, as_strided, broadcast_tensors, broadcast_to, chunk, clone, diagonal, flatten, movedim, moveaxis,
    narrow, permute, reshape, select, split, squeeze, swapaxes, swapdims, t, tensor_split, transpose, unbind,
    unflatten, unsqueeze,
)


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op on the two operands produces (tensors or Python scalars)."""
    from .dtypes import result_type_of

    return result_type_of(tensor1, tensor2)


def get_num_threads() -> int:
    return _C.get_num_threads()


def set_num_threads(n: int) -> None:
    _C.set_num_threads(n)


def numel(input: Tensor) -> int:
    return input.numel()


def is_floating_point(input: Tensor) -> bool:
    return input.is_floating_point()


def from_numpy(ndarray):
    from .interop import from_numpy as _from_numpy

    return _from_numpy(ndarray)


ops = _dispatch.OPS


def _functional_for_methods() -> dict:
    names = {}
    for module in (_pointwise, _views, _reduction, _linalg, _indexing, _random, _comparison, _reorder, _lapack,
                   _scatter, _sorting, _complex):
        exported = set(getattr(module, "__all__", ()))
        for name in dir(module):
            if name.startswith("_") or name.endswith("_op"):
                continue
            fn = getattr(module, name)
            if not callable(fn) or not getattr(fn, "__module__", "").startswith("ember._src.ops"):
                continue
            # Besides its public functions, a module's own method-only functions (copy_, view, ...)
            # become methods; helpers it imports, and result types, do not (its own are private).
            if name not in exported and (isinstance(fn, type) or fn.__module__ != module.__name__):
                continue
            names[name] = fn
    names.pop("positive", None)
    names["positive"] = _pointwise.positive
    return names


_methods.install(_functional_for_methods())

# The newer op modules name their Tensor methods (some public functions there take no tensor,
# others are functions only in PyTorch): TENSOR_METHODS / TENSOR_PROPERTIES, or METHODS.
for _module in (_view_copies, _scatter_views, _index_utils, _shape_utils, _tensor_utils, _creation_extra):
    for _name in _module.TENSOR_METHODS:
        if not hasattr(Tensor, _name):
            setattr(Tensor, _name, getattr(_module, _name))
    for _name in getattr(_module, "TENSOR_PROPERTIES", ()):
        setattr(Tensor, _name, property(getattr(_module, _name)))
del _module, _name
from .ops import combinatorics as _cmb, integration as _itg, lapack_extra as _lpx, number_theory as _nth  # noqa: E402
from .ops import sampling as _smp, signal as _sig, special_fns as _spf, statistics as _sts  # noqa: E402

_methods.install({n: getattr(m, n) for m in (_sts, _nth, _spf, _itg, _cmb, _sig, _lpx, _smp) for n in m.METHODS})

# Autocast: the switches torch exposes at top level; install() marks the listed ops (all defined by now).
from . import autocast as _autocast  # noqa: E402
from .autocast import (  # noqa: E402,F401
    autocast, autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache, get_autocast_cpu_dtype,
    get_autocast_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
    is_autocast_enabled, set_autocast_cache_enabled, set_autocast_cpu_dtype, set_autocast_cpu_enabled,
    set_autocast_dtype, set_autocast_enabled,
)

_autocast.install()

# Last: the in-place variants are generated from the methods installed above (gcd -> gcd_, ...).
from .ops.inplace_variants import *  # noqa: E402,F401,F403

__all__ = [n for n in dir() if not n.startswith("_")]
