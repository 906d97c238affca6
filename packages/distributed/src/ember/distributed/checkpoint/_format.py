"""What a checkpoint holds: flattened state-dict paths, tensor pieces, and the JSON metadata.

A nested state dict (an optimizer's ``{"state": {...}, "param_groups": [...]}``) is flattened
into leaves keyed by their path, written as a JSON list (``["state", "fc.weight", "exp_avg"]``)
so that dotted module names stay unambiguous. Tensor leaves are stored as pieces: global
offsets and sizes, the file and byte range holding the piece (C order, little endian). Other
leaves (numbers, strings, lists of them) are stored in the metadata as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

import ember

FORMAT = "ember-dcp"
VERSION = 1

# dtypes NumPy cannot hold are stored through an integer view of the same width.
_BIT_VIEWS = {"bfloat16": ("int16", np.int16)}


def dtype_name(dtype) -> str:
    return str(dtype).split(".")[-1]


def to_bytes(t) -> bytes:
    t = t.detach().contiguous()
    name = dtype_name(t.dtype)
    if name in _BIT_VIEWS:
        t = t.view(getattr(ember, _BIT_VIEWS[name][0]))
    return np.ascontiguousarray(t.numpy()).astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()


def from_bytes(data: bytes, name: str, sizes) -> ember.Tensor:
    if name in _BIT_VIEWS:
        array = np.frombuffer(data, dtype=np.dtype(_BIT_VIEWS[name][1]).newbyteorder("<")).astype(_BIT_VIEWS[name][1])
        return ember.from_numpy(array.reshape(sizes).copy()).view(getattr(ember, name))
    dtype = getattr(ember, name, None)
    if not isinstance(dtype, ember.dtype):
        raise ValueError(f"checkpoint: unknown dtype '{name}'")
    np_dtype = ember.empty(0, dtype=dtype).numpy().dtype
    array = np.frombuffer(data, dtype=np_dtype.newbyteorder("<")).astype(np_dtype)
    return ember.from_numpy(array.reshape(sizes).copy())


@dataclass
class Piece:
    offsets: list
    sizes: list
    file: str
    start: int
    nbytes: int


@dataclass
class TensorEntry:
    shape: list
    dtype: str
    pieces: list = field(default_factory=list)


@dataclass
class Metadata:
    """The checkpoint's table of contents (``state_dict_metadata`` as PyTorch names it)."""

    state_dict_metadata: dict = field(default_factory=dict)  # path -> TensorEntry or {"value": ...}

    def to_json(self) -> str:
        entries = {}
        for key, entry in self.state_dict_metadata.items():
            if isinstance(entry, TensorEntry):
                entries[key] = {"tensor": {"shape": entry.shape, "dtype": entry.dtype,
                                           "pieces": [vars(p) for p in entry.pieces]}}
            else:
                entries[key] = {"value": entry["value"]}
        return json.dumps({"format": FORMAT, "version": VERSION, "entries": entries})

    @staticmethod
    def from_json(text: str) -> Metadata:
        data = json.loads(text)
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(f"not an ember checkpoint (format {data.get('format')!r}, "
                             f"version {data.get('version')!r})")
        meta = Metadata()
        for key, entry in data["entries"].items():
            if "tensor" in entry:
                t = entry["tensor"]
                meta.state_dict_metadata[key] = TensorEntry(t["shape"], t["dtype"], [Piece(**p) for p in t["pieces"]])
            else:
                meta.state_dict_metadata[key] = {"value": entry["value"]}
        return meta


def flatten(state, prefix=()):
    """[(path tuple, leaf)] of a nested dict/list state; tensors and plain values are leaves."""
    if isinstance(state, dict) and not isinstance(state, ember.Tensor):
        out = []
        for k, v in state.items():
            out.extend(flatten(v, (*prefix, k)))
        return out
    if isinstance(state, (list, tuple)) and any(isinstance(v, (ember.Tensor, dict, list, tuple)) for v in state):
        out = []
        for i, v in enumerate(state):
            out.extend(flatten(v, (*prefix, i)))
        return out
    return [(prefix, state)]


def path_key(path) -> str:
    return json.dumps(list(path))


def set_path(state, path, value) -> None:
    for step in path[:-1]:
        state = state[step]
    state[path[-1]] = value


def check_value(key: str, value):
    """A non-tensor leaf must be JSON data (what the metadata can hold without pickling)."""
    try:
        json.dumps(value)
    except TypeError:
        raise TypeError(f"checkpoint: the value at {key} ({type(value).__name__}) is neither a tensor nor JSON "
                        "data; ember's checkpoints hold no pickled objects") from None
    return value
