"""PyTorch's storage classes: ``UntypedStorage`` (ember's ``_C.Storage``, a block of bytes) and the
deprecated ``TypedStorage`` with its legacy names (``FloatStorage``, ...), a dtype over bytes.

Tensors view an untyped storage (``Tensor.untyped_storage()``); ``Tensor.storage()`` wraps it in a
``TypedStorage`` of the tensor's dtype, with PyTorch's deprecation warning, first time only.
"""

from __future__ import annotations

import copy
import warnings

from . import dtypes
from ._native import _C
from .device import device as _device

UntypedStorage = _C.Storage


def _from_buffer(buffer, byte_order=None, count: int = -1, offset: int = 0, dtype=None):
    """PyTorch's ``UntypedStorage.from_buffer``: a new CPU storage holding a copy of ``count``
    elements of ``dtype`` read from ``buffer`` at byte ``offset`` (all of it by default), in the byte
    order ``byte_order`` ("little", "big", "native"; needed unless the dtype is uint8 or int8)."""
    import sys

    if dtype is None:
        raise RuntimeError("argument 'dtype' cannot be None")
    d = dtypes.to_dtype(dtype)
    if byte_order is None and d not in (dtypes.uint8, dtypes.int8):
        raise RuntimeError("function missing required argument 'byte_order' (pos 2)")
    if byte_order is not None and byte_order not in ("big", "little", "native"):
        raise ValueError(f"invalid byte_order '{byte_order}' (expected 'big', 'little', or 'native')")
    try:
        data = memoryview(buffer).cast("B")
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not '{type(buffer).__name__}'") from None
    length, size = len(data), d.itemsize
    if offset < 0 or offset > length:
        # (PyTorch's message, its two numbers as it prints them)
        raise ValueError(f"offset must be non-negative and no greater than buffer length ({offset}) , "
                         f"but got {length}")
    if count < 0:
        if (length - offset) % size:
            raise ValueError(f"buffer size ({length - offset}) must be a multiple of element size ({size})")
        count = (length - offset) // size
    if offset + count * size > length:
        raise ValueError(f"buffer has only {(length - offset) // size} elements after offset {offset}, but "
                         f"specified a size of {count}")
    raw = bytes(data[offset:offset + count * size])
    order = sys.byteorder if byte_order in (None, "native") else byte_order
    unit = size // 2 if d.is_complex else size  # complex: each part in the given order
    if order != sys.byteorder and unit > 1:
        raw = b"".join(raw[i:i + unit][::-1] for i in range(0, len(raw), unit))
    out = _C.Storage.allocate(len(raw))
    if raw:
        memoryview(out).cast("B")[:] = raw
    return out


def _from_file(filename, shared=False, nbytes: int = 0):
    """PyTorch's ``UntypedStorage.from_file``: ``nbytes`` of the file memory-mapped. ``shared``: the
    mapping is the file (writes reach it; the file is created, or grown, to ``nbytes``); otherwise a
    private copy-on-write mapping of a file at least that long."""
    import mmap
    import os

    filename, nbytes = os.fspath(filename), int(nbytes)
    mode = "read-write" if shared else "read-only"
    try:
        fd = os.open(filename, (os.O_RDWR | os.O_CREAT) if shared else os.O_RDONLY, 0o600)
    except OSError as exc:
        raise RuntimeError(f"unable to open file <{filename}> in {mode} mode: {exc.strerror} ({exc.errno})") from None
    try:
        if nbytes < 0:
            raise RuntimeError(f"unable to mmap {nbytes} bytes from file <{filename}>: Cannot allocate memory (12)")
        if not os.path.isfile(filename):
            raise RuntimeError(f"unable to mmap {nbytes} bytes from file <{filename}>: No such device (19)")
        have = os.fstat(fd).st_size
        if have < nbytes:
            if not shared:
                raise RuntimeError(f"file <{filename}> size <{have}> is smaller than the required mapping size "
                                   f"<{nbytes}>")
            os.ftruncate(fd, nbytes)
        if nbytes == 0:
            return _C.Storage.allocate(0)
        if shared:
            mapped = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        else:
            mapped = mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    storage, _readonly = _C.Storage._wrap_buffer(mapped)  # the mapping lives as long as the storage
    return storage


UntypedStorage.from_buffer = staticmethod(_from_buffer)
UntypedStorage.from_file = staticmethod(_from_file)

_REMOVAL_MESSAGE = (
    "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage "
    "class. This should only matter to you if you are using storages directly.  To access UntypedStorage "
    "directly, use tensor.untyped_storage() instead of tensor.storage()"
)
_WARNED = [False]


def _warn_typed_storage_removal(stacklevel: int = 2) -> None:
    if not _WARNED[0]:
        _WARNED[0] = True
        warnings.warn(_REMOVAL_MESSAGE, UserWarning, stacklevel=stacklevel + 1)


def _view(untyped, dtype, count: int):
    """A 1-D tensor of `count` elements of `dtype` over the storage's bytes."""
    from .ops.creation.factories import empty

    out = empty((0,), dtype=dtype, device=untyped.device)
    return out.set_(untyped, 0, (count,), (1,))


class _LegacyStorageMeta(type):
    dtype: object

    def __instancecheck__(cls, instance) -> bool:
        fixed = cls.__dict__.get("dtype")
        if fixed is not None and type(instance) is TypedStorage:
            return instance.dtype is fixed and instance.device.type == "cpu"
        return super().__instancecheck__(instance)


class TypedStorage(metaclass=_LegacyStorageMeta):
    """Elements of one dtype over an ``UntypedStorage`` (deprecated in PyTorch, kept for old code)."""

    is_sparse = False

    @classmethod
    def from_file(cls, filename, shared, size: int):
        """``size`` elements of the class's dtype over the file (``UntypedStorage.from_file``)."""
        _warn_typed_storage_removal()
        dtype = cls.__dict__.get("dtype") or dtypes.get_default_dtype()
        untyped = UntypedStorage.from_file(filename, shared, int(size) * dtype.itemsize)
        return TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)

    @classmethod
    def _from_buffer(cls, *args, dtype=None, device=None, **kwargs):
        """``UntypedStorage.from_buffer`` typed: the default dtype (or ``dtype``) for TypedStorage, the
        class's own for a legacy class (``ByteStorage._from_buffer(raw_bytes)``)."""
        fixed = cls.__dict__.get("dtype")
        if fixed is None:
            dtype = dtypes.get_default_dtype() if dtype is None else dtype
            device = _device("cpu" if device is None else device)
            if device.type != "cpu":
                raise RuntimeError(f"TypedStorage.from_buffer: Not available for device {device.type}")
        else:
            if dtype is not None or len(args) == 5:
                raise RuntimeError("from_buffer: 'dtype' can only be specified in UntypedStorage.from_buffer and "
                                   "TypedStorage.from_buffer")
            if device is not None:
                raise RuntimeError("from_buffer: 'device' can only be specified in UntypedStorage.from_buffer and "
                                   "TypedStorage.from_buffer")
            dtype = fixed
        untyped = UntypedStorage.from_buffer(*args, dtype=dtype, **kwargs)
        return TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)

    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        return cls._from_buffer(*args, **kwargs)

    def __init__(self, *args, device=None, dtype=None, wrap_storage=None, _internal: bool = False):
        if not _internal:
            _warn_typed_storage_removal()
        fixed = type(self).__dict__.get("dtype")
        if fixed is not None:  # a legacy class (FloatStorage, ...): its dtype, on the CPU
            if dtype is not None and dtype is not fixed:
                raise RuntimeError(f"{type(self).__name__}: dtype must be {fixed}, got {dtype}")
            if device is not None and _device(device).type != "cpu":
                raise RuntimeError(f"{type(self).__name__}: legacy storages are on the CPU, got device {device}")
            dtype = fixed
        if dtype is not None and not isinstance(dtype, dtypes.dtype):
            raise TypeError(f"TypedStorage: argument 'dtype' must be ember.dtype, not {type(dtype).__name__}")
        if wrap_storage is not None:
            if args or device is not None:
                raise RuntimeError("TypedStorage: wrap_storage excludes positional arguments and device")
            if dtype is None:
                raise RuntimeError("TypedStorage: wrap_storage needs a dtype")
            if isinstance(wrap_storage, TypedStorage) or not hasattr(wrap_storage, "nbytes"):
                raise TypeError(
                    f"TypedStorage: wrap_storage must be an UntypedStorage, got {type(wrap_storage).__name__}")
            self.dtype = dtype
            self._untyped_storage = wrap_storage
            return
        self.dtype = dtypes.get_default_dtype() if dtype is None else dtype
        dev = "cpu" if device is None else str(_device(device))
        if len(args) > 1:
            raise TypeError(f"TypedStorage() takes at most one positional argument ({len(args)} given)")
        arg = args[0] if args else 0
        if isinstance(arg, int) and not isinstance(arg, bool):
            if arg < 0:
                raise RuntimeError(f"TypedStorage: the size must be non-negative, got {arg}")
            self._untyped_storage = UntypedStorage(arg * self.dtype.itemsize, device=dev)
            return
        from .tensor import Tensor

        if isinstance(arg, (Tensor, str, bytes)) or not hasattr(arg, "__len__"):
            raise TypeError(
                f"{type(self).__name__}(): expected a size or a sequence of numbers, got {type(arg).__name__}"
            )
        from .ops.creation.factories import tensor

        self._untyped_storage = tensor(list(arg), dtype=self.dtype, device=dev).untyped_storage()

    # -- sizes and identity ------------------------------------------------------------------
    @property
    def device(self):
        return self._untyped_storage.device

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    def size(self) -> int:
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def nbytes(self) -> int:
        return self.size() * self.dtype.itemsize

    def element_size(self) -> int:
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        return self._untyped_storage.data_ptr()

    def untyped(self):
        return self._untyped_storage

    def get_device(self) -> int:
        return self._untyped_storage.get_device()

    def is_pinned(self, device=None) -> bool:
        return False

    def is_shared(self) -> bool:
        return self._untyped_storage.is_shared()

    def share_memory_(self):
        self._untyped_storage.share_memory_()
        return self

    def _new_shared(self, size: int):
        out = TypedStorage(size, dtype=self.dtype, device=self.device, _internal=True)
        return out.share_memory_()

    def pickle_storage_type(self) -> str:
        from ..serialization._torch_globals import STORAGE_NAMES

        return STORAGE_NAMES[self.dtype]

    def type(self, dtype=None, non_blocking: bool = False):
        if dtype is None:
            return "ember." + self.pickle_storage_type()
        return self._to(dtype if isinstance(dtype, dtypes.dtype) else getattr(dtype, "dtype", dtype))

    # -- elements -----------------------------------------------------------------------------
    def _tensor(self):
        return _view(self._untyped_storage, self.dtype, self.size())

    def _index(self, idx) -> int:
        if isinstance(idx, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise RuntimeError(f"can't index a {type(self).__name__} with {type(idx).__name__}")
        n = self.size()
        j = idx + n if idx < 0 else idx
        if not 0 <= j < n:
            raise IndexError(f"index {idx} out of range for storage of size {n}")
        return j

    def __getitem__(self, idx):
        return self._tensor()[self._index(idx)].item()

    def __setitem__(self, idx, value) -> None:
        t = self._tensor()
        if isinstance(idx, slice):
            t[idx] = value
        else:
            t[self._index(idx)] = value

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list:
        return self._tensor().tolist()

    def fill_(self, value):
        self._tensor().fill_(value)
        return self

    def copy_(self, source, non_blocking=None):
        src = source._tensor() if isinstance(source, TypedStorage) else source
        if not hasattr(src, "dtype") and hasattr(src, "nbytes"):  # an UntypedStorage: its bytes
            self._untyped_storage.copy_(src)
            return self
        self._tensor().copy_(src)
        return self

    def resize_(self, size: int) -> None:  # None, as PyTorch's
        self._untyped_storage.resize_(size * self.dtype.itemsize)

    def clone(self):
        return TypedStorage(wrap_storage=self._untyped_storage.clone(), dtype=self.dtype, _internal=True)

    def cpu(self):
        return self if self.device.type == "cpu" else TypedStorage(
            wrap_storage=self._tensor().cpu().untyped_storage(), dtype=self.dtype, _internal=True)

    def _to(self, dtype):
        if dtype is self.dtype:
            return self
        return TypedStorage(wrap_storage=self._tensor().to(dtype).untyped_storage(), dtype=dtype, _internal=True)

    def double(self):
        return self._to(dtypes.float64)

    def float(self):
        return self._to(dtypes.float32)

    def half(self):
        return self._to(dtypes.float16)

    def bfloat16(self):
        return self._to(dtypes.bfloat16)

    def long(self):
        return self._to(dtypes.int64)

    def int(self):
        return self._to(dtypes.int32)

    def short(self):
        return self._to(dtypes.int16)

    def char(self):
        return self._to(dtypes.int8)

    def byte(self):
        return self._to(dtypes.uint8)

    def bool(self):
        return self._to(dtypes.bool)

    def cfloat(self):
        return self._to(dtypes.complex64)

    def cdouble(self):
        return self._to(dtypes.complex128)

    # -- Python protocols ---------------------------------------------------------------------
    def __repr__(self) -> str:
        head = "" if self.device.type == "meta" else "".join(f" {v}\n" for v in self.tolist())
        return (f"{head}[ember.storage.TypedStorage(dtype={self.dtype}, device={self.device}) "
                f"of size {self.size()}]")

    __str__ = __repr__

    def __copy__(self):
        return TypedStorage(wrap_storage=self._untyped_storage, dtype=self.dtype, _internal=True)

    def __deepcopy__(self, memo):
        out = TypedStorage(wrap_storage=copy.deepcopy(self._untyped_storage, memo), dtype=self.dtype, _internal=True)
        memo[id(self)] = out
        return out

    def __reduce__(self):
        return _rebuild_typed_storage, (self._untyped_storage, self.dtype)

    def __sizeof__(self) -> int:
        return super().__sizeof__() + self.nbytes()


def _rebuild_typed_storage(untyped, dtype):
    return TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)


def _legacy_class(name: str, dtype) -> type:
    def __init__(self, *args, device=None, dtype=None, wrap_storage=None, _internal: bool = False):
        # As PyTorch's legacy classes: constructing one directly warns that TypedStorage is deprecated.
        TypedStorage.__init__(self, *args, device=device, dtype=dtype, wrap_storage=wrap_storage, _internal=_internal)

    return _LegacyStorageMeta(name, (TypedStorage,), {"dtype": dtype, "__init__": __init__, "__module__": "ember"})


FloatStorage = _legacy_class("FloatStorage", dtypes.float32)
DoubleStorage = _legacy_class("DoubleStorage", dtypes.float64)
HalfStorage = _legacy_class("HalfStorage", dtypes.float16)
BFloat16Storage = _legacy_class("BFloat16Storage", dtypes.bfloat16)
LongStorage = _legacy_class("LongStorage", dtypes.int64)
IntStorage = _legacy_class("IntStorage", dtypes.int32)
ShortStorage = _legacy_class("ShortStorage", dtypes.int16)
CharStorage = _legacy_class("CharStorage", dtypes.int8)
ByteStorage = _legacy_class("ByteStorage", dtypes.uint8)
BoolStorage = _legacy_class("BoolStorage", dtypes.bool)
ComplexFloatStorage = _legacy_class("ComplexFloatStorage", dtypes.complex64)
ComplexDoubleStorage = _legacy_class("ComplexDoubleStorage", dtypes.complex128)


def is_storage_object(obj) -> bool:
    return isinstance(obj, (UntypedStorage, TypedStorage))


def tensor_over_storage(storage, dtype):
    """A 1-D tensor of ``dtype`` viewing all of a storage (the legacy constructors' ``Tensor(storage)``);
    a typed storage must be of ``dtype``, as PyTorch's."""
    from .ops.creation.factories import empty

    return empty((0,), dtype=dtype, device=storage.device).set_(storage)
