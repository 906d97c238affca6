"""``ember.types``: the type aliases PyTorch code annotates with (``torch.types``): ``Number``,
``Device``, ``_size``, ``FileLike``, the ``_int``/``_float``/... builtins and ``_TensorOrTensors``.
Aliases only; nothing here is checked at run time."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, TypeAlias

from ember._C import Storage
from ember._src.device import device as _device
from ember._src.dtypes import dtype as _dtype
from ember._src.layouts import layout as _layout
from ember._src.shapes import Size
from ember._src.tensor import Tensor

_bool: TypeAlias = bool
_int: TypeAlias = int
_float: TypeAlias = float
_complex: TypeAlias = complex
_str: TypeAlias = str
_bytes: TypeAlias = bytes

Number: TypeAlias = int | float | bool
_Number = (int, float, bool)  # for isinstance, as PyTorch's
Device: TypeAlias = _device | str | int | None
_size: TypeAlias = Size | list | tuple
_symsize = _size
FileLike: TypeAlias = str | os.PathLike | IO[bytes]
_TensorOrTensors: TypeAlias = Tensor | Sequence[Tensor]
_TensorOrOptionalTensors: TypeAlias = Tensor | Sequence[Tensor | None] | None
# ember's traces keep only sizes symbolic (ember.SymInt, with ember-compile): ints stand for all three
IntLikeType: TypeAlias = int
FloatLikeType: TypeAlias = float
BoolLikeType: TypeAlias = bool

__all__ = ["Device", "FileLike", "Number", "Size", "Storage", "Tensor", "_bool", "_bytes", "_complex", "_device",
           "_dtype", "_float", "_int", "_layout", "_size", "_str"]
