"""``torch._foreach_*``: an op applied to every tensor of a list (EMA and Polyak updates, hand-written
optimizers, gradient clipping call them directly).

PyTorch fuses each call into a few kernels over the whole list; here each is the plain op per
tensor, with PyTorch's argument forms (a tensor list, one scalar, a list of scalars, or a 0-d tensor
as the other operand), its list checks and their messages, and its results: a tuple for the
out-of-place forms, the list itself (the same object) for the in-place ones. Gradients flow through
the per-tensor ops as they do through PyTorch's foreach derivatives.
"""

from __future__ import annotations

import numbers

from ember._src.tensor import Tensor

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
          "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin",
          "sinh", "sqrt", "tan", "tanh", "trunc")
# name -> (out-of-place op, in-place method); the second operand may be a list, a scalar, a scalar list
# and, where PyTorch has that overload, a 0-d tensor
_BINARY = {"add": True, "sub": True, "mul": True, "div": True, "clamp_min": False, "clamp_max": False,
           "maximum": False, "minimum": False, "pow": False}


def _tensors(tensors, name: str) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"_foreach_{name}() received an invalid combination of arguments - got "
                        f"({type(tensors).__name__}, ...), but expected a list or tuple of Tensors as its first "
                        f"argument")
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return list(tensors)


def _same_length(a: list, b, what: str = "tensors") -> list:
    b = list(b)
    if len(a) != len(b):
        if what == "scalars":
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        raise RuntimeError(f"Tensor lists must have the same number of tensors, got {len(a)} and {len(b)}")
    return b


def _others(self: list, other, name: str, tensor_ok: bool) -> list:
    """The second operand for each tensor of ``self``."""
    if isinstance(other, Tensor):
        if not tensor_ok:
            raise TypeError(f"_foreach_{name}() received an invalid combination of arguments - got "
                            f"(list, Tensor)")
        if other.ndim != 0:
            raise RuntimeError(f"scalar tensor expected to be 0 dim but it has {other.ndim} dimensions and "
                               f"{other.numel()} elements.")
        return [other] * len(self)
    if isinstance(other, (numbers.Number,)) and not isinstance(other, Tensor):
        return [other] * len(self)
    other = list(other)
    if other and all(isinstance(o, numbers.Number) for o in other):
        return _same_length(self, other, "scalars")
    return _same_length(self, other)


def _unary(name: str):
    def out_of_place(self):
        return tuple(getattr(t, name)() for t in _tensors(self, name))

    def in_place(self):
        for t in _tensors(self, name + "_"):
            getattr(t, name + "_")()
        return self

    out_of_place.__name__, in_place.__name__ = f"_foreach_{name}", f"_foreach_{name}_"
    return out_of_place, in_place


_SCALAR_FORM = {"maximum": "clamp_min", "minimum": "clamp_max"}  # PyTorch's scalar overloads of these


def _binary(name: str, tensor_ok: bool):
    has_alpha = name in ("add", "sub")

    def apply(t, o, suffix, kwargs):
        op = _SCALAR_FORM.get(name, name) if isinstance(o, numbers.Number) else name
        if suffix and op in ("maximum", "minimum"):  # no Tensor.maximum_: the result is written back
            return t.copy_(getattr(t, op)(o))
        if has_alpha and kwargs.get("alpha", 1) != 1:
            return getattr(t, op + suffix)(o, alpha=kwargs["alpha"])
        return getattr(t, op + suffix)(o)

    def out_of_place(self, other, **kwargs):
        ts = _tensors(self, name)
        return tuple(apply(t, o, "", kwargs) for t, o in zip(ts, _others(ts, other, name, tensor_ok)))

    def in_place(self, other, **kwargs):
        ts = _tensors(self, name + "_")
        for t, o in zip(ts, _others(ts, other, name + "_", tensor_ok)):
            apply(t, o, "_", kwargs)
        return self

    out_of_place.__name__, in_place.__name__ = f"_foreach_{name}", f"_foreach_{name}_"
    return out_of_place, in_place


def _foreach_pow(self, exponent):
    import ember

    if isinstance(self, numbers.Number):  # pow(scalar, tensors)
        return tuple(ember.pow(self, t) for t in _tensors(exponent, "pow"))
    ts = _tensors(self, "pow")
    return tuple(t.pow(e) for t, e in zip(ts, _others(ts, exponent, "pow", False)))


def _foreach_lerp(self, tensors1, weight):
    ts = _tensors(self, "lerp")
    ends = _same_length(ts, tensors1)
    return tuple(t.lerp(e, w) for t, e, w in zip(ts, ends, _others(ts, weight, "lerp", True)))


def _foreach_lerp_(self, tensors1, weight):
    ts = _tensors(self, "lerp_")
    ends = _same_length(ts, tensors1)
    for t, e, w in zip(ts, ends, _others(ts, weight, "lerp_", True)):
        t.lerp_(e, w)
    return self


def _pointwise(name: str):
    def values(ts, scalars):
        if isinstance(scalars, Tensor):  # one value per tensor, from a 1-d tensor
            if scalars.ndim != 1 or scalars.numel() != len(ts):
                raise RuntimeError("Tensor list must have same number of elements as scalar list.")
            return scalars.tolist()
        return _others(ts, scalars, name, False)

    def out_of_place(self, tensor1, tensor2, scalars=1, *, value=None):
        ts = _tensors(self, name)
        a, b = _same_length(ts, tensor1), _same_length(ts, tensor2)
        vs = values(ts, value if value is not None else scalars)
        return tuple(getattr(t, name)(x, y, value=v) for t, x, y, v in zip(ts, a, b, vs))

    def in_place(self, tensor1, tensor2, scalars=1, *, value=None):
        ts = _tensors(self, name + "_")
        a, b = _same_length(ts, tensor1), _same_length(ts, tensor2)
        for t, x, y, v in zip(ts, a, b, values(ts, value if value is not None else scalars)):
            getattr(t, name + "_")(x, y, value=v)
        return self

    out_of_place.__name__, in_place.__name__ = f"_foreach_{name}", f"_foreach_{name}_"
    return out_of_place, in_place


def _foreach_norm(self, ord=2, dtype=None):  # noqa: A002 - PyTorch's argument name
    import ember

    return tuple(ember.linalg.vector_norm(t, ord, dtype=dtype) for t in _tensors(self, "norm"))


def _foreach_powsum(self, ord=2, dtype=None):  # noqa: A002
    return tuple(t.abs().pow(ord).sum(dtype=dtype) for t in _tensors(self, "powsum"))


def _foreach_max(self):
    return tuple(t.max() for t in _tensors(self, "max"))


def _foreach_mm(self, mat2):
    ts = _tensors(self, "mm")
    return tuple(t.mm(m) for t, m in zip(ts, _same_length(ts, mat2)))


def _foreach_clone(self, *, memory_format=None):
    kwargs = {} if memory_format is None else {"memory_format": memory_format}
    return tuple(t.clone(**kwargs) for t in _tensors(self, "clone"))


def _foreach_copy_(self, src, non_blocking: bool = False):
    ts = _tensors(self, "copy_")
    for t, s in zip(ts, _same_length(ts, src)):
        t.copy_(s, non_blocking=non_blocking)
    return self


def _foreach_zero_(self):
    for t in _tensors(self, "zero_"):
        t.zero_()
    return self


def _build() -> dict:
    out = {}
    for name in _UNARY:
        out[f"_foreach_{name}"], out[f"_foreach_{name}_"] = _unary(name)
    for name, tensor_ok in _BINARY.items():
        out[f"_foreach_{name}"], out[f"_foreach_{name}_"] = _binary(name, tensor_ok)
    for name in ("addcmul", "addcdiv"):
        out[f"_foreach_{name}"], out[f"_foreach_{name}_"] = _pointwise(name)
    out["_foreach_pow"] = _foreach_pow
    for fn in (_foreach_lerp, _foreach_lerp_, _foreach_norm, _foreach_powsum, _foreach_max, _foreach_mm,
               _foreach_clone, _foreach_copy_, _foreach_zero_):
        out[fn.__name__] = fn
    return out


FOREACH = _build()
