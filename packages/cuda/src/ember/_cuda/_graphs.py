"""CUDA graphs: ``ember.cuda.CUDAGraph``, the ``graph`` context, ``graph_pool_handle``.

A capture records every kernel, copy and memset that ember issues on the capturing stream
into a driver graph (stream capture: ``cuStreamBeginCapture`` .. ``cuStreamEndCapture``),
then instantiates it; ``replay()`` launches the whole graph with one driver call, so a replay
costs no Python dispatch, no allocator work and no per-kernel launch.

Memory: while a stream captures, the caching allocator serves that stream from the graph's
private pool (``_allocator``): tensors freed during the capture go back to that pool only, so
later work never takes memory that replays still write. Tensors created during the capture
are the graph's static outputs: replays rewrite them in place, as in PyTorch. Graphs that
share a pool (``pool=other.pool()`` or one ``graph_pool_handle()``) must be replayed in the
order they were captured.

The driver entry points are called through ctypes (fixed signatures, no binding version
differences). Capture runs in the "global", "thread_local" or "relaxed" mode PyTorch offers;
synchronizing calls (``.item()``, host copies, ``synchronize``) are refused by the driver during
a capture and raise.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools

from . import _allocator, _driver
from ._fastcall import raise_for
from ._streams import Stream, current_stream

_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}
_LIB: list = []
_POOL_IDS = itertools.count(1)
_vp, _u64, _int = ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int


def _lib():
    if not _LIB:
        lib = ctypes.CDLL("libcuda.so.1")
        for name, argtypes in {
            "cuStreamBeginCapture_v2": (_vp, _int),
            "cuStreamEndCapture": (_vp, ctypes.POINTER(_vp)),
            "cuStreamIsCapturing": (_vp, ctypes.POINTER(_int)),
            "cuGraphInstantiateWithFlags": (ctypes.POINTER(_vp), _vp, _u64),
            "cuGraphLaunch": (_vp, _vp),
            "cuGraphExecDestroy": (_vp,),
            "cuGraphDestroy": (_vp,),
            "cuThreadExchangeStreamCaptureMode": (ctypes.POINTER(_int),),
        }.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        _LIB.append(lib)
    return _LIB[0]


def _call(name: str, *args) -> None:
    rc = getattr(_lib(), name)(*args)
    if rc:
        raise_for(rc, name)


@contextlib.contextmanager
def relaxed_capture_mode():
    """This thread in the relaxed capture mode (allocations and module loads during a capture)."""
    mode = _int(_MODES["relaxed"])
    _call("cuThreadExchangeStreamCaptureMode", ctypes.byref(mode))
    try:
        yield
    finally:
        _call("cuThreadExchangeStreamCaptureMode", ctypes.byref(mode))


def graph_pool_handle():
    """An opaque token naming a memory pool that several graphs may share (``pool=``)."""
    return (0, next(_POOL_IDS))


def is_current_stream_capturing() -> bool:
    """Whether the current stream of the current device is capturing a graph."""
    if _driver.device_count() == 0:
        return False
    status = _int(0)
    _call("cuStreamIsCapturing", _vp(current_stream().cuda_stream), ctypes.byref(status))
    return status.value == 1


class CUDAGraph:
    """A captured CUDA graph (``torch.cuda.CUDAGraph``)."""

    def __init__(self, keep_graph: bool = False):
        self._keep_graph = keep_graph
        self._graph = self._exec = None
        self._pool = None
        self._device = None
        self._stream = None
        self._capturing = False

    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        if capture_error_mode not in _MODES:
            raise RuntimeError(f"Unknown capture_error_mode '{capture_error_mode}': expected global, thread_local "
                               "or relaxed")
        if self._exec is not None or self._capturing:
            raise RuntimeError("This CUDAGraph instance already owns a captured graph. To capture a new graph, "
                               "create a new instance.")
        stream = current_stream()
        if stream.cuda_stream == 0:
            raise RuntimeError("CUDA graphs must be captured on a non-default stream. (However, after capture, "
                               "it's ok to replay them on the default stream.)")
        self._device = stream.device_index
        self._stream = stream
        self._pool = tuple(pool) if pool is not None else graph_pool_handle()
        alloc = _allocator.allocator(self._device)
        alloc.retain_pool(self._pool)
        _driver.ensure_context(self._device)
        _call("cuStreamBeginCapture_v2", _vp(stream.cuda_stream), _MODES[capture_error_mode])
        alloc.capturing[stream.cuda_stream] = self._pool
        self._capturing = True

    def capture_end(self) -> None:
        if not self._capturing:
            raise RuntimeError("capture_end() without capture_begin()")
        alloc = _allocator.allocator(self._device)
        alloc.capturing.pop(self._stream.cuda_stream, None)
        self._capturing = False
        graph = _vp()
        _call("cuStreamEndCapture", _vp(self._stream.cuda_stream), ctypes.byref(graph))
        self._graph = graph
        exec_ = _vp()
        _call("cuGraphInstantiateWithFlags", ctypes.byref(exec_), graph, 0)
        self._exec = exec_
        if not self._keep_graph:
            _call("cuGraphDestroy", graph)
            self._graph = None

    def _abort(self) -> None:
        """Ends a capture that failed part-way (the stream must leave capture mode) and drops it."""
        if not self._capturing:
            return
        _allocator.allocator(self._device).capturing.pop(self._stream.cuda_stream, None)
        self._capturing = False
        graph = _vp()
        _lib().cuStreamEndCapture(_vp(self._stream.cuda_stream), ctypes.byref(graph))  # error already raised
        if graph.value:
            _lib().cuGraphDestroy(graph)
        self.reset()

    def instantiate(self) -> None:
        if self._exec is None:
            raise RuntimeError("instantiate() needs a captured graph")

    def replay(self) -> None:
        if self._exec is None:
            raise RuntimeError("Called CUDAGraph::replay without a preceding successful capture.")
        _call("cuGraphLaunch", self._exec, _vp(current_stream(self._device).cuda_stream))

    def reset(self) -> None:
        if self._exec is not None:
            _lib().cuGraphExecDestroy(self._exec)
            self._exec = None
        if self._graph is not None:
            _lib().cuGraphDestroy(self._graph)
            self._graph = None
        if self._pool is not None:
            _allocator.allocator(self._device).release_pool(self._pool)
            self._pool = None

    def pool(self):
        if self._pool is None:
            raise RuntimeError("Called CUDAGraph::pool without a preceding successful capture.")
        return self._pool

    def enable_debug_mode(self) -> None:
        self._keep_graph = True

    def debug_dump(self, debug_path: str) -> None:
        raise RuntimeError("ember's CUDAGraph keeps no debug dump; use the driver's tools on a kept graph")

    def __del__(self):
        try:
            self.reset()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass


class graph:  # noqa: N801 - PyTorch's spelling
    """``with ember.cuda.graph(g):`` captures the block into ``g`` on a side stream."""

    default_capture_stream = None

    def __init__(self, cuda_graph: CUDAGraph, pool=None, stream=None, capture_error_mode: str = "global"):
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.__class__.default_capture_stream
        self.cuda_graph = cuda_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        import gc

        from . import api

        api.synchronize()
        gc.collect()  # storages freed now go back to the ordinary pools, not the graph's
        api.empty_cache()
        self._prev = current_stream(self.capture_stream.device_index)
        # The side stream starts after all work already queued on the current one.
        self.capture_stream.wait_stream(self._prev)
        from ._streams import set_stream

        set_stream(self.capture_stream)
        try:
            self.cuda_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            set_stream(self._prev)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        from ._streams import set_stream

        try:
            if exc_type is not None:
                self.cuda_graph._abort()
            else:
                self.cuda_graph.capture_end()
        finally:
            set_stream(self._prev)
        return False
