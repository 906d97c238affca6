"""A small protocol-2 pickler for checkpoint data: containers, numbers, strings, and hooks.

It writes only opcodes that PyTorch's ``weights_only`` unpickler understands, so files load in
``torch.load(weights_only=True)``. Built-in values are written directly; every other object is
handed to a ``hook`` which answers with a ``Reduce`` (an allow-listed global called with
arguments), a ``Global`` (a named value such as ``torch.float32``) or ``None`` -- and ``None``
is a ``TypeError`` naming the type: no object ever chooses how it is pickled.
"""

from __future__ import annotations

import copyreg
import pickle
import struct
import sys
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

_BATCHSIZE = 1000  # items per APPENDS/SETITEMS, as the standard pickler batches them


class Global:
    """``module.name`` written as a GLOBAL opcode (e.g. ``torch.FloatStorage``)."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str):
        self.module = module
        self.name = name


class Reduce:
    """``func(*args)`` on load, then ``BUILD`` with ``state`` when it is given."""

    __slots__ = ("func", "args", "state")

    def __init__(self, func: Global, args: tuple, state: Any = None):
        self.func = func
        self.args = args
        self.state = state


class Persistent:
    """A persistent id (``BINPERSID``): the loader resolves it, e.g. to a storage record."""

    __slots__ = ("pid",)

    def __init__(self, pid: tuple):
        self.pid = pid


def encode_long(x: int) -> bytes:
    """Two's-complement little-endian bytes, as short as possible (the LONG1 payload)."""
    if x == 0:
        return b""
    nbytes = (x.bit_length() >> 3) + 1
    out = x.to_bytes(nbytes, "little", signed=True)
    if x < 0 and nbytes > 1 and out[-1] == 0xFF and out[-2] & 0x80:
        out = out[:-1]
    return out


class Pickler:
    """``Pickler(hook).dumps(obj)`` -> protocol-2 pickle bytes.

    With ``any_object=True`` an object the hook does not know is written the way the standard
    pickler writes it (its ``__reduce_ex__(2)``: classes and functions by name, NEWOBJ/REDUCE,
    then its state), as ``torch.save`` pickles whole modules or NumPy arrays; loading such a
    file needs ``weights_only=False``.
    """

    def __init__(self, hook: Callable[[Any], Reduce | Global | Persistent | None], any_object: bool = False):
        self._hook = hook
        self._any_object = any_object
        self._out: list[bytes] = []
        self._memo: dict[int, int] = {}
        self._globals: dict[tuple[str, str], int] = {}
        self._alive: list = []  # keeps memoized objects alive so their ids stay unique
        self._open_tuples: set[int] = set()

    def dumps(self, obj) -> bytes:
        self._out.append(b"\x80\x02")
        self._save(obj)
        self._out.append(b".")
        return b"".join(self._out)

    # -- memo -----------------------------------------------------------------------------------
    def _put(self, obj) -> None:
        idx = len(self._memo) + len(self._globals)
        self._memo[id(obj)] = idx
        self._alive.append(obj)
        self._write_put(idx)

    def _write_put(self, idx: int) -> None:
        self._out.append(b"q" + bytes([idx]) if idx < 256 else b"r" + struct.pack("<I", idx))

    def _write_get(self, idx: int) -> None:
        self._out.append(b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx))

    # -- dispatch -------------------------------------------------------------------------------
    def _save(self, obj) -> None:
        t = type(obj)
        if obj is None:
            self._out.append(b"N")
        elif t is bool:
            self._out.append(b"\x88" if obj else b"\x89")
        elif t is int:
            self._save_int(obj)
        elif t is float:
            self._out.append(b"G" + struct.pack(">d", obj))
        elif id(obj) in self._memo:
            self._write_get(self._memo[id(obj)])
        elif t is str:
            data = obj.encode("utf-8", "surrogatepass")
            self._out.append(b"X" + struct.pack("<I", len(data)) + data)
            self._put(obj)
        elif t is bytes:
            # Protocol 2 has no bytes opcode: PyTorch (and pickle) write _codecs.encode(text, 'latin1').
            self._save_reduce(Reduce(Global("_codecs", "encode"), (obj.decode("latin1"), "latin1")), obj)
        elif t is tuple:
            self._save_tuple(obj)
        elif t is list:
            self._out.append(b"]")
            self._put(obj)
            self._save_batches(obj, b"a", b"e")
        elif t is dict:
            self._out.append(b"}")
            self._put(obj)
            self._save_batches(obj.items(), b"s", b"u")
        elif t is OrderedDict:
            state = dict(vars(obj)) or None  # e.g. a state dict's ``_metadata``
            self._save_reduce(Reduce(Global("collections", "OrderedDict"), (), state), obj, items=obj.items())
        elif t is Global:
            self._save_global(obj)
        elif t is Reduce:
            self._save_reduce(obj, obj)
        elif t is Persistent:
            self._save(obj.pid)
            self._out.append(b"Q")
        else:
            reduced = self._hook(obj)
            if reduced is None and self._any_object:
                self._save_any(obj)
                return
            if reduced is None:
                raise TypeError(
                    f"ember.save cannot serialize an object of type {t.__module__}.{t.__qualname__}: checkpoints "
                    "hold only tensors, dtypes, None/bool/int/float/str/bytes and tuple/list/dict/OrderedDict "
                    "of them"
                )
            if type(reduced) is Reduce:
                self._save_reduce(reduced, obj)
            else:
                self._save(reduced)

    def _save_any(self, obj) -> None:
        """An arbitrary object, as pickle's protocol 2 writes it."""
        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType)):
            name = getattr(obj, "__qualname__", obj.__name__)
            if "<locals>" in name:  # the C pickler's error for these (PyTorch's save uses it)
                raise AttributeError(f"Can't pickle local object {name!r}")
            module = pickle.whichmodule(obj, name)
            if _lookup(module, name) is not obj:
                raise pickle.PicklingError(f"Can't pickle {obj!r}: attribute lookup {name} on {module} failed")
            self._save_global(Global(module, name))
            return
        reducer = copyreg.dispatch_table.get(type(obj))
        rv = reducer(obj) if reducer is not None else obj.__reduce_ex__(2)
        if isinstance(rv, str):
            self._save_global(Global(pickle.whichmodule(obj, rv), rv))
            return
        func, args, state, listitems, dictitems = (tuple(rv) + (None,) * 5)[:5]
        if func is copyreg.__newobj__:
            self._save(args[0])
            self._save(tuple(args[1:]))
            self._out.append(b"\x81")  # NEWOBJ
        else:
            self._save(func)
            self._save(tuple(args))
            self._out.append(b"R")
        self._put(obj)
        if listitems is not None:
            self._save_batches(listitems, b"a", b"e")
        if dictitems is not None:
            self._save_batches(dictitems, b"s", b"u")
        if state is not None:
            self._save(state)
            self._out.append(b"b")

    def _save_int(self, x: int) -> None:
        if 0 <= x < 256:
            self._out.append(b"K" + bytes([x]))
        elif 0 <= x < 65536:
            self._out.append(b"M" + struct.pack("<H", x))
        elif -(2**31) <= x < 2**31:
            self._out.append(b"J" + struct.pack("<i", x))
        else:
            data = encode_long(x)
            if len(data) < 256:
                self._out.append(b"\x8a" + bytes([len(data)]) + data)
            else:
                self._out.append(b"\x8b" + struct.pack("<i", len(data)) + data)

    def _save_global(self, g: Global) -> None:
        key = (g.module, g.name)
        if key in self._globals:
            self._write_get(self._globals[key])
            return
        self._out.append(b"c" + f"{g.module}\n{g.name}\n".encode())
        idx = len(self._memo) + len(self._globals)
        self._globals[key] = idx
        self._write_put(idx)

    def _save_tuple(self, obj: tuple) -> None:
        if not obj:
            self._out.append(b")")
            return
        if id(obj) in self._open_tuples:
            raise ValueError("ember.save cannot serialize a tuple that contains itself")
        self._open_tuples.add(id(obj))
        try:
            if len(obj) <= 3:
                for item in obj:
                    self._save(item)
                self._out.append(bytes([0x84 + len(obj)]))  # TUPLE1, TUPLE2, TUPLE3
            else:
                self._out.append(b"(")
                for item in obj:
                    self._save(item)
                self._out.append(b"t")
        finally:
            self._open_tuples.discard(id(obj))
        self._put(obj)

    def _save_reduce(self, r: Reduce, obj, items=None) -> None:
        self._save_global(r.func)
        self._save(r.args)
        self._out.append(b"R")
        self._put(obj)
        if items is not None:
            self._save_batches(items, b"s", b"u")
        if r.state is not None:
            self._save(r.state)
            self._out.append(b"b")

    def _save_batches(self, items, one: bytes, many: bytes) -> None:
        pairs = one == b"s"
        batch: list = []
        for item in items:
            batch.append(item)
            if len(batch) == _BATCHSIZE:
                self._write_batch(batch, one, many, pairs)
                batch = []
        if batch:
            self._write_batch(batch, one, many, pairs)

    def _write_batch(self, batch: list, one: bytes, many: bytes, pairs: bool) -> None:
        if len(batch) > 1:
            self._out.append(b"(")
        for item in batch:
            if pairs:
                self._save(item[0])
                self._save(item[1])
            else:
                self._save(item)
        self._out.append(many if len(batch) > 1 else one)


def _lookup(module: str, qualname: str):
    """The object ``module.qualname`` names, or None."""
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj
