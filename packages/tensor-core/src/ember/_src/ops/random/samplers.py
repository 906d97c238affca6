"""Op family: random. In-place samplers (``uniform_``, ``normal_``, ``bernoulli_``, ...),
``bernoulli``, ``multinomial`` and the tensor-parameter ``normal``.

Every sampler draws from a ``Generator``'s PyTorch-compatible stream (``_src/generator.py``)
with PyTorch's transforms, element by element in the order PyTorch's kernels visit them
(memory order), so a non-contiguous target is filled through a temporary laid out that way. Factories
(``rand``, ``randn``, ``randint``, ...) live in ``_src/random_factories.py`` so that they
are not attached as Tensor methods; they are re-exported here.
"""

from __future__ import annotations

import builtins
import math
import operator
import threading

from ... import dtypes
from ..._native import _C
from ...device import META
from ...dispatch import define as _define
from ...generator import Generator
from ...generator import resolve as _resolve
from ...memory_format import preserve_layout
from ...optable import declare
from ...shapes import broadcast_shapes as _broadcast_shapes
from ...tensor import Tensor
from ...tensor import new_empty_tensor as _new_empty
from .._common import check_internal_overlap as _check_internal_overlap
from .._common import check_partial_overlap as _check_partial_overlap
from .._common import convert, type_name
from .._common import write_out as _write_out

_KINDS = _C.random_kinds

# C++ type names PyTorch uses in random_'s bounds errors.
_C_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short", "int32": "int",
    "int64": "long", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
    "float64": "double",
}
_MANTISSA = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _num(x) -> str:
    """A number as PyTorch's messages print it (``-1`` for -1.0)."""
    if isinstance(x, float) and math.isfinite(x) and x == int(x):
        return str(int(x))
    return str(x)


def _check_self(self, name: str) -> None:
    if not isinstance(self, Tensor):
        raise TypeError(f"{name}(): argument 'self' must be Tensor, not {type(self).__name__}")


def _check_floating(self: Tensor, kernel: str) -> None:
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(self.dtype)}'")


def _check_no_overlap(self: Tensor) -> None:
    if self._device is not META:  # PyTorch checks real devices only
        _check_internal_overlap(self)


def _float(value, name: str) -> float:
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, (builtins.bool, int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


def _generator_for(self: Tensor, generator) -> Generator:
    gen = _resolve(generator)
    if self._device.type != gen.device.type:
        raise RuntimeError(
            f"Expected a '{self._device.type}' device type for generator but found '{gen.device.type}'"
        )
    return gen


def _memory_ordered(t: Tensor) -> tuple:
    """``(order, view)``: the dimension order (outermost first) in which PyTorch's TensorIterator
    visits a lone output (decreasing strides, ties in dimension order), and ``t`` permuted to it
    (``t`` itself when that is its own order)."""
    identity = tuple(range(t.ndim))
    if t.is_contiguous():
        return identity, t
    order = tuple(sorted(identity, key=lambda d: (-t._stride[d] if t._shape[d] != 1 else 0, d)))
    return order, (t if order == identity else t.permute(order))


class _FreshFill(threading.local):
    storage = None  # the storage a random factory is filling right now (fill_fresh)


_FRESH = _FreshFill()


def fill_fresh(sampler, t: Tensor, *args, generator=None) -> Tensor:
    """``sampler(t, *args, generator=generator)`` on a tensor a factory has just allocated, below its
    version counter: PyTorch's factories (randn, rand_like, bernoulli, ...) fill their result
    without bumping it, so a fresh random tensor is at ``_version`` 0."""
    _FRESH.storage = t._storage
    try:
        return sampler(t, *args, generator=generator)
    finally:
        _FRESH.storage = None


def bump_written(self: Tensor) -> None:
    """A sampler kernel's version bump, skipped for the tensor ``fill_fresh`` is filling."""
    if _FRESH.storage is None or self._storage is not _FRESH.storage:
        self._bump_version()


def _fill(self: Tensor, generator, draw) -> Tensor:
    """Runs ``draw(target, rng)`` on a contiguous target holding self's elements in the order
    PyTorch draws them (memory order), then writes it into self."""
    gen = _generator_for(self, generator)
    n = self.numel()
    if n == 0:
        return self
    if self.is_contiguous():
        draw(self, gen._rng)
    else:
        _, view = _memory_ordered(self)
        target = _new_empty(view._shape, self.dtype, self._device)
        draw(target, gen._rng)
        _C.copy_(view, target)
    bump_written(self)
    return self


def _declare_inplace(schema: str, check, draw):
    """An in-place sampler op: ``check(self, *args)`` validates, ``draw(target, rng, contiguous, *args)``
    fills (``contiguous``: whether self itself is)."""
    op = _define(schema, ("random", "inplace"))

    @op.kernel("cpu")
    def cpu(self, *args, generator=None):
        check(self, *args)
        contiguous = self.is_contiguous()
        return _fill(self, generator, lambda target, rng: draw(target, rng, contiguous, *args))

    @op.kernel("meta")
    def meta(self, *args, generator=None):
        check(self, *args)
        _resolve(generator)  # type-checked; nothing is drawn on meta
        return self

    op.meta = meta
    return op


# -- uniform_ / normal_ / log_normal_ / cauchy_ / exponential_ / geometric_ ------------------------------

def _check_uniform(self, low, high):
    _check_self(self, "uniform_")
    _check_floating(self, "check_uniform_bounds")
    _check_no_overlap(self)
    limit = dtypes.finfo(self.dtype).max
    if not (-limit <= low <= limit):
        raise RuntimeError(f"from is out of bounds for {_C_NAMES[self.dtype.name]}")
    if not (-limit <= high <= limit):
        raise RuntimeError(f"to is out of bounds for {_C_NAMES[self.dtype.name]}")
    if low > high:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={_num(low)} > to={_num(high)}"
        )
    if high - low > limit:
        raise RuntimeError(
            f"uniform_ expects to-from <= std::numeric_limits<{_C_NAMES[self.dtype.name]}>::max(), but found "
            f"to={_num(high)} and from={_num(low)} which result in to-from to exceed the limit"
        )


def _check_normal(self, mean, std):
    _check_self(self, "normal_")
    _check_floating(self, "normal_kernel_cpu")
    _check_no_overlap(self)
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_num(std)}")


def _check_log_normal(self, mean, std):
    _check_self(self, "log_normal_")
    _check_floating(self, "log_normal_cpu")
    _check_no_overlap(self)
    if not std > 0.0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_num(std)}")


def _check_continuous(self, label):
    if not self.dtype.is_floating_point:
        raise RuntimeError(
            f"{label} distribution is a continuous probability distribution. dtype must be a floating point "
            f"but you specified {_C_NAMES[self.dtype.name]}"
        )


def _check_cauchy(self, median, sigma):
    _check_self(self, "cauchy_")
    _check_continuous(self, "Cauchy")
    _check_no_overlap(self)
    if not sigma > 0.0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_num(sigma)}")


def _check_exponential(self, lambd):
    _check_self(self, "exponential_")
    _check_continuous(self, "Exponential")
    _check_no_overlap(self)
    if not lambd > 0.0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_num(lambd)}")


def _check_geometric(self, p):
    _check_self(self, "geometric_")
    _check_no_overlap(self)
    if not 0.0 < p < 1.0:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_num(p)}")


def _check_bernoulli_p(self, p):
    _check_self(self, "bernoulli_")
    _check_no_overlap(self)
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_num(p)}")


def _dist(kind: str):
    code = _KINDS[kind]

    def draw(target, rng, contiguous, a, b=0.0):
        _C.mt_dist_(target, rng, code, a, b)

    return draw


def _draw_normal(target, rng, contiguous, mean, std):
    # PyTorch's 16-wide Box-Muller fill serves contiguous tensors of >= 16 elements.
    _C.mt_normal_(target, rng, mean, std, contiguous)


uniform_op = _declare_inplace(
    "uniform_(Tensor(a!) self, float from=0, float to=1, *, Generator? generator=None) -> Tensor(a!)",
    _check_uniform, lambda target, rng, contiguous, lo, hi: _C.mt_uniform_(target, rng, lo, hi),
)
normal_inplace_op = _declare_inplace(
    "normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor(a!)",
    _check_normal, _draw_normal)
log_normal_op = _declare_inplace(
    "log_normal_(Tensor(a!) self, float mean=1, float std=2, *, Generator? generator=None) -> Tensor(a!)",
    _check_log_normal, _dist("log_normal"))
cauchy_op = _declare_inplace(
    "cauchy_(Tensor(a!) self, float median=0, float sigma=1, *, Generator? generator=None) -> Tensor(a!)",
    _check_cauchy, _dist("cauchy"))
exponential_op = _declare_inplace(
    "exponential_(Tensor(a!) self, float lambd=1, *, Generator? generator=None) -> Tensor(a!)",
    _check_exponential, _dist("exponential"))
geometric_op = _declare_inplace(
    "geometric_(Tensor(a!) self, float p, *, Generator? generator=None) -> Tensor(a!)",
    _check_geometric, _dist("geometric"))
bernoulli_float_op = _declare_inplace(
    "bernoulli_.float(Tensor(a!) self, float p=0.5, *, Generator? generator=None) -> Tensor(a!)",
    _check_bernoulli_p, _dist("bernoulli"))


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kwargs):
    """Fills self with values drawn uniformly from [from, to)."""
    from_ = kwargs.pop("from", from_)
    _no_extra(kwargs, "uniform_")
    return uniform_op(self, _float(from_, "from"), _float(to, "to"), generator=generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return normal_inplace_op(self, _float(mean, "mean"), _float(std, "std"), generator=generator)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    return log_normal_op(self, _float(mean, "mean"), _float(std, "std"), generator=generator)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    return cauchy_op(self, _float(median, "median"), _float(sigma, "sigma"), generator=generator)


def exponential_(self, lambd=1.0, *, generator=None):
    return exponential_op(self, _float(lambd, "lambd"), generator=generator)


def geometric_(self, p, *, generator=None):
    return geometric_op(self, _float(p, "p"), generator=generator)


def _no_extra(kwargs, name):
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")


# -- random_ ------------------------------------------------------------------------------------------

def _int_bounds(d) -> tuple:
    """The integers a dtype holds exactly for random_: [lo, hi]."""
    if d.is_floating_point:
        m = 1 << _MANTISSA[d.name]
        return -m, m
    info = dtypes.iinfo(d)
    return info.min, info.max


def _check_random(self, low, high):
    _check_self(self, "random_")
    _check_no_overlap(self)
    if high is not None and low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if self.dtype.is_floating_point:
        limit = int(dtypes.finfo(self.dtype).max)
        lo, hi = -limit, limit
    else:
        lo, hi = _int_bounds(self.dtype)
    if not lo <= low <= hi:
        raise RuntimeError(f"from is out of bounds for {_C_NAMES[self.dtype.name]}")
    if high is not None and not lo <= high - 1 <= hi:
        raise RuntimeError(f"to - 1 is out of bounds for {_C_NAMES[self.dtype.name]}")


def _draw_random(target, rng, contiguous, low, high):
    if high is None:
        if low == -(1 << 63):  # every int64: one 64-bit draw each
            _C.mt_random_(target, rng, 1, 0, 0)
        elif low == 0:  # random_(): PyTorch's unbounded kernel, [0, largest exact integer]
            _C.mt_random_(target, rng, 2, 0, 0)
        else:  # [from, largest exactly representable integer]
            _C.mt_random_(target, rng, 0, _int_bounds(target.dtype)[1] - low + 1, low)
        return
    _C.mt_random_(target, rng, 0, (high - low) & ((1 << 64) - 1), low)


random_inplace_op = _declare_inplace(
    "random_(Tensor(a!) self, int from, int? to, *, Generator? generator=None) -> Tensor(a!)",
    _check_random, _draw_random)


def random_(self, *args, generator=None, **kwargs):
    """``random_()``: [0, largest exact integer]; ``random_(to)``: [0, to); ``random_(from, to)``."""
    if "from" in kwargs or "to" in kwargs or len(args) == 2:
        low = kwargs.pop("from", args[0] if args else 0)
        high = kwargs.pop("to", args[1] if len(args) > 1 else None)
    elif len(args) == 1:
        low, high = 0, args[0]
    elif not args:
        low, high = 0, None
    else:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    _no_extra(kwargs, "random_")
    low = operator.index(low)
    high = None if high is None else operator.index(high)
    return random_inplace_op(self, low, high, generator=generator)


# -- bernoulli ----------------------------------------------------------------------------------------

bernoulli_tensor_op = _define(
    "bernoulli_.Tensor(Tensor(a!) self, Tensor p, *, Generator? generator=None) -> Tensor(a!)",
    ("random", "inplace"),
)


def _check_bernoulli_tensor(self, p):
    _check_self(self, "bernoulli_")
    if not isinstance(p, Tensor):
        raise TypeError(f"bernoulli_(): argument 'p' must be Tensor or float, not {type(p).__name__}")
    _check_floating(p, "bernoulli_tensor_cpu_p_")
    _check_no_overlap(self)
    if self._device is not META:
        _check_partial_overlap(self, (p,))
    if _broadcast_shapes(self._shape, p._shape) != self._shape:
        raise RuntimeError(f"bernoulli_: probability tensor of shape {list(p._shape)} is not broadcastable "
                           f"to the output shape {list(self._shape)}")


@bernoulli_tensor_op.kernel("cpu")
def _bernoulli_tensor_cpu(self, p, *, generator=None):
    _check_bernoulli_tensor(self, p)
    gen = _generator_for(self, generator)
    n = self.numel()
    if n == 0:
        return self
    # PyTorch draws a 53-bit uniform per element for float64 p, a 24-bit one otherwise, in
    # the output's memory order.
    p_dtype = dtypes.float64 if p.dtype is dtypes.float64 else dtypes.float32
    order, view = _memory_ordered(self)
    probs = convert(p, p_dtype).expand(self._shape).permute(order).contiguous()
    values = _new_empty(view._shape, self.dtype, self._device)
    _C.mt_bernoulli_tensor_(values, probs, gen._rng)
    _C.copy_(view, values)
    bump_written(self)
    return self


@bernoulli_tensor_op.kernel("meta")
def _bernoulli_tensor_meta(self, p, *, generator=None):
    _check_bernoulli_tensor(self, p)
    _resolve(generator)
    return self


bernoulli_tensor_op.meta = _bernoulli_tensor_meta


def bernoulli_(self, p=0.5, *, generator=None):
    """Fills self with 0/1 draws: probability ``p`` (a float, or a tensor broadcast to self)."""
    if isinstance(p, Tensor):
        return bernoulli_tensor_op(self, p, generator=generator)
    return bernoulli_float_op(self, _float(p, "p"), generator=generator)


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 draws with the probabilities in ``input`` (or a fixed ``p``), in input's dtype."""
    _check_self(input, "bernoulli")
    result = _new_empty(input._shape, input.dtype, input._device)
    if p is None:
        fill_fresh(bernoulli_tensor_op, result, input, generator=generator)
    else:
        fill_fresh(bernoulli_float_op, result, _float(p, "p"), generator=generator)
    return _write_out(result, out)


# -- normal with tensor parameters ----------------------------------------------------------------------

normal_tensor_op = _define(
    "normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator=None, ScalarType? dtype=None) "
    "-> Tensor",
    ("random",),
)


def _normal_result(mean: Tensor, std: Tensor, result_dtype):
    shape = _broadcast_shapes(mean._shape, std._shape)
    if not result_dtype.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{type_name(result_dtype)}'")
    return shape


@normal_tensor_op.kernel("cpu")
def _normal_tensor_cpu(mean, std, *, generator=None, dtype=None):
    dtype = dtype or mean.dtype
    shape = _normal_result(mean, std, dtype)
    out = _new_empty(shape, dtype, mean._device)
    if out.numel() == 0:
        return out
    if bool((std < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    # As PyTorch: standard normals into the output, then * std + mean in the output's dtype.
    gen = _generator_for(out, generator)
    _C.mt_normal_(out, gen._rng, 0.0, 1.0, True)
    _C.copy_(out, out * convert(std, dtype) + convert(mean, dtype))
    return out


@normal_tensor_op.kernel("meta")
def _normal_tensor_meta(mean, std, *, generator=None, dtype=None):
    _resolve(generator)
    dtype = dtype or mean.dtype
    return _new_empty(_normal_result(mean, std, dtype), dtype, META)


normal_tensor_op.meta = _normal_tensor_meta


# -- multinomial ---------------------------------------------------------------------------------------

multinomial_op = _define(
    "multinomial(Tensor self, int num_samples, bool replacement=False, *, Generator? generator=None) "
    "-> Tensor",
    ("random",),
)


def _multinomial_shape(probs, num_samples, replacement):
    _check_self(probs, "multinomial")
    if not probs.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: {type_name(probs.dtype)}"
        )
    if probs.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n = probs._shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    return probs._shape[:-1] + (num_samples,)


@multinomial_op.kernel("cpu")
def _multinomial_cpu(probs, num_samples, replacement=False, *, generator=None):
    shape = _multinomial_shape(probs, num_samples, replacement)
    rows = probs._shape[0] if probs.ndim == 2 else 1
    n = probs._shape[-1]
    if rows == 0:
        return _new_empty(shape, dtypes.int64, probs._device)
    gen = _generator_for(probs, generator)
    if not replacement or num_samples == 1:
        # PyTorch's path: argmax / top-k of p / q with q ~ Exponential(1) drawn in p's dtype
        # (the Gumbel-max trick), after checking the rows.
        if not bool(((probs.max() < math.inf) & (probs.min() >= 0)).item()):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if bool((probs.sum(-1) == 0).any().item()):
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        # empty_like(probs): a strided (e.g. transposed) input's q is drawn in its memory order.
        q = preserve_layout(_new_empty(probs._shape, probs.dtype, probs._device), probs, values=False)
        exponential_op(q, 1.0, generator=gen)
        keys = probs / q
        if num_samples == 1:
            return keys.argmax(-1, keepdim=True)
        return keys.topk(num_samples)[1]
    out = _new_empty(shape, dtypes.int64, probs._device)
    table_dtype = dtypes.float64 if probs.dtype is dtypes.float64 else dtypes.float32
    table = convert(probs, table_dtype).contiguous().reshape(rows, n)
    _C.mt_multinomial_(out.reshape(rows, num_samples), table, gen._rng)
    return out


@multinomial_op.kernel("meta")
def _multinomial_meta(probs, num_samples, replacement=False, *, generator=None):
    _resolve(generator)
    return _new_empty(_multinomial_shape(probs, num_samples, replacement), dtypes.int64, META)


multinomial_op.meta = _multinomial_meta


def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Category indices sampled from the rows of ``input`` (non-negative weights)."""
    num_samples, replacement = operator.index(num_samples), builtins.bool(replacement)
    result = multinomial_op(input, num_samples, replacement, generator=generator)
    return _write_out(result, out)


# The public API of this module's ops: one record per op (optable.py; docs/adding-an-op.md).
declare(__name__, """
bernoulli                   function method
bernoulli_                  method
cauchy_                     method
exponential_                method
geometric_                  method
log_normal_                 method
multinomial                 function method
normal_                     method
random_                     method
uniform_                    method
""")
