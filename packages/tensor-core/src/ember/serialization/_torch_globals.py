"""The allow-list: which PyTorch globals a checkpoint may name, and ember's stand-ins for them.

A checkpoint's pickle names functions such as ``torch._utils._rebuild_tensor_v2``. ember never
imports them: each allowed name maps to plain data (a dtype, a storage type) or to a
``Constructor`` around one of the small validating functions below. Anything else is an
``UnpicklingError`` naming the global, raised before anything is called.
"""

from __future__ import annotations

from collections import Counter, OrderedDict

from .._src import dtypes
from .._src.device import device
from .._src.shapes import Size
from .._src.tensor import Tensor, check_view_bounds, make_tensor
from ._errors import UnpicklingError
from ._pickle_reader import Constructor

# The legacy typed-storage class PyTorch names for each dtype (``GLOBAL torch FloatStorage``).
STORAGE_NAMES = {
    dtypes.float32: "FloatStorage",
    dtypes.float64: "DoubleStorage",
    dtypes.float16: "HalfStorage",
    dtypes.bfloat16: "BFloat16Storage",
    dtypes.int64: "LongStorage",
    dtypes.int32: "IntStorage",
    dtypes.int16: "ShortStorage",
    dtypes.int8: "CharStorage",
    dtypes.uint8: "ByteStorage",
    dtypes.bool: "BoolStorage",
    dtypes.complex64: "ComplexFloatStorage",
    dtypes.complex128: "ComplexDoubleStorage",
}
_STORAGE_MODULES = ("torch", "torch.storage", "torch.cuda")
_KNOWN_TORCH_DTYPES = {
    "complex32", "complex64", "complex128", "cfloat", "cdouble", "chalf", "uint16", "uint32", "uint64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "quint8", "qint8", "qint32",
}


class StorageType:
    """What ``GLOBAL torch FloatStorage`` loads as: the element type of a storage record."""

    __slots__ = ("name", "dtype")

    def __init__(self, name: str, dtype):
        self.name = name
        self.dtype = dtype  # UntypedStorage holds bytes: uint8, as in torch.load

    def __repr__(self) -> str:
        return f"torch.{self.name}"


class LoadedStorage:
    """A storage record read from the archive, with the dtype it was saved as."""

    __slots__ = ("storage", "dtype", "typed")

    def __init__(self, storage, dtype, typed: bool = True):
        self.storage = storage
        self.dtype = dtype
        self.typed = typed  # saved as a TypedStorage (FloatStorage...), not an UntypedStorage

    def as_result(self):
        """What torch.load returns for a storage saved on its own: a TypedStorage of the record's
        dtype, or the bytes of an UntypedStorage."""
        if not self.typed:
            return self.storage
        from .._src.storage import TypedStorage

        return TypedStorage(wrap_storage=self.storage, dtype=self.dtype, _internal=True)


class _Marker:
    """A class name that is only ever compared against (``torch.Tensor`` in _rebuild_from_type_v2)."""

    __slots__ = ("qualname",)

    def __init__(self, qualname: str):
        self.qualname = qualname


_TENSOR_TYPE = _Marker("torch.Tensor")


def _ints(value, what: str) -> tuple:
    if not isinstance(value, tuple) or any(type(v) is not int for v in value):
        raise UnpicklingError(f"tensor {what} must be a tuple of ints, got {value!r:.80}")
    return tuple(value)


def _view(storage, storage_offset, size, stride, dtype, requires_grad) -> Tensor:
    if not isinstance(storage, LoadedStorage):
        raise UnpicklingError(f"a tensor must be rebuilt from a storage record, got {type(storage).__name__}")
    if type(storage_offset) is not int:
        raise UnpicklingError(f"tensor storage offset must be an int, got {type(storage_offset).__name__}")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if type(requires_grad) is not bool:
        raise UnpicklingError(f"requires_grad must be a bool, got {type(requires_grad).__name__}")
    # Raises unless every element of the view lies inside the record: never an out-of-bounds read.
    check_view_bounds(storage.storage, size, stride, storage_offset, dtype)
    t = make_tensor(storage.storage, size, stride, storage_offset, dtype, _CPU)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _check_metadata(metadata) -> None:
    if metadata and any(metadata.values()):
        raise UnpicklingError(f"tensor metadata {metadata!r:.80} (conjugate/negative views) is not supported")


def rebuild_tensor(storage, storage_offset, size, stride):
    return _view(storage, storage_offset, size, stride, _dtype_of(storage), False)


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
    _check_metadata(metadata)
    return _view(storage, storage_offset, size, stride, _dtype_of(storage), requires_grad)


def rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, metadata=None):
    if not isinstance(dtype, dtypes.dtype):
        raise UnpicklingError(f"_rebuild_tensor_v3 needs a dtype, got {type(dtype).__name__}")
    _check_metadata(metadata)
    return _view(storage, storage_offset, size, stride, dtype, requires_grad)


def _dtype_of(storage):
    if not isinstance(storage, LoadedStorage):
        raise UnpicklingError(f"a tensor must be rebuilt from a storage record, got {type(storage).__name__}")
    return storage.dtype


def _parameter_class():
    """``ember.nn.Parameter`` when ember-nn is installed: found through its ``parameter`` plugin
    entry point, since the core may not import packages above it."""
    from ember._src import plugins

    return plugins.load("parameter")


def rebuild_parameter(data, requires_grad, backward_hooks=None):
    if not isinstance(data, Tensor) or type(requires_grad) is not bool:
        raise UnpicklingError("_rebuild_parameter needs (Tensor, bool, hooks)")
    cls = _parameter_class()
    if cls is None:
        return data.detach().requires_grad_(requires_grad)
    return cls(data, requires_grad)


def rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    param = rebuild_parameter(data, requires_grad, backward_hooks)
    _set_attributes(param, state)
    return param


def rebuild_from_type_v2(func, new_type, args, state):
    if not isinstance(func, Constructor) or type(args) is not tuple:
        raise UnpicklingError("_rebuild_from_type_v2 needs an allow-listed rebuild function")
    result = func.call(*args)
    if new_type is not _TENSOR_TYPE and new_type is not _PARAMETER:
        raise UnpicklingError(f"tensor subclass {new_type!r:.80} is not supported")
    if new_type is _PARAMETER and isinstance(result, Tensor):
        result = rebuild_parameter(result, result.requires_grad)
    _set_attributes(result, state)
    return result


def _set_attributes(obj, state) -> None:
    """Python attributes saved with a tensor: plain data only, never over a class attribute."""
    if isinstance(state, tuple) and len(state) == 2:
        state = {**(state[0] or {}), **(state[1] or {})}
    if not state:
        return
    if not isinstance(state, dict) or any(type(k) is not str for k in state):
        raise UnpicklingError(f"object state must be a dict of str, got {type(state).__name__}")
    for key, value in state.items():
        if hasattr(type(obj), key):
            raise UnpicklingError(f"saved attribute {key!r} would replace {type(obj).__name__}.{key}")
        setattr(obj, key, value)


def _get_layout(name):
    """``torch.serialization._get_layout("torch.sparse_coo")``: a layout by its printed name."""
    from .._src.layouts import LAYOUTS

    if type(name) is not str or not name.startswith("torch.") or name[6:] not in LAYOUTS:
        raise UnpicklingError(f"unknown layout {name!r:.80}")
    return LAYOUTS[name[6:]]


def rebuild_sparse_tensor(layout, data):
    """``torch._utils._rebuild_sparse_tensor``: COO (indices, values, size[, is_coalesced]) or a
    compressed layout (compressed indices, plain indices, values, size), rebuilt through the public
    constructors, whose invariant checks reject malformed index arrays before any kernel runs."""
    from .._src import sparse
    from .._src.layouts import COMPRESSED, sparse_coo

    if type(data) is not tuple or not all(isinstance(x, Tensor) for x in data[:-2 if layout is sparse_coo else -1]):
        raise UnpicklingError("_rebuild_sparse_tensor needs a tuple of tensors and a size")
    try:
        if layout is sparse_coo and len(data) in (3, 4):
            coalesced = data[3] if len(data) == 4 else None
            if coalesced is not None and type(coalesced) is not bool:
                raise UnpicklingError("is_coalesced must be a bool")
            return sparse.sparse_coo_tensor(data[0], data[1], _ints(tuple(data[2]), "size"),
                                            is_coalesced=coalesced or None)
        if layout in COMPRESSED and len(data) == 4:
            return sparse.sparse_compressed_tensor(data[0], data[1], data[2], _ints(tuple(data[3]), "size"),
                                                   layout=layout)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise UnpicklingError(f"invalid sparse tensor in checkpoint: {exc}") from None
    raise UnpicklingError(f"_rebuild_sparse_tensor: unsupported layout {layout!r:.40} or data")


def _encode(text, encoding="latin1"):
    # How protocol 2 spells ``bytes``: _codecs.encode(text, 'latin1').
    if type(text) is not str or encoding not in ("latin1", "latin-1"):
        raise UnpicklingError("_codecs.encode is only allowed as the latin1 spelling of bytes")
    return text.encode("latin1")


def _bytes(data=b"", encoding=None):
    # Never bytes(n) / bytearray(n): a size from the file must not choose an allocation.
    if type(data) is str:
        data = _encode(data, encoding)
    if type(data) is not bytes:
        raise UnpicklingError("bytes and bytearray must be rebuilt from bytes or latin1 text")
    return data


def _bytearray(data=b"", encoding=None):
    return bytearray(_bytes(data, encoding))


def _size(*args):
    return Size(_ints(tuple(*args), "size"))


def _new_parameter(data=None, requires_grad=True):
    return rebuild_parameter(data, requires_grad)


_CPU = device("cpu")
_PARAMETER = Constructor("torch.nn.parameter.Parameter", _new_parameter)


def build_allowed() -> dict[tuple[str, str], object]:
    allowed: dict[tuple[str, str], object] = {}
    for cls in (OrderedDict, Counter):
        allowed["collections", cls.__name__] = Constructor(f"collections.{cls.__name__}", cls)
    for cls in (set, frozenset, complex):
        allowed["builtins", cls.__name__] = Constructor(f"builtins.{cls.__name__}", cls)
    allowed["builtins", "bytearray"] = Constructor("builtins.bytearray", _bytearray)
    allowed["builtins", "bytes"] = Constructor("builtins.bytes", _bytes)  # how pickle spells b"" before protocol 3
    allowed["_codecs", "encode"] = Constructor("_codecs.encode", _encode)
    for fn in (rebuild_tensor, rebuild_tensor_v2, rebuild_tensor_v3, rebuild_parameter,
               rebuild_parameter_with_state):
        allowed["torch._utils", "_" + fn.__name__] = Constructor("torch._utils._" + fn.__name__, fn)
    allowed["torch._utils", "_rebuild_sparse_tensor"] = Constructor("torch._utils._rebuild_sparse_tensor",
                                                                    rebuild_sparse_tensor)
    allowed["torch.serialization", "_get_layout"] = Constructor("torch.serialization._get_layout", _get_layout)
    allowed["torch._tensor", "_rebuild_from_type_v2"] = Constructor("torch._tensor._rebuild_from_type_v2",
                                                                    rebuild_from_type_v2)
    allowed["torch.nn.parameter", "Parameter"] = _PARAMETER
    allowed["torch", "Tensor"] = _TENSOR_TYPE
    allowed["torch", "Size"] = Constructor("torch.Size", _size)
    allowed["torch", "device"] = Constructor("torch.device", device)
    for name, d in dtypes._BY_NAME.items():
        allowed["torch", name] = d
    for d, name in STORAGE_NAMES.items():
        for module in _STORAGE_MODULES:
            allowed[module, name] = StorageType(name, d)
    for module in _STORAGE_MODULES:
        allowed[module, "UntypedStorage"] = StorageType("UntypedStorage", dtypes.uint8)
    return allowed


ALLOWED = build_allowed()
_RENAMED_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}  # Python 2 names in protocol-2 files


def find_global(module: str, name: str, source: str):
    module = _RENAMED_MODULES.get(module, module)
    value = ALLOWED.get((module, name))
    if value is not None:
        return value
    if module == "torch" and name in _KNOWN_TORCH_DTYPES:
        raise UnpicklingError(f"{source}: dtype torch.{name} is not supported by ember")
    if module in _STORAGE_MODULES and name.endswith("Storage"):
        raise UnpicklingError(f"{source}: storages of type torch.{name} are not supported by ember")
    raise UnpicklingError(
        f"{source}: the checkpoint refers to the global '{module}.{name}', which ember.load does not allow "
        "(checkpoints may hold only tensors, dtypes, numbers, strings and containers); nothing was executed"
    )


def build(inst, state) -> None:
    """BUILD: only the attribute dict of an OrderedDict (a state dict's ``_metadata``)."""
    if type(inst) not in (OrderedDict, Counter):
        raise UnpicklingError(f"BUILD on a {type(inst).__name__} is not allowed")
    _set_attributes(inst, state)

