"""Random factories: ``rand``, ``randn``, ``randint``, ``randperm``, ``normal`` and the ``*_like`` forms.

Each allocates with the ``empty`` op and fills with an in-place sampler op (ops/random.py),
so tracing modes see two ops and the meta device gets a shape without drawing anything.
Kept outside ``ops/`` so that they are not attached as Tensor methods.
"""

from __future__ import annotations

import builtins
import operator

from . import dtypes
from ._native import _C
from .device import META, like_device, to_device
from .dispatch import define
from .generator import resolve
from .ops._common import check_int64_arg, type_name, write_out
from .ops.creation.factories import empty_op, scalar_tensor
from .ops.pointwise.complex import view_as_real_op
from .ops.random import samplers as _samplers
from .ops.random.samplers import fill_fresh as _fill_fresh
from .optable import declare
from .shapes import as_shape, check_sizes
from .tensor import Tensor, new_empty_tensor, set_factory_requires_grad


def _shape(size_args: tuple, kwargs: dict, name: str) -> tuple:
    if "size" in kwargs:
        if size_args:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        size_args = (kwargs.pop("size"),)
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    shape = as_shape(size_args)
    check_sizes(shape)
    return shape


def _finish(t: Tensor, out, requires_grad: bool, overlap: bool = True) -> Tensor:
    # A mismatched out is resized silently, as PyTorch's factories do.
    t = write_out(t, out, overlap=overlap, warn_resize=False)  # PyTorch refuses an expanded out= but for randperm's
    if requires_grad:
        set_factory_requires_grad(t)
    return t


def _alloc(shape, dtype, device):
    return empty_op(shape, dtype=dtype, device=to_device(device))


def _default_float(dtype):
    return dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)


def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False, **kwargs):
    """Uniform samples from [0, 1)."""
    shape = _shape(size, kwargs, "rand")
    t = _alloc(shape, _default_float(dtype), device)
    if t.dtype.is_complex:  # real and imaginary parts each uniform on [0, 1), as PyTorch
        _fill_fresh(_samplers.uniform_op, _complex_parts(t), 0.0, 1.0, generator=generator)
        return _finish(t, out, requires_grad)
    return _finish(_fill_fresh(_samplers.uniform_op, t, 0.0, 1.0, generator=generator), out, requires_grad)


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, **kwargs):
    """Standard normal samples."""
    shape = _shape(size, kwargs, "randn")
    t = _alloc(shape, _default_float(dtype), device)
    if t.dtype.is_complex:  # E|z|^2 = 1: each part normal with variance 1/2, as PyTorch
        _fill_fresh(_samplers.normal_inplace_op, _complex_parts(t), 0.0, 0.5 ** 0.5, generator=generator)
        return _finish(t, out, requires_grad)
    return _finish(_fill_fresh(_samplers.normal_inplace_op, t, 0.0, 1.0, generator=generator), out, requires_grad)


def _complex_parts(t):
    return view_as_real_op(t)


def _int_arg(value, name: str, fn: str) -> int:
    if isinstance(value, Tensor):
        value = value.item()
    if isinstance(value, builtins.bool) or not isinstance(value, int):
        raise TypeError(f"{fn}(): argument '{name}' must be int, not {type(value).__name__}")
    if not -2**63 <= value < 2**63:  # PyTorch's argument parser reads an int64
        raise ValueError("Overflow when unpacking long long")
    return value


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False, low=None, high=None):
    """Integers drawn uniformly from [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    args = list(args)
    if size is None:
        if not args:
            raise TypeError("randint() missing required argument 'size'")
        size = args.pop()
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not {type(size).__name__}")
    if high is None:
        if not args:
            raise TypeError("randint() missing required argument 'high'")
        high = args.pop()
    if low is None:
        low = args.pop() if args else 0
    if args:
        raise TypeError("randint() takes at most 3 positional arguments")
    low, high = _int_arg(low, "low", "randint"), _int_arg(high, "high", "randint")
    shape = as_shape((size,))
    check_sizes(shape)
    d = dtypes.int64 if dtype is None else dtypes.to_dtype(dtype)
    t = _alloc(shape, d, device)
    return _finish(_fill_fresh(_samplers.random_inplace_op, t, low, high, generator=generator), out, requires_grad)


def _like(input, dtype, device):
    if not isinstance(input, Tensor):
        raise TypeError(f"expected a Tensor, got {type(input).__name__}")
    d = input.dtype if dtype is None else dtypes.to_dtype(dtype)
    dev = input._device if device is None else like_device(input._device, device)
    from . import memory_format

    return memory_format.preserve_layout(empty_op(input._shape, dtype=d, device=dev), input, values=False)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    t = _like(input, dtype, device)
    return _finish(_fill_fresh(_samplers.uniform_op, t, 0.0, 1.0, generator=generator), None, requires_grad)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    t = _like(input, dtype, device)
    return _finish(_fill_fresh(_samplers.normal_inplace_op, t, 0.0, 1.0, generator=generator), None, requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    if high is None:
        low, high = 0, low
    low, high = _int_arg(low, "low", "randint_like"), _int_arg(high, "high", "randint_like")
    t = _like(input, dtype, device)
    return _finish(_fill_fresh(_samplers.random_inplace_op, t, low, high, generator=generator), None, requires_grad)


# -- randperm ---------------------------------------------------------------------------------------

randperm_op = define(
    "randperm(SymInt n, *, Generator? generator=None, ScalarType? dtype=None, Device? device=None) -> Tensor",
    ("factory", "random"),
)


def _check_randperm(n, dtype):
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    if dtype is dtypes.bool:
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if dtype.is_floating_point:
        limit = (1 << _samplers._MANTISSA[dtype.name]) + 1
        if n > limit:
            raise RuntimeError(f"n cannot be greater than {limit} for {type_name(dtype)} type.")
    elif n > 0 and n - 1 > dtypes.iinfo(dtype).max:
        raise RuntimeError(f"randperm: n={n} values cannot be represented in {dtype} without overflow")


@randperm_op.kernel("cpu")
def _randperm_cpu(n, *, generator=None, dtype=None, device=None):
    _check_randperm(n, dtype)
    gen = resolve(generator)
    perm = new_empty_tensor((n,), dtypes.int64, device)
    if n:
        _C.mt_randperm_(perm, gen._rng)
    if dtype is dtypes.int64:
        return perm
    out = new_empty_tensor((n,), dtype, device)
    _C.copy_(out, perm)
    return out


@randperm_op.kernel("meta")
def _randperm_meta(n, *, generator=None, dtype=None, device=None):
    _check_randperm(n, dtype)
    resolve(generator)
    return new_empty_tensor((n,), dtype, META)


randperm_op.meta = _randperm_meta


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False):
    """A random permutation of 0 .. n-1."""
    n = operator.index(n)
    check_int64_arg(n)
    d = dtypes.int64 if dtype is None else dtypes.to_dtype(dtype)
    return _finish(randperm_op(n, generator=generator, dtype=d, device=to_device(device)), out, requires_grad,
                   overlap=False)


# -- normal: four overloads -----------------------------------------------------------------------------

def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           requires_grad=False, pin_memory=False):
    """Normal samples: ``normal(Tensor, Tensor)``, ``normal(Tensor, float)``, ``normal(float, Tensor)`` or
    ``normal(float, float, size)``."""
    mean_t, std_t = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mean_t and not std_t:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (float, float): "
                            "a size is needed when mean and std are both numbers")
        mean, std = _samplers._float(mean, "mean"), _samplers._float(std, "std")
        shape = as_shape((size,))
        check_sizes(shape)
        t = _alloc(shape, _default_float(dtype), device)
        return _finish(_fill_fresh(_samplers.normal_inplace_op, t, mean, std, generator=generator), out, requires_grad)
    if size is not None:
        raise TypeError("normal(): size is only accepted when mean and std are both numbers")
    if mean_t and not std_t:
        std = _samplers._float(std, "std")
        if not std >= 0.0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {_samplers._num(std)}")
        std = scalar_tensor(std, dtypes.float64, mean._device)
        result_dtype = mean.dtype
    elif std_t and not mean_t:
        mean = scalar_tensor(_samplers._float(mean, "mean"), dtypes.float64, std._device)
        result_dtype = std.dtype
    else:
        result_dtype = mean.dtype
    result = _samplers.normal_tensor_op(mean, std, generator=generator, dtype=result_dtype)
    return _finish(result, out, requires_grad)


# The public API of these ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
normal                      function
rand                        function
rand_like                   function
randint                     function
randint_like                function
randn                       function
randn_like                  function
randperm                    function
""")
