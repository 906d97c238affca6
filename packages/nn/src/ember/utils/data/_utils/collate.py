"""``default_collate`` / ``default_convert``: samples to batched tensors, as ``torch.utils.data``.

``collate(batch, collate_fn_map=...)`` walks containers (mappings, namedtuples, sequences)
and hands leaves to the function registered for their type; ``default_collate_fn_map``
holds the defaults (tensors stacked, NumPy arrays and scalars converted, Python floats to
float64, ints/bools to int64/bool tensors, strings and bytes kept as lists).
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
import re

import ember

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]

# NumPy dtype kinds a tensor cannot hold: byte/unicode strings and objects.
_NP_STR_OBJ = re.compile(r"[SaUO]")

_ERR_FORMAT = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _rebuild_mapping(data, values: dict):
    """``values`` in the container type of ``data`` (a plain dict when that type won't take them)."""
    try:
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update(values)
            return clone
        return type(data)(values)
    except TypeError:
        return values


def _rebuild_sequence(data, values: list):
    try:
        if isinstance(data, collections.abc.MutableSequence):
            clone = copy.copy(data)
            for i, v in enumerate(values):
                clone[i] = v
            return clone
        return type(data)(values)
    except TypeError:
        return values


def default_convert(data):
    """Converts NumPy arrays and scalars (also inside containers) to tensors; leaves the rest.

    The DataLoader's collate_fn when auto-batching is off (``batch_size=None``).
    """
    elem_type = type(data)
    if isinstance(data, ember.Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if elem_type.__name__ == "ndarray" and _NP_STR_OBJ.search(data.dtype.str) is not None:
            return data
        return ember.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as PyTorch (backwards compatibility)
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch, *, collate_fn_map=None):
    """Collates a list of samples; leaves go to ``collate_fn_map`` (exact type first, then isinstance)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type, fn in collate_fn_map.items():
            if isinstance(elem, collate_type):
                return fn(batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        values = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
        return _rebuild_mapping(elem, values)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns  # a list, as PyTorch (backwards compatibility)
        return _rebuild_sequence(elem, columns)
    raise TypeError(_ERR_FORMAT.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    # PyTorch stacks into shared memory inside workers; here the result is pickled to the
    # main process anyway, so a plain stack is enough.
    return ember.stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if _NP_STR_OBJ.search(elem.dtype.str) is not None:
        raise TypeError(_ERR_FORMAT.format(elem.dtype))
    return collate([ember.as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return ember.as_tensor(list(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    return ember.tensor(list(batch), dtype=ember.float64)


def collate_int_fn(batch, *, collate_fn_map=None):
    return ember.tensor(list(batch))


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map: dict = {ember.Tensor: collate_tensor_fn}
with contextlib.suppress(ImportError):
    import numpy as np

    default_collate_fn_map[np.ndarray] = collate_numpy_array_fn
    # np.bool_ and np.number scalars; np.object_ never reaches here as a scalar type.
    default_collate_fn_map[(np.bool_, np.number, np.object_)] = collate_numpy_scalar_fn
default_collate_fn_map[float] = collate_float_fn
default_collate_fn_map[int] = collate_int_fn
default_collate_fn_map[str] = collate_str_fn
default_collate_fn_map[bytes] = collate_str_fn


def default_collate(batch):
    """Puts each leaf of a list of samples into a tensor with a new leading batch dimension.

    Tensors are stacked, NumPy arrays/scalars and Python numbers become tensors (floats as
    float64, ints as int64, bools as bool), strings/bytes stay a list, and mappings,
    namedtuples and sequences are collated field by field (tuples come back as lists).
    Sequences of unequal lengths raise RuntimeError.
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
