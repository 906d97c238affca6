"""Helpers shared by op families: allocation, dtype conversion, out= handling."""

from __future__ import annotations

from collections import namedtuple

from .. import dispatch as _dispatch
from .. import dtypes, grad_mode
from .._native import _C
from ..device import META, copy_across
from ..shapes import numel, pointwise_strides
from ..tensor import Tensor, make_tensor, new_empty_tensor

HALF_TYPES = (dtypes.float16, dtypes.bfloat16)


def empty(shape: tuple, dtype, device) -> Tensor:
    return new_empty_tensor(shape, dtype, device)


def empty_pointwise(shape: tuple, dtype, device, *args) -> Tensor:
    """A pointwise op's fresh result, laid out after its tensor ``args`` (Note [Pointwise result
    layout], shapes.py): contiguous unless an input is not."""
    operands = [(a._shape, a._stride) for a in args if isinstance(a, Tensor)]
    strides = pointwise_strides(shape, operands) if operands else None
    if strides is None:
        return new_empty_tensor(shape, dtype, device)
    flat = new_empty_tensor((numel(shape),), dtype, device)
    return make_tensor(flat._storage, shape, strides, 0, dtype, flat._device)


def convert(t: Tensor, dtype) -> Tensor:
    """``t`` as ``dtype`` (itself if it already is); a fresh contiguous copy otherwise."""
    if t.dtype is dtype:
        return t
    out = new_empty_tensor(t._shape, dtype, t._device)
    if t._device.type == "cpu":
        _C.copy_(out, t)
    elif t._device is not META:
        copy_across(out, t)
    return out


def compute_dtype(dtype):
    """Kernels compute float16/bfloat16 in float32."""
    return dtypes.float32 if dtype in HALF_TYPES else dtype


def check_same_device(a: Tensor, b: Tensor) -> None:
    if a._device != b._device and a.ndim != 0 and b.ndim != 0:
        raise RuntimeError(
            f"Expected all tensors to be on the same device, but found at least two devices, "
            f"{a._device} and {b._device}!"
        )


def check_meta_operands(*operands) -> None:
    """A pointwise op computing on the meta device refuses another device's tensor, as PyTorch's
    TensorIterator does (a 0-d CPU tensor passes as a number). The compiler's tracers hand every
    operand over as meta, so only a program mixing devices meets this."""
    for t in operands:
        if isinstance(t, Tensor) and t._device is not META and t.ndim != 0:
            raise RuntimeError(f"Tensor on device {t._device} is not on the expected device meta!")


# -- memory overlap (PyTorch's at::has_internal_overlap / get_overlap_status) ----------------------
# Only shape/stride/offset arithmetic: these run on every in-place op.

INTERNAL_OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single memory location. "
    "Please clone() the tensor before performing the operation."
)
PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation."
)


def check_internal_overlap(t: Tensor) -> None:
    """Refuses a write into ``t`` when several of its elements share one memory location (a dim of size > 1
    and stride 0, as after expand). Other self-overlapping layouts (as_strided) are PyTorch's "too hard"
    case: allowed. Empty tensors never overlap."""
    stride = t._stride
    if 0 in stride:
        for size, st in zip(t._shape, stride):
            if st == 0 and size > 1:
                if 0 not in t._shape:
                    raise RuntimeError(INTERNAL_OVERLAP)
                return


def _dense(shape: tuple, stride: tuple) -> bool:
    """PyTorch's is_non_overlapping_and_dense: a permutation of a contiguous layout."""
    if len(shape) == 1:
        return shape[0] < 2 or stride[0] == 1
    expected = 1
    for st, size in sorted((st, size) for size, st in zip(shape, stride) if size >= 2):
        if st != expected:
            return False
        expected *= size
    return True


def _partially_overlaps(out: Tensor, t: Tensor, full_too: bool) -> bool:
    if t is out:
        return full_too
    if t._storage is not out._storage or 0 in out._shape or 0 in t._shape:
        return False
    if not (_dense(out._shape, out._stride) and _dense(t._shape, t._stride)):
        return False  # PyTorch's "too hard" case: allowed
    # Dense layouts cover [offset, offset + numel) exactly; compare byte ranges (views may differ in dtype).
    out_begin, t_begin = out._offset * out.dtype.itemsize, t._offset * t.dtype.itemsize
    out_end, t_end = out_begin + numel(out._shape) * out.dtype.itemsize, t_begin + numel(t._shape) * t.dtype.itemsize
    if out_begin == t_begin and out_end == t_end and out._stride == t._stride:
        return full_too  # the same elements: each is read before it is written
    return out_begin < t_end and t_begin < out_end


def check_partial_overlap(out: Tensor, inputs) -> None:
    """Refuses a write into ``out`` that some input tensor in ``inputs`` (non-tensors are skipped) reads
    through a different view of the same memory; the very same elements (full overlap) are fine."""
    for t in inputs:
        if isinstance(t, Tensor) and t._storage is out._storage and _partially_overlaps(out, t, False):
            raise RuntimeError(PARTIAL_OVERLAP)


def check_no_overlap(out: Tensor, inputs) -> None:
    """As check_partial_overlap, but a full overlap is refused too (PyTorch's cat, index_select, scatter_ ...,
    whose kernels read an input while writing other positions of out)."""
    for t in inputs:
        if isinstance(t, Tensor) and t._storage is out._storage and _partially_overlaps(out, t, True):
            raise RuntimeError(PARTIAL_OVERLAP)


def check_write(out: Tensor, inputs=()) -> None:
    """The checks PyTorch's TensorIterator makes on a written-to tensor: no internal overlap, no partial
    overlap with any input. (Both inlined for the common case: this runs on every in-place op.)"""
    if 0 in out._stride:
        check_internal_overlap(out)
    storage = out._storage
    for t in inputs:
        if t is not out and isinstance(t, Tensor) and t._storage is storage and _partially_overlaps(out, t, False):
            raise RuntimeError(PARTIAL_OVERLAP)


def _out_caller_name(result: Tensor) -> str:
    """The public function an out= call came through (for its error): write_out's caller when that
    is one, else the op named by the result's node (CatBackward0: cat)."""
    import re
    import sys

    import ember

    name = sys._getframe(2).f_code.co_name
    if name.startswith("_") or not callable(getattr(ember, name, None)):
        node = type(result.grad_fn).__name__ if result.grad_fn is not None else name
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", node.rpartition("Backward")[0] or node).lower()
    return name


def fresh_result(result: Tensor) -> Tensor:
    """``result``, which an op allocated and then wrote through in-place ops (a clone then scatter_,
    zeros then a diagonal's copy_ ...), with its version counter back at 0: PyTorch's kernel writes
    its fresh result below the counter, so ``x.scatter(...)._version`` is 0 (in-place writes to it
    later bump it as usual; its views share the new counter)."""
    _C._new_version_counter(result)
    return result


def check_out_dtype(out, dtype, message: str) -> None:
    """PyTorch's check of an op whose out= must have exactly ``dtype`` (no cast), with its message."""
    if isinstance(out, Tensor) and out.dtype is not dtype:
        raise RuntimeError(message)


def write_out(result: Tensor, out: Tensor | None, inputs=(), *, distinct=(), overlap: bool = True,
              warn_resize: bool = True, exact_dtype: bool = False) -> Tensor:
    """Implements ``out=``: checks memory overlap, resizes an empty/mismatched out, checks the dtype cast, copies.

    As PyTorch, out must not overlap itself (expanded) and must not partially overlap any tensor in ``inputs``
    (the op's inputs: a different view of the same memory); tensors in ``distinct`` must not overlap out even
    fully (ops reading an input while writing other positions of out: cat, gather ...). ``overlap=False``
    where PyTorch writes through without checking (most reductions, zeros/full/linspace, tril ...).
    ``warn_resize=False`` where PyTorch resizes a mismatched out silently (the factories: zeros, rand ...).
    ``exact_dtype``: out must have the result's dtype, no cast (PyTorch's structured kernels: argmax,
    sort, topk, max(dim)'s (values, indices), gather ...).
    """
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a Tensor, got {type(out).__name__}")
    if (result._requires_grad or out._requires_grad) and grad_mode.STATE.grad_enabled:
        # The copy into out would have no history: PyTorch refuses out= while recording.
        raise RuntimeError(f"{_out_caller_name(result)}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    if grad_mode.INFERENCE_USED[0] and out._storage.inference and not grad_mode.STATE.inference:
        raise RuntimeError(grad_mode.INFERENCE_INPLACE)
    if overlap and out._device is not META:  # before the dtype check and any resize, as PyTorch's TensorIterator
        check_write(out, inputs)
        if distinct:
            check_no_overlap(out, distinct)
    if exact_dtype and out.dtype is not result.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {type_meta_name(result.dtype)}, but got "
                           f"{type_meta_name(out.dtype)} instead")
    if not dtypes.can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the desired output type "
                           f"{_type_name(out.dtype)}")
    if out._shape != result._shape:
        if warn_resize and numel(out._shape) != 0:
            import warnings

            warnings.warn(
                f"An output with one or more elements was resized since it had shape {list(out._shape)}, "
                f"which does not match the required output shape {list(result._shape)}.",
                UserWarning,
                stacklevel=3,
            )
        fresh = new_empty_tensor(result._shape, out.dtype, out._device)
        _C._keep_version_counter(out)  # out keeps its counter (shared with its views) on the new memory
        out._storage, out._shape, out._stride, out._offset = fresh._storage, fresh._shape, fresh._stride, 0
    if _dispatch._MODES_ENTERED[0] and _dispatch._MODES.stack:
        # A dispatch mode (a tracer) must see the write as an op: result may hold no data yet.
        from .shape.views import copy_inplace_op

        copy_inplace_op(out, result)
        return out
    if out._device.type == "cpu" and result._device.type == "cpu":
        _C.copy_(out, result)
    elif out._device is not META:
        if out._device != result._device:
            raise RuntimeError(f"Expected out tensor to have device {result._device}, but got {out._device} instead")
        copy_across(out, result)  # a plugin device's own copy
    out._bump_version()
    return out


_TYPE_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


def _type_name(d) -> str:
    """PyTorch's ScalarType name used in its error messages (Float, Long, ...)."""
    return _TYPE_NAMES.get(d.name, d.name)


type_name = _type_name


# The names c10's TypeMeta prints for a dtype (its C++ type, as the compiler spells it): PyTorch's
# messages that format ``tensor.dtype()`` itself (conv's "Input type (float) and bias type (double)").
_TYPE_META_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
    "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
    "float64": "double", "complex64": "c10::complex<float>", "complex128": "c10::complex<double>",
}


def type_meta_name(d) -> str:
    """c10's TypeMeta name of a dtype (float, double, long int, c10::Half, ...)."""
    return _TYPE_META_NAMES.get(d.name, d.name)


# c10's spelling of each type in "value cannot be converted to type ... without overflow".
_C10_NAMES = {
    dtypes.uint8: "uint8_t",
    dtypes.int8: "int8_t",
    dtypes.int16: "int16_t",
    dtypes.int32: "int",
    dtypes.int64: "int64_t",
    dtypes.float16: "c10::Half",
    dtypes.bfloat16: "c10::BFloat16",
    dtypes.float32: "float",
    dtypes.float64: "double",
    dtypes.complex64: "c10::complex<float>",
    dtypes.complex128: "c10::complex<double>",
}


def check_fill_fits(value, dtype) -> None:
    """``check_scalar_fits`` for a fill (fill_, full, scalar_tensor, x[i] = v): PyTorch fills a
    float16/bfloat16 tensor without the range check, so a large value becomes inf there
    (``full((1,), 1e6, dtype=float16)`` is inf) where masked_fill or clamp raise."""
    if (dtype is dtypes.float16 or dtype is dtypes.bfloat16) and not isinstance(value, complex):
        return
    check_scalar_fits(value, dtype)


def check_scalar_fits(value, dtype, label: str | None = None) -> None:
    """Raises PyTorch's RuntimeError when a Python number written into a ``dtype`` tensor (fill_,
    full, masked_fill, clamp bounds, where, index_fill, ...) does not fit it (c10::overflows).

    Integers wrap only in the unsigned types' -max..-1 (as ``a - b`` on uint8 needs); floats must
    lie in the type's range (NaN never fits an integer type, inf fits every float type); a complex
    value with an imaginary part fits only a complex type. bool takes any value. ``label`` names
    the type in the message (``ember.tensor`` says "uint8" where the kernels say "uint8_t")."""
    name = label or _C10_NAMES.get(dtype, getattr(dtype, "name", "?"))
    if dtype is dtypes.bool or isinstance(value, bool) or not isinstance(value, (int, float, complex)):
        return
    if isinstance(value, complex):
        if value.imag != 0 and not dtype.is_complex:
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        value = value.real
        if dtype.is_complex:
            return
    if dtype.is_complex:
        dtype = dtypes.float32 if dtype is dtypes.complex64 else dtypes.float64
    if dtype.is_floating_point:
        if isinstance(value, int) and dtype is dtypes.float64:
            return  # every Python int converts (rounding), as c10 converts int64
        f = float(value) if not isinstance(value, int) or abs(value) < 2**1024 else float("inf")
        if f != f or f in (float("inf"), float("-inf")):
            return
        if abs(f) > dtypes.finfo(dtype).max:
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        return
    if isinstance(value, int):
        int64_scalar(value)  # beyond 64 bits: Python's OverflowError, as PyTorch's argument parser
    info = dtypes.iinfo(dtype)
    if isinstance(value, float):
        fits = value == value and info.min <= value <= info.max
    else:
        low = -info.max if info.min == 0 else info.min  # unsigned: negatives wrap
        fits = low <= value <= info.max
    if not fits:
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def int64_scalar(value: int) -> int:
    """A Python int as the int64 a kernel takes, as PyTorch's argument parser reads it: beyond 64 bits
    an OverflowError, and [2**63, 2**64) wraps (read as an unsigned 64-bit value)."""
    if -(1 << 63) <= value < (1 << 63):
        return value
    if (1 << 63) <= value < (1 << 64):
        return value - (1 << 64)
    raise OverflowError("int too big to convert")


def check_int64_arg(value: int) -> None:
    """PyTorch's parser reads an int argument (an index, a start, a size) as a C long long: a Python int
    outside int64 is its ValueError, raised before any range check of the op."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError("Overflow when unpacking long long")


def return_type(name: str, fields: list) -> type:
    """The named tuple type ``torch.return_types.<name>`` (what max, sort, linalg_svd... return):
    pickled by reference to ``ember.return_types``, printed as PyTorch prints its structseqs, one
    field per line."""
    cls = namedtuple(name, fields, module="ember.return_types")

    def __repr__(self):  # noqa: N807 - the method of the named tuple type
        body = ",\n".join(f"{field}={value!r}" for field, value in zip(self._fields, self))
        return f"{type(self).__module__}.{type(self).__name__}(\n{body})"

    cls.__repr__ = __repr__
    return cls


def check_tensor_args(fn_name: str, *named) -> None:
    """PyTorch's argument-parser TypeError in a Python composite (F.linear, the losses, pools): the
    (name, value) pairs, in position order, must be tensors."""
    for position, (name, value) in enumerate(named, 1):
        if not isinstance(value, Tensor):
            raise TypeError(f"{fn_name}(): argument '{name}' (position {position}) must be Tensor, "
                            f"not {type(value).__name__}")


_GRAD_FN_SLOT = Tensor.__dict__["grad_fn"]


def label_as_op(result: Tensor, op_name: str, inputs: tuple | None = None) -> Tensor:
    """A function composed of several ops whose grad_fn prints as PyTorch's single op (mse_loss:
    MseLossBackward0, not MeanBackward0): the autograd plugin renames the result's last node,
    which computes the same. The node is read through the slot itself: a traced tensor's
    ``grad_fn`` property (ember.compile's lazy tensors) would stop the trace, and a traced result
    has no node to rename."""
    if _GRAD_FN_SLOT.__get__(result, Tensor) is not None:
        label = _LABEL_GRAD_FN[0]
        if label is None:  # a node exists, so the autograd plugin is loaded: find its labeller once
            from .. import plugins

            engine = plugins.get("autograd")
            if engine is None or not hasattr(engine, "label_grad_fn"):
                return result
            label = _LABEL_GRAD_FN[0] = engine.label_grad_fn
        if inputs is None:
            label(result, op_name)
        else:
            label(result, op_name, inputs)
    return result


_LABEL_GRAD_FN: list = [None]  # the autograd plugin's label_grad_fn (an import per call cost ~2 us)
