"""A pickle opcode interpreter that never imports or calls anything it was not given.

``pickle.Unpickler`` resolves every GLOBAL with ``importlib`` and REDUCE calls whatever it
found: a checkpoint can run any code. This interpreter instead asks a *policy* for each
global; the policy answers with plain data (a dtype, a storage type) or a ``Constructor``
wrapping one of ember's own functions, and REDUCE/NEWOBJ only ever call a ``Constructor``.
Everything else in the stream is data: containers are built by the interpreter itself, and
only ``list``/``dict``/``set`` instances it made itself can be mutated by APPEND/SETITEM/ADDITEMS.

Every opcode of protocols 0-5 is understood except the extension registry (EXT1/2/4) and
out-of-band buffers (NEXT_BUFFER/READONLY_BUFFER), which checkpoints never use. Each opcode
consumes at least one byte, so a stream of n bytes runs at most n steps: no input can hang it.
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable
from typing import Any, Protocol

from ._errors import CallerError, UnpicklingError

_MAX_PROTOCOL = 5


class Constructor:
    """An allow-listed callable: the only thing REDUCE, NEWOBJ, INST and OBJ may call."""

    __slots__ = ("qualname", "call", "new")

    def __init__(self, qualname: str, call: Callable, new: Callable | None = None):
        self.qualname = qualname
        self.call = call
        self.new = new if new is not None else call

    def __repr__(self) -> str:
        return f"<allow-listed global {self.qualname}>"


class Policy(Protocol):
    def find_global(self, module: str, name: str) -> Any: ...

    def persistent_load(self, pid: Any) -> Any: ...

    def build(self, inst: Any, state: Any) -> None: ...

    # optional: ``constructor_for(obj)`` -> a Constructor for a plain global REDUCE may call, or None


class _Mark:
    __slots__ = ()


class SafeUnpickler:
    """``SafeUnpickler(data, policy, source).load()`` -> the object the stream describes."""

    def __init__(self, data, policy: Policy, source: str, encoding: str = "utf-8", errors: str = "strict"):
        self._data = bytes(data)
        self._pos = 0
        self._policy = policy
        self._source = source
        self._encoding = encoding
        self._errors = errors
        self._stack: list = []
        self._metastack: list[list] = []
        self._memo: dict[int, Any] = {}

    # -- raw reads ----------------------------------------------------------------------------
    def _read(self, n: int) -> bytes:
        end = self._pos + n
        if n < 0 or end > len(self._data):
            raise UnpicklingError(f"pickle data was truncated (needed {n} bytes at offset {self._pos})")
        out = self._data[self._pos:end]
        self._pos = end
        return out

    def _readline(self) -> bytes:
        start = self._pos
        nl = self._data.find(b"\n", start)
        if nl < 0:
            raise UnpicklingError(f"pickle data was truncated (no newline after offset {start})")
        self._pos = nl + 1
        return self._data[start:nl]

    def _unpack(self, fmt: str):
        return struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]

    # -- stack helpers ------------------------------------------------------------------------
    def _pop_mark(self) -> list:
        if not self._metastack:
            raise UnpicklingError("could not find MARK")
        items = self._stack
        self._stack = self._metastack.pop()
        return items

    def _top(self):
        if not self._stack:
            raise UnpicklingError("unpickling stack underflow")
        return self._stack[-1]

    def _pop(self):
        if not self._stack:
            raise UnpicklingError("unpickling stack underflow")
        return self._stack.pop()

    def _callable(self, obj, opcode: str) -> Constructor:
        # what REDUCE/NEWOBJ/INST/OBJ may call: a Constructor, or a global the policy allows calling
        if not isinstance(obj, Constructor):
            allow = getattr(self._policy, "constructor_for", None)
            wrapped = allow(obj) if allow is not None else None
            if wrapped is not None:
                return wrapped
        return _constructor(obj, opcode)

    def _memo_get(self, idx: int):
        try:
            return self._memo[idx]
        except KeyError:
            raise UnpicklingError(f"memo key {idx} was never stored") from None

    # -- main loop ----------------------------------------------------------------------------
    def load(self):
        dispatch = _DISPATCH
        while True:
            if self._pos >= len(self._data):
                raise UnpicklingError("pickle data was truncated (no STOP opcode)")
            at = self._pos
            code = self._data[at]
            self._pos += 1
            handler = dispatch.get(code)
            if handler is None:
                raise UnpicklingError(f"invalid or unsupported pickle opcode {bytes([code])!r} at offset {at}")
            try:
                if handler is _STOP:
                    result = self._pop()
                    if self._stack or self._metastack:
                        raise UnpicklingError("pickle stream has leftover items at STOP")
                    return result
                handler(self)
            except UnpicklingError:
                raise
            except CallerError as exc:
                raise exc.error from None
            except Exception as exc:  # a malformed stream: wrong arguments, unhashable keys, bad views ...
                raise UnpicklingError(f"{type(exc).__name__} at pickle offset {at}: {exc}") from exc

    # -- opcodes ------------------------------------------------------------------------------
    def _proto(self):
        proto = self._read(1)[0]
        if proto > _MAX_PROTOCOL:
            raise UnpicklingError(f"unsupported pickle protocol: {proto}")

    def _frame(self):
        size = self._unpack("<Q")
        if size > len(self._data) - self._pos:
            raise UnpicklingError("pickle frame is larger than the data left")

    def _push(self, value):
        self._stack.append(value)

    def _mark(self):
        self._metastack.append(self._stack)
        self._stack = []

    def _global(self):
        module = self._readline().decode("utf-8")
        name = self._readline().decode("utf-8")
        self._push(self._policy.find_global(module, name))

    def _stack_global(self):
        name = self._pop()
        module = self._pop()
        if type(module) is not str or type(name) is not str:
            raise UnpicklingError("STACK_GLOBAL requires str")
        self._push(self._policy.find_global(module, name))

    def _reduce(self):
        args = self._pop()
        func = self._pop()
        func = self._callable(func, "REDUCE")
        if func.qualname in _HASHING_CONSTRUCTORS:
            _check_hash_cost(args)
        self._push(func.call(*_args_tuple(args)))

    def _newobj(self):
        args = self._pop()
        cls = self._pop()
        self._push(self._callable(cls, "NEWOBJ").new(*_args_tuple(args)))

    def _newobj_ex(self):
        kwargs = self._pop()
        args = self._pop()
        cls = self._pop()
        if type(kwargs) is not dict or any(type(k) is not str for k in kwargs):
            raise UnpicklingError("NEWOBJ_EX keyword arguments must be a dict of str")
        self._push(self._callable(cls, "NEWOBJ_EX").new(*_args_tuple(args), **kwargs))

    def _inst(self):
        module = self._readline().decode("ascii")
        name = self._readline().decode("ascii")
        cls = self._policy.find_global(module, name)
        self._push(self._callable(cls, "INST").new(*self._pop_mark()))

    def _obj(self):
        items = self._pop_mark()
        if not items:
            raise UnpicklingError("OBJ without a class")
        self._push(self._callable(items[0], "OBJ").new(*items[1:]))

    def _build(self):
        state = self._pop()
        self._policy.build(self._top(), state)

    def _binpersid(self):
        self._push(self._policy.persistent_load(self._pop()))

    def _persid(self):
        self._push(self._policy.persistent_load(self._readline().decode("ascii")))

    # Containers: only objects of exactly these types may be mutated.
    def _append(self):
        value = self._pop()
        _target(self._top(), list, "APPEND").append(value)

    def _appends(self):
        items = self._pop_mark()
        _target(self._top(), list, "APPENDS").extend(items)

    def _setitem(self):
        value = self._pop()
        key = self._pop()
        _check_hash_cost(key)
        _target(self._top(), dict, "SETITEM")[key] = value

    def _setitems(self):
        items = self._pop_mark()
        if len(items) % 2:
            raise UnpicklingError("SETITEMS with an odd number of items")
        target = _target(self._top(), dict, "SETITEMS")
        _check_hash_cost(items[0::2])
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def _additems(self):
        items = self._pop_mark()
        _check_hash_cost(items)
        _target(self._top(), set, "ADDITEMS").update(items)

    def _list(self):
        self._push(self._pop_mark())

    def _dict(self):
        items = self._pop_mark()
        if len(items) % 2:
            raise UnpicklingError("DICT with an odd number of items")
        _check_hash_cost(items[0::2])
        self._push({items[i]: items[i + 1] for i in range(0, len(items), 2)})

    def _tuple(self):
        self._push(tuple(self._pop_mark()))

    def _frozenset(self):
        items = self._pop_mark()
        _check_hash_cost(items)
        self._push(frozenset(items))

    def _pop_op(self):
        if self._stack:
            self._stack.pop()
        else:
            self._pop_mark()

    def _pop_mark_op(self):
        self._pop_mark()

    def _dup(self):
        self._push(self._top())

    # Memo.
    def _put(self):
        self._memo[_parse_int(self._readline())] = self._top()

    def _binput(self):
        self._memo[self._read(1)[0]] = self._top()

    def _long_binput(self):
        self._memo[self._unpack("<I")] = self._top()

    def _memoize(self):
        self._memo[len(self._memo)] = self._top()

    def _get(self):
        self._push(self._memo_get(_parse_int(self._readline())))

    def _binget(self):
        self._push(self._memo_get(self._read(1)[0]))

    def _long_binget(self):
        self._push(self._memo_get(self._unpack("<I")))

    # Scalars.
    def _int(self):
        line = self._readline()  # protocol 0 spells booleans as INT 00 / 01
        self._push(line == b"01" if line in (b"00", b"01") else _parse_int(line))

    def _long(self):
        line = self._readline()
        self._push(_parse_int(line[:-1] if line.endswith(b"L") else line))

    def _float(self):
        self._push(float(self._readline().decode("ascii")))

    def _string(self):
        raw = self._readline()
        if len(raw) < 2 or raw[0] != raw[-1] or raw[:1] not in (b"'", b'"'):
            raise UnpicklingError("the STRING opcode argument must be quoted")
        self._push(self._decode_py2(codecs.escape_decode(raw[1:-1])[0]))

    def _decode_py2(self, data: bytes):
        # Python 2 ``str``: bytes when encoding='bytes', else text (PyTorch loads with utf-8).
        return data if self._encoding == "bytes" else data.decode(self._encoding, self._errors)

    def _unicode(self):
        self._push(self._readline().decode("raw-unicode-escape"))


# Handler factories for opcode families that differ only in a width or a result type.
def _tuple_n(n: int):
    def handler(self):
        if len(self._stack) < n:
            raise UnpicklingError("unpickling stack underflow")
        items = tuple(self._stack[-n:])
        del self._stack[-n:]
        self._push(items)

    return handler


def _long_n(fmt: str):
    def handler(self):
        n = self._unpack(fmt)
        self._push(int.from_bytes(self._read(n), "little", signed=True))

    return handler


def _sized(fmt: str, kind: str):
    def handler(self):
        n = self._unpack(fmt)
        raw = self._read(n)
        if kind == "str":
            self._push(raw.decode("utf-8", "surrogatepass"))
        elif kind == "py2":
            self._push(self._decode_py2(raw))
        elif kind == "bytearray":
            self._push(bytearray(raw))
        else:
            self._push(raw)

    return handler


def _parse_int(line: bytes) -> int:
    return int(line.decode("ascii"))


# Allow-listed callables that hash what they are given (set items, dict keys).
_HASHING_CONSTRUCTORS = frozenset({"builtins.set", "builtins.frozenset", "collections.OrderedDict",
                                   "collections.Counter"})
_HASH_BUDGET = 1_000_000


def _check_hash_cost(obj) -> None:
    """Bounds the work of hashing ``obj``: a tuple's hash is not cached, so a few hundred tuples
    that each hold the previous one twice (a 2 KB pickle, through the memo) would take 2**n steps
    to hash as a set item or dict key. Counts the tuple nodes hashing visits, shared ones each
    time, and refuses the file past a million."""
    stack = [obj]
    seen = 0
    while stack:
        item = stack.pop()
        if type(item) in (tuple, list, frozenset, set):
            seen += len(item) + 1
            if seen > _HASH_BUDGET:
                raise UnpicklingError("the checkpoint builds nested tuples too large to hash (over a million "
                                      "shared members); refusing to load it")
            stack.extend(item)


def _constructor(obj, opcode: str) -> Constructor:
    if not isinstance(obj, Constructor):
        raise UnpicklingError(f"{opcode} may only call an allow-listed global, got a {type(obj).__name__}")
    return obj


def _args_tuple(args) -> tuple:
    if type(args) is not tuple:
        raise UnpicklingError(f"call arguments must be a tuple, got {type(args).__name__}")
    return args


def _target(obj, kind: type, opcode: str):
    # Subclasses (OrderedDict, Counter) are dicts ember made itself; anything else is refused.
    if not isinstance(obj, kind) or type(obj).__module__ not in ("builtins", "collections"):
        raise UnpicklingError(f"{opcode} on a {type(obj).__name__} is not allowed")
    return obj


def _STOP(self):  # noqa: N802 - a marker; load() handles STOP itself
    raise AssertionError


S = SafeUnpickler
_DISPATCH: dict[int, Callable] = {
    ord(k): v for k, v in {
        b"\x80": S._proto, b"\x95": S._frame, b".": _STOP, b"(": S._mark,
        b"c": S._global, b"\x93": S._stack_global, b"R": S._reduce, b"\x81": S._newobj, b"\x92": S._newobj_ex,
        b"i": S._inst, b"o": S._obj, b"b": S._build, b"Q": S._binpersid, b"P": S._persid,
        b"a": S._append, b"e": S._appends, b"s": S._setitem, b"u": S._setitems, b"\x90": S._additems,
        b"l": S._list, b"d": S._dict, b"t": S._tuple, b"\x85": _tuple_n(1), b"\x86": _tuple_n(2),
        b"\x87": _tuple_n(3), b"\x91": S._frozenset,
        b"]": lambda self: self._push([]), b"}": lambda self: self._push({}), b")": lambda self: self._push(()),
        b"\x8f": lambda self: self._push(set()),
        b"0": S._pop_op, b"1": S._pop_mark_op, b"2": S._dup,
        b"p": S._put, b"q": S._binput, b"r": S._long_binput, b"\x94": S._memoize,
        b"g": S._get, b"h": S._binget, b"j": S._long_binget,
        b"N": lambda self: self._push(None), b"\x88": lambda self: self._push(True),
        b"\x89": lambda self: self._push(False),
        b"I": S._int, b"L": S._long, b"F": S._float,
        b"J": lambda self: self._push(self._unpack("<i")), b"K": lambda self: self._push(self._read(1)[0]),
        b"M": lambda self: self._push(self._unpack("<H")), b"G": lambda self: self._push(self._unpack(">d")),
        b"\x8a": _long_n("<B"), b"\x8b": _long_n("<i"),
        b"S": S._string, b"V": S._unicode,
        b"T": _sized("<i", "py2"), b"U": _sized("<B", "py2"),
        b"X": _sized("<I", "str"), b"\x8c": _sized("<B", "str"), b"\x8d": _sized("<Q", "str"),
        b"B": _sized("<I", "bytes"), b"C": _sized("<B", "bytes"), b"\x8e": _sized("<Q", "bytes"),
        b"\x96": _sized("<Q", "bytearray"),
    }.items()
}
del S
