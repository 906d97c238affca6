"""The derivative table: completeness, gradcheck (float64) and gradients equal to PyTorch's.

Each case is ``(id, fn, shapes, (low, high))``: ``fn(module, *inputs)`` runs with ember and with
torch (``module`` is ``ember`` or ``torch``); ``shapes`` names the shape classes it is checked
over (broadcast, 0-d, non-contiguous inputs).
"""

from __future__ import annotations

import pytest
import torch
from ag_helpers import grads_match_torch, leaves, make_arrays

import ember
from ember._src.dispatch import OPS
from ember.autograd.formulas import FORMULAS, NON_DIFFERENTIABLE
from ember.autograd.gradcheck import gradcheck

F = torch.nn.functional


def fn_of(module):
    """Where the activation functions live: ``torch.nn.functional`` or top-level ember."""
    return F if module is torch else module


UNARY_SHAPES = {"2d": [(2, 3)], "0d": [()], "transposed": [(2, 3)]}
BINARY_SHAPES = {
    "same": [(2, 3), (2, 3)],
    "broadcast": [(2, 3), (3,)],
    "broadcast_both": [(2, 1), (1, 3)],
    "0d": [(), ()],
    "transposed": [(2, 3), (2, 3)],
}

# name -> input range, for ``module.<name>(x)``.
UNARY = {
    "sqrt": (0.2, 2), "rsqrt": (0.2, 2), "exp": (-1, 1), "exp2": (-1, 1), "expm1": (-1, 1),
    "log": (0.2, 2), "log2": (0.2, 2), "log10": (0.2, 2), "log1p": (-0.5, 1), "sin": (-2, 2),
    "cos": (-2, 2), "tan": (-1, 1), "asin": (-0.8, 0.8), "acos": (-0.8, 0.8), "atan": (-2, 2),
    "sinh": (-1, 1), "cosh": (-1, 1), "tanh": (-2, 2), "asinh": (-2, 2), "acosh": (1.2, 3),
    "atanh": (-0.8, 0.8), "sigmoid": (-3, 3), "erf": (-2, 2), "erfc": (-2, 2), "erfinv": (-0.8, 0.8),
    "reciprocal": (0.5, 2), "lgamma": (0.5, 3), "abs": (-2, 2), "neg": (-2, 2), "square": (-2, 2),
    "frac": (1.1, 1.9), "floor": (1.1, 1.9), "ceil": (1.1, 1.9), "trunc": (1.1, 1.9), "round": (1.1, 1.4),
    "sign": (0.1, 1), "nan_to_num": (-2, 2), "logit": (0.1, 0.9), "relu": (-2, 2), "selu": (-2, 2),
}

ACTIVATIONS = [
    ("relu6", lambda m, x: fn_of(m).relu6(x * 4), (-2, 2)),
    ("elu", lambda m, x: fn_of(m).elu(x, 0.7), (-2, 2)),
    ("celu", lambda m, x: fn_of(m).celu(x, 0.5), (-2, 2)),
    ("leaky_relu", lambda m, x: fn_of(m).leaky_relu(x, 0.2), (-2, 2)),
    ("hardsigmoid", lambda m, x: fn_of(m).hardsigmoid(x), (-4, 4)),
    ("hardswish", lambda m, x: fn_of(m).hardswish(x), (-4, 4)),
    ("hardtanh", lambda m, x: fn_of(m).hardtanh(x, -0.5, 0.5), (-1, 1)),
    ("gelu", lambda m, x: fn_of(m).gelu(x), (-2, 2)),
    ("gelu_tanh", lambda m, x: fn_of(m).gelu(x, approximate="tanh"), (-2, 2)),
    ("silu", lambda m, x: fn_of(m).silu(x), (-2, 2)),
    ("mish", lambda m, x: fn_of(m).mish(x), (-2, 2)),
    ("softplus", lambda m, x: fn_of(m).softplus(x, 2.0, 1.0), (-2, 2)),
    ("softsign", lambda m, x: fn_of(m).softsign(x), (-2, 2)),
    ("tanhshrink", lambda m, x: fn_of(m).tanhshrink(x), (-2, 2)),
    ("threshold", lambda m, x: fn_of(m).threshold(x, 0.1, 20.0), (-2, 2)),
    ("logit_eps", lambda m, x: m.logit(x, 0.05), (0.1, 0.9)),
    ("round_decimals", lambda m, x: m.round(x, decimals=1), (0.11, 0.14)),
]

BINARY = [
    ("add", lambda m, x, y: m.add(x, y, alpha=2), (-1, 1), (-1, 1)),
    ("sub", lambda m, x, y: m.sub(x, y, alpha=0.5), (-1, 1), (-1, 1)),
    ("mul", lambda m, x, y: x * y, (-1, 1), (-1, 1)),
    ("div", lambda m, x, y: x / y, (-1, 1), (0.5, 2)),
    ("pow", lambda m, x, y: m.pow(x, y), (0.5, 2), (-1.5, 1.5)),
    ("atan2", lambda m, x, y: m.atan2(x, y), (-1, 1), (0.2, 1)),
    ("copysign", lambda m, x, y: m.copysign(x, y), (-1, 1), (-1, 1)),
    ("fmod", lambda m, x, y: m.fmod(x, y), (0.1, 0.4), (0.5, 0.9)),
    ("remainder", lambda m, x, y: m.remainder(x, y), (0.1, 0.4), (0.5, 0.9)),
    ("hypot", lambda m, x, y: m.hypot(x, y), (0.2, 1), (-1, -0.2)),
    ("logaddexp", lambda m, x, y: m.logaddexp(x, y), (-1, 1), (-1, 1)),
    ("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), (-1, 1), (-1, 1)),
    ("xlogy", lambda m, x, y: m.xlogy(x, y), (-1, 1), (0.2, 2)),
    ("maximum", lambda m, x, y: m.maximum(x, y), (-1, 1), (-1, 1)),
    ("minimum", lambda m, x, y: m.minimum(x, y), (-1, 1), (-1, 1)),
    ("fmax", lambda m, x, y: m.fmax(x, y), (-1, 1), (-1, 1)),
    ("fmin", lambda m, x, y: m.fmin(x, y), (-1, 1), (-1, 1)),
    ("nextafter", lambda m, x, y: m.nextafter(x, y), (-1, 1), (-1, 1)),
    ("lerp_scalar", lambda m, x, y: m.lerp(x, y, 0.3), (-1, 1), (-1, 1)),
    ("where", lambda m, x, y: m.where(x > 0, x, y), (-1, 1), (-1, 1)),
    ("mul_scalar", lambda m, x, y: x * 2.5 + y, (-1, 1), (-1, 1)),
    ("rpow", lambda m, x, y: 2.0 ** x + m.pow(y, 3), (-1, 1), (-1, 1)),
    ("rsub_rdiv", lambda m, x, y: 1 - x + 2 / y, (-1, 1), (0.5, 2)),
    ("clamp_tensor", lambda m, x, y: m.clamp(x, min=y), (-1, 1), (-1, 1)),
]


def _binary_arrays(shapes, lo1, lo2, seed=0):
    a = make_arrays(shapes[:1], seed, *lo1)
    b = make_arrays(shapes[1:], seed + 1, *lo2)
    return a + b


def _check(fn, arrays, layout="contiguous"):
    es, _ = leaves(arrays, layout)
    assert gradcheck(lambda *xs: fn(ember, *xs), tuple(es))
    grads_match_torch(fn, arrays, layout)


# -- completeness ---------------------------------------------------------------------------------


# Ops PyTorch records but has no derivative for: their formula raises, as PyTorch's does.
NO_DERIVATIVE_IN_PYTORCH = {"floor_divide", "_unique2", "acosh_", "asinh_", "atanh_",
                            "_scaled_dot_product_flash_attention_backward",
                            "linalg_ldl_factor_ex", "linalg_ldl_solve", "geqrf"}


def test_every_op_has_a_formula_or_is_non_differentiable():
    missing = []
    for name, op in OPS.items():
        formula = FORMULAS.get(name)
        if formula is not None and getattr(formula.backward, "not_implemented", False):
            if name not in NO_DERIVATIVE_IN_PYTORCH:
                missing.append(name)  # a formula that only raises is a missing derivative
            continue
        if name in FORMULAS or name in NON_DIFFERENTIABLE or not op.differentiable:
            continue
        if "composite" in op.tags:
            continue  # autograd records the ops its decomposition runs (ember._src.composite)
        # An in-place op without its own entry uses its out-of-place formula.
        if "inplace" in op.tags and name.endswith("_") and name[:-1] in FORMULAS:
            continue
        missing.append(name)
    assert not missing, f"ops with neither a derivative nor a non-differentiable mark: {missing}"


@pytest.mark.parametrize("name, fn", [("floor_divide", lambda m, x: m.floor_divide(x, 2)),
                                      ("_unique2", lambda m, x: m.unique(x))])
def test_no_derivative_raises_like_pytorch(name, fn):
    if name not in FORMULAS:
        pytest.skip(f"{name} is not in this tensor-core")
    for m in (ember, torch):
        x = m.tensor([1.5, 2.5, 1.5], requires_grad=True)
        with pytest.raises(RuntimeError, match="not implemented"):
            fn(m, x).sum().backward()


def test_table_names_real_ops():
    assert set(FORMULAS) <= set(OPS)
    assert not set(FORMULAS) & NON_DIFFERENTIABLE


# -- pointwise ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape_class", list(UNARY_SHAPES))
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, shape_class):
    arrays = make_arrays(UNARY_SHAPES[shape_class], 0, *UNARY[name])
    layout = "transposed" if shape_class == "transposed" else "contiguous"
    _check(lambda m, x: getattr(m, name)(x), arrays, layout)


@pytest.mark.parametrize("shape_class", list(UNARY_SHAPES))
@pytest.mark.parametrize("name, fn, domain", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation(name, fn, domain, shape_class):
    arrays = make_arrays(UNARY_SHAPES[shape_class], 0, *domain)
    _check(fn, arrays, "transposed" if shape_class == "transposed" else "contiguous")


@pytest.mark.parametrize("shape_class", list(BINARY_SHAPES))
@pytest.mark.parametrize("name, fn, d1, d2", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, fn, d1, d2, shape_class):
    arrays = _binary_arrays(BINARY_SHAPES[shape_class], d1, d2)
    _check(fn, arrays, "transposed" if shape_class == "transposed" else "contiguous")


def test_lerp_tensor_weight():
    _check(lambda m, x, y, w: m.lerp(x, y, w), make_arrays([(2, 3), (3,), (2, 1)], 3))


def test_floor_divide_derivative_not_implemented_as_torch():
    x = ember.tensor([1.5, 2.5], dtype=ember.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        ember.floor_divide(x, 2.0).sum().backward()
