"""Binary ops: arithmetic, comparison, logical, bitwise (tensor-tensor, broadcast, Python scalars)."""

from __future__ import annotations

import operator

import numpy as np
import torch

import ember

from .core import INT_NAMES, OpInfo, Pair, Sample, make, pair_of, special_values

_PAIRS = (
    (((3, 4), "contiguous"), ((3, 4), "contiguous")),
    (((3, 4), "transposed"), ((3, 4), "sliced")),
    (((3, 4), "expanded"), ((4,), "contiguous")),
    (((2, 1, 4), "contiguous"), ((3, 1), "contiguous")),
    (((), "contiguous"), ((2, 3), "contiguous")),
    (((), "contiguous"), ((), "contiguous")),
    (((0, 3), "contiguous"), ((3,), "contiguous")),
)


def binary_samples(a_range=(-5, 5), b_range=(-5, 5), nonzero_b=False, scalars=(2, -3, 2.5, True), specials=True,
                   no_nan=False):
    def gen(name):
        out = []
        for i, ((sa, la), (sb, lb)) in enumerate(_PAIRS):
            a = make(sa, name, la, *a_range, seed=i)
            b = make(sb, name, lb, *b_range, seed=100 + i, nonzero=nonzero_b)
            out.append(Sample((a, b), desc=f"{sa} {la} x {sb} {lb}"))
        a = make((3, 4), name, "contiguous", *a_range, seed=7)
        for s in scalars:
            if nonzero_b and s == 0:
                continue
            out.append(Sample((a, s), desc=f"tensor x scalar {s!r}"))
        if specials:
            vals = special_values(name)
            if no_nan and vals.dtype.kind == "f":
                vals = vals[~np.isnan(vals)]  # PyTorch's NaN sign bit (read by copysign) depends on the dtype path
            x = pair_of(vals[:, None].repeat(len(vals), 1), name)
            y = pair_of(vals[None, :].repeat(len(vals), 0), name)
            out.append(Sample((x, y), desc="special values x special values"))
        return out

    return gen


def _getter(module, name):
    return lambda *a, **k: getattr(module, name)(*a, **k)


def binary(name, torch_name=None, tols=None, inplace=True, **sample_kw):
    return OpInfo(name, _getter(ember, torch_name or name), _getter(torch, torch_name or name),
                  binary_samples(**sample_kw),
                  tols=tols or {}, inplace=name + "_" if inplace else None, check_out=True)


def _reflected(name, fn):
    """``scalar <op> tensor`` through the Python operator (``__radd__`` and friends)."""

    def gen(dtype_name):
        a = make((3, 4), dtype_name, "transposed", seed=3, nonzero=True)
        return [Sample((s, a), desc=f"scalar {s!r} x tensor") for s in (2, -3, 2.5, True)]

    return OpInfo("reflected_" + name, fn, fn, gen)


def _operator(name, fn, **sample_kw):
    return OpInfo("operator_" + name, fn, fn, binary_samples(**sample_kw))


_DIV_KW = {"nonzero_b": True}
_SHIFT_KW = {"b_range": (0, 5), "scalars": (1, 3), "specials": False}
_POW_KW = {"a_range": (-3, 3), "b_range": (0, 4), "scalars": (2, 3, 0.5, 2.0, 0), "specials": True}

BINARY_OPS = [
    binary("add"), binary("sub"), binary("mul"), binary("div", **_DIV_KW),
    binary("div_zero", "div", inplace=False),
    binary("floor_divide", **_DIV_KW), binary("remainder", **_DIV_KW), binary("fmod", **_DIV_KW),
    binary("pow", **_POW_KW), binary("atan2"), binary("hypot"), binary("copysign", no_nan=True), binary("logaddexp"),
    binary("logaddexp2", tols={"float32": (1e-5, 1e-6)}), binary("maximum", inplace=False),
    binary("minimum", inplace=False), binary("fmax", inplace=False), binary("fmin", inplace=False),
    binary("eq"), binary("ne"), binary("lt"), binary("le"), binary("gt"), binary("ge"),
    binary("logical_and"), binary("logical_or"), binary("logical_xor"),
    binary("bitwise_and"), binary("bitwise_or"), binary("bitwise_xor"),
    binary("bitwise_left_shift", **_SHIFT_KW), binary("bitwise_right_shift", **_SHIFT_KW),
    binary("xlogy", inplace=False), binary("nextafter", inplace=False, specials=False, scalars=()),
    OpInfo("div_trunc", lambda a, b: ember.div(a, b, rounding_mode="trunc"),
           lambda a, b: torch.div(a, b, rounding_mode="trunc"), binary_samples(nonzero_b=True)),
    OpInfo("div_floor", lambda a, b: ember.div(a, b, rounding_mode="floor"),
           lambda a, b: torch.div(a, b, rounding_mode="floor"), binary_samples(nonzero_b=True)),
    OpInfo("add_alpha", lambda a, b: ember.add(a, b, alpha=2), lambda a, b: torch.add(a, b, alpha=2),
           binary_samples(specials=False)),
    OpInfo("sub_alpha", lambda a, b: ember.sub(a, b, alpha=0.5), lambda a, b: torch.sub(a, b, alpha=0.5),
           binary_samples(specials=False)),
    _operator("add", operator.add), _operator("sub", operator.sub), _operator("mul", operator.mul),
    _operator("truediv", operator.truediv, nonzero_b=True), _operator("floordiv", operator.floordiv, nonzero_b=True),
    _operator("mod", operator.mod, nonzero_b=True), _operator("pow", operator.pow, **_POW_KW),
    _operator("and", operator.and_), _operator("or", operator.or_), _operator("xor", operator.xor),
    _operator("lshift", operator.lshift, **_SHIFT_KW), _operator("rshift", operator.rshift, **_SHIFT_KW),
    _operator("lt", operator.lt), _operator("eq", operator.eq),
]
for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lt", operator.lt), ("ge", operator.ge), ("eq", operator.eq)):
    BINARY_OPS.append(_reflected(_name, _fn))


def int_zero_division_errors(name):
    """Integer division by zero raises RuntimeError on both sides."""
    a, b = make((4,), name, seed=1), pair_of(np.array([1, 0, 2, 3]), name)
    return [Sample((a, b), desc="int / 0")]


ZERO_DIV_INT = INT_NAMES
__all__ = ["BINARY_OPS", "ZERO_DIV_INT", "Pair", "int_zero_division_errors"]
