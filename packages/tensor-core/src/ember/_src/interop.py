"""Interop with NumPy (zero-copy both ways where dtypes allow), pickling, and DLPack.

NumPy is imported only when a function here needs it, so that ``import ember`` stays fast.
"""

from __future__ import annotations

import sys
import weakref

from . import dispatch as _dispatch
from . import dtypes
from ._native import _C
from .device import CPU, META, to_device
from .tensor import Tensor, make_tensor, new_empty_tensor

_NUMPY_TO_EMBER: dict = {}


def _numpy_to_ember() -> dict:
    if not _NUMPY_TO_EMBER:
        import numpy as np

        _NUMPY_TO_EMBER.update({np.dtype(d._numpy): d for d in dtypes.ALL_DTYPES if d._numpy is not None})
    return _NUMPY_TO_EMBER


# Borrowed memory (NumPy arrays, buffers, DLPack) cannot grow: PyTorch's storages over it are "not
# resizable". Keyed by data address, each with a weak reference to the object that keeps the memory
# alive: while that object lives no allocation can reuse the address, and its death drops the key.
_UNRESIZABLE: dict = {}


def mark_unresizable(storage, owner=None) -> None:
    """Records that ``storage`` views memory owned by ``owner`` (the storage itself if None)."""
    address = storage.data_ptr()
    if not address:
        return
    try:
        ref = weakref.ref(owner if owner is not None else storage,
                          lambda r, a=address: _UNRESIZABLE.pop(a, None) if _UNRESIZABLE.get(a) is r else None)
    except TypeError:
        ref = weakref.ref(storage, lambda r, a=address: _UNRESIZABLE.pop(a, None) if _UNRESIZABLE.get(a) is r else None)
    _UNRESIZABLE[address] = ref


def is_resizable(storage) -> bool:
    ref = _UNRESIZABLE.get(storage.data_ptr())
    return ref is None or ref() is None


def is_numpy_array(obj) -> bool:
    np = sys.modules.get("numpy")  # an ndarray exists only once NumPy is imported
    return np is not None and isinstance(obj, np.ndarray)


def numpy_dtype(d):
    import numpy as np

    if d._numpy is None:
        from .ops._common import type_name

        raise TypeError(f"Got unsupported ScalarType {type_name(d)}")
    return np.dtype(d._numpy)


def to_numpy(t: Tensor, force: bool = False):
    """The tensor's memory as a NumPy array (no copy)."""
    _dispatch.sync_pending(t, "Tensor.numpy()")
    import numpy as np

    if t._device is META:
        raise RuntimeError("can't convert meta device type tensor to numpy.")
    if t._device.type != "cpu":
        raise TypeError(f"can't convert {t._device.type} device type tensor to numpy. Use Tensor.cpu() first.")
    if t._requires_grad and not force:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    if t.dtype is dtypes.bfloat16 and force:
        t = t.to(dtypes.float32)
    npd = numpy_dtype(t.dtype)
    item = t.dtype.itemsize
    if 0 in t._shape:
        # An empty view may sit past the end of its storage (as_strided allows it, as in PyTorch);
        # NumPy rejects such a buffer offset, and there is no memory to share anyway.
        return np.ndarray(t._shape, dtype=npd)
    storage = t._storage
    # NumPy takes a zero-length buffer as "size unknown" and skips its bounds check: a tensor whose
    # storage resize_ shrank must raise here, as the kernels do (check_view in tensor_arg.cpp).
    if storage.nbytes() < (t._offset + sum((n - 1) * s for n, s in zip(t._shape, t._stride)) + 1) * item:
        raise IndexError(f"tensor view exceeds its storage (offset {t._offset}, storage of {storage.nbytes()} bytes)")
    return np.ndarray(t._shape, dtype=npd, buffer=storage, offset=t._offset * item,
                      strides=_numpy_strides(t._shape, t._stride, item))


def _numpy_strides(shape: tuple, stride: tuple, item: int) -> tuple:
    """Byte strides for NumPy. A size-1 dim is never stepped over, so its stride (which may be
    huge after as_strided, beyond what NumPy accepts) is replaced by the contiguous one."""
    out = []
    inner = item
    for n, s in zip(reversed(shape), reversed(stride)):
        out.append(inner if n == 1 else s * item)
        inner *= n
    return tuple(reversed(out))


def to_numpy_copy(t: Tensor):
    _dispatch.sync_pending(t, "Tensor.numpy()")
    import numpy as np

    if t._device.type not in ("cpu", "meta"):
        t = t.detach().to("cpu")  # a plugin device's tensor is read through a host copy
    return np.array(to_numpy(t, force=True), copy=True)


def read_scalar(t: Tensor):
    if t._device.type not in ("cpu", "meta"):
        t = t.detach().to("cpu")  # a plugin device's tensor is read through a host copy
    if t.dtype is dtypes.bfloat16:
        t = t.to(dtypes.float32)
    return to_numpy(t, force=True).reshape(()).item() if t.ndim else to_numpy(t, force=True).item()


def from_numpy(arr) -> Tensor:
    """A tensor sharing ``arr``'s memory (``arr`` is kept alive by the tensor)."""
    if not is_numpy_array(arr):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    d = _numpy_to_ember().get(arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype)
    if d is not None and not arr.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. Conversion "
                         "between byte orders is currently not supported.")
    if d is None:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{arr.dtype.type.__name__}. The only supported types are: "
            "float64, float32, float16, "
            "complex64, complex128, "
            "int64, int32, int16, int8, uint8, and bool."
        )
    item = arr.itemsize
    _check_strides_not_negative(arr)
    if any(s % item for s in arr.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. Copy the numpy array "
                         "to reallocate the memory.")
    shape = tuple(arr.shape)
    strides = tuple(s // item for s in arr.strides)
    if arr.size == 0:
        nbytes = 0
    else:
        nbytes = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * item
    address = arr.__array_interface__["data"][0]
    storage = _C.Storage.borrow(address, nbytes, arr)
    mark_unresizable(storage, arr)
    return make_tensor(storage, shape, strides, 0, d, CPU)


def _check_strides_not_negative(arr) -> None:
    if any(s < 0 for s in arr.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with negative strides are not "
            "currently supported. (You can probably work around this by making a copy of your array  with "
            "array.copy().) "
        )


def from_numpy_copy(arr) -> Tensor:
    """``ember.tensor(arr)``: a copy; like PyTorch's, it refuses an array with negative strides."""
    import numpy as np

    _check_strides_not_negative(arr)
    if arr.dtype == np.dtype("O"):
        raise TypeError("can't convert np.ndarray of type numpy.object_.")
    if arr.dtype.kind in "iu" and arr.dtype not in _numpy_to_ember():
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "f" and arr.dtype not in _numpy_to_ember():
        arr = arr.astype(np.float64)
    # np.ascontiguousarray would turn a 0-d array into 1-d.
    src = from_numpy(arr if arr.flags.c_contiguous else np.array(arr, order="C"))
    return src.clone()


def _rebuild(data: bytes, dtype_name: str, shape: tuple, requires_grad: bool = False) -> Tensor:
    t = new_empty_tensor(tuple(shape), dtypes._dtype_by_name(dtype_name), CPU)
    if len(data) != t.nbytes:
        raise RuntimeError(f"corrupt tensor pickle: {len(data)} bytes for shape {list(shape)} of "
                           f"{dtype_name}")
    if data:
        memoryview(t._storage)[: len(data)] = data
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor_reduce(t: Tensor):
    """Pickle support (used by multiprocessing and copy); ``ember.save`` does not pickle.

    The payload is the raw bytes of a contiguous copy, so every dtype (bfloat16 too) round-trips exactly.
    """
    _dispatch.sync_pending(t, "pickling a tensor")
    if t._layout.dispatch_key is not None:
        from .sparse._core import reduce_sparse

        return reduce_sparse(t)
    if t._device.type != "cpu":
        raise RuntimeError(f"cannot pickle a tensor on the {t._device.type} device")
    src = t.detach().contiguous()
    start = src._offset * src.dtype.itemsize
    data = bytes(memoryview(src._storage)[start:start + src.nbytes])
    return (_rebuild, (data, t.dtype.name, tuple(t._shape), t._requires_grad))


def _reduce_for_process(t: Tensor):
    """multiprocessing's pickling (ForkingPickler: Process arguments, Queue items): a CPU tensor
    in shared memory (``share_memory_()``) travels as its memfd, so the receiver maps the same
    memory and sees every later write (Hogwild training); any other tensor is copied."""
    storage = t._storage
    if t._layout.dispatch_key is not None or t._device.type != "cpu" or not storage.is_shared():
        return tensor_reduce(t)
    from multiprocessing.reduction import DupFd

    _dispatch.sync_pending(t, "sending a tensor to another process")
    return (_rebuild_shared, (DupFd(storage.shm_fd), storage.nbytes(), t.dtype.name, tuple(t._shape),
                              tuple(t._stride), t._offset, t._requires_grad))


def _rebuild_shared(dup_fd, nbytes: int, dtype_name: str, shape: tuple, stride: tuple, offset: int,
                    requires_grad: bool) -> Tensor:
    import os

    fd = dup_fd.detach()
    try:
        storage = _C.Storage.from_shm_fd(fd, nbytes)  # maps its own duplicate of the fd
    finally:
        os.close(fd)
    t = make_tensor(storage, tuple(shape), tuple(stride), offset, dtypes._dtype_by_name(dtype_name), CPU)
    if requires_grad:
        t.requires_grad_(True)
    return t


def register_process_reducers() -> None:
    """Sends shared tensors between processes by memory, not by copy (``torch`` does this at import)."""
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(Tensor, _reduce_for_process)


class _ReducersOnImport:
    """A meta path finder that registers the reducers as soon as ``multiprocessing.reduction`` has been
    imported (by any ``multiprocessing`` use), and then leaves ``sys.meta_path``. Importing it here
    instead pulled in multiprocessing and socket: a fifth of ``import ember`` (issue 18: < 0.1 s)."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "multiprocessing.reduction":
            return None
        if cls in sys.meta_path:
            sys.meta_path.remove(cls)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec  # not a path-based module (an unusual install): call register_process_reducers()
        exec_module = loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            module.ForkingPickler.register(Tensor, _reduce_for_process)

        loader.exec_module = exec_and_register  # this spec's loader only: a fresh one per find_spec
        return spec


def install_process_reducers() -> None:
    """Registers the reducers now if multiprocessing is loaded, else on its first import."""
    if "multiprocessing.reduction" in sys.modules:
        register_process_reducers()
    elif _ReducersOnImport not in sys.meta_path:
        sys.meta_path.insert(0, _ReducersOnImport)


install_process_reducers()


# -- DLPack ------------------------------------------------------------------------------------------

_KDL_CPU = _C.dlpack_cpu


_DL_DEVICE_NAMES = {2: "cuda"}  # DLPack device types a device plugin may serve (kDLCUDA)


def _dlpack_plugin(name: str):
    """The device plugin that exchanges ``name`` tensors through DLPack, or None."""
    from . import plugins

    plugin = plugins.load(name)
    return plugin if plugin is not None and hasattr(plugin, "to_dlpack") else None


def dlpack_device(t: Tensor) -> tuple:
    """``__dlpack_device__``: (device type, index) in DLPack's numbering."""
    if t._device.type == "cpu":
        return (_KDL_CPU, 0)
    plugin = _dlpack_plugin(t._device.type)
    if plugin is not None:
        return plugin.dlpack_device(t)
    raise ValueError(f"Unknown device type {t._device.type} for Dlpack")


def to_dlpack(t: Tensor, max_version=None, dl_device=None, copy=None, stream=None):
    """``__dlpack__``: a capsule sharing ``t``'s memory; versioned when the consumer asks for >= (1, 0)."""
    _dispatch.sync_pending(t, "__dlpack__")
    if t._requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if t._device.type != "cpu":
        plugin = _dlpack_plugin(t._device.type)
        if plugin is None:
            raise BufferError(f"Can't export a tensor on the {t._device.type} device through DLPack")
        if any(st < 0 for st in t._stride):
            raise BufferError("Can't export a tensor with negative strides")
        return plugin.to_dlpack(t, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
    if dl_device is not None and tuple(dl_device) != (_KDL_CPU, 0):
        raise BufferError(f"Can't export a CPU tensor to DLPack device {tuple(dl_device)}")
    if any(st < 0 for st in t._stride):
        raise BufferError("Can't export a tensor with negative strides")
    src = t.clone() if copy else t
    versioned = max_version is not None and int(max_version[0]) >= 1
    return _C.to_dlpack(src, versioned, bool(copy))


def from_dlpack(ext_tensor, *, device=None, copy=None) -> Tensor:
    """A tensor sharing the memory of any object with ``__dlpack__`` (or of a DLPack capsule).

    ``copy=True`` returns a copy; ``device`` may only name the CPU.
    """
    if hasattr(ext_tensor, "__dlpack__"):
        if hasattr(ext_tensor, "__dlpack_device__"):
            dev_type, _ = ext_tensor.__dlpack_device__()
            name = _DL_DEVICE_NAMES.get(int(dev_type))
            plugin = _dlpack_plugin(name) if name is not None else None
            if plugin is not None:
                # A device producer (CUDA): the device plugin reads the capsule on its stream.
                result = plugin.from_dlpack(ext_tensor)
                if device is not None:
                    result = result.to(device)
                return result.clone() if copy else result
            if int(dev_type) != _KDL_CPU:
                raise RuntimeError(f"from_dlpack: ember can only import CPU tensors, got DLPack device type "
                                   f"{int(dev_type)}")
    if device is not None:
        if to_device(device).type != "cpu":
            raise BufferError(f"from_dlpack: ember imports DLPack tensors to the CPU only, not {device}")
    if hasattr(ext_tensor, "__dlpack__"):
        try:
            capsule = ext_tensor.__dlpack__(max_version=_C.dlpack_version)
        except TypeError:  # a producer from before DLPack 1.0
            capsule = ext_tensor.__dlpack__()
    else:
        capsule = ext_tensor
        if type(capsule).__name__ != "PyCapsule":
            raise RuntimeError(f"from_dlpack expects an object with __dlpack__ or a DLPack capsule, got "
                            f"{type(ext_tensor).__name__}")
    storage, shape, strides, code, _read_only = _C.from_dlpack(capsule)
    mark_unresizable(storage, ext_tensor if ext_tensor is not capsule else None)
    result = make_tensor(storage, shape, strides, 0, dtypes.BY_CODE[code], CPU)
    return result.clone() if copy else result


def export_dlpack(tensor) -> object:
    """``ember.to_dlpack``: a DLPack capsule of ``tensor``'s memory (its data: a tensor that requires
    grad exports as if detached, as PyTorch's ``to_dlpack``)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'data' (position 1) must be Tensor, not {type(tensor).__name__}")
    return to_dlpack(tensor.detach() if tensor._requires_grad else tensor)
