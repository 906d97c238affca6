"""PyTorch's ``torch._foreach_*`` functions: one op applied over lists of tensors.

Optimizers and EMA helpers in ordinary programs call them directly (``torch._foreach_mul_(ema,
decay)``, ``torch._foreach_lerp_``). Each is a loop over the list calling the op on one tensor at a
time, which is what PyTorch's CPU build does too (its fused multi-tensor kernels are CUDA's): no
per-element work in Python, and autograd records each call as the single-tensor op.

Overloads, as PyTorch's schemas: the second argument of a binary op is a Scalar, a list of
tensors (``alpha`` for add/sub), a list of scalars, or (add/mul/div/sub) one 0-d tensor. In-place
forms return the list they were given; out-of-place forms return a tuple.
"""

from __future__ import annotations

import numbers

from .tensor import Tensor


def _api():
    import ember

    return ember


def _check_list(name: str, tensors, empty_ok: bool = False) -> list:
    """The list, type-checked; refused when empty unless ``empty_ok`` (where another list comes
    with it, PyTorch compares the lengths first: see _require_nonempty)."""
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"{name}(): argument 'self' (position 1) must be tuple of Tensors, not "
                        f"{type(tensors).__name__}")
    if not empty_ok:
        _require_nonempty(tensors)
    return list(tensors)


def _require_nonempty(tensors) -> None:
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")


def _check_same_length(a: list, b) -> None:
    if len(a) != len(b):
        raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(a)} and {len(b)}")


def _is_scalar(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, Tensor)


def _classify(name: str, other, tensor_ok: bool):
    """("scalar", v) / ("list", [t]) / ("scalars", [v]) / ("tensor", t)."""
    if isinstance(other, Tensor):
        if other.dim() != 0:
            if not tensor_ok:
                raise TypeError(f"{name}(): a Tensor second argument must be 0-dimensional (a Scalar)")
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.dim()} dimensions and "
                               f"{other.numel()} elements.")
        return ("tensor", other) if tensor_ok else ("scalar", other.item())
    if _is_scalar(other):
        return "scalar", other
    if isinstance(other, (list, tuple)):
        if all(isinstance(o, Tensor) for o in other) and other:
            return "list", list(other)
        if all(_is_scalar(o) for o in other):
            return "scalars", list(other)
    raise TypeError(f"{name}() received an invalid combination of arguments - got (list, {type(other).__name__})")


def _seconds(name: str, tensors: list, other, tensor_ok: bool = False) -> list:
    kind, value = _classify(name, other, tensor_ok)
    if kind == "list":
        _check_same_length(tensors, value)
        return value
    if kind == "scalars":
        _require_nonempty(tensors)  # (PyTorch's order: emptiness before a scalar list's length)
        if len(value) != len(tensors):
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return value
    return [value] * len(tensors)


def _finish(name: str, tensors: list, results: list, inplace: bool, original):
    return original if inplace else tuple(results)


# --- unary ------------------------------------------------------------------------------------

_UNARY = ("abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p log2 neg "
          "reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc").split()


def _unary(op: str, inplace: bool):
    name = f"_foreach_{op}{'_' if inplace else ''}"

    def fn(self):
        tensors = _check_list(name, self)
        if inplace:
            for t in tensors:
                getattr(t, op + "_")()
            return self
        ember = _api()
        return tuple(getattr(ember, op)(t) for t in tensors)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{op}`` of each tensor of the list{' (in place)' if inplace else ''}."
    return fn


# --- binary (Scalar / Tensor[] / Scalar[] / 0-d Tensor) -----------------------------------------

_BINARY = {"add": True, "sub": True, "mul": True, "div": True, "clamp_min": False, "clamp_max": False,
           "maximum": False, "minimum": False}
_TENSOR_OVERLOAD = {"add", "mul", "div"}


def _binary_one(op: str, t, o, alpha, inplace: bool):
    ember = _api()
    if op in ("clamp_min", "clamp_max"):
        kw = {"min": o} if op == "clamp_min" else {"max": o}
        return t.clamp_(**kw) if inplace else ember.clamp(t, **kw)
    if op in ("maximum", "minimum"):
        if not isinstance(o, Tensor):
            o = ember.tensor(o, dtype=ember.result_type(t, o))
        result = getattr(ember, op)(t, o)
        if not inplace:
            return result
        if not ember.can_cast(result.dtype, t.dtype):
            raise RuntimeError(f"result type {result.dtype} can't be cast to the desired output type {t.dtype}")
        return t.copy_(result)
    kwargs = {} if alpha is None else {"alpha": alpha}
    return getattr(t, op + "_")(o, **kwargs) if inplace else getattr(ember, op)(t, o, **kwargs)


def _binary(op: str, has_alpha: bool, inplace: bool):
    name = f"_foreach_{op}{'_' if inplace else ''}"

    def fn(self, other, *, alpha=None):
        if alpha is not None and not has_alpha:
            raise TypeError(f"{name}() got an unexpected keyword argument 'alpha'")
        tensors = _check_list(name, self, empty_ok=True)
        kind = _classify(name, other, op in _TENSOR_OVERLOAD or op == "sub")[0]
        if alpha is not None and kind in ("scalar", "scalars"):
            raise TypeError(f"{name}(): alpha is only accepted with a list of tensors or a Tensor")
        seconds = _seconds(name, tensors, other, op in _TENSOR_OVERLOAD or op == "sub")
        _require_nonempty(tensors)
        results = [_binary_one(op, t, o, alpha, inplace) for t, o in zip(tensors, seconds)]
        return _finish(name, tensors, results, inplace, self)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{op}`` of each tensor of the list with a scalar, a tensor of a second list, a scalar of a " \
                 f"list of scalars{' or a 0-d tensor' if op in _TENSOR_OVERLOAD else ''}."
    return fn


def _pow(inplace: bool):
    name = "_foreach_pow_" if inplace else "_foreach_pow"

    def fn(self, exponent):
        ember = _api()
        if not inplace and _is_scalar(self):
            tensors = _check_list(name, exponent)
            return tuple(ember.pow(self, t) for t in tensors)
        tensors = _check_list(name, self, empty_ok=True)
        seconds = _seconds(name, tensors, exponent)
        _require_nonempty(tensors)
        if inplace:
            for t, e in zip(tensors, seconds):
                t.pow_(e)
            return self
        return tuple(ember.pow(t, e) for t, e in zip(tensors, seconds))

    fn.__name__ = fn.__qualname__ = name
    return fn


def _pointwise3(op: str, inplace: bool):
    name = f"_foreach_{op}{'_' if inplace else ''}"

    def fn(self, tensor1, tensor2, scalars=1, *, value=None):
        tensors = _check_list(name, self, empty_ok=True)
        t1, t2 = _check_list(name, tensor1, empty_ok=True), _check_list(name, tensor2, empty_ok=True)
        _check_same_length(tensors, t1)
        _check_same_length(tensors, t2)
        _require_nonempty(tensors)
        if value is not None:
            scalars = value
        if isinstance(scalars, Tensor):
            if scalars.dim() != 1:
                raise RuntimeError(f"Expected packed scalar Tensor to be of dimension 1. Got {scalars.dim()} instead.")
            if scalars.numel() != len(tensors):
                raise RuntimeError("Expected length of scalars to match input of length "
                                   f"{len(tensors)} but got {scalars.numel()} instead.")
            values = scalars.tolist()
        elif isinstance(scalars, (list, tuple)):
            if len(scalars) != len(tensors):
                raise RuntimeError("Tensor list must have same number of elements as scalar list.")
            values = list(scalars)
        elif _is_scalar(scalars):
            values = [scalars] * len(tensors)
        else:
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"(list, list, list, {type(scalars).__name__})")
        ember = _api()
        if inplace:
            for t, a, b, v in zip(tensors, t1, t2, values):
                getattr(t, op + "_")(a, b, value=v)
            return self
        return tuple(getattr(ember, op)(t, a, b, value=v) for t, a, b, v in zip(tensors, t1, t2, values))

    fn.__name__ = fn.__qualname__ = name
    return fn


def _lerp(inplace: bool):
    name = "_foreach_lerp_" if inplace else "_foreach_lerp"

    def fn(self, tensors1, weight):
        tensors = _check_list(name, self, empty_ok=True)
        ends = _check_list(name, tensors1, empty_ok=True)
        _check_same_length(tensors, ends)
        _require_nonempty(tensors)
        weights = _seconds(name, tensors, weight)
        ember = _api()
        if inplace:
            for t, e, w in zip(tensors, ends, weights):
                t.lerp_(e, w)
            return self
        return tuple(ember.lerp(t, e, w) for t, e, w in zip(tensors, ends, weights))

    fn.__name__ = fn.__qualname__ = name
    return fn


def _check_ord(name: str, ord):
    if isinstance(ord, Tensor) and ord.dim() == 0:
        ord = ord.item()
    if not _is_scalar(ord) or isinstance(ord, complex):
        raise TypeError(f"{name}(): argument 'ord' (position 2) must be Number, not {type(ord).__name__}")
    return ord


def _foreach_norm(self, ord=2, dtype=None):
    """The vector norm of each tensor (0-d results)."""
    tensors = _check_list("_foreach_norm", self)
    ord = _check_ord("_foreach_norm", ord)
    vector_norm = _api().linalg.vector_norm
    return tuple(vector_norm(t, ord, dtype=dtype) for t in tensors)


def _foreach_powsum(self, ord=2, dtype=None):
    """``sum(|x| ** ord)`` of each tensor, computed literally for every ``ord`` (PyTorch's)."""
    tensors = _check_list("_foreach_powsum", self)
    ord = _check_ord("_foreach_powsum", ord)
    ember = _api()
    out = []
    for t in tensors:
        x = t.abs() if dtype is None else t.abs().to(dtype)
        out.append(ember.sum(x.pow(ord)))  # literally: ord 0 counts zeros too, +-inf gives inf or 0
    return tuple(out)


def _foreach_max(self):
    """The maximum of each tensor (0-d results)."""
    tensors = _check_list("_foreach_max", self)
    for t in tensors:
        if t.numel() == 0:
            raise RuntimeError("_foreach_max cannot compute the maximum of an empty tensor; max over zero elements "
                               "is undefined.")
    return tuple(t.max() for t in tensors)


def _foreach_mm(self, mat2):
    tensors = _check_list("_foreach_mm", self, empty_ok=True)
    others = _check_list("_foreach_mm", mat2, empty_ok=True)
    if not tensors:
        raise RuntimeError("_foreach_mm requires non-empty tensor lists")
    if len(tensors) != len(others):
        raise RuntimeError("_foreach_mm: self and mat2 must have the same number of tensors")
    mm = _api().mm
    return tuple(mm(a, b) for a, b in zip(tensors, others))


def _foreach_clone(self, *, memory_format=None):
    tensors = _check_list("_foreach_clone", self)
    kwargs = {} if memory_format is None else {"memory_format": memory_format}
    return tuple(t.clone(**kwargs) for t in tensors)


def _foreach_copy_(self, src, non_blocking: bool = False):
    tensors = _check_list("_foreach_copy_", self)
    sources = _check_list("_foreach_copy_", src)
    _check_same_length(tensors, sources)
    for t, s in zip(tensors, sources):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _foreach_zero_(self):
    tensors = _check_list("_foreach_zero_", self)
    for t in tensors:
        t.zero_()
    return self


def _table() -> dict:
    table = {}
    for op in _UNARY:
        for inplace in (False, True):
            f = _unary(op, inplace)
            table[f.__name__] = f
    for op, has_alpha in _BINARY.items():
        for inplace in (False, True):
            f = _binary(op, has_alpha and op in ("add", "sub"), inplace)
            table[f.__name__] = f
    for factory in (_pow, _lerp):
        for inplace in (False, True):
            f = factory(inplace)
            table[f.__name__] = f
    for op in ("addcmul", "addcdiv"):
        for inplace in (False, True):
            f = _pointwise3(op, inplace)
            table[f.__name__] = f
    for f in (_foreach_norm, _foreach_powsum, _foreach_max, _foreach_mm, _foreach_clone, _foreach_copy_,
              _foreach_zero_):
        table[f.__name__] = f
    for f in table.values():
        f.__module__ = "ember"
    return table


FOREACH = _table()
