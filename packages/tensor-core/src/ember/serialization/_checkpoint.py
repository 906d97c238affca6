"""``ember.save`` / ``ember.load``: PyTorch's checkpoint format, without running pickled code.

``save`` writes what ``torch.save`` writes (a zip with ``data.pkl`` and one raw record per
storage), so ``torch.load(f, weights_only=True)`` reads it; ``load`` reads ``torch.save`` files
with ember's own opcode interpreter and allow-list (``_pickle_reader``, ``_torch_globals``).
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import warnings
from collections import OrderedDict

from ember._src.dispatch import sync_pending

from .._src import dtypes
from .._src._native import _C
from .._src.device import device
from .._src.layouts import layout as _layout
from .._src.shapes import Size
from .._src.storage import TypedStorage
from .._src.tensor import Tensor
from . import _safe_globals
from . import _torch_globals as torch_globals
from ._atomic import atomic_write
from ._errors import CallerError, UnpicklingError, describe
from ._fixups import byteswap, normalize_bools
from ._pickle_reader import Constructor, SafeUnpickler
from ._pickle_writer import Global, Persistent, Pickler, Reduce
from ._zipfile_format import ZipReader, ZipWriter

_FORMAT_VERSION = b"3\n"  # the `version` record torch.save writes


def _is_path(f) -> bool:
    return isinstance(f, (str, bytes)) or hasattr(f, "__fspath__")


# -- save -----------------------------------------------------------------------------------------

class _SaveHook:
    """Turns tensors, dtypes, sizes and devices into the reductions torch.save writes."""

    def __init__(self):
        self.storages: dict[int, tuple[str, object, object]] = {}

    def __call__(self, obj):
        if isinstance(obj, Tensor) and obj._layout.dispatch_key is not None:
            return self._sparse(obj)
        if isinstance(obj, Tensor):
            # Python attributes set on a tensor travel with it, as torch.save keeps them.
            state = dict(vars(obj)) or None
            if type(obj) is Tensor:
                if state is None:
                    return self._tensor(obj)
                return Reduce(Global("torch._tensor", "_rebuild_from_type_v2"),
                              (Global("torch._utils", "_rebuild_tensor_v2"), Global("torch", "Tensor"),
                               self._tensor(obj).args, state))
            if type(obj).__name__ == "Parameter":  # ember.nn.Parameter (a package above the core)
                # As torch does: the data is saved without requires_grad, the parameter carries it.
                args = (self._tensor(obj, requires_grad=False), obj.requires_grad, OrderedDict())
                if state is None:
                    return Reduce(Global("torch._utils", "_rebuild_parameter"), args)
                return Reduce(Global("torch._utils", "_rebuild_parameter_with_state"), args + (state,))
            return None
        if isinstance(obj, _C.Storage):  # torch.save(t.untyped_storage()): the record itself
            return self._storage_record(obj, dtypes.uint8, "UntypedStorage")
        if isinstance(obj, TypedStorage):
            return self._storage_record(obj._untyped_storage, obj.dtype, torch_globals.STORAGE_NAMES[obj.dtype])
        if isinstance(obj, dtypes.dtype):
            return Global("torch", obj.name)
        if type(obj) is Size:
            return Reduce(Global("torch", "Size"), (tuple(obj),))
        if type(obj) is device:
            return Reduce(Global("torch", "device"), (obj.type,) if obj.index is None else (obj.type, obj.index))
        if type(obj) is _layout:  # as torch.save writes a layout (its weights-only load allows it)
            return Reduce(Global("torch.serialization", "_get_layout"), (repr(obj),))
        return None

    def _sparse(self, t: Tensor) -> Reduce:
        """torch.save's record of a sparse tensor: _rebuild_sparse_tensor(layout, members)."""
        layout = Reduce(Global("torch.serialization", "_get_layout"), (repr(t._layout),))
        size = Reduce(Global("torch", "Size"), (tuple(t._shape),))
        if t._layout.name == "sparse_coo":
            members = (t._sp_indices, t._sp_values, size, t._coalesced)
        else:
            members = (t._compressed, t._plain, t._sp_values, size)
        return Reduce(Global("torch._utils", "_rebuild_sparse_tensor"), (layout, members))

    def _tensor(self, t: Tensor, requires_grad: bool | None = None) -> Reduce:
        if t._device.type == "meta":
            raise RuntimeError("ember.save cannot save a tensor on the meta device: it has no data")
        if t._device.type != "cpu":
            t = t.cpu()
        pid = self._storage_record(t._storage, t.dtype, torch_globals.STORAGE_NAMES[t.dtype])
        if requires_grad is None:
            requires_grad = t._requires_grad
        return Reduce(Global("torch._utils", "_rebuild_tensor_v2"),
                      (pid, t._offset, tuple(t._shape), tuple(t._stride), requires_grad, OrderedDict()))

    def _storage_record(self, storage, dtype, type_name: str) -> Persistent:
        """The persistent id torch.save writes for a storage (its bytes are written once per file)."""
        if getattr(storage, "device_type", "cpu") == "meta":
            raise RuntimeError("ember.save cannot save a storage on the meta device: it has no data")
        entry = self.storages.get(id(storage))
        if entry is None:
            entry = (str(len(self.storages)), storage, dtype)
            self.storages[id(storage)] = entry
        elif entry[2] is not dtype:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same data as different types")
        numel = storage.nbytes() // dtype.itemsize
        return Persistent(("storage", Global("torch", type_name), entry[0], "cpu", numel))


def _write_archive(f, archive: str, data_pkl: bytes, storages, byteorder_record: bool, force_zip64=False):
    writer = ZipWriter(f, archive, force_zip64=force_zip64)
    writer.write_record("data.pkl", data_pkl)
    writer.write_record(".format_version", b"1")
    writer.write_record(".storage_alignment", b"64")
    if byteorder_record:
        writer.write_record("byteorder", sys.byteorder.encode("ascii"))
    for key, storage, dtype in storages:
        nbytes = storage.nbytes() // dtype.itemsize * dtype.itemsize
        writer.write_record(f"data/{key}", memoryview(storage)[:nbytes])
    writer.write_record("version", _FORMAT_VERSION)
    writer.close()


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False) -> None:
    """Saves ``obj`` to ``f`` (a path or a binary file object) in PyTorch's checkpoint format.

    Tensors, ``ember.nn.Parameter``, dtypes, ``ember.Size`` and devices are written as torch.save
    writes them, so ``torch.load(weights_only=True)`` reads a file of those, numbers, strings and
    containers. Any other object (a whole module, a NumPy array) is pickled by its own reduction,
    as torch.save does; loading it needs ``weights_only=False``. The pickle is always protocol 2
    and written by ember's own pickler, so ``pickle_module`` must be left unset.
    Saving to a path is atomic: a temporary file in the same folder replaces ``f`` only once
    it is complete and synced, so a failure leaves any previous file intact.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("ember.save writes checkpoints with its own pickler; pickle_module is not supported")
    if not isinstance(pickle_protocol, int) or isinstance(pickle_protocol, bool):
        raise TypeError(f"pickle_protocol must be an int, got {type(pickle_protocol).__name__}")
    if not _use_new_zipfile_serialization:
        raise RuntimeError("ember.save writes only the zip checkpoint format (_use_new_zipfile_serialization=True)")
    sync_pending(None, "ember.save")  # a lazy tracer's pending tensors get their values first
    hook = _SaveHook()
    # Tensors, dtypes, sizes and devices as torch.save writes them; any other object (a whole
    # module, a NumPy array) pickled by its own reduction, as torch.save does. Errors surface
    # here, before f is touched.
    data_pkl = Pickler(hook, any_object=True).dumps(obj)
    storages = list(hook.storages.values())
    if _is_path(f):
        parent = os.path.dirname(os.path.abspath(os.fsdecode(os.fspath(f))))
        if not os.path.isdir(parent):  # PyTorch's check (its zip writer's), before anything is written
            raise RuntimeError(f"Parent directory {os.path.dirname(os.fsdecode(os.fspath(f)))} does not exist.")
        name = os.path.splitext(os.path.basename(os.fsdecode(os.fspath(f))))[0]
        name = name if name.isascii() and name.isprintable() and name else "archive"
        with atomic_write(f) as out:
            _write_archive(out, name, data_pkl, storages, not _disable_byteorder_record)
    elif hasattr(f, "write"):
        _write_archive(f, "archive", data_pkl, storages, not _disable_byteorder_record)
    else:
        raise AttributeError("expected 'f' to be string, path, or a file-like object with a 'write' attribute")


# -- load -----------------------------------------------------------------------------------------

class _LoadPolicy:
    """What the unpickler may do with a checkpoint: allow-listed globals and its storage records."""

    def __init__(self, reader: ZipReader, source: str, map_location, swap_bytes: bool):
        self._reader = reader
        self._source = source
        self._map_location = map_location
        self._swap_bytes = swap_bytes
        self._storages: dict[str, object] = {}
        self._dtypes: dict[str, object] = {}

    def find_global(self, module: str, name: str):
        user = _safe_globals.user_global(module, name)
        if user is not None:
            return user
        try:
            return torch_globals.find_global(module, name, self._source)
        except UnpicklingError as exc:
            raise UnpicklingError(f"{exc}. Weights only load failed: a global the checkpoint names may be "
                                  f"allowed with ember.serialization.add_safe_globals([{module}.{name}]) or "
                                  "the safe_globals context manager, or loaded with weights_only=False if "
                                  "the file is trusted (that runs code from it)") from None

    def constructor_for(self, obj):
        return _safe_globals.user_constructor(obj)

    def build(self, inst, state) -> None:
        if _safe_globals.is_user_class_instance(inst):
            _safe_globals.build_user_instance(inst, state)
            return
        torch_globals.build(inst, state)

    def persistent_load(self, pid):
        if type(pid) is not tuple or len(pid) != 5 or pid[0] not in ("storage", b"storage"):
            raise UnpicklingError(f"only storage records may be loaded by persistent id, got {pid!r:.80}")
        _, storage_type, key, location, numel = pid
        key, location = _text(key), _text(location)
        if not isinstance(storage_type, torch_globals.StorageType) or type(numel) is not int or numel < 0:
            raise UnpicklingError(f"malformed storage reference {pid!r:.120}")
        dtype = storage_type.dtype
        nbytes = numel * dtype.itemsize
        storage = self._storages.get(key)
        seen_as = self._dtypes.setdefault(key, dtype)
        if seen_as is not dtype:
            # torch.save never writes one storage under two dtypes; reinterpreting the bytes would
            # give e.g. bool tensors holding 2 or 255.
            raise UnpicklingError(f"storage '{key}' is referenced as both {seen_as} and {dtype}")
        if storage is None:
            storage = self._reader.read_storage(f"data/{key}", nbytes)
            if self._swap_bytes and dtype.itemsize > 1:
                # A complex number is two floats: each part is swapped on its own.
                byteswap(storage, dtype.itemsize // 2 if dtype.is_complex else dtype.itemsize)
            if dtype is dtypes.bool:
                normalize_bools(storage)
            storage = self._place(storage, location, nbytes)
            self._storages[key] = storage
        elif storage.nbytes() < nbytes:
            raise UnpicklingError(f"storage '{key}' is referenced with {nbytes} bytes but holds {storage.nbytes()}")
        return torch_globals.LoadedStorage(storage, dtype, storage_type.name != "UntypedStorage")

    def _place(self, storage, location: str, nbytes: int):
        try:
            return self._map(storage, location, nbytes)
        except (TypeError, RuntimeError, ValueError) as exc:  # map_location is the caller's, not the file's
            raise CallerError(exc) from exc

    def _map(self, storage, location: str, nbytes: int):
        ml = self._map_location
        target = None  # a device map_location asks for explicitly
        if isinstance(ml, dict):
            target = ml.get(location)
        elif isinstance(ml, (str, device)):
            target = ml
        elif callable(ml):
            result = ml(storage, location)
            if isinstance(result, _C.Storage):
                if result.nbytes() < nbytes or result.device_type != "cpu":
                    raise RuntimeError("map_location returned a storage that is too small or not on the CPU")
                return result
            if result is not None:
                raise TypeError(f"map_location returned a {type(result).__name__}, expected a storage or None")
        tag = location if target is None else target
        if isinstance(tag, str):
            try:
                device(tag)
            except RuntimeError:  # PyTorch's restore-location text, whether the tag is the file's or the caller's
                raise RuntimeError(f"don't know how to restore data location of torch.storage.UntypedStorage "
                                   f"(tagged with {tag})") from None
        if target is None:
            pass  # storages saved on an accelerator load on the CPU
        elif device(target).type != "cpu":
            raise RuntimeError(f"ember.load places tensors on the CPU, but map_location asked for {device(target)}")
        return storage


def _text(value) -> str:
    if type(value) is bytes:
        value = value.decode("ascii")
    if type(value) is not str:
        raise UnpicklingError(f"storage key/location must be a str, got {type(value).__name__}")
    return value


def _weights_only(value) -> bool:
    # None means PyTorch's default (True), which TORCH_FORCE_WEIGHTS_ONLY_LOAD-style switches keep.
    return True if value is None else bool(value)


class _FullUnpickler(pickle.Unpickler):
    """``weights_only=False``: Python's unpickler, which runs what the file names (trusted files
    only, as in PyTorch). torch's rebuild functions and types map to ember's; other ``torch.*``
    globals are looked up as ``ember.*``; storages come from the archive's records."""

    def __init__(self, data: bytes, policy: _LoadPolicy, encoding: str, errors: str):
        super().__init__(io.BytesIO(data), encoding=encoding, errors=errors)
        self._policy = policy

    def find_class(self, module: str, name: str):
        try:
            value = torch_globals.find_global(module, name, self._policy._source)
        except UnpicklingError:
            value = None
        if value is not None:
            if isinstance(value, Constructor):
                return value.call
            return value
        if module == "torch" or module.startswith("torch."):
            try:
                return super().find_class("ember" + module[len("torch"):], name)
            except (ImportError, AttributeError):
                pass
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._policy.persistent_load(pid)


def _resolve_weights_only(weights_only, pickle_module) -> bool:
    """PyTorch's rule: unset means True unless a pickle_module is given; TORCH_FORCE_WEIGHTS_ONLY_LOAD
    forces True, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD forces False where the caller left it unset."""
    not_set = weights_only is None
    if not_set:
        weights_only = pickle_module is None
    truthy = ("1", "y", "yes", "true")
    force = os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in truthy
    force_no = os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in truthy
    if force and force_no:
        raise RuntimeError("Only one of `TORCH_FORCE_WEIGHTS_ONLY_LOAD` or `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD` "
                           "should be set, but both were set.")
    if force:
        return True
    if force_no and not_set:
        warnings.warn("Environment variable TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected, since the`weights_only` "
                      "argument was not explicitly passed to `torch.load`, forcing weights_only=False.",
                      UserWarning, stacklevel=3)
        return False
    return bool(weights_only)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Loads an object saved by ``ember.save`` or ``torch.save`` (the zip format).

    With ``weights_only=True`` (the default, as in PyTorch) ember interprets the pickle itself and
    never imports or calls anything a file names beyond its allow-list: tensors, dtypes, sizes,
    devices, numbers, strings, bytes and containers, plus the globals the user allowed with
    ``ember.serialization.add_safe_globals``/``safe_globals``; any other global is an
    ``UnpicklingError`` naming it. ``weights_only=False`` runs Python's unpickler, which executes
    what the file names: for trusted files only (whole modules, NumPy arrays). Tensors are loaded
    on the CPU and own their memory (``mmap=True`` maps a file path copy-on-write instead).
    """
    weights_only = _resolve_weights_only(weights_only, pickle_module)
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is specified")
    if pickle_module is not None and pickle_module is not pickle:
        raise RuntimeError("ember.load reads checkpoints with its own safe unpickler; pickle_module is not supported")
    encoding = pickle_load_args.pop("encoding", "utf-8")
    errors = pickle_load_args.pop("errors", "strict")
    if pickle_load_args:
        raise TypeError(f"ember.load got unexpected keyword arguments {sorted(pickle_load_args)}")
    if mmap and not _is_path(f):
        raise ValueError("f must be a file path in order to use the mmap argument")
    if map_location is not None and not isinstance(map_location, (str, device, dict)) and not callable(map_location):
        raise TypeError(f"map_location must be None, a str, a device, a dict or a callable, got {type(map_location)}")
    source = describe(f)
    if _is_path(f):
        with open(f, "rb") as fh:
            return _load_from(fh, source, map_location, encoding, errors, bool(mmap), _weights_only(weights_only))
    if not hasattr(f, "read"):
        raise AttributeError(f"ember.load expects a path or a readable binary file, got {type(f).__name__}")
    seekable = getattr(f, "seekable", None)
    if not hasattr(f, "seek") or (seekable is not None and not seekable()):
        f = io.BytesIO(f.read())  # a zip is read from its end: a pipe is buffered first
    return _load_from(f, source, map_location, encoding, errors, False, _weights_only(weights_only))


def _load_from(fh, source: str, map_location, encoding: str, errors: str, use_mmap: bool, weights_only: bool):
    reader = ZipReader(fh, source, use_mmap=use_mmap)
    try:
        swap = False
        if reader.has_record("byteorder"):
            order = reader.read("byteorder")
            if order not in (b"little", b"big"):
                raise RuntimeError(f"{source}: unknown byteorder record {order[:16]!r}")
            swap = order.decode() != sys.byteorder
        policy = _LoadPolicy(reader, source, map_location, swap)
        data = reader.read("data.pkl")
        if not weights_only:
            result = _FullUnpickler(data, policy, encoding, errors).load()
            return result.as_result() if isinstance(result, torch_globals.LoadedStorage) else result
        try:
            result = SafeUnpickler(data, policy, source, encoding, errors).load()
        except UnpicklingError as exc:
            if str(exc).startswith(source):
                raise
            raise UnpicklingError(f"{source}: {exc}") from exc
        # torch.save(tensor.untyped_storage()): the storage itself, as Tensor.untyped_storage() gives it.
        return result.as_result() if isinstance(result, torch_globals.LoadedStorage) else result
    finally:
        reader.close()
