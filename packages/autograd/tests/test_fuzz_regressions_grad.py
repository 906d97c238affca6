"""Regressions for gradient divergences the differential fuzzer (test_fuzz_ops) found, vs torch 2.13.

Each case runs one call on both libraries with float64 leaves and compares every gradient
exactly where it is not finite (inf/NaN placement and sign) and closely elsewhere.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as t_fwad

import ember
import ember.autograd.forward_ad as e_fwad

NAN = math.nan

# Corrections >= N warn (both libraries): expected here, not what is tested.
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning")


def _pair(values, requires_grad=True):
    e = ember.tensor(values, dtype=ember.float64, requires_grad=requires_grad)
    t = torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad)
    return e, t


def _same(e, t):
    assert e is not None and t is not None, (e, t)
    assert tuple(e.shape) == tuple(t.shape)
    a, b = np.asarray(e.tolist(), dtype=float), np.asarray(t.tolist(), dtype=float)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_array_equal(np.isinf(a) * np.sign(a), np.isinf(b) * np.sign(b))
    finite = np.isfinite(b)
    np.testing.assert_allclose(a[finite], b[finite], rtol=1e-12, atol=1e-14)


def _grads_match(fn, *value_lists, cotangent_seed=0):
    """fn(module, *leaves) on both sides; compares the outputs and every leaf's gradient."""
    pairs = [_pair(v) for v in value_lists]
    e_out, t_out = fn(ember, *[p[0] for p in pairs]), fn(torch, *[p[1] for p in pairs])
    e_outs = e_out if isinstance(e_out, tuple) else (e_out,)
    t_outs = t_out if isinstance(t_out, tuple) else (t_out,)
    rng = np.random.default_rng(cotangent_seed)
    cts = [rng.uniform(-1, 1, tuple(t.shape)) for t in t_outs]
    e_grads = ember.autograd.grad(e_outs, [p[0] for p in pairs], [ember.tensor(c) for c in cts])
    t_grads = torch.autograd.grad(t_outs, [p[1] for p in pairs], [torch.tensor(c) for c in cts])
    for eo, to in zip(e_outs, t_outs):
        _same(eo.detach(), to.detach())
    for eg, tg in zip(e_grads, t_grads):
        _same(eg, tg)


# -- in-place ops without a derivative ------------------------------------------------------------

# PyTorch's derivatives.yaml gives acosh_/asinh_/atanh_ no derivative (not_implemented); every other
# in-place op differentiates like its out-of-place form (self as it was is saved for it).
NO_DERIVATIVE = ["acosh_", "asinh_", "atanh_"]
WITH_DERIVATIVE = ["asin_", "sin_", "log_", "sqrt_", "exp_", "tanh_", "sigmoid_", "relu_", "erf_", "reciprocal_"]


def _inplace_values(name):
    return [1.5, 2.0, 3.5] if name == "acosh_" else [0.2, 0.5, 0.7]


@pytest.mark.parametrize("name", NO_DERIVATIVE)
@pytest.mark.parametrize("on_view", [False, True])
def test_inplace_without_derivative_raises_at_backward(name, on_view):
    for m in (ember, torch):
        x = m.tensor(_inplace_values(name), dtype=m.float64, requires_grad=True)
        y = x.clone()
        getattr(y[1:] if on_view else y, name)()  # the forward works
        if not on_view:
            assert type(y.grad_fn).__name__ == name[:-1].capitalize() + "Backward1"
        with pytest.raises(NotImplementedError, match=f"inplace version of {name[:-1]}"):
            y.sum().backward()


@pytest.mark.parametrize("name", NO_DERIVATIVE)
def test_inplace_without_derivative_has_no_forward_ad(name):
    for m, fwad in ((ember, e_fwad), (torch, t_fwad)):
        with fwad.dual_level():
            values = m.tensor(_inplace_values(name), dtype=m.float64)
            x = fwad.make_dual(values, m.ones(3, dtype=m.float64)).clone()
            with pytest.raises(NotImplementedError, match="forward AD"):
                getattr(x, name)()


@pytest.mark.parametrize("name", WITH_DERIVATIVE)
def test_inplace_with_derivative_matches(name):
    _grads_match(lambda m, x: getattr(x.clone(), name)() * 2, _inplace_values(name))


# -- clamp ---------------------------------------------------------------------------------------

# Crossed bounds (min > max), ties and NaNs in self, min and max.
X = [-2.0, -1.0, 0.0, 1.0, 2.0, NAN, 0.5, 1.0]
LOW = [1.0, -1.5, 0.0, 2.0, NAN, 0.0, 1.0, 1.0]
HIGH = [-1.0, 0.5, 0.0, 1.5, 1.0, 1.0, NAN, 0.0]


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x, lo, hi: m.clamp(x, lo, hi),
        lambda m, x, lo, hi: m.clamp(x, min=lo) * m.clamp(x, max=hi),
        lambda m, x, lo, hi: m.clamp(x, lo[:1], hi[1:2]),  # broadcast bounds
        lambda m, x, lo, hi: x.clone().clamp_(lo, hi),
    ],
    ids=["both", "one", "broadcast", "inplace"],
)
def test_clamp_tensor_bounds(fn):
    _grads_match(fn, X, LOW, HIGH)


@pytest.mark.parametrize("low, high", [(1.0, -1.0), (0.0, 0.0), (NAN, 1.0), (0.0, NAN), (None, 0.5), (-0.5, None)])
def test_clamp_number_bounds(low, high):
    _grads_match(lambda m, x: m.clamp(x, low, high), X)


def test_inplace_clamp_is_recorded():
    # clamp_ used to write through out= and keep self's old history (gradient 1 everywhere).
    _grads_match(lambda m, x: x.clone().clamp_(-0.5, 1.0) + x.clone().clip_(max=0.0) * 3, X)
    for m in (ember, torch):
        with pytest.raises(RuntimeError, match="leaf Variable"):
            m.tensor([1.0], requires_grad=True).clamp_(0, 1)
        with pytest.raises(RuntimeError, match="more than one element"):  # its own op keeps the overlap checks
            m.zeros(1).expand(3).clamp_(0, 1)
        y = m.arange(4.0)
        with pytest.raises(RuntimeError, match="some elements"):
            y[1:].clamp_(y[:3], m.tensor(10.0))


@pytest.mark.parametrize("bounds", ["both", "min", "max"])
def test_clamp_forward_ad(bounds):
    tangents = {}
    for m, fwad in ((ember, e_fwad), (torch, t_fwad)):
        with fwad.dual_level():
            x, lo, hi = (
                fwad.make_dual(m.tensor(v, dtype=m.float64), m.full((len(v),), s, dtype=m.float64))
                for v, s in ((X, 1.0), (LOW, 10.0), (HIGH, 100.0))
            )
            kwargs = {"both": {"min": lo, "max": hi}, "min": {"min": lo}, "max": {"max": hi}}[bounds]
            tangents[m] = fwad.unpack_dual(m.clamp(x, **kwargs)).tangent
    _same(tangents[ember], tangents[torch])


# -- div with a rounding mode --------------------------------------------------------------------

NUM = [-2.5, 3.0, 0.0, 1.5, -1.0, NAN]
DEN = [2.0, 0.0, 0.0, -0.5, math.inf, 1.0]


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("form", ["tensor", "broadcast", "number", "inplace"])
def test_div_rounding_mode_gradient_is_zero(mode, form):
    if form == "tensor":
        _grads_match(lambda m, x, y: m.div(x, y, rounding_mode=mode), NUM, DEN)
    elif form == "broadcast":
        _grads_match(lambda m, x, y: m.div(x, y[1:2], rounding_mode=mode), NUM, DEN)
    elif form == "number":
        _grads_match(lambda m, x: m.div(x, 0.0, rounding_mode=mode) + m.div(x, 2, rounding_mode=mode), NUM)
    else:
        _grads_match(lambda m, x, y: (x * 1).div_(y, rounding_mode=mode), NUM, DEN)


def test_div_rounding_mode_node_and_forward_ad():
    e, t = _pair(NUM)
    assert type(ember.div(e, 2.0, rounding_mode="floor").grad_fn).__name__ == "DivBackward2"
    for m, fwad, x in ((ember, e_fwad, e), (torch, t_fwad, t)):
        with fwad.dual_level():
            dual = fwad.make_dual(x.detach(), m.ones(len(NUM), dtype=m.float64))
            assert fwad.unpack_dual(m.div(dual, 2.0, rounding_mode="trunc")).tangent.tolist() == [0.0] * len(NUM)


def test_div_other_gradient_grouping():
    # -g * (self / other) / other: large and tiny divisors overflow/underflow as in PyTorch.
    _grads_match(lambda m, x, y: x / y, [1.0, 1e200, 1e-200, 0.0, 2.0], [1e-200, 1e200, 1e200, 0.0, 1e-170])


def test_floor_divide_still_has_no_derivative():
    for m in (ember, torch):
        x = m.tensor([1.5, 2.5], dtype=m.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="not implemented"):
            (x // 2).sum().backward()


# -- var / std -----------------------------------------------------------------------------------

MOMENTS = ["var", "std", "var_mean", "std_mean"]
DATA_2x3 = [[0.3, -1.2, 0.8], [2.0, 0.1, -0.4]]


@pytest.mark.parametrize("fn", MOMENTS)
@pytest.mark.parametrize("correction", [0, 1, 3, 6, 7, 2.5])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1), []])
@pytest.mark.parametrize("keepdim", [False, True])
def test_moment_corrections(fn, correction, dim, keepdim):
    kwargs = {"correction": correction, "keepdim": keepdim}
    if dim is not None:
        kwargs["dim"] = dim
    _grads_match(lambda m, x: getattr(m, fn)(x, **kwargs), DATA_2x3)


@pytest.mark.parametrize("fn", MOMENTS)
@pytest.mark.parametrize("values", [0.7, [0.7], [0.5, 0.5, 0.5], [[1.0], [2.0]]], ids=["0d", "one", "const", "col"])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_moment_degenerate_inputs(fn, values, correction):
    # 0-d inputs, a single element, constant values (std 0, x equal to its mean everywhere).
    for dim in ([None, 0] if isinstance(values, list) else [None]):
        kwargs = {"correction": correction} if dim is None else {"correction": correction, "dim": dim}
        _grads_match(lambda m, x, kw=kwargs: getattr(m, fn)(x, **kw), values)


def test_moment_unbiased_flag():
    _grads_match(lambda m, x: m.std(x, 1, False, True) + m.var(x, unbiased=True).expand(1, 1), [[0.5], [0.9]])



# -- in-place activations (found by the deep gradient fuzz) -------------------------------------

ACT_X = [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 7.0]


def _functional(m):
    return m.nn.functional


@pytest.mark.parametrize(
    "name, fn",
    [
        ("leaky_relu", lambda F, y, a: F.leaky_relu(y, a, inplace=True)),
        ("elu", lambda F, y, a: F.elu(y, alpha=a, inplace=True)),
        ("celu", lambda F, y, a: F.celu(y, alpha=a, inplace=True)),
    ],
)
@pytest.mark.parametrize("slope", [0.7, 0.0, -0.5])
def test_inplace_activation_differentiates_from_result(name, fn, slope):
    # PyTorch's elu_/celu_/leaky_relu_ save their result, not self, and refuse a negative slope at
    # backward (the result then does not tell the input's sign).
    if name == "celu" and slope == 0.0:
        pytest.skip("celu's alpha must not be 0")
    if slope < 0:
        for m in (ember, torch):
            x = m.tensor(ACT_X, dtype=m.float64, requires_grad=True)
            y = fn(_functional(m), x.clone(), slope)
            with pytest.raises(RuntimeError, match="negative slope"):
                y.sum().backward()
        return
    _grads_match(lambda m, x: fn(_functional(m), x.clone(), slope) * 1.5, ACT_X)
    x = ember.tensor(ACT_X, dtype=ember.float64, requires_grad=True)
    node = type(fn(ember.nn.functional, x.clone(), slope).grad_fn).__name__
    assert node == {"leaky_relu": "LeakyReluBackward1", "elu": "EluBackward1", "celu": "CeluBackward1"}[name]


@pytest.mark.parametrize("alpha", [0.7, 1.3, -0.4])
def test_celu_gradient_rounds_alpha_like_pytorch(alpha):
    # PyTorch scales by 1 / float32(alpha) (celu's forward does too): a 1e-8 relative difference.
    _grads_match(lambda m, x: _functional(m).celu(x, alpha=alpha), ACT_X)


def test_inplace_relu6_is_hardtanh_():
    # relu6(inplace=True) used to copy relu6's result into its input, overwriting what relu6 saved.
    _grads_match(lambda m, x: _functional(m).relu6(x * 3, inplace=True), ACT_X)


# -- norm: dims are checked in order (an empty one before a later dim out of range) --------------


@pytest.mark.parametrize("shape, dim", [((0,), [0, 1]), ((3, 0), [0, 5]), ((3, 0), -1), ((3, 0), [1, 0])])
def test_inf_norm_on_empty_dim_error_order(shape, dim):
    errors = []
    for m in (ember, torch):
        with pytest.raises((RuntimeError, IndexError)) as info:
            m.norm(m.zeros(shape, dtype=m.float64), math.inf, dim)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]) == str(errors[1])


@pytest.mark.parametrize("shape, dim", [((0, 1), [0, 1, 2]), ((3,), (0, 1, 5)), ((2, 2, 2), [1, 2, 0])])
def test_fro_norm_over_more_than_two_dims_is_a_matrix_norm_error(shape, dim):
    errors = []
    for m in (ember, torch):
        with pytest.raises(RuntimeError) as info:
            m.norm(m.zeros(shape, dtype=m.float64, requires_grad=True), "fro", dim)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("shapes, dim", [([(2,), (1,)], 2), ([(2,), (2, 1)], 5), ([(2,), (1,)], 1)])
def test_stack_checks_dim_before_shapes(shapes, dim):
    errors = []
    for m in (ember, torch):
        with pytest.raises((RuntimeError, IndexError)) as info:
            m.stack([m.zeros(s, requires_grad=True) for s in shapes], dim)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]) == str(errors[1])


# -- writing into an input after its use: only what PyTorch saves is version-checked -------------

AFTER_USE = {
    "view": lambda m, y: y.view(6),
    "unsqueeze": lambda m, y: y.unsqueeze(1),
    "select": lambda m, y: y[1],
    "slice": lambda m, y: y[:, 1:],
    "diagonal": lambda m, y: y.diagonal(),
    "as_strided": lambda m, y: y.as_strided((2, 2), (1, 2)),
    "unfold": lambda m, y: y.unfold(1, 2, 1),
    "unbind": lambda m, y: y.unbind(0)[1],
    "sum": lambda m, y: y.sum(1),
    "mean": lambda m, y: y.mean(),
    "cat": lambda m, y: m.cat([y, y]),
    "neg": lambda m, y: -y,
    "floor": lambda m, y: y.floor(),
    "sub": lambda m, y: y.detach() - y,
    "mul_number": lambda m, y: y * 3,
    "div_number": lambda m, y: y / 2,
    "mul_constant": lambda m, y: y * y.detach(),  # saves the constant: both raise
    "pow": lambda m, y: y**2,  # saves y: both raise
}


@pytest.mark.parametrize("name", list(AFTER_USE))
def test_inplace_write_after_use(name):
    results = []
    for m in (ember, torch):
        x = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=m.float64, requires_grad=True)
        y = x * 1
        w = AFTER_USE[name](m, y) + 0
        with m.no_grad():
            y.add_(1)
        try:
            results.append(m.autograd.grad(w, x, m.ones_like(w))[0])
        except RuntimeError as exc:
            assert "modified by an inplace operation" in str(exc)
            results.append(None)
    assert (results[0] is None) == (results[1] is None)
    if results[1] is not None:
        _same(*results)


@pytest.mark.parametrize("op", ["sin_", "exp_", "elu", "mul_"])
def test_double_backward_through_inplace_on_view(op):
    # The as_strided in CopySlices' backward reads only its input's geometry (its input is then
    # written into); a saved result unpacks with the view's history, so the op runs once per backward.
    def fn(m, x):
        y = x * 1
        view = y[1:]
        if op == "elu":
            _functional(m).elu(view, 0.5, inplace=True)
        else:
            getattr(view, op)(*([2.0] if op == "mul_" else []))
        (g,) = m.autograd.grad((y * y).sum(), x, create_graph=True)
        return g

    _grads_match(fn, [-1.0, 0.5, 2.0, -3.0])
