"""The caching allocator: device memory for CUDA storages, reused without calling the driver.

``cuMemAlloc``/``cuMemFree`` synchronize the device and cost tens of microseconds, so freed
blocks go back to a pool and the next request of the same size class takes one. Sizes are
rounded into classes: multiples of 512 bytes up to 1 MiB (the small pool), above that
``roundup_power2_divisions`` steps between consecutive powers of two (4 by default, so at
most 25% rounding waste; the large pool). A block is reused only on the stream it was freed
on, unless ``record_stream`` marked it used on other streams: then it waits in a pending list
until events recorded on those streams at free time have completed.

``EMBER_CUDA_ALLOC_CONF`` (like ``PYTORCH_CUDA_ALLOC_CONF``): comma-separated ``key:value``
with ``roundup_power2_divisions`` (a power of two), ``garbage_collection_threshold`` (a
fraction of the device's memory: past it, cached blocks are released before allocating
more) and ``caching`` (``False`` frees every block at once, for memory checkers).

The common case of ``malloc`` and ``release`` (no graph capture, nothing pending, a block of the
ordinary pools used on its own stream) runs in C++ (the core's ``_C.DeviceAllocatorBase`` holds the
counters and the pool dict, ``_C.DeviceStorage`` gives its block back when collected, see
``_storage``); the Python methods below remain the whole rule and take every other case.
``EMBER_CUDA_NATIVE_ALLOC=0`` keeps everything in Python.
"""

from __future__ import annotations

import os

from ember import _C

from . import _driver
from ._driver import OutOfMemoryError, check

_SMALL = 1 << 20


class _Config:
    def __init__(self, text: str | None):
        self.divisions = 4
        self.gc_threshold = 0.0
        self.caching = os.environ.get("EMBER_NO_CUDA_MEMORY_CACHING", "0") in ("", "0")
        for item in filter(None, (text or "").split(",")):
            key, sep, value = item.partition(":")
            key, value = key.strip(), value.strip()
            if not sep:
                raise RuntimeError(f"EMBER_CUDA_ALLOC_CONF: expected key:value, got '{item}'")
            if key == "roundup_power2_divisions":
                n = int(value)
                if n < 1 or n & (n - 1):
                    raise RuntimeError("EMBER_CUDA_ALLOC_CONF: roundup_power2_divisions must be a power of 2")
                self.divisions = n
            elif key == "garbage_collection_threshold":
                v = float(value)
                if not 0.0 < v < 1.0:
                    raise RuntimeError("EMBER_CUDA_ALLOC_CONF: garbage_collection_threshold must be in (0, 1)")
                self.gc_threshold = v
            elif key == "caching":
                self.caching = value.lower() in ("1", "true")
            else:
                raise RuntimeError(f"Unrecognized CachingAllocator option: {key}")


def round_size(nbytes: int, divisions: int = 4) -> int:
    if nbytes <= _SMALL:
        return max(512, (nbytes + 511) & ~511)
    top = 1 << (nbytes - 1).bit_length()  # the next power of two
    step = max(512, (top >> 1) // divisions)
    return (nbytes + step - 1) // step * step


class Block:
    __slots__ = ("ptr", "size", "stream", "streams", "device", "pool")

    def __init__(self, ptr: int, size: int, stream: int, device: int, pool=None):
        self.ptr, self.size, self.stream, self.device = ptr, size, stream, device
        self.streams = None  # other streams that used it (record_stream)
        self.pool = pool  # the CUDA-graph memory pool it was allocated in (None: the ordinary pools)


# Whether the native allocation path is used (the core built with it, not turned off).
NATIVE = (os.environ.get("EMBER_CUDA_NATIVE_ALLOC", "1") not in ("0", "") and hasattr(_C, "DeviceAllocatorBase")
          and hasattr(_C, "DeviceStorage") and hasattr(_C, "_device_storage_new"))


class DeviceAllocator(_C.DeviceAllocatorBase if NATIVE else object):
    """The pools and statistics of one device."""

    def __init__(self, index: int, config: _Config):
        self.index = index
        self.config = config
        # Read by the native path (the config is fixed once the first allocator exists).
        self.divisions, self.caching = config.divisions, config.caching
        self.free: dict = {}  # (stream, size) -> [Block]
        self.pending: list = []  # (Block, [events]) waiting for other streams
        # Statistics as plain attributes: malloc/release run once per op.
        self.allocated = self.allocated_peak = self.requested = self.requested_peak = 0
        self.reserved = self.reserved_peak = self.active_blocks = self.segments = 0
        self.num_alloc_retries = self.num_ooms = self.num_device_alloc = self.num_device_free = 0
        self.allocations = self.frees = 0
        self.total = 0
        # CUDA-graph capture (``_graphs``): capturing stream -> private pool id. Blocks allocated
        # while a stream captures come from (and go back to) that pool's lists, keyed
        # ("pool", id, size), so that memory a graph's replays write is never handed to other work.
        self.capturing: dict = {}
        self.pool_refs: dict = {}  # pool id -> number of graphs (and captures) holding it

    @property
    def stats(self) -> dict:
        return {k: getattr(self, k) for k in (
            "allocated", "allocated_peak", "reserved", "reserved_peak", "active_blocks", "segments",
            "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "requested", "requested_peak",
            "allocations", "frees")}

    def reset_peaks(self) -> None:
        self.allocated_peak, self.reserved_peak, self.requested_peak = self.allocated, self.reserved, self.requested

    def malloc(self, nbytes: int, stream: int) -> Block:
        size = (nbytes + 511) & ~511 if nbytes <= _SMALL else round_size(nbytes, self.divisions)
        pool = None
        if self.capturing:
            pool = self.capturing.get(stream)
        elif self.pending:  # event queries are not allowed while a capture runs
            self._collect_pending()
        blocks = self.free.get((stream, size) if pool is None else ("pool", pool, size))
        if blocks:
            block = blocks.pop()
        else:
            block = Block(self._device_alloc(size, nbytes), size, stream, self.index, pool)
        self.allocated += size
        self.requested += nbytes
        self.active_blocks += 1
        self.allocations += 1
        if self.allocated > self.allocated_peak:
            self.allocated_peak = self.allocated
        if self.requested > self.requested_peak:
            self.requested_peak = self.requested
        return block

    def _new_block(self, size: int, nbytes: int, stream: int) -> Block:
        """A fresh block of the ordinary pools (the native path's miss: no block of this size is free)."""
        return Block(self._device_alloc(size, nbytes), size, stream, self.index, None)

    def release(self, block: Block, nbytes: int) -> None:
        self.allocated -= block.size
        self.requested -= nbytes
        self.active_blocks -= 1
        self.frees += 1
        if block.pool is not None and block.pool in self.pool_refs:
            # Back to its graph pool: replays may still write it (no stream events: a graph's
            # memory is ordered by the graph).
            self.free.setdefault(("pool", block.pool, block.size), []).append(block)
            return
        block.pool = None
        if not self.caching and not self.capturing:
            self._device_free(block)
            return
        if block.streams and not self.capturing:
            from ._streams import Event, Stream

            events = []
            for s in block.streams:
                ev = Event()
                ev.record(Stream(self.index, _handle=s))
                events.append(ev)
            block.streams = None
            self.pending.append((block, events))
            return
        blocks = self.free.get((block.stream, block.size))
        if blocks is None:
            self.free[(block.stream, block.size)] = [block]
        else:
            blocks.append(block)

    def _collect_pending(self) -> None:
        still = []
        for block, events in self.pending:
            if all(ev.query() for ev in events):
                self.free.setdefault((block.stream, block.size), []).append(block)
            else:
                still.append((block, events))
        self.pending = still

    def _device_alloc(self, size: int, requested: int) -> int:
        drv = _driver._driver()
        _driver.ensure_context(self.index)
        if self.config.gc_threshold and self.total:
            if self.reserved + size > self.config.gc_threshold * self.total:
                self.empty_cache()
        if self.capturing:
            from ._graphs import relaxed_capture_mode

            with relaxed_capture_mode():  # cuMemAlloc is an "unsafe" call for a capturing thread
                err, ptr = drv.cuMemAlloc(size)
        else:
            err, ptr = drv.cuMemAlloc(size)
        if int(err) == 2 and not self.capturing:  # out of memory: give the cache back and try once more
            self.num_alloc_retries += 1
            self.empty_cache()
            err, ptr = drv.cuMemAlloc(size)
        if int(err) == 2:
            self.num_ooms += 1
            free, total = _driver.mem_get_info(self.index)
            raise OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {_fmt(requested)}. GPU {self.index} has a total capacity of "
                f"{_fmt(total)} of which {_fmt(free)} is free. Of the allocated memory {_fmt(self.allocated)} is "
                f"allocated by ember, and {_fmt(self.reserved - self.allocated)} is reserved by ember but "
                f"unallocated. (see ember.cuda.memory_summary() and EMBER_CUDA_ALLOC_CONF)")
        if int(err):
            raise _driver.cuda_error(int(err), "cuMemAlloc")
        self.reserved += size
        self.segments += 1
        self.num_device_alloc += 1
        if self.reserved > self.reserved_peak:
            self.reserved_peak = self.reserved
        return int(ptr)

    def _device_free(self, block: Block) -> None:
        _driver.ensure_context(self.index)
        check(_driver._driver().cuMemFree(block.ptr), "cuMemFree")
        self.reserved -= block.size
        self.segments -= 1
        self.num_device_free += 1

    def empty_cache(self) -> None:
        if self.capturing:
            return  # freeing synchronizes: not while a graph captures
        self._collect_pending()
        ordinary = [key for key in self.free if key[0] != "pool"]
        if any(self.free[key] for key in ordinary):
            _driver.ensure_context(self.index)
            check(_driver._driver().cuCtxSynchronize(), "cuCtxSynchronize")
        for key in ordinary:
            for block in self.free.pop(key):
                self._device_free(block)

    def retain_pool(self, pool) -> None:
        self.pool_refs[pool] = self.pool_refs.get(pool, 0) + 1

    def release_pool(self, pool) -> None:
        """Drops one holder of a graph pool; the last one returns its free blocks to the ordinary pools."""
        n = self.pool_refs.get(pool, 0) - 1
        if n > 0:
            self.pool_refs[pool] = n
            return
        self.pool_refs.pop(pool, None)
        for key in [k for k in self.free if k[0] == "pool" and k[1] == pool]:
            for block in self.free.pop(key):
                block.pool = None
                self.free.setdefault((block.stream, block.size), []).append(block)

    def cached_bytes(self) -> int:
        return sum(b.size for blocks in self.free.values() for b in blocks)


def _fmt(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"


_ALLOCATORS: dict = {}
_CONFIG: list = []


def allocator(index: int) -> DeviceAllocator:
    a = _ALLOCATORS.get(index)
    if a is None:
        if not _CONFIG:
            _CONFIG.append(_Config(os.environ.get("EMBER_CUDA_ALLOC_CONF")))
        a = _ALLOCATORS[index] = DeviceAllocator(index, _CONFIG[0])
        try:
            a.total = _driver.properties(index).total_memory
        except Exception:  # noqa: BLE001 - only the gc threshold needs it
            a.total = 0
    return a


def all_allocators():
    return list(_ALLOCATORS.values())
