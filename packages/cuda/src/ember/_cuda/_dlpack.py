"""DLPack for CUDA tensors: ``__dlpack__``/``__dlpack_device__`` of CUDA tensors and
``ember.from_dlpack`` of CUDA producers (PyTorch, CuPy, JAX), sharing device memory, no copy.

The structs of ``dlpack.h`` (1.x, and the unversioned 0.x ``DLManagedTensor`` for older
consumers) are built with ctypes; a capsule's destructor and the tensor's deleter are ctypes
callbacks. An exported tensor stays alive (in ``_LIVE``) until the consumer calls the
deleter, or until an unconsumed capsule is collected. An imported tensor's storage holds the
producer's managed tensor and calls its deleter when the last view is gone.

Streams follow the array API: the consumer passes the stream it will use (1 = the legacy
default stream, 2 = the per-thread default, -1 = no synchronization, None = the legacy
default); unless it is ember's current stream, that stream waits on an event recorded on the
current stream, so the data is ready when the consumer's work runs.
"""

from __future__ import annotations

import ctypes

from ember._src import dtypes as dt

from . import _driver
from ._storage import CudaStorage

KDL_CUDA = 2
_c = ctypes


class DLDevice(_c.Structure):
    _fields_ = [("device_type", _c.c_int32), ("device_id", _c.c_int32)]


class DLDataType(_c.Structure):
    _fields_ = [("code", _c.c_uint8), ("bits", _c.c_uint8), ("lanes", _c.c_uint16)]


class DLTensor(_c.Structure):
    _fields_ = [("data", _c.c_void_p), ("device", DLDevice), ("ndim", _c.c_int32), ("dtype", DLDataType),
                ("shape", _c.POINTER(_c.c_int64)), ("strides", _c.POINTER(_c.c_int64)),
                ("byte_offset", _c.c_uint64)]


class DLManagedTensor(_c.Structure):
    pass


_DELETER = _c.CFUNCTYPE(None, _c.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", _c.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(_c.Structure):
    _fields_ = [("major", _c.c_uint32), ("minor", _c.c_uint32)]


class DLManagedTensorVersioned(_c.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", _c.c_void_p), ("deleter", _DELETER),
                ("flags", _c.c_uint64), ("dl_tensor", DLTensor)]


# (code, bits) of each dtype (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6)
_CODES = {
    dt.int8: (0, 8), dt.int16: (0, 16), dt.int32: (0, 32), dt.int64: (0, 64), dt.uint8: (1, 8),
    dt.float16: (2, 16), dt.float32: (2, 32), dt.float64: (2, 64), dt.bfloat16: (4, 16),
    dt.complex64: (5, 64), dt.complex128: (5, 128), dt.bool: (6, 8),
}
_DTYPES = {v: k for k, v in _CODES.items()}

_api = _c.pythonapi
_api.PyCapsule_New.restype, _api.PyCapsule_New.argtypes = _c.py_object, (_c.c_void_p, _c.c_char_p, _c.c_void_p)
_api.PyCapsule_IsValid.restype, _api.PyCapsule_IsValid.argtypes = _c.c_int, (_c.c_void_p, _c.c_char_p)
_api.PyCapsule_GetPointer.restype = _c.c_void_p
_api.PyCapsule_GetPointer.argtypes = (_c.c_void_p, _c.c_char_p)
_api.PyCapsule_SetName.restype, _api.PyCapsule_SetName.argtypes = _c.c_int, (_c.py_object, _c.c_char_p)
_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}
_USED = {False: b"used_dltensor", True: b"used_dltensor_versioned"}

_LIVE: dict = {}  # address of an exported managed struct -> what it keeps alive


@_DELETER
def _deleter(address):
    _LIVE.pop(address, None)


_CAPSULE_DESTRUCTOR = _c.CFUNCTYPE(None, _c.c_void_p)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # An unconsumed capsule still carries its first name: its tensor is released here.
    for versioned in (True, False):
        if _api.PyCapsule_IsValid(capsule, _NAMES[versioned]):
            _LIVE.pop(_api.PyCapsule_GetPointer(capsule, _NAMES[versioned]), None)


def _sync_for(stream) -> None:
    from ._streams import Event, Stream, current_stream

    if stream == -1:
        return
    handle = {None: 0, 1: 0, 2: 2}.get(stream, stream)  # 0x2 is CU_STREAM_PER_THREAD
    if not isinstance(handle, int) or handle < 0:
        raise ValueError(f"__dlpack__: invalid stream {stream!r}")
    cur = current_stream()
    if cur.cuda_stream != handle:
        ev = Event()
        ev.record(cur)
        Stream(cur.device_index, _handle=handle).wait_event(ev)


def to_dlpack(t, stream=None, max_version=None, dl_device=None, copy=None):
    index = t._device.index or 0
    if dl_device is not None and tuple(dl_device) != (KDL_CUDA, index):
        raise BufferError(f"Can't export a cuda:{index} tensor to DLPack device {tuple(dl_device)}")
    if t.dtype not in _CODES:
        raise BufferError(f"DLPack has no type for {t.dtype}")
    src = t.clone() if copy else t
    _sync_for(stream)
    versioned = max_version is not None and int(max_version[0]) >= 1
    n = src.ndim
    shape = (_c.c_int64 * max(n, 1))(*src._shape)
    strides = (_c.c_int64 * max(n, 1))(*src._stride)
    code, bits = _CODES[src.dtype]
    tensor = DLTensor(src._storage.data_ptr(), DLDevice(KDL_CUDA, index), n, DLDataType(code, bits, 1),
                      shape, strides, src._offset * src.dtype.itemsize)
    if versioned:
        managed = DLManagedTensorVersioned(DLPackVersion(1, 0), None, _deleter, 0, tensor)
    else:
        managed = DLManagedTensor(tensor, None, _deleter)
    address = _c.addressof(managed)
    _LIVE[address] = (managed, shape, strides, src)
    return _api.PyCapsule_New(address, _NAMES[versioned], _c.cast(_capsule_destructor, _c.c_void_p))


class ExternalCudaStorage(CudaStorage):
    """Device memory owned by a DLPack producer: its deleter runs when the last view is gone."""

    __slots__ = ("_managed", "_call_deleter")

    def __del__(self):
        managed = getattr(self, "_managed", None)
        if managed is not None:
            self._managed = None
            try:
                self._call_deleter(managed)
            except Exception:  # noqa: BLE001, S110 - interpreter shutdown
                pass


def _external(ptr: int, nbytes: int, index: int, managed, deleter) -> ExternalCudaStorage:
    storage = ExternalCudaStorage(0, index)  # no allocation: the memory is the producer's
    storage._ptr, storage._nbytes, storage._block = ptr, nbytes, None
    storage._managed, storage._call_deleter = managed, deleter
    return storage


def from_capsule(capsule, index_hint=None):
    """A CUDA tensor over the memory a DLPack capsule describes (consuming the capsule)."""
    from ember._src.device import device as _device
    from ember._src.tensor import make_tensor

    versioned = bool(_api.PyCapsule_IsValid(id(capsule), _NAMES[True]))  # id: the PyObject address
    if not versioned and not _api.PyCapsule_IsValid(id(capsule), _NAMES[False]):
        raise RuntimeError("from_dlpack: the capsule was already consumed or is not a DLPack capsule")
    address = _api.PyCapsule_GetPointer(id(capsule), _NAMES[versioned])
    kind = DLManagedTensorVersioned if versioned else DLManagedTensor
    managed = _c.cast(address, _c.POINTER(kind))
    if versioned and managed.contents.version.major != 1:
        raise BufferError(f"from_dlpack: unsupported DLPack version {managed.contents.version.major}")
    tensor = managed.contents.dl_tensor
    if tensor.device.device_type != KDL_CUDA:
        raise BufferError(f"from_dlpack: expected a CUDA tensor, got DLPack device type {tensor.device.device_type}")
    key = (tensor.dtype.code, tensor.dtype.bits)
    if tensor.dtype.lanes != 1 or key not in _DTYPES:
        raise BufferError(f"from_dlpack: unsupported DLPack dtype (code {key[0]}, bits {key[1]}, "
                          f"lanes {tensor.dtype.lanes})")
    dtype = _DTYPES[key]
    n = tensor.ndim
    shape = tuple(tensor.shape[i] for i in range(n))
    if tensor.strides:
        strides = tuple(tensor.strides[i] for i in range(n))
    else:
        strides, acc = [], 1
        for size in reversed(shape):
            strides.insert(0, acc)
            acc *= max(size, 1)
        strides = tuple(strides)
    _api.PyCapsule_SetName(capsule, _USED[versioned])
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, strides) if s > 0) if all(shape) else 0
    deleter = managed.contents.deleter

    def call_deleter(m, fn=deleter):
        if fn:
            fn(_c.addressof(m.contents))

    index = tensor.device.device_id
    _driver.ensure_context(index)
    storage = _external(tensor.data + tensor.byte_offset, extent * dtype.itemsize, index, managed, call_deleter)
    return make_tensor(storage, shape, strides, 0, dtype, _device("cuda", index))


def from_dlpack(obj):
    """``ember.from_dlpack`` of an object whose ``__dlpack_device__`` is CUDA."""
    from ._streams import current_stream

    if hasattr(obj, "__dlpack__"):
        handle = current_stream().cuda_stream
        stream = 1 if handle == 0 else handle
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0
            capsule = obj.__dlpack__(stream=stream)
    else:
        capsule = obj
    return from_capsule(capsule)
