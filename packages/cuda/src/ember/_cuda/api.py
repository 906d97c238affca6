"""The public ``ember.cuda`` API as the plugin provides it (``ember.cuda.<name>`` resolves here).

Names and behaviour follow ``torch.cuda``. Without a device (no driver, no GPU) the
informational calls answer as PyTorch's CPU build (``is_available()`` False, 0 devices,
memory figures 0) and calls that need a device raise AssertionError, the type the tests of
CPU-only programs expect.
"""

from __future__ import annotations

from . import _allocator, _driver
from ._driver import OutOfMemoryError
from ._graphed import make_graphed_callables  # noqa: F401 - re-exported (CUDA graphs with autograd)
from ._graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing  # noqa: F401
from ._streams import (  # noqa: F401 - re-exported
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)
from ._streams import synchronize as _synchronize

__all__ = [
    "CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables",
    "Event", "ExternalStream", "OutOfMemoryError", "Stream", "StreamContext", "current_device", "current_stream",
    "default_stream", "device", "device_count", "empty_cache", "get_device_capability", "get_device_name",
    "get_device_properties", "init", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_peak_memory_stats", "set_device", "set_stream",
    "stream", "synchronize",
]


def is_available() -> bool:
    return _driver.device_count() > 0


def device_count() -> int:
    return _driver.device_count()


def _need_device(what: str) -> None:
    if _driver.device_count() == 0:
        raise AssertionError(f"{what}: no CUDA device is available ({_driver.unavailable_reason()})")


def init() -> None:
    _need_device("ember.cuda.init()")
    _driver.ensure_context(_driver.current_index())


def is_initialized() -> bool:
    return _driver.is_initialized()


def _index(dev) -> int:
    if dev is None:
        return _driver.current_index()
    if isinstance(dev, int):
        return dev
    from ember._src.device import device as _dev

    d = _dev(dev)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return _driver.current_index() if d.index is None else d.index


def current_device() -> int:
    _need_device("ember.cuda.current_device()")
    return _driver.current_index()


def set_device(dev) -> None:
    _need_device("ember.cuda.set_device()")
    index = _index(dev)
    if index >= 0:
        _driver.set_current(index)


class device:  # noqa: N801 - PyTorch's spelling
    """``with ember.cuda.device(i):`` makes device ``i`` current for the block."""

    def __init__(self, dev):
        self.idx = _index(dev) if dev is not None else -1

    def __enter__(self):
        self.prev = _driver.current_index()
        if self.idx >= 0:
            _driver.set_current(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            _driver.set_current(self.prev)
        return False


def get_device_properties(dev=None):
    _need_device("ember.cuda.get_device_properties()")
    return _driver.properties(_index(dev))


def get_device_name(dev=None) -> str:
    return get_device_properties(dev).name


def get_device_capability(dev=None) -> tuple:
    p = get_device_properties(dev)
    return (p.major, p.minor)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return is_available() and get_device_capability()[0] >= 8


def synchronize(dev=None) -> None:
    _need_device("ember.cuda.synchronize()")
    _synchronize(_index(dev))


def mem_get_info(dev=None) -> tuple:
    _need_device("ember.cuda.mem_get_info()")
    return _driver.mem_get_info(_index(dev))


# -- seeds ------------------------------------------------------------------------------------

def manual_seed(seed: int) -> None:
    from . import _random

    _random.manual_seed(int(seed))


manual_seed_all = manual_seed


def seed() -> None:
    from . import _random

    _random.seed()


seed_all = seed


def initial_seed() -> int:
    from . import _random

    return _random.initial_seed()


# -- memory ------------------------------------------------------------------------------------

def _stats(dev):
    if _driver.device_count() == 0:
        return None
    return _allocator.allocator(_index(dev)).stats


def empty_cache() -> None:
    for a in _allocator.all_allocators():
        a.empty_cache()


def memory_allocated(dev=None) -> int:
    s = _stats(dev)
    return s["allocated"] if s else 0


def max_memory_allocated(dev=None) -> int:
    s = _stats(dev)
    return s["allocated_peak"] if s else 0


def memory_reserved(dev=None) -> int:
    s = _stats(dev)
    return s["reserved"] if s else 0


def max_memory_reserved(dev=None) -> int:
    s = _stats(dev)
    return s["reserved_peak"] if s else 0


memory_cached, max_memory_cached = memory_reserved, max_memory_reserved


def reset_peak_memory_stats(dev=None) -> None:
    if _driver.device_count():
        _allocator.allocator(_index(dev)).reset_peaks()


def reset_max_memory_allocated(dev=None) -> None:
    if _driver.device_count():
        a = _allocator.allocator(_index(dev))
        a.allocated_peak = a.allocated


def memory_stats(dev=None) -> dict:
    """PyTorch's flat key names for the figures this allocator keeps."""
    s = _stats(dev)
    if not s:
        return {}
    a = _allocator.allocator(_index(dev))
    return {
        "allocated_bytes.all.current": s["allocated"], "allocated_bytes.all.peak": s["allocated_peak"],
        "reserved_bytes.all.current": s["reserved"], "reserved_bytes.all.peak": s["reserved_peak"],
        "requested_bytes.all.current": s["requested"], "requested_bytes.all.peak": s["requested_peak"],
        "active.all.current": s["active_blocks"], "segment.all.current": s["segments"],
        "inactive_split_bytes.all.current": a.cached_bytes(), "allocation.all.allocated": s["allocations"],
        "allocation.all.freed": s["frees"], "num_alloc_retries": s["num_alloc_retries"], "num_ooms": s["num_ooms"],
        "num_device_alloc": s["num_device_alloc"], "num_device_free": s["num_device_free"],
    }


def memory_summary(dev=None, abbreviated: bool = False) -> str:
    stats = memory_stats(dev)
    if not stats:
        return "No CUDA device: no memory is allocated.\n"
    mib = 1 << 20
    rows = [("Allocated memory", "allocated_bytes"), ("Requested memory", "requested_bytes"),
            ("GPU reserved memory", "reserved_bytes")]
    lines = ["|" + "=" * 75 + "|", f"|{'ember CUDA memory summary, device ID ' + str(_index(dev)):^75}|",
             "|" + "-" * 75 + "|", f"| {'Metric':<32}| {'Cur Usage':>18} | {'Peak Usage':>18} |", "|" + "-" * 75 + "|"]
    for title, key in rows:
        cur, peak = stats[f"{key}.all.current"], stats[f"{key}.all.peak"]
        lines.append(f"| {title:<32}| {cur / mib:>15.2f} MiB | {peak / mib:>15.2f} MiB |")
    lines.append(f"| {'Cached (free) blocks':<32}| {stats['inactive_split_bytes.all.current'] / mib:>15.2f} MiB |"
                 f" {'':>18} |")
    for title, key in (("Active allocations", "active.all.current"), ("Device segments", "segment.all.current"),
                       ("cudaMalloc retries", "num_alloc_retries"), ("CUDA OOMs", "num_ooms")):
        lines.append(f"| {title:<32}| {stats[key]:>18} | {'':>18} |")
    lines.append("|" + "=" * 75 + "|")
    return "\n".join(lines) + "\n"


def record_stream(tensor, s) -> None:
    tensor._storage.record_stream(s)


__all__ += ["OutOfMemoryError", "seed", "seed_all", "initial_seed", "record_stream", "memory_cached",
            "max_memory_cached", "reset_max_memory_allocated"]
