"""Unary math ops and activations."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

import ember

from .core import FLOAT_NAMES, LAYOUTS, OpInfo, Sample, make, pair_of, special_values

_SHAPES = (((), "contiguous"), ((0,), "contiguous"), ((0, 3), "contiguous"), ((5,), "contiguous")) + tuple(
    ((3, 4), layout) for layout in LAYOUTS
)


def unary_samples(low=-5.0, high=5.0, kwargs=None, specials=True, no_nan=False):
    kwargs = kwargs or {}

    def gen(name):
        out = [Sample((make(shape, name, layout, low, high, seed=i),), dict(kwargs), f"{shape} {layout}")
               for i, (shape, layout) in enumerate(_SHAPES)]
        if specials:
            vals = special_values(name)
            if no_nan and name in FLOAT_NAMES:
                vals = vals[~np.isnan(vals)]  # PyTorch's NaN sign bit depends on the conversion path
            out.append(Sample((pair_of(vals, name),), dict(kwargs), "special values"))
        return out

    return gen


def unary(name, low=-5.0, high=5.0, tols=None, torch_name=None, inplace=True, kwargs=None, out=True, no_nan=False):
    e_fn = lambda *a, **k: getattr(ember, name)(*a, **k)
    t_fn = lambda *a, **k: getattr(torch, torch_name or name)(*a, **k)
    return OpInfo(name, e_fn, t_fn, unary_samples(low, high, kwargs, no_nan=no_nan), tols=tols or {},
                  inplace=name + "_" if inplace else None, check_out=out)


_LOOSE = {"float32": (1e-5, 1e-6), "float64": (1e-10, 1e-10)}
# float16/bfloat16 logit: x / (1 - x) amplifies the input's rounding near 0 and 1.
_LOGIT = {"float16": (4e-3, 1e-3), "bfloat16": (4e-2, 4e-3)}

UNARY_OPS = [
    unary("abs"), unary("neg"), unary("sign"), unary("sqrt", 0, 10), unary("rsqrt", 0.1, 10),
    unary("exp"), unary("exp2"), unary("expm1"), unary("log", 0, 10), unary("log2", 0, 10),
    unary("log10", 0, 10), unary("log1p", -1, 10), unary("sin"), unary("cos"), unary("tan"),
    unary("asin", -1, 1), unary("acos", -1, 1), unary("atan"), unary("sinh"), unary("cosh"), unary("tanh"),
    unary("asinh"), unary("acosh", 1, 10), unary("atanh", -1, 1), unary("sigmoid"), unary("erf"),
    unary("erfc"), unary("erfinv", -1, 1, tols=_LOOSE), unary("floor"), unary("ceil"), unary("round"),
    unary("trunc"), unary("frac"), unary("reciprocal"), unary("isnan", inplace=False, out=False),
    unary("isinf", inplace=False, out=False), unary("isfinite", inplace=False, out=False), unary("nan_to_num"),
    unary("lgamma", 0.1, 8, tols=_LOOSE), unary("digamma", 0.1, 8, tols=_LOOSE), unary("logit", 0, 1, tols=_LOGIT),
    unary("square"), unary("bitwise_not"), unary("logical_not"), unary("signbit", inplace=False, no_nan=True),
    unary("isposinf", inplace=False), unary("isneginf", inplace=False),
    OpInfo("round_decimals", lambda x, **k: ember.round(x, **k), lambda x, **k: torch.round(x, **k),
           lambda name: [s for d in (1, 2, -1) for s in unary_samples(-50, 50, {"decimals": d})(name)]),
    OpInfo("nan_to_num_args", lambda x, **k: ember.nan_to_num(x, **k), lambda x, **k: torch.nan_to_num(x, **k),
           unary_samples(kwargs={"nan": 1.5, "posinf": 7.0, "neginf": -8.0})),
    OpInfo("logit_eps", lambda x, **k: ember.logit(x, **k), lambda x, **k: torch.logit(x, **k),
           unary_samples(-0.5, 1.5, kwargs={"eps": 0.1}), tols=_LOGIT),
]


def activation(name, kwargs=None, tols=None, module=F, specials=True):
    e_fn = lambda *a, **k: getattr(ember, name)(*a, **k)
    t_fn = lambda *a, **k: getattr(module, name)(*a, **k)
    label = name + ("" if not kwargs else "_" + "_".join(f"{k}{v}" for k, v in kwargs.items()))
    return OpInfo(label, e_fn, t_fn, unary_samples(-6, 6, kwargs, specials=specials), tols=tols or {})


# PyTorch's float32 erf loses ~1e-4 relative accuracy where 1 + erf(x) cancels (x < -2); ember is exact there.
_GELU = {"float32": (1e-5, 1e-5)}

ACTIVATION_OPS = [
    activation("relu"), activation("gelu", tols=_GELU, specials=False),
    activation("gelu", {"approximate": "tanh"}, tols=_GELU), activation("silu"),
    activation("softplus"), activation("softplus", {"beta": 2.0, "threshold": 3.0}), activation("elu"),
    activation("elu", {"alpha": 0.5}), activation("leaky_relu"), activation("leaky_relu", {"negative_slope": 0.2}),
    activation("hardtanh"), activation("hardtanh", {"min_val": -2.0, "max_val": 3.0}), activation("hardsigmoid"),
    activation("hardswish"), activation("mish"), activation("selu"), activation("celu"),
    activation("celu", {"alpha": 2.0}), activation("relu6"), activation("softsign"), activation("tanhshrink"),
    activation("threshold", {"threshold": 0.5, "value": -2.0}),
]
