"""Autocast (automatic mixed precision) state and the dispatcher step that applies it.

The state is per thread, as in PyTorch. The dispatcher tests one module-level counter on
every op (``dispatch._AUTOCAST_ON``, nonzero while some thread has autocast enabled); only
ops that carry a cast policy (``Op.amp``) then look at this thread's state, cast their
floating inputs with differentiable ``to`` copies, and run with autocast excluded so that
ops they call internally are not cast again (PyTorch redispatches below its Autocast key).

The op lists are PyTorch's CPU and CUDA lists, restricted to the ops this dispatcher has
(an op carries its CPU policy in ``Op.amp``; CUDA's come from ``_CUDA_POLICY``). Composite
functions (``linear``, ``matmul``, ``conv2d``...) reach ``addmm``/``mm``/``convolution``
and are cast there.
"""

from __future__ import annotations

import functools
import threading
import warnings

from . import dispatch as _dispatch
from . import dtypes as _dtypes
from .device import to_device
from .torch_function import _ON as _TORCH_FUNCTION_ON

# PyTorch's CPU "lower_precision_fp" list, as ember names the ops.
LOWER_PRECISION_OPS = (
    "mm", "bmm", "baddbmm", "addmm", "addbmm", "convolution", "scaled_dot_product_attention",
)
# PyTorch's CPU "fp32" list: ops whose accuracy suffers in bfloat16/float16.
FP32_OPS = (
    "prod", "polar", "view_as_complex", "_class_nll", "_fft_c2c", "_fft_r2c", "_fft_c2r",
    "linalg_cholesky_ex", "linalg_inv_ex", "linalg_qr", "linalg_svd", "linalg_eigh", "linalg_lstsq",
    "linalg_solve_ex",
)
# Ops that run in the widest floating dtype among their inputs.
PROMOTE_OPS = ("cat",)

# PyTorch's CUDA lists, as ember names the ops (composites such as linear, matmul, einsum reach
# mm/bmm/addmm). "fp32_opt" is PyTorch's fp32_set_opt_dtype: without an explicit dtype the op
# runs (and returns) in float32. On CUDA these replace the CPU lists above.
CUDA_LOWER_PRECISION_OPS = (
    "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "convolution", "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
)
CUDA_FP32_OPS = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "softplus", "native_layer_norm", "native_group_norm", "_class_nll", "logsumexp",
    "_upsample",
)
CUDA_FP32_OPT_DTYPE_OPS = ("prod", "sum", "cumsum", "cumprod", "softmax", "log_softmax")
CUDA_PROMOTE_OPS = ("addcdiv", "addcmul", "atan2", "dot", "cat", "stack", "index_put", "scatter_add")
_CUDA_POLICY: dict = {}  # op name -> policy on CUDA (filled by install())
# Composite functions of PyTorch's CPU lists that its CUDA lists leave uncast (by defining module),
# and the one whose CUDA policy differs.
_CPU_ONLY_COMPOSITE_MODULES = ("ember.linalg", "ember._src.ops.linalg.solves", "ember._src.ops.reduction.statistics",
                               "ember._src.ops.spectral.fft", "ember.nn.functional_pool3d")
_CUDA_COMPOSITE = {"grid_sample": "promote", "max_unpool2d": None, "binary_cross_entropy": "banned"}
# PyTorch's CUDA autocast refuses binary_cross_entropy ("banned": its log of a probability rounded to
# 16 bits is unsafe); the message is PyTorch's.
_BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast."
)

_SUPPORTED = ("cpu", "cuda")  # device types autocast accepts
_DEFAULT_DTYPES = {"cpu": "bfloat16", "cuda": "float16"}


class _State(threading.local):
    def __init__(self):
        self.enabled = {}  # device type -> bool
        self.dtype = {}  # device type -> ember dtype
        self.active = True  # False while an autocast op runs (its inner ops are not cast again)
        self.cache_enabled = True
        self.nesting = 0
        self.cache = {}  # id(weight) -> (weight, cast copy), for leaf weights within a region
        # > 0 while a graph capture records (ember.compile): its casts are graph values that
        # must not outlive the call in the cache, so they are neither cached nor read from it
        # (PyTorch's compiled graphs recompute their casts too)
        self.capturing = 0


STATE = _State()
_COUNT_LOCK = threading.Lock()


def _device_type(device_type) -> str:
    if not isinstance(device_type, str):
        raise TypeError(f"device_type must be a str, got {type(device_type).__name__}")
    return to_device(device_type).type


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (without it, CUDA's state, as in PyTorch)."""
    return STATE.enabled.get("cuda" if device_type is None else _device_type(device_type), False)


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``set_autocast_enabled(device_type, enabled)``; the one-argument form sets CUDA's state."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    dev = _device_type(device_type)
    enabled = bool(enabled)
    was = STATE.enabled.get(dev, False)
    STATE.enabled[dev] = enabled
    if was != enabled:
        # The dispatcher's global counter: nonzero while any thread has some device enabled.
        with _COUNT_LOCK:
            _dispatch._AUTOCAST_ON[0] += 1 if enabled else -1


def get_autocast_dtype(device_type: str):
    dev = _device_type(device_type)
    d = STATE.dtype.get(dev)
    return d if d is not None else getattr(_dtypes, _DEFAULT_DTYPES.get(dev, "float16"))


def set_autocast_dtype(device_type: str, dtype) -> None:
    if not isinstance(dtype, _dtypes.dtype):
        raise TypeError(f"set_autocast_dtype(): dtype must be an ember.dtype, got {type(dtype).__name__}")
    STATE.dtype[_device_type(device_type)] = dtype


def is_autocast_cache_enabled() -> bool:
    return STATE.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    STATE.cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    STATE.cache.clear()


def autocast_increment_nesting() -> int:
    STATE.nesting += 1
    return STATE.nesting


def autocast_decrement_nesting() -> int:
    STATE.nesting -= 1
    return STATE.nesting


def is_autocast_available(device_type: str) -> bool:
    return device_type in _SUPPORTED


# Legacy CPU-specific switches torch still exposes.
def is_autocast_cpu_enabled() -> bool:
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled: bool) -> None:
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype():
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype) -> None:
    set_autocast_dtype("cpu", dtype)


class autocast:  # noqa: N801  (PyTorch's name)
    """Context manager and decorator running a region in mixed precision (``torch.autocast``)."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled: bool | None = None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled:
            if device_type == "cuda":
                from ember import cuda

                if not cuda.is_available():
                    warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                    enabled = False
            elif self.fast_dtype not in (_dtypes.bfloat16, _dtypes.float16):
                name = device_type.upper()
                warnings.warn(
                    f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                    f"{name} Autocast only supports dtypes of ember.bfloat16, ember.float16 currently.",
                    stacklevel=2,
                )
                enabled = False
        self._enabled = enabled
        self._saved = []  # a stack, so that a decorated function may recurse

    def __enter__(self):
        self._saved.append((is_autocast_cache_enabled(), is_autocast_enabled(self.device),
                            get_autocast_dtype(self.device)))
        set_autocast_enabled(self.device, self._enabled)
        set_autocast_dtype(self.device, self.fast_dtype)
        autocast_increment_nesting()
        set_autocast_cache_enabled(self._cache_enabled)
        return self

    def __exit__(self, *exc):
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        cache, enabled, dtype = self._saved.pop()
        set_autocast_enabled(self.device, enabled)
        set_autocast_dtype(self.device, dtype)
        set_autocast_cache_enabled(cache)
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(
                f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                "Did you mean to use autocast as a context manager?"
            )

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return decorate_autocast


# --- the dispatcher step ------------------------------------------------------------------


_TO_COPY = [None]  # the _to_copy op (ops.shape.views.to_dtype_op), found on the first cast


def _cast(t, to, device_type, state):
    # PyTorch casts floating tensors of the autocast device, never float64 ones.
    d = t.dtype
    if d is to or not d.is_floating_point or d is _dtypes.float64 or t._device.type != device_type:
        return t
    # PyTorch caches the low-precision copy of fp32 leaf weights for the whole region.
    # (t.is_leaf read as grad_fn is None where the class keeps Tensor's property: no property frame)
    cacheable = (state.cache_enabled and not state.capturing and t.dtype is _dtypes.float32
                 and to is not _dtypes.float32 and t._requires_grad and t._base is None
                 and (t.grad_fn is None if type(t).is_leaf is _dispatch._Tensor.is_leaf and not _TORCH_FUNCTION_ON[0]
                      else t.is_leaf))
    if cacheable:
        hit = state.cache.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
    dev = t._device
    tt = type(t)
    if (dev.index is not None and device_type != "cpu" and not _TORCH_FUNCTION_ON[0]
            and (tt is _dispatch._Tensor or tt.to is _dispatch._Tensor.to)):
        # t.to(to) on an indexed device is Tensor.to's first branch, this very call: made without its frame
        # while the __torch_function__ protocol is off (nothing gates Tensor.to) for a tensor whose class
        # keeps Tensor.to (nn.Parameter: the weights)
        op = _TO_COPY[0]
        if op is None:
            from .ops.shape.views import to_dtype_op as op

            _TO_COPY[0] = op
        out = op(t, dtype=to, device=dev)
    else:
        out = t.to(to)
    if cacheable:
        state.cache[id(t)] = (t, out)
    return out


def _map(args, kwargs, fn):
    Tensor = _dispatch._Tensor

    def one(a):
        if isinstance(a, Tensor):
            return fn(a)
        if isinstance(a, (list, tuple)) and any(isinstance(b, Tensor) for b in a):
            return type(a)(fn(b) if isinstance(b, Tensor) else b for b in a)
        return a

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def _prioritize(current, nxt):
    # at::autocast::prioritize: float64 inputs are ignored (never cast), float32 wins, and two
    # different 16-bit types are an error.
    if nxt is _dtypes.float64:
        return current
    if current is _dtypes.float32 or nxt is _dtypes.float32:
        return _dtypes.float32
    if current is nxt:
        return current
    raise RuntimeError(f"Unexpected floating ScalarType in autocast promotion: {current} and {nxt}")


def _explicit_dtype(op, args, kwargs) -> bool:
    # softmax/log_softmax take dtype positionally (third); the reductions only by keyword.
    return kwargs.get("dtype") is not None or (op in ("softmax", "log_softmax") and len(args) > 2
                                               and args[2] is not None)


def _cast_args(policy, device_type, args, kwargs, state):
    if policy == "fp32":
        to = _dtypes.float32
    else:
        to = state.dtype.get(device_type)  # get_autocast_dtype (device_type is already a type name)
        if to is None:
            to = getattr(_dtypes, _DEFAULT_DTYPES.get(device_type, "float16"))
        if policy != "lower":  # promote: the widest floating dtype, starting from the autocast dtype
            for t in _dispatch._iter_tensors(args, kwargs):
                if t.dtype.is_floating_point and t._device.type == device_type:
                    to = _prioritize(to, t.dtype)
    Tensor = _dispatch._Tensor
    if not kwargs:
        # _map's common case (positional tensors and plain values), one pass with no closure.
        out = []
        for a in args:
            if isinstance(a, Tensor):
                a = _cast(a, to, device_type, state)
            elif isinstance(a, (list, tuple)) and any(isinstance(b, Tensor) for b in a):
                break
            out.append(a)
        else:
            return tuple(out), kwargs
    return _map(args, kwargs, lambda t: _cast(t, to, device_type, state))


def _pad_policy(self, pad, mode, value=None):
    # PyTorch lists reflection_pad1d/2d and replication_pad1d/2d/3d (not reflect 3-d, nor circular).
    k = len(pad) // 2
    return "fp32" if (mode == 1 and k <= 2) or mode == 2 else None


def autocast_call(op, args, kwargs):
    """Runs ``op`` under this thread's autocast state (the dispatcher calls this)."""
    state = STATE
    device_type = _dispatch._device_type_of(args, kwargs)
    policy = op.amp
    if device_type == "cuda":
        policy = _CUDA_POLICY.get(op.name)
        if policy == "fp32_opt":
            policy = None if _explicit_dtype(op.name, args, kwargs) else "fp32"
    elif policy == "device":  # listed for CUDA only
        policy = None
    if policy == "pad":
        policy = _pad_policy(*args, **kwargs)
    # out= variants have no autocast in PyTorch: they run uncast.
    if policy is not None and state.enabled.get(device_type, False) and kwargs.get("out") is None:
        args, kwargs = _cast_args(policy, device_type, args, kwargs, state)
    return _call_excluded(op, args, kwargs, state)


def composite(policy: str):
    """Gives a Python composite function (``linear``, ``mse_loss``...) the cast policy PyTorch's
    list has for it: torch casts such ops before they decompose, so the whole function runs in
    the policy's dtype and the ops it calls are not cast again."""

    def wrap(fn):
        cuda_policy = _CUDA_COMPOSITE.get(fn.__name__, policy)
        if fn.__module__.startswith(_CPU_ONLY_COMPOSITE_MODULES):
            cuda_policy = None

        @functools.wraps(fn)
        def autocast_wrapper(*args, **kwargs):
            if _dispatch._AUTOCAST_ON[0] and STATE.active:
                state = STATE
                device_type = _dispatch._device_type_of(args, kwargs)
                here = policy if device_type != "cuda" else cuda_policy
                if here is not None and state.enabled.get(device_type, False) and kwargs.get("out") is None:
                    if here == "banned":
                        raise RuntimeError(_BANNED_MESSAGE)
                    args, kwargs = _cast_args(here, device_type, args, kwargs, state)
                return _call_excluded(fn, args, kwargs, state)
            return fn(*args, **kwargs)

        return autocast_wrapper

    return wrap


def _call_excluded(op, args, kwargs, state):
    state.active = False
    try:
        return op(*args, **kwargs)
    finally:
        state.active = True


def install() -> None:
    """Marks the listed ops with their policy and connects the dispatcher step."""
    for names, policy in ((LOWER_PRECISION_OPS, "lower"), (FP32_OPS, "fp32"), (PROMOTE_OPS, "promote")):
        for name in names:
            op = _dispatch.OPS.get(name)
            if op is not None:
                op.amp = policy
    pad = _dispatch.OPS.get("_pad_enum")
    if pad is not None:
        pad.amp = "pad"  # the policy depends on the mode and rank (_pad_policy)
    for names, policy in ((CUDA_LOWER_PRECISION_OPS, "lower"), (CUDA_FP32_OPS, "fp32"),
                          (CUDA_FP32_OPT_DTYPE_OPS, "fp32_opt"), (CUDA_PROMOTE_OPS, "promote")):
        for name in names:
            op = _dispatch.OPS.get(name)
            if op is not None:
                _CUDA_POLICY[name] = policy
                if op.amp is None:
                    op.amp = "device"  # reaches autocast_call, which looks the device's policy up
    _dispatch._AUTOCAST_CALL[0] = autocast_call
    _dispatch._AUTOCAST_STATE = STATE
