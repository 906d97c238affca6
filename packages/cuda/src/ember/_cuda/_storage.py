"""CUDA storages, the "cuda" backend's allocate/copy, and pinned host memory.

A ``CudaStorage`` is what a CUDA tensor views: a block from the caching allocator, given back
when the storage is collected (the last view gone). Copies between the host and the device
go through the driver's async copies on the current stream; anything non-contiguous or of
another dtype is first made contiguous on the side that has the kernels for it.
"""

from __future__ import annotations

import ctypes

from ember import _C
from ember._src import grad_mode as _grad_mode
from ember._src.device import LAST_EMPTY as _LAST_EMPTY
from ember._src.device import device as _device
from ember._src.shapes import contiguous_strides
from ember._src.tensor import _MAX_NBYTES
from ember._src.tensor import make_tensor as _make_tensor
from ember._src.tensor import new_empty_tensor as _new_empty_tensor

from . import _allocator, _driver, _fastcall
from ._elementwise import _SHAPES, contiguous_info
from ._streams import _TLS as _STREAMS_TLS
from ._streams import current_handle

_DEVICES: dict = {}
_ALLOCATORS: dict = {}  # device index -> DeviceAllocator (a module-level cache for the per-op path)


def _device_and_allocator(index: int) -> tuple:
    """(the device object, the DeviceAllocator) of device ``index`` (two dict hits once known)."""
    try:
        return _DEVICES[index], _ALLOCATORS[index]
    except KeyError:
        return (_DEVICES.setdefault(index, _device("cuda", index)),
                _ALLOCATORS.setdefault(index, _allocator.allocator(index)))


class _PyStorageBase:
    """The fields of a CUDA storage and the return of its block, in Python (``_C.DeviceStorage`` does
    both natively; this is the fallback where the native allocation path is off)."""

    __slots__ = ("_ptr", "_nbytes", "_block", "_alloc", "device", "version", "inference", "__weakref__")

    def __del__(self):
        block = getattr(self, "_block", None)  # absent when the allocation itself failed
        if block is not None:
            self._block = None
            try:
                self._alloc.release(block, self._nbytes)
            except Exception:  # noqa: BLE001, S110 - interpreter shutdown: the driver is gone
                pass


def _py_storage_new(cls, alloc, nbytes: int, device, stream: int, inference: bool):
    """``_C._device_storage_new`` in Python: a storage of ``cls`` with ``nbytes`` from ``alloc``."""
    storage = cls.__new__(cls)
    storage.device, storage._alloc, storage._nbytes = device, alloc, nbytes
    storage.version, storage.inference = 0, inference
    storage._ptr, storage._block = 0, None
    if nbytes:
        storage._block = block = alloc.malloc(nbytes, stream)
        storage._ptr = block.ptr
    return storage


_NATIVE = _allocator.NATIVE
_StorageBase = _C.DeviceStorage if _NATIVE else _PyStorageBase
_new_storage = _C._device_storage_new if _NATIVE else _py_storage_new
# _device_tensor_new(cls, alloc, nbytes, device, stream, inference, shape, strides, dtype): `empty`'s storage
# and tensor in one call (needs tuples: `empty` is given the shape as a tuple; its strides are tuples).
_TENSOR_NEW = getattr(_C, "_device_tensor_new", None) if _NATIVE else None


class CudaStorage(_StorageBase):
    """A block of the caching allocator that tensors view; the block goes back to the allocator (``_alloc``)
    when the storage is collected (natively: ``_C.DeviceStorage``'s deallocation)."""

    __slots__ = ()
    device_type = "cuda"

    def __init__(self, nbytes: int, index: int):
        self._nbytes = nbytes
        self.device, alloc = _device_and_allocator(index)
        self.version = 0
        self.inference = False
        self._alloc = alloc
        if nbytes == 0:
            self._ptr, self._block = 0, None
            return
        self._block = block = alloc.malloc(nbytes, current_handle(index))
        self._ptr = block.ptr

    def data_ptr(self) -> int:
        return self._ptr

    def nbytes(self) -> int:
        return self._nbytes

    size = nbytes

    def __len__(self) -> int:
        return self._nbytes

    def is_shared(self) -> bool:
        return False

    def record_stream(self, stream) -> None:
        block = self._block
        if block is not None and stream.cuda_stream != block.stream:
            if block.streams is None:
                block.streams = set()
            block.streams.add(stream.cuda_stream)

    def graph_alias(self) -> AliasStorage:
        """A storage over this one's memory that can later take its data elsewhere (AliasStorage)."""
        return AliasStorage(self)

    def __repr__(self) -> str:
        return f"<CudaStorage {self._nbytes} bytes at {hex(self._ptr)} on {self.device}>"


class AliasStorage(CudaStorage):
    """Another storage over a block some other storage owns (a CUDA graph's output buffer): its
    tensors read and write that memory until ``evacuate`` gives them a copy in a block of their
    own. ``compile(mode="reduce-overhead")`` returns its replays' outputs over such storages and
    evacuates those still held before the next replay overwrites the buffers."""

    __slots__ = ("_owner",)

    def __init__(self, owner: CudaStorage):  # (no allocation: CudaStorage.__init__ is not called)
        self._owner = owner
        self._nbytes, self.device, self._ptr, self._block = owner._nbytes, owner.device, owner._ptr, None
        self.version = 0
        self.inference = owner.inference

    @property
    def aliased(self) -> bool:
        """Whether this storage still reads its owner's memory."""
        return self._block is None and self._owner is not None

    def evacuate(self) -> None:
        """Moves the data into a fresh block of the caching allocator, ordered on the current stream
        before whatever next writes the owner's memory; views of this storage follow."""
        if not self.aliased:
            return
        index = self.device.index or 0
        stream = current_handle(index)
        alloc = _device_and_allocator(index)[1]
        block = alloc.malloc(self._nbytes, stream)
        _fastcall.memcpy_dtod(block.ptr, self._ptr, self._nbytes, stream)
        self._alloc, self._block, self._ptr, self._owner = alloc, block, block.ptr, None


def allocate(nbytes: int, zero: bool = False, dev=None) -> CudaStorage:
    index = (dev.index if dev is not None and dev.index is not None else _driver.current_index())
    _driver.ensure_context(index)
    device, alloc = _device_and_allocator(index)
    stream = current_handle(index)
    storage = _new_storage(CudaStorage, alloc, nbytes, device, stream, False)
    if zero and nbytes:
        _fastcall.memset8(storage._ptr, 0, nbytes, stream)
    return storage


_INFERENCE_USED = _grad_mode.INFERENCE_USED
_TLS = _driver._TLS


def new_contiguous(shape: tuple, strides: tuple, n: int, dtype, dev):
    """A fresh contiguous CUDA tensor (the small-op fast path of ``new_empty_tensor``)."""
    index = dev.index or 0
    if _TLS.index != index:
        _driver.ensure_context(index)
    try:
        device, alloc = _DEVICES[index], _ALLOCATORS[index]
    except KeyError:
        device, alloc = _device_and_allocator(index)
    streams = _STREAMS_TLS.streams  # current_handle(index), inlined (one frame less per result)
    s = streams.get(index) if streams else None
    stream = 0 if s is None else s.cuda_stream
    # The thread-local inference flag is read only once inference mode has ever been on.
    inference = bool(_INFERENCE_USED[0] and _grad_mode.STATE.inference)
    if _TENSOR_NEW is not None and device is dev and type(shape) is tuple and type(strides) is tuple:
        # storage and tensor in one native call (`empty`'s); the tensor's device is `dev` itself
        return _TENSOR_NEW(CudaStorage, alloc, n * dtype.itemsize, device, stream, inference, shape, strides, dtype)
    storage = _new_storage(CudaStorage, alloc, n * dtype.itemsize, device, stream, inference)
    return _make_tensor(storage, shape, strides, 0, dtype, dev)


def empty(shape: tuple, n: int, dtype, dev, zero: bool = False):
    """``new_empty_tensor`` for a device with an index (the backend's ``empty``): a fresh contiguous
    tensor, its strides cached per shape."""
    index = dev.index
    if _TLS.index != index:
        _driver.ensure_context(index)
    strides = _SHAPES.get(shape)
    strides = strides[0] if strides is not None else contiguous_info(shape)[0] if n else contiguous_strides(shape)
    try:
        device, alloc = _DEVICES[index], _ALLOCATORS[index]
    except KeyError:
        device, alloc = _device_and_allocator(index)
    streams = _STREAMS_TLS.streams  # current_handle(index), inlined (one frame less per result)
    s = streams.get(index) if streams else None
    stream = 0 if s is None else s.cuda_stream
    inference = bool(_INFERENCE_USED[0] and _grad_mode.STATE.inference)
    if _TENSOR_NEW is not None and type(shape) is tuple:  # storage and tensor in one native call
        t = _TENSOR_NEW(CudaStorage, alloc, n * dtype.itemsize, device, stream, inference, shape, strides, dtype)
        if zero and n:
            storage = t._storage
            _fastcall.memset8(storage._ptr, 0, storage._nbytes, stream)
        return t
    storage = _new_storage(CudaStorage, alloc, n * dtype.itemsize, device, stream, inference)
    if zero and n:
        _fastcall.memset8(storage._ptr, 0, storage._nbytes, stream)
    return _make_tensor(storage, shape, strides, 0, dtype, storage.device)  # the generic path's device object


def new_empty(shape, dtype, dev, zero: bool = False):
    """``new_empty_tensor(shape, dtype, dev, zero)`` for the CUDA kernels, in one Python frame: a result of a
    shape seen before on the device ``new_empty_tensor`` last allocated on is ``empty``'s native call, made
    here (new_empty_tensor then empty: two frames per result, ~850 a GPT-2 step). Anything else (another
    device, a new shape, zero filling) is new_empty_tensor's."""
    info = _SHAPES.get(shape)
    if info is None or dev is not _LAST_EMPTY[0] or _LAST_EMPTY[1] is not empty or zero or _TENSOR_NEW is None:
        return _new_empty_tensor(shape, dtype, dev, zero)
    nbytes = info[1] * dtype.itemsize
    if nbytes > _MAX_NBYTES:
        return _new_empty_tensor(shape, dtype, dev, zero)  # its error
    index = dev.index
    if _TLS.index != index:
        _driver.ensure_context(index)
    try:
        device, alloc = _DEVICES[index], _ALLOCATORS[index]
    except KeyError:
        device, alloc = _device_and_allocator(index)
    streams = _STREAMS_TLS.streams
    s = streams.get(index) if streams else None
    return _TENSOR_NEW(CudaStorage, alloc, nbytes, device, 0 if s is None else s.cuda_stream,
                       bool(_INFERENCE_USED[0] and _grad_mode.STATE.inference), shape, info[0], dtype)



_py_new_empty = new_empty
_EMPTY_FRONT = getattr(_C, "_device_empty_front", None) if _TENSOR_NEW is not None else None
if _EMPTY_FRONT is not None:
    # new_empty's common case in one C call, without its Python frame (~850 results a GPT-2 step); anything else
    # calls the Python function above with the same arguments (device_storage.cpp: the objects it reads)
    new_empty = _EMPTY_FRONT((_py_new_empty, _SHAPES, _LAST_EMPTY, empty, _MAX_NBYTES, _TLS, _DEVICES, _ALLOCATORS,
                              _STREAMS_TLS, _INFERENCE_USED, _grad_mode.STATE, CudaStorage))

def wrapper_front(dev):
    """The native allocation front of a compiled wrapper on ``dev`` (the backend's ``wrapper_front``):
    ``(_C._device_tensor_new, CudaStorage, the allocator, the device object, begin)``, ``begin()`` making the
    device's context current and returning the current stream (once per wrapper call; each buffer is then
    one ``_device_tensor_new(CudaStorage, alloc, nbytes, device, stream, inference, shape, strides, dtype)``).
    None where the native allocation path is off."""
    tensor_new = getattr(_C, "_device_tensor_new", None)
    if not _NATIVE or tensor_new is None:
        return None
    index = dev.index if dev.index is not None else _driver.current_index()
    device, alloc = _device_and_allocator(index)  # (linking leaves this thread's context as it is)
    tls, ensure = _TLS, _driver.ensure_context

    def begin() -> int:
        if tls.index != index:
            ensure(index)
        return current_handle(index)

    return tensor_new, CudaStorage, alloc, device, begin


# -- copies -----------------------------------------------------------------------------------


def _is_dense_contiguous(t) -> bool:
    return t.is_contiguous()


def _host_contiguous(t, dtype):
    """``t`` (CPU) as a contiguous CPU tensor of ``dtype``."""
    if t.dtype is not dtype:
        t = t.to(dtype)
    return t if t.is_contiguous() else t.contiguous()


def copy(dst, src, non_blocking: bool = False) -> None:
    """dst <- src where either lives on CUDA (the backend's ``copy``); shapes already checked/broadcast."""
    from ._ops_copy import device_copy

    if dst._device.type == "cuda" and src._device.type == "cuda":
        device_copy(dst, src)
        return
    if dst._device.type == "cuda":  # host -> device
        index = dst._device.index or 0
        _driver.ensure_context(index)
        if src._shape != dst._shape:
            src = src.expand(dst._shape)
        host = _host_contiguous(src, dst.dtype)
        n = host.numel() * dst.dtype.itemsize
        stream = current_handle(index)
        if dst.is_contiguous():
            if n:
                _fastcall.memcpy_htod(dst.data_ptr(), host.data_ptr(), n, stream)
        else:
            from ember._src.tensor import new_empty_tensor

            tmp = new_empty_tensor(dst._shape, dst.dtype, dst._device)
            if n:
                _fastcall.memcpy_htod(tmp.data_ptr(), host.data_ptr(), n, stream)
            device_copy(dst, tmp)
        if not (non_blocking and is_pinned(host)):
            _fastcall.stream_synchronize(stream)
        else:
            _keep_until_done(host, index, stream)
        return
    # device -> host
    index = src._device.index or 0
    _driver.ensure_context(index)
    stream = current_handle(index)
    if not src.is_contiguous() or src._shape != dst._shape:
        from ember._src.tensor import new_empty_tensor

        tmp = new_empty_tensor(dst._shape, src.dtype, src._device)
        device_copy(tmp, src.expand(dst._shape) if src._shape != dst._shape else src)
        src = tmp
    direct = dst.is_contiguous() and dst.dtype is src.dtype
    if direct:
        host = dst
    else:
        from ember._src.tensor import new_empty_tensor

        host = new_empty_tensor(src._shape, src.dtype, _device("cpu"))
    n = src.numel() * src.dtype.itemsize
    if n:
        _fastcall.memcpy_dtoh(host.data_ptr(), src.data_ptr(), n, stream)
    if not (non_blocking and direct and is_pinned(dst)):
        _fastcall.stream_synchronize(stream)
        from ._ops_index import check_device_errors

        check_device_errors()
    if not direct:
        from ember import _C

        _C.copy_(dst, host)


_INFLIGHT: list = []  # (event, host tensor) kept alive until an async copy from pinned memory is done


def _keep_until_done(host, index: int, stream: int) -> None:
    from ._streams import Event, Stream

    ev = Event()
    ev.record(Stream(index, _handle=stream))
    _INFLIGHT.append((ev, host))
    while _INFLIGHT and _INFLIGHT[0][0].query():
        _INFLIGHT.pop(0)


# -- pinned host memory --------------------------------------------------------------------------


class _PinnedBuffer:
    """Page-locked host memory from ``cuMemHostAlloc``; freed when the CPU storage viewing it goes."""

    def __init__(self, nbytes: int):
        _driver.ensure_context(_driver.current_index())
        drv = _driver._driver()
        self.ptr = int(_driver.check(drv.cuMemHostAlloc(max(nbytes, 1), 0), "cuMemHostAlloc"))
        self.nbytes = nbytes
        _PINNED[self.ptr] = nbytes

    def __del__(self):
        _PINNED.pop(self.ptr, None)
        try:
            _driver._driver().cuMemFreeHost(self.ptr)
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass


_PINNED: dict = {}  # base address -> size of every live pinned buffer


def pin_memory(t):
    from ember import _C
    from ember._src.shapes import contiguous_strides
    from ember._src.tensor import make_tensor

    nbytes = t.numel() * t.dtype.itemsize
    buf = _PinnedBuffer(nbytes)
    storage = _C.Storage.borrow(buf.ptr, nbytes, buf)
    out = make_tensor(storage, t._shape, contiguous_strides(t._shape), 0, t.dtype, _device("cpu"))
    if nbytes:
        _C.copy_(out, t)
    return out


def is_pinned(t) -> bool:
    if not _PINNED or t._device.type != "cpu":
        return False
    p = t._storage.data_ptr()
    for base, size in _PINNED.items():
        if base <= p < base + max(size, 1):
            return True
    return False


def host_buffer(nbytes: int):
    """A ctypes view of fresh page-locked memory (for tests and staging)."""
    buf = _PinnedBuffer(nbytes)
    return buf, (ctypes.c_char * nbytes).from_address(buf.ptr)

