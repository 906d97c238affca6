"""Creation ops: tensor/as_tensor, empty/zeros/ones/full (+ _like), arange, linspace, eye, ..."""

from __future__ import annotations

import builtins
import collections.abc
import math
import operator

from ... import dtypes
from ..._native import _C
from ...device import CPU, META, get_backend, like_device, to_device
from ...dispatch import define
from ...optable import declare
from ...shapes import as_shape, check_sizes, contiguous_strides, numel
from ...tensor import Tensor, make_tensor, new_empty_tensor, set_factory_requires_grad
from .._common import check_fill_fits, check_scalar_fits, write_out

_NUMBER = (builtins.bool, int, float, complex)


def _out_device(device, out):
    """A factory's device: ``out``'s when none is named (PyTorch's: ``arange(n, out=cuda_tensor)``)."""
    return out.device if device is None and isinstance(out, Tensor) else device


def _resolve(dtype, device, default=None):
    if dtype is not None:
        d = dtypes.to_dtype(dtype)
    else:
        d = dtypes.get_default_dtype() if default is None else default
    dev = to_device(device)
    if dev.type not in ("cpu", "meta"):
        get_backend(dev.type)  # a device without a backend raises as PyTorch's CPU build does
    return d, dev


def check_pin_memory(pin_memory) -> None:
    if pin_memory:
        raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no pinned memory "
                           "allocator is available on this system.")


def _finish(t: Tensor, requires_grad: bool, out: Tensor | None = None, overlap: bool = False,
            sequence: bool = False) -> Tensor:
    """``overlap``: refuse an expanded out= (PyTorch's arange/linspace/logspace; zeros, full, eye write through).
    A factory resizes a mismatched out= without a warning, as PyTorch's (arange warns on its own); a
    ``sequence`` (arange/linspace/logspace) keeps an out= of any shape holding as many elements."""
    if out is not None:
        if sequence and isinstance(out, Tensor) and out.numel() == t.numel():
            t = t.reshape(out.shape)
        return write_out(t, out, overlap=overlap, warn_resize=False)
    if requires_grad:
        set_factory_requires_grad(t)
    return t


# -- empty / zeros / ones / full --------------------------------------------------------------

empty_op = define("empty(SymInt[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor", ("factory",))
full_op = define(
    "full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Device? device=None) -> Tensor", ("factory",)
)


@empty_op.kernel("cpu")
@empty_op.kernel("meta")
def _empty_kernel(size, *, dtype=None, device=None):
    return new_empty_tensor(size, dtype, device)


def check_fill_value(value, dtype, size) -> None:
    """full's check of its value, as PyTorch's fill_: its one-element fast path converts a number
    to float16/bfloat16 unchecked (``full((1,), 1e6, dtype=float16)`` is inf, ``full((2,), ...)`` raises)."""
    count = 1
    for s in size:
        count *= s
    if isinstance(count, int) and count == 1:
        check_fill_fits(value, dtype)
    else:
        check_scalar_fits(value, dtype)


@full_op.kernel("cpu")
def _full_cpu(size, fill_value, *, dtype=None, device=None):
    if fill_value == 0 and not (isinstance(fill_value, float) and math.copysign(1.0, fill_value) < 0):
        return new_empty_tensor(size, dtype, device, zero=True)
    check_fill_value(fill_value, dtype, size)
    t = new_empty_tensor(size, dtype, device)
    _C.fill_(t, fill_value)
    return t


@full_op.kernel("meta")
def _full_meta(size, fill_value, *, dtype=None, device=None):
    check_fill_value(fill_value, dtype, size)
    return new_empty_tensor(size, dtype, device)


empty_op.meta = _empty_kernel
full_op.meta = _full_meta


def _sizes_or_keyword(sizes: tuple, size):
    """``zeros(2, 3)``, ``zeros((2, 3))`` or ``zeros(size=(2, 3))``, as PyTorch's parser takes them."""
    if size is None:
        return sizes
    if sizes:
        raise TypeError("argument 'size' given by name and by position")
    return (size,)


def _size_args(size):
    shape = as_shape(size)
    check_sizes(shape)
    return shape


def empty(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
          memory_format=None):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    shape = _size_args(_sizes_or_keyword(sizes, size))
    d, dev = _resolve(dtype, device)
    if memory_format is not None:
        return _finish(_in_format(empty_op(shape, dtype=d, device=dev), memory_format, "empty"), requires_grad, out)
    return _finish(empty_op(shape, dtype=d, device=dev), requires_grad, out)


def _in_format(t, memory_format, fn: str, like=None):
    """``t`` laid out in the requested memory format: a ``*_like`` result (``like`` given) by default
    as PyTorch's ``preserve_format`` lays it out; contiguous: as made."""
    from ... import memory_format as mf

    mf.check(memory_format, fn)
    if fn == "empty" and memory_format is mf.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by empty")
    if like is not None and (memory_format is None or memory_format is mf.preserve_format):
        return mf.preserve_layout(t, like, values=fn != "empty_like")
    if mf.rank_for(memory_format) is None:
        return t
    return mf.to_format(t, memory_format)


def zeros(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    shape = as_shape(_sizes_or_keyword(sizes, size))
    if any(type(s) is int and s < 0 for s in shape):  # PyTorch's zeros words it so (empty/ones/full do not)
        raise RuntimeError("zeros: Dimension size must be non-negative.")
    check_sizes(shape)
    d, dev = _resolve(dtype, device)
    return _finish(full_op(shape, 0, dtype=d, device=dev), requires_grad, out)


def ones(*sizes, size=None, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    shape = _size_args(_sizes_or_keyword(sizes, size))
    d, dev = _resolve(dtype, device)
    return _finish(full_op(shape, 1, dtype=d, device=dev), requires_grad, out)


def _fill_dtype(fill_value):
    if isinstance(fill_value, Tensor):
        return fill_value.dtype
    return dtypes.scalar_dtype(fill_value)


def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    shape = _size_args((size,) if not isinstance(size, (tuple, list)) else size)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    d, dev = _resolve(dtype, device, default=_fill_dtype(fill_value) if dtype is None else None)
    return _finish(full_op(shape, fill_value, dtype=d, device=dev), requires_grad, out)


def _like(input, dtype, device):
    if not isinstance(input, Tensor):
        raise TypeError(f"expected a Tensor, got {type(input).__name__}")
    return (input.dtype if dtype is None else dtypes.to_dtype(dtype),
            input._device if device is None else like_device(input._device, device))


def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
               memory_format=None):
    check_pin_memory(pin_memory)
    d, dev = _like(input, dtype, device)
    out = empty_op(input._shape, dtype=d, device=dev)
    return _finish(_in_format(out, memory_format, "empty_like", input), requires_grad)


def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
               memory_format=None):
    check_pin_memory(pin_memory)
    d, dev = _like(input, dtype, device)
    out = full_op(input._shape, 0, dtype=d, device=dev)
    return _finish(_in_format(out, memory_format, "zeros_like", input), requires_grad)


def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
               memory_format=None):
    check_pin_memory(pin_memory)
    d, dev = _like(input, dtype, device)
    out = full_op(input._shape, 1, dtype=d, device=dev)
    return _finish(_in_format(out, memory_format, "ones_like", input), requires_grad)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
               memory_format=None):
    check_pin_memory(pin_memory)
    d, dev = _like(input, dtype, device)
    out = full_op(input._shape, fill_value, dtype=d, device=dev)
    return _finish(_in_format(out, memory_format, "full_like", input), requires_grad)


def scalar_tensor(value, dtype=None, device=None, *, layout=None, requires_grad=False, pin_memory=False) -> Tensor:
    """A 0-d tensor holding a Python scalar."""
    check_pin_memory(pin_memory)
    # Like PyTorch, the default dtype whatever the scalar's type (ember.tensor infers it instead).
    d = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    dev = to_device(device)
    check_fill_fits(value, d)
    t = new_empty_tensor((), d, CPU if dev.type != "meta" else dev)
    if dev is not META:
        _C.fill_(t, value)
        if dev.type != "cpu":
            t = t.to(dev)  # a plugin device: filled on the host, then copied
    return _finish(t, requires_grad)


# -- tensor / as_tensor -------------------------------------------------------------------------

def _infer_nested(data, shape_out: list, dtype=None):
    """Nested sequences' result dtype and shape (into ``shape_out``), as PyTorch infers them: the
    shape follows the first element at each depth, the dtype promotes over every number, and
    then every element must fit that shape (errors in that order, as PyTorch's)."""
    item = data
    while _is_sequence(item):
        item = _sequence_items(item)
        shape_out.append(len(item))
        if not item:
            break
        item = item[0]
        if isinstance(item, (str, bytes)):  # a sequence to PyTorch, of itself: endless dims
            raise ValueError(f"too many dimensions '{type(item).__name__}'")
    if dtype is None:  # a dtype given is not inferred: an unreadable element fails in the check
        dtype = _infer_dtype(data)
    _check_nested_shape(data, shape_out, 0, dtype)
    return dtype


_PLAIN_NUMBERS = frozenset((builtins.bool, int, float))


def _is_sequence(data) -> builtins.bool:
    if isinstance(data, (list, tuple, range, bytearray, memoryview)):
        return True
    return _is_other_sequence(data) or _is_array_in_sequence(data)


def _is_array_in_sequence(data) -> builtins.bool:
    """A NumPy array of 1+ dims inside a list (``torch.tensor([state1, state2])``): PyTorch reads it as
    a sequence of its rows, its numbers keeping the array's dtype."""
    return type(data).__module__ == "numpy" and getattr(data, "ndim", 0) >= 1 and hasattr(data, "dtype")


def _is_other_sequence(data) -> builtins.bool:
    # PyTorch reads any object of the sequence protocol (len and integer indexing: a deque, an
    # array.array, a user class), except strings, mappings and tensor/array-likes
    if isinstance(data, (str, bytes, dict, Tensor, collections.abc.Mapping)) or hasattr(data, "dtype"):
        return False
    cls = type(data)
    return hasattr(cls, "__len__") and hasattr(cls, "__getitem__")


def _sequence_items(data):
    if isinstance(data, (list, tuple, range)):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return _buffer_items(data)
    return [data[i] for i in range(len(data))]


def _infer_dtype(data):
    if isinstance(data, Tensor):
        return data.dtype
    if _is_array_in_sequence(data):
        return dtypes.from_numpy_dtype(data.dtype)
    if _is_sequence(data):
        items = _sequence_items(data)
        kinds = set(map(type, items))
        if kinds and kinds <= _PLAIN_NUMBERS:  # a row of Python numbers, read at once (the common case)
            if float in kinds:
                return dtypes.get_default_dtype()
            return dtypes.int64 if int in kinds else dtypes.bool
        result = None
        for item in items:
            d = _infer_dtype(item)
            result = d if result is None else dtypes.promote_types(result, d)
        return result if result is not None else dtypes.get_default_dtype()
    if _is_numpy_scalar(data):
        return dtypes.from_numpy_dtype(data.dtype)
    if isinstance(data, _NUMBER):
        return dtypes.scalar_dtype(data)
    if hasattr(data, "item") and hasattr(data, "dtype") and getattr(data, "shape", None) == ():
        return dtypes.from_numpy_dtype(data.dtype)
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")


def _check_nested_shape(data, shape: list, depth: int, dtype) -> None:
    """PyTorch's errors for elements that do not fit the shape the first elements gave."""
    if depth == len(shape):
        if isinstance(data, Tensor):
            if numel(data._shape) != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
        elif _is_array_in_sequence(data):
            raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
        elif not (isinstance(data, _NUMBER) or hasattr(data, "item")):
            if dtype.is_floating_point or dtype.is_complex:
                raise TypeError(f"must be real number, not {type(data).__name__}")
            raise TypeError(f"'{type(data).__name__}' object cannot be interpreted as an integer")
        return
    if not (_is_sequence(data) or isinstance(data, (str, bytes))):  # a string is a sequence to PyTorch
        raise TypeError("not a sequence")
    if _is_array_in_sequence(data) and data.ndim == len(shape) - depth:  # an array's rows all fit at once
        for k, (got, want) in enumerate(zip(data.shape, shape[depth:])):
            if got != want:
                raise ValueError(f"expected sequence of length {want} at dim {depth + k} (got {got})")
        return
    items = _sequence_items(data)
    if len(items) != shape[depth]:
        raise ValueError(f"expected sequence of length {shape[depth]} at dim {depth} (got {len(items)})")
    if depth + 1 == len(shape) and set(map(type, items)) <= _PLAIN_NUMBERS:
        return  # a row of Python numbers: every leaf fits
    for item in items:
        _check_nested_shape(item, shape, depth + 1, dtype)


def _is_numpy_scalar(x) -> builtins.bool:
    # NumPy scalars keep their dtype (np.float64 is also a Python float, which would infer the default dtype).
    return type(x).__module__ == "numpy" and hasattr(x, "dtype") and getattr(x, "shape", None) == ()


def _buffer_items(data) -> list:
    """A bytearray or memoryview as the sequence of numbers PyTorch reads from it."""
    return list(data) if isinstance(data, bytearray) else data.tolist()


def _flatten(data, out: list):
    if isinstance(data, (bytearray, memoryview)) or _is_other_sequence(data):
        data = _sequence_items(data)
    if isinstance(data, (list, tuple, range)):
        if set(map(type, data)) <= _PLAIN_NUMBERS:
            out.extend(data)  # a row of Python numbers
            return
        for item in data:
            _flatten(item, out)
    elif isinstance(data, Tensor) or _is_array_in_sequence(data):
        out.extend(data.reshape(-1).tolist())
    elif hasattr(data, "item"):
        out.append(data.item())
    else:
        out.append(data)


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    """Copies ``data`` (nested sequences of numbers, a NumPy array, a tensor) into a new tensor."""
    from ...interop import from_numpy_copy, is_numpy_array

    check_pin_memory(pin_memory)
    dev = to_device(device)
    if isinstance(data, Tensor):
        result = data.detach().clone()
        if dtype is not None or device is not None:
            result = result.to(dtype=dtypes.to_dtype(dtype) if dtype is not None else None, device=dev)
        return _finish(result, requires_grad)
    if is_numpy_array(data):
        result = from_numpy_copy(data)
        if dtype is not None and result.dtype is not dtypes.to_dtype(dtype):
            result = result.to(dtypes.to_dtype(dtype))
        if dev is not CPU:
            result = result.to(dev)
        return _finish(result, requires_grad)
    if _is_numpy_scalar(data) and dtype is None:
        dtype = dtypes.from_numpy_dtype(data.dtype)
        data = data.item()
    if isinstance(data, _NUMBER):
        d = dtypes.scalar_dtype(data) if dtype is None else dtypes.to_dtype(dtype)
        _check_no_complex((data,), d)
        if not (d.is_floating_point or d.is_complex):
            _check_int64_unpacks((data,))
            check_scalar_fits(data, d, d.name)
        elif d is dtypes.float32 and isinstance(data, float) and abs(data) > _FLOAT32_MAX:
            # ember.tensor(1e39) rounds to inf, as a list's elements do (scalar_tensor(1e39) raises)
            data = math.copysign(math.inf if abs(data) >= _FLOAT32_ROUNDS_TO_INF else _FLOAT32_MAX, data)
        return _finish(scalar_tensor(data, d, dev), requires_grad)
    if isinstance(data, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    shape: list = []
    d = _infer_nested(data, shape, None if dtype is None else dtypes.to_dtype(dtype))
    flat: list = []
    _flatten(data, flat)
    if dtype is not None:
        _check_no_complex(flat, d)
    result = _from_flat_list(flat, tuple(shape), d)
    if dev is not CPU:
        result = result.to(dev)
    return _finish(result, requires_grad)


_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_ROUNDS_TO_INF = 2.0**128 * (1 - 2.0**-25)  # half an ulp above the largest float32


def _check_no_complex(values, dtype) -> None:
    """A Python complex bound for a real (not bool) dtype is PyTorch's TypeError, not a dropped
    imaginary part."""
    if dtype.is_complex or dtype is dtypes.bool or not builtins.any(type(v) is complex for v in values):
        return
    if dtype.is_floating_point:
        raise TypeError("must be real number, not complex")
    raise TypeError("'complex' object cannot be interpreted as an integer")


def _check_int64_unpacks(values) -> None:
    """PyTorch reads every Python int bound for an integer tensor as a C long long first: one
    outside int64 is its ValueError, before any check of the target dtype's range."""
    for v in values:
        if type(v) is int and not -(1 << 63) <= v < (1 << 63):
            raise ValueError("Overflow when unpacking long long")


def _check_integer_range(flat: list, dtype) -> None:
    """ember.tensor's check of numbers bound for an integer dtype (PyTorch's RuntimeError)."""
    _check_int64_unpacks(flat)
    reals = [v.real if isinstance(v, complex) else v for v in flat if not isinstance(v, builtins.bool)]
    if any(v != v for v in reals):
        check_scalar_fits(float("nan"), dtype, dtype.name)
    if reals:
        check_scalar_fits(builtins.min(reals), dtype, dtype.name)
        check_scalar_fits(builtins.max(reals), dtype, dtype.name)


def _from_flat_list(flat: list, shape: tuple, dtype) -> Tensor:
    """Packs Python numbers through the array module (C speed) and converts natively."""
    import array

    out = new_empty_tensor(shape, dtype, CPU)
    if not flat:
        return out
    if not (dtype.is_floating_point or dtype.is_complex or dtype is dtypes.bool):
        _check_integer_range(flat, dtype)
    if all(isinstance(v, (builtins.bool, int)) for v in flat) and not dtype.is_floating_point:
        try:
            packed = array.array("q", [int(v) for v in flat])
            src_dtype = dtypes.int64
        except OverflowError:
            raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow") from None
    elif dtype.is_complex or any(isinstance(v, complex) for v in flat):
        # Interleaved (real, imag) pairs: the memory layout of complex128.
        packed = array.array("d", [p for v in flat for p in (complex(v).real, complex(v).imag)])
        src_dtype = dtypes.complex128
    else:
        packed = array.array("d", [float(v) for v in flat])
        src_dtype = dtypes.float64
    mv = memoryview(packed)
    storage = _C.Storage.borrow(mv.obj.buffer_info()[0], len(packed) * packed.itemsize, packed)

    src = make_tensor(storage, shape, contiguous_strides(shape), 0, src_dtype, CPU)
    _C.copy_(out, src)
    return out


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like ``tensor`` but shares memory with a tensor or NumPy array when dtype/device allow."""
    from ...interop import from_numpy, is_numpy_array

    if isinstance(data, Tensor):
        return data.to(dtype=dtypes.to_dtype(dtype) if dtype is not None else None,
                       device=to_device(device) if device is not None else None)
    if is_numpy_array(data):
        try:
            t = from_numpy(data)
        except TypeError:
            return tensor(data, dtype=dtype, device=device)
        return t.to(dtype=dtypes.to_dtype(dtype) if dtype is not None else None,
                    device=to_device(device) if device is not None else None)
    return tensor(data, dtype=dtype, device=device)


asarray = as_tensor


# -- ranges -------------------------------------------------------------------------------------

def _number(value):
    number = dtypes.numpy_scalar_value(value)
    return value if number is None else number


def arange(start=None, end=None, step=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
           pin_memory=False):
    """Values from start (inclusive) to end (exclusive) by step."""
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    if end is None and start is None or start is None and step is not None:
        raise TypeError("arange() missing 1 required positional arguments: \"end\"")
    if end is None:
        start, end = 0, start
    elif start is None:  # arange(end=3): PyTorch's arange(end) overload by keyword
        start = 0
    if step is None:
        step = 1
    vals = [v.item() if isinstance(v, Tensor) else _number(v) for v in (start, end, step)]
    start, end, step = vals
    if step == 0 or step != step:  # a NaN step too, as PyTorch
        raise RuntimeError("step must be nonzero")
    if any(isinstance(v, float) and (math.isnan(v) or math.isinf(v)) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if (end - start) / step < 0 and end != start:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        d = dtypes.get_default_dtype() if any(isinstance(v, float) for v in vals) else dtypes.int64
    else:
        d = dtypes.to_dtype(dtype)
    if all(isinstance(v, int) for v in vals):
        n = max(0, -((start - end) // step))  # exact integer ceil; a symbolic size (export) stays symbolic
    else:
        n = max(0, math.ceil((end - start) / step))
    if isinstance(n, int) and n > (1 << 63) - 1:
        raise RuntimeError("invalid size, possible overflow?")
    if isinstance(out, Tensor) and isinstance(n, int) and out.numel() not in (0, n):
        import warnings

        warnings.warn(f"The number of elements in the out tensor of shape {list(out.shape)} is {out.numel()} "
                      f"which does not match the computed number of elements {n}. Note that this may occur as "
                      f"a result of rounding error. The out tensor will be resized to a tensor of shape ({n},).",
                      UserWarning, stacklevel=2)
    return _finish(_affine_range(n, start, step, d, to_device(device)), requires_grad, out, overlap=True,
                   sequence=True)


range_op = define("arange_affine(int n, Scalar start, Scalar step, *, ScalarType dtype, Device device) -> Tensor",
                  ("factory",))


@range_op.kernel("cpu")
def _affine_cpu(n, start, step, *, dtype, device):
    # Computed in float64/int64 and converted once, so float32 ranges match PyTorch's.
    if not dtype.is_floating_point:
        # PyTorch casts start and step to the integer type first (truncating), then steps.
        start, step = int(start), int(step)
    exact = dtypes.int64 if (isinstance(start, int) and isinstance(step, int)) else dtypes.float64
    base = new_empty_tensor((n,), exact, device)
    if n:
        _C.iota(base, start, step)
    out = new_empty_tensor((n,), dtype, device)
    _C.copy_(out, base)
    return out


@range_op.kernel("meta")
def _affine_meta(n, start, step, *, dtype, device):
    return new_empty_tensor((n,), dtype, device)


range_op.meta = _affine_meta


def _affine_range(n, start, step, dtype, device):
    return range_op(n if isinstance(n, int) else int(n), start, step, dtype=dtype, device=device)


def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    steps = operator.index(steps)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    start = start.item() if isinstance(start, Tensor) else start
    end = end.item() if isinstance(end, Tensor) else end
    d = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    dev = to_device(device)
    if steps == 1:
        return _finish(full((1,), start, dtype=d, device=dev), requires_grad, out, overlap=True, sequence=True)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    # PyTorch fills the second half from the end so the last value is exactly `end`; a float32
    # result is computed in float32 as PyTorch's (the native fill), the rest in float64.
    work = dtypes.float32 if d is dtypes.float32 else dtypes.float64
    # The native fill writes host memory: another device's values are the CPU's, copied there once.
    host = dev.type != "cpu" and dev is not META
    result = new_empty_tensor((steps,), work, CPU if host else dev)
    if dev is not META and steps:
        _C.linspace(result, float(start), float(end), float(step))
    return _finish(result.to(d).to(dev) if host else result.to(d), requires_grad, out, overlap=True, sequence=True)


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    d = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    exponents = linspace(start, end, steps, dtype=dtypes.float64, device=device)
    from ..pointwise.elementwise import pow_op

    return _finish(pow_op(float(base), exponents).to(d), requires_grad, out, overlap=True, sequence=True)


def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    check_pin_memory(pin_memory)
    device = _out_device(device, out)
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    if n < 0 or m < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {min(n, m)}")
    d, dev = _resolve(dtype, device)
    result = full_op((n, m), 0, dtype=d, device=dev)
    if dev is not META and min(n, m):
        result.diagonal().fill_(1)
        # The result is fresh (the diagonal view that bumped its counter is gone): PyTorch fills it below
        # the version counter, so it starts at _version 0.
        _C._new_version_counter(result)
    return _finish(result, requires_grad, out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
arange                      function
as_tensor                   function alias=asarray
empty                       function
empty_like                  function
eye                         function
full                        function
full_like                   function
linspace                    function
logspace                    function
ones                        function
ones_like                   function
scalar_tensor               function
tensor                      function
zeros                       function
zeros_like                  function
""")
