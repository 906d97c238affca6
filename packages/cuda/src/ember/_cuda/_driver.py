"""The CUDA driver: initialization, the primary context, device properties, errors.

Everything goes through NVIDIA's ``cuda-bindings`` (``cuda.bindings.driver``), imported on
first use so that ``import ember`` and ``ember.cuda.is_available()`` on a machine without a
GPU cost nothing and raise nothing. The per-op hot path (kernel launches, async copies) calls
the same ``libcuda`` entry points through ctypes instead (``_fastcall.py``): cuda-bindings
converts every argument generically and costs several microseconds a call.

Each device is used through its primary context, the one the CUDA runtime (and so cuBLAS,
PyTorch and CuPy) also uses, so memory and streams can be shared with them.
"""

from __future__ import annotations

import threading

# ``ember.cuda.OutOfMemoryError`` is the core's ``ember.OutOfMemoryError`` itself, as in PyTorch
# (``torch.cuda.OutOfMemoryError is torch.OutOfMemoryError``): ``except ember.OutOfMemoryError`` catches
# a failed CUDA allocation.
from ember._src.ops.nn.tbc_permuted import OutOfMemoryError

_STATE: dict = {}  # "drv": module, "count": int, "ctx": {index: context}, "error": str
_LOCK = threading.RLock()
class _Local(threading.local):
    index = None  # the device whose context is current in this thread
    ctx = 0


_TLS = _Local()


def _driver():
    drv = _STATE.get("drv")
    if drv is None:
        from cuda.bindings import driver as drv

        _STATE["drv"] = drv
    return drv


def check(result, what: str = "CUDA call"):
    """Unpacks a cuda-bindings result tuple, raising RuntimeError (PyTorch's type) on failure."""
    err = result[0]
    if int(err) != 0:
        raise cuda_error(int(err), what)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def cuda_error(code: int, what: str) -> RuntimeError:
    drv = _driver()
    try:
        _, name = drv.cuGetErrorName(drv.CUresult(code))
        _, text = drv.cuGetErrorString(drv.CUresult(code))
        detail = f"{name.decode()}: {text.decode()}"
    except Exception:  # noqa: BLE001 - an unknown code still deserves a message
        detail = f"error {code}"
    if code == 2:  # CUDA_ERROR_OUT_OF_MEMORY
        return OutOfMemoryError(f"CUDA out of memory in {what} ({detail})")
    return RuntimeError(f"CUDA error in {what}: {detail}")




def device_count() -> int:
    """0 when there is no driver or no device (never raises)."""
    count = _STATE.get("count")
    if count is None:
        with _LOCK:
            try:
                drv = _driver()
                check(drv.cuInit(0), "cuInit")
                count = int(check(drv.cuDeviceGetCount(), "cuDeviceGetCount"))
            except Exception as exc:  # noqa: BLE001 - no bindings, no driver, no device: all mean "none"
                _STATE["error"] = f"{type(exc).__name__}: {exc}"
                count = 0
            _STATE["count"] = count
    return count


def unavailable_reason() -> str:
    device_count()
    return _STATE.get("error", "no CUDA device found")


def ensure_context(index: int = 0) -> int:
    """Makes device ``index``'s primary context current in this thread; returns its handle (an int)."""
    if _TLS.index == index:
        return _TLS.ctx
    count = device_count()
    if count == 0:
        raise RuntimeError(f"Found no NVIDIA driver on your system, or no CUDA device ({unavailable_reason()})")
    if not 0 <= index < count:
        raise RuntimeError(f"CUDA error: invalid device ordinal (device {index}, {count} available)")
    drv = _driver()
    with _LOCK:
        contexts = _STATE.setdefault("ctx", {})
        ctx = contexts.get(index)
        if ctx is None:
            dev = check(drv.cuDeviceGet(index), "cuDeviceGet")
            ctx = check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            contexts[index] = ctx
    check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _TLS.index, _TLS.ctx = index, int(ctx)
    return _TLS.ctx


def is_initialized() -> bool:
    return bool(_STATE.get("ctx"))


def current_index() -> int:
    return _TLS.index or 0


def set_current(index: int) -> None:
    ensure_context(index)


_ATTRS = {
    "major": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",
    "minor": "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR",
    "multi_processor_count": "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT",
    "is_integrated": "CU_DEVICE_ATTRIBUTE_INTEGRATED",
    "is_multi_gpu_board": "CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD",
    "max_threads_per_multi_processor": "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR",
    "regs_per_multiprocessor": "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR",
    "warp_size": "CU_DEVICE_ATTRIBUTE_WARP_SIZE",
    "L2_cache_size": "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE",
    "shared_memory_per_block_optin": "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
    "clock_rate": "CU_DEVICE_ATTRIBUTE_CLOCK_RATE",
}


class CudaDeviceProperties:
    """``ember.cuda.get_device_properties(i)`` (PyTorch's ``_CudaDeviceProperties``)."""

    def __init__(self, index: int):
        drv = _driver()
        device_count()
        dev = check(drv.cuDeviceGet(index), "cuDeviceGet")
        raw = check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
        self.name = bytes(raw).split(b"\0", 1)[0].decode()
        self.total_memory = int(check(drv.cuDeviceTotalMem(dev), "cuDeviceTotalMem"))
        for key, attr in _ATTRS.items():
            value = check(drv.cuDeviceGetAttribute(getattr(drv.CUdevice_attribute, attr), dev), attr)
            setattr(self, key, int(value))
        self.is_integrated = bool(self.is_integrated)
        self.is_multi_gpu_board = bool(self.is_multi_gpu_board)
        try:
            uuid = check(drv.cuDeviceGetUuid(dev), "cuDeviceGetUuid")
            b = bytes(uuid.bytes)
            h = b.hex()
            self.uuid = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
        except Exception:  # noqa: BLE001 - optional field
            self.uuid = ""

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, multi_processor_count={self.multi_processor_count}, "
                f"uuid={self.uuid}, L2_cache_size={self.L2_cache_size // (1 << 20)}MB)")


_PROPS: dict = {}


def properties(index: int) -> CudaDeviceProperties:
    props = _PROPS.get(index)
    if props is None:
        count = device_count()
        if not 0 <= index < count:
            raise AssertionError(f"Invalid device id {index} ({count} CUDA devices)")
        props = _PROPS[index] = CudaDeviceProperties(index)
    return props


def mem_get_info(index: int) -> tuple[int, int]:
    ensure_context(index)
    free, total = check(_driver().cuMemGetInfo(), "cuMemGetInfo")
    return int(free), int(total)
