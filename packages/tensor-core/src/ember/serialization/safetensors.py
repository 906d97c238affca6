"""The safetensors format, with the API of ``safetensors.torch``: no pickle at all.

A file is ``<u64 little-endian header length><JSON header><data>``. The header maps each
tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into the data,
which the tensors cover back to back) plus an optional ``"__metadata__"`` of str -> str, and is
padded with spaces to a multiple of 8 bytes. Like the reference writer, tensors are laid out
by dtype (largest alignment first) then name, so every tensor's data is aligned.
"""

from __future__ import annotations

import os
import struct

from .._src import dtypes
from .._src._native import _C
from .._src.device import CPU, device
from .._src.tensor import Tensor, make_tensor
from ._atomic import atomic_write
from ._fixups import normalize_bools

__all__ = ["SafetensorError", "load", "load_file", "save", "save_file"]

_MAX_HEADER = 100_000_000  # the reference reader's limit
_CODES = {
    dtypes.float64: "F64", dtypes.float32: "F32", dtypes.float16: "F16", dtypes.bfloat16: "BF16", dtypes.int64: "I64",
    dtypes.int32: "I32", dtypes.int16: "I16", dtypes.int8: "I8", dtypes.uint8: "U8", dtypes.bool: "BOOL",
}
_DTYPES = {code: d for d, code in _CODES.items()}
# The reference writer orders tensors by its dtype enum, descending: this is that enum's order.
_RANK = {code: i for i, code in enumerate(["BOOL", "U8", "I8", "I16", "F16", "BF16", "I32", "F32", "F64", "I64"])}
_OTHER_CODES = {"F4", "F6_E2M3", "F6_E3M2", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "U16",
                "U32", "U64", "C64"}


class SafetensorError(Exception):
    """A malformed safetensors file (the reference library's exception name)."""


# -- writing ----------------------------------------------------------------------------------------

def _check(tensors, metadata) -> list[tuple[str, Tensor]]:
    if not isinstance(tensors, dict):
        raise TypeError(f"argument 'tensors': expected a dict, got {type(tensors).__name__}")
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"argument 'tensor_dict': '{type(name).__name__}' object is not an instance of 'str'")
        if not isinstance(t, Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected ember.Tensor but received {type(t)}")
        if t.device.type != "cpu":
            raise NotImplementedError(f"tensor `{name}` is on {t.device}: only CPU tensors can be saved")
        if not t.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}` which is not allowed. It either means you "
                "are trying to save tensors which are reference of each other in which case it's recommended to "
                "save only the full tensors, and reslice at load time, or simply call `.contiguous()` on your "
                "tensor to pack it before saving."
            )
    if metadata is not None and (not isinstance(metadata, dict)
                                 or any(type(k) is not str or type(v) is not str for k, v in metadata.items())):
        raise TypeError("argument 'metadata': expected a dict of str to str")
    _check_shared(tensors)
    return sorted(tensors.items(), key=lambda kv: (-_RANK[_CODES[kv[1].dtype]], kv[0]))


def _check_shared(tensors) -> None:
    # Tensors whose bytes overlap would load as separate copies: refuse, as safetensors does.
    spans: dict[int, list[tuple[int, int, str]]] = {}
    for name, t in tensors.items():
        if t.numel():
            start = t.storage_offset() * t.element_size()
            spans.setdefault(id(t.untyped_storage()), []).append((start, start + t.nbytes, name))
    failing = []
    for group in spans.values():
        group.sort()
        for (_, end, a), (start, _, b) in zip(group, group[1:]):
            if start < end:
                failing.append({a, b})
    if failing:
        raise RuntimeError(
            "Some tensors share memory, this will lead to duplicate memory on disk and potential differences when "
            f"loading them again: {failing}. A potential way to correctly save your model is to save each tensor's "
            "`.clone()`."
        )


def _header(items, metadata) -> bytes:
    header: dict = {} if metadata is None else {"__metadata__": metadata}
    offset = 0
    for name, t in items:
        header[name] = {"dtype": _CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    import json  # lazily: `import ember` should not pay for it

    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def _data(t: Tensor) -> memoryview:
    start = t.storage_offset() * t.element_size()
    return memoryview(t.untyped_storage())[start:start + t.nbytes]


def save(tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors`` (contiguous CPU tensors, non-overlapping)."""
    items = _check(tensors, metadata)
    return b"".join([_header(items, metadata)] + [_data(t) for _, t in items])


def save_file(tensors: dict[str, Tensor], filename, metadata: dict[str, str] | None = None) -> None:
    """Writes ``tensors`` to ``filename`` atomically (a synced temporary file, then a rename)."""
    items = _check(tensors, metadata)
    with atomic_write(filename) as f:
        f.write(_header(items, metadata))
        for _, t in items:
            f.write(_data(t))


# -- reading ----------------------------------------------------------------------------------------

def _parse_header(raw: bytes, data_len: int) -> list[tuple[str, object, tuple, int, int]]:
    """Validated entries (name, dtype, shape, begin, end), in data order."""
    import json

    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SafetensorError(f"Error while deserializing: invalid JSON in header: {exc}") from None
    if not isinstance(header, dict):
        raise SafetensorError("Error while deserializing: the header must be a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (not isinstance(metadata, dict)
                                 or any(not isinstance(v, str) for v in metadata.values())):
        raise SafetensorError("Error while deserializing: __metadata__ must map str to str")
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise SafetensorError(f"Error while deserializing: tensor `{name}` is not an object")
        code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if code in _OTHER_CODES:
            raise SafetensorError(f"tensor `{name}` has dtype {code}, which ember does not support")
        if code not in _DTYPES:
            raise SafetensorError(f"Error while deserializing: tensor `{name}` has unknown dtype {code!r:.40}")
        if (not isinstance(shape, list) or any(type(s) is not int or s < 0 for s in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or any(type(o) is not int or o < 0 for o in offsets) or offsets[0] > offsets[1]):
            raise SafetensorError(f"Error while deserializing: invalid shape or data_offsets for tensor `{name}`")
        d = _DTYPES[code]
        n = 1
        for s in shape:
            n *= s
        if n * d.itemsize != offsets[1] - offsets[0]:
            raise SafetensorError("Error while deserializing: invalid shape, data type, or offset for tensor "
                                  f"`{name}`")
        entries.append((name, d, tuple(shape), offsets[0], offsets[1]))
    entries.sort(key=lambda e: (e[3], e[4]))
    end = 0
    for name, _, _, begin, stop in entries:
        if begin != end:  # the tensors must tile the data: no gaps, no overlaps
            raise SafetensorError(f"Error while deserializing: invalid offset for tensor `{name}`")
        end = stop
    if end != data_len:
        raise SafetensorError("Error while deserializing: incomplete metadata, file not fully covered")
    return entries


def _header_length(prefix: bytes, total: int) -> int:
    if len(prefix) < 8:
        raise SafetensorError("Error while deserializing: header too small")
    (n,) = struct.unpack("<Q", prefix)
    if n > _MAX_HEADER:
        raise SafetensorError("Error while deserializing: header too large")
    if 8 + n > total:
        raise SafetensorError("Error while deserializing: invalid header length")
    return n


def _new_tensor(d, shape: tuple, nbytes: int) -> tuple[Tensor, memoryview]:
    storage = _C.Storage.allocate(nbytes)
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return make_tensor(storage, shape, tuple(reversed(strides)), 0, d, CPU), memoryview(storage)


def load(data: bytes) -> dict[str, Tensor]:
    """Tensors from safetensors bytes; each owns a copy of its data."""
    view = memoryview(data).cast("B")
    n = _header_length(bytes(view[:8]), len(view))
    body = view[8 + n:]
    out = {}
    for name, d, shape, begin, end in _parse_header(bytes(view[8:8 + n]), len(body)):
        t, target = _new_tensor(d, shape, end - begin)
        target[:] = body[begin:end]
        if d is dtypes.bool:
            normalize_bools(t.untyped_storage())
        out[name] = t
    return out


def load_file(filename, device: str | int = "cpu") -> dict[str, Tensor]:
    """Tensors from a safetensors file, read straight into their own storages."""
    if _device_type(device) != "cpu":
        raise RuntimeError(f"ember loads safetensors on the CPU, got device={device!r}")
    with open(filename, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        n = _header_length(f.read(8), total)
        entries = _parse_header(f.read(n), total - 8 - n)
        out = {}
        for name, d, shape, begin, end in entries:
            t, target = _new_tensor(d, shape, end - begin)
            f.seek(8 + n + begin)
            if f.readinto(target) != end - begin:
                raise SafetensorError(f"Error while deserializing: file truncated in tensor `{name}`")
            if d is dtypes.bool:
                normalize_bools(t.untyped_storage())
            out[name] = t
    return out


def _device_type(d) -> str:
    if isinstance(d, int) and not isinstance(d, bool):
        return "cuda"
    return device(d).type
