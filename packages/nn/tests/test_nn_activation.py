"""Activation modules against torch.nn: outputs, input and parameter gradients, reprs, state, errors."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from nn_layer_helpers import assert_close, check_module, check_state, copy_params, leaf_pair, to_np

import ember
import ember.nn as enn

# (class name, positional args, keyword args) for the elementwise activations.
ELEMENTWISE = [
    ("ReLU", (), {}),
    ("ReLU6", (), {}),
    ("LeakyReLU", (), {}),
    ("LeakyReLU", (0.2,), {}),
    ("ELU", (), {}),
    ("ELU", (0.5,), {}),
    ("SELU", (), {}),
    ("CELU", (), {}),
    ("CELU", (1.5,), {}),
    ("GELU", (), {}),
    ("GELU", (), {"approximate": "tanh"}),
    ("SiLU", (), {}),
    ("Mish", (), {}),
    ("Hardswish", (), {}),
    ("Hardsigmoid", (), {}),
    ("Hardtanh", (), {}),
    ("Hardtanh", (-2.0, 1.5), {}),
    ("Hardshrink", (), {}),
    ("Hardshrink", (1.2,), {}),
    ("Softshrink", (), {}),
    ("Softshrink", (0.9,), {}),
    ("Tanhshrink", (), {}),
    ("Threshold", (0.3, -2.0), {}),
    ("Sigmoid", (), {}),
    ("Tanh", (), {}),
    ("LogSigmoid", (), {}),
    ("Softplus", (), {}),
    ("Softplus", (2.0, 1.0), {}),
    ("Softsign", (), {}),
    ("RReLU", (), {}),
    ("RReLU", (0.2, 0.4), {}),
]
INPLACE = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "SiLU", "Mish", "Hardswish", "Hardsigmoid",
           "Hardtanh", "Threshold", "RReLU"]
# torch cannot differentiate its in-place rrelu of a non-leaf (its backward needs the overwritten input).
NO_INPLACE_GRAD = {"RReLU"}


# PyTorch's hardsigmoid backward multiplies by the float constant 1.0f / 6 even for float64.
LOOSE_F64 = {"Hardsigmoid": {"rtol": 1e-7, "atol": 1e-9}}


def _ids(cases):
    return [f"{n}{a}{k}" for n, a, k in cases]


def _pair(name, args, kwargs):
    e, t = getattr(enn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    if name == "RReLU":  # random in training mode; eval uses the mean slope
        e.eval(), t.eval()
    return e, t


@pytest.mark.parametrize("name,args,kwargs", ELEMENTWISE, ids=_ids(ELEMENTWISE))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,layout", [((2, 3, 4), "contiguous"), ((3, 5), "transposed"), ((4, 3), "sliced"),
                                          ((), "contiguous"), ((0, 3), "contiguous")])
def test_elementwise_matches_torch(name, args, kwargs, dtype, shape, layout):
    e_mod, t_mod = _pair(name, args, kwargs)
    e, t, el, tl = leaf_pair(shape, dtype, layout=layout)
    tol = LOOSE_F64.get(name, {}) if dtype == "float64" else {}
    check_module(e_mod, t_mod, [e], [t], [el], [tl], dtype, **tol)
    check_state(e_mod, t_mod)


@pytest.mark.parametrize("name", INPLACE)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inplace_matches_torch(name, dtype):
    args = (0.3, -2.0) if name == "Threshold" else ()
    e_mod, t_mod = getattr(enn, name)(*args, inplace=True), getattr(torch.nn, name)(*args, inplace=True)
    e_mod.eval(), t_mod.eval()
    check_state(e_mod, t_mod)
    e, t, el, tl = leaf_pair((3, 4), dtype, layout="transposed")
    e_in, t_in = e * 1, t * 1  # in-place ops need a non-leaf
    e_out, t_out = e_mod(e_in), t_mod(t_in)
    assert e_out is e_in
    assert_close(e_in, t_in, dtype)
    if name in NO_INPLACE_GRAD:
        return
    g = np.linspace(-1, 1, 12).reshape(3, 4)
    (e_out * ember.tensor(g, dtype=e_out.dtype)).sum().backward()
    (t_out * torch.tensor(g, dtype=t_out.dtype)).sum().backward()
    assert_close(el.grad, tl.grad, dtype, **(LOOSE_F64.get(name, {}) if dtype == "float64" else {}))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_repr_and_bad_approximate(approximate):
    check_state(enn.GELU(approximate), torch.nn.GELU(approximate))
    with pytest.raises(RuntimeError):
        torch.nn.GELU("bad")(torch.ones(2))
    with pytest.raises(RuntimeError):
        enn.GELU("bad")(ember.ones(2))


def test_reprs_with_options():
    pairs = [
        (enn.Threshold(0.1, 20, inplace=True), torch.nn.Threshold(0.1, 20, inplace=True)),
        (enn.RReLU(0.1, 0.3, inplace=True), torch.nn.RReLU(0.1, 0.3, inplace=True)),
        (enn.Hardtanh(-2, 2, True), torch.nn.Hardtanh(-2, 2, True)),
        (enn.ELU(2.0, True), torch.nn.ELU(2.0, True)),
        (enn.LeakyReLU(0.1, True), torch.nn.LeakyReLU(0.1, True)),
        (enn.Softmax(), torch.nn.Softmax()),
        (enn.LogSoftmax(-1), torch.nn.LogSoftmax(-1)),
        (enn.Softmin(0), torch.nn.Softmin(0)),
        (enn.GLU(1), torch.nn.GLU(1)),
        (enn.Softplus(3, 10), torch.nn.Softplus(3, 10)),
        (enn.PReLU(5, 0.1), torch.nn.PReLU(5, 0.1)),
        (enn.Softmax2d(), torch.nn.Softmax2d()),
        (enn.Hardshrink(2), torch.nn.Hardshrink(2)),
        (enn.Softshrink(0.25), torch.nn.Softshrink(0.25)),
    ]
    for e_mod, t_mod in pairs:
        check_state(e_mod, t_mod)
    e_seq = enn.Sequential(*[e for e, _ in pairs])
    t_seq = torch.nn.Sequential(*[t for _, t in pairs])
    assert repr(e_seq) == repr(t_seq)


def test_hardtanh_deprecated_args_and_bounds():
    with pytest.warns(FutureWarning):
        e_mod = enn.Hardtanh(min_value=-3.0)
    with pytest.warns(FutureWarning):
        t_mod = torch.nn.Hardtanh(min_value=-3.0)
    with pytest.warns(FutureWarning):
        e_mod2 = enn.Hardtanh(max_value=3.0)
    assert (e_mod.min_val, e_mod2.max_val) == (t_mod.min_val, 3.0)
    with pytest.raises(AssertionError):
        torch.nn.Hardtanh(1.0, 1.0)
    with pytest.raises(AssertionError):
        enn.Hardtanh(1.0, 1.0)


# -- PReLU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("num_parameters,shape", [(1, (5,)), (1, (2, 3, 4)), (3, (2, 3)), (3, (2, 3, 4)),
                                                  (3, (2, 3, 2, 2)), (1, ())])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prelu_matches_torch(num_parameters, shape, dtype):
    t_mod = torch.nn.PReLU(num_parameters, dtype=getattr(torch, dtype))
    e_mod = enn.PReLU(num_parameters, dtype=getattr(ember, dtype))
    check_state(e_mod, t_mod)
    assert_close(e_mod.weight, t_mod.weight.detach())
    with torch.no_grad():
        t_mod.weight.copy_(torch.linspace(-0.5, 0.7, num_parameters, dtype=getattr(torch, dtype)))
    copy_params(e_mod, t_mod)
    e, t, el, tl = leaf_pair(shape, dtype, layout="transposed" if len(shape) >= 2 else "contiguous")
    check_module(e_mod, t_mod, [e], [t], [el], [tl], dtype)


@pytest.mark.parametrize("x_shape,w_shape,w_dtype", [((3,), (3,), "float32"), ((2, 4), (3,), "float32"),
                                                     ((2, 3), (3, 1), "float32"), ((2, 3), (1, 1), "float32"),
                                                     ((2, 3, 4), (3,), "float64")])
def test_prelu_functional_errors(x_shape, w_shape, w_dtype):
    with pytest.raises(RuntimeError):
        torch.nn.functional.prelu(torch.ones(x_shape), torch.ones(w_shape, dtype=getattr(torch, w_dtype)))
    with pytest.raises(RuntimeError):
        enn.functional.prelu(ember.ones(x_shape), ember.ones(w_shape, dtype=getattr(ember, w_dtype)))


def test_prelu_default_init_and_errors():
    e_mod = enn.PReLU(4, init=0.1)
    assert isinstance(e_mod.weight, enn.Parameter) and e_mod.weight.shape == (4,)
    np.testing.assert_allclose(to_np(e_mod.weight), np.full(4, 0.1, np.float32))
    e_mod.weight.data.fill_(3.0)
    e_mod.reset_parameters()
    np.testing.assert_allclose(to_np(e_mod.weight), np.full(4, 0.1, np.float32))
    with pytest.raises(RuntimeError):
        torch.nn.PReLU(4)(torch.ones(2, 3))
    with pytest.raises(RuntimeError):
        e_mod(ember.ones(2, 3))


# -- RReLU in training mode ------------------------------------------------------------------

@pytest.mark.parametrize("inplace", [False, True])
def test_rrelu_training_slopes(inplace):
    lower, upper = 0.1, 0.3
    m = enn.RReLU(lower, upper, inplace=inplace)
    base = ember.tensor(np.linspace(-3, 3, 200).astype(np.float32), requires_grad=True)
    x = base * 1
    out = m(x)
    xs, ys = to_np(base), to_np(out)
    pos = xs >= 0
    np.testing.assert_array_equal(ys[pos], xs[pos])
    slope = ys[~pos] / xs[~pos]
    assert slope.min() >= lower - 1e-6 and slope.max() <= upper + 1e-6
    assert slope.std() > 0.01  # one slope per element, not one for all
    out.sum().backward()
    grad = to_np(base.grad)
    np.testing.assert_allclose(grad[~pos], slope, rtol=1e-5)
    np.testing.assert_array_equal(grad[pos], 1.0)


# -- softmax family --------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["Softmax", "LogSoftmax", "Softmin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_family_matches_torch(name, dim, dtype):
    e_mod, t_mod = getattr(enn, name)(dim), getattr(torch.nn, name)(dim)
    e, t, el, tl = leaf_pair((3, 4, 5), dtype, layout="transposed")
    check_module(e_mod, t_mod, [e], [t], [el], [tl], dtype)


@pytest.mark.parametrize("name", ["Softmax", "LogSoftmax", "Softmin"])
@pytest.mark.parametrize("shape", [(), (4,), (3, 4), (2, 3, 4), (2, 3, 4, 2)])
def test_softmax_implicit_dim_warns(name, shape):
    e_mod, t_mod = getattr(enn, name)(), getattr(torch.nn, name)()
    e, t, el, tl = leaf_pair(shape)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        e_out = e_mod(e)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out = t_mod(t)
    assert_close(e_out, t_out)


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax2d_matches_torch(shape, dtype):
    e, t, el, tl = leaf_pair(shape, dtype, layout="transposed")
    check_module(enn.Softmax2d(), torch.nn.Softmax2d(), [e], [t], [el], [tl], dtype)


@pytest.mark.parametrize("shape", [(3, 4), (1, 2, 3, 4, 5)])
def test_softmax2d_rejects_bad_rank(shape):
    with pytest.raises(ValueError):
        torch.nn.Softmax2d()(torch.ones(shape))
    with pytest.raises(ValueError):
        enn.Softmax2d()(ember.ones(shape))


def test_softmax_pickle_without_dim():
    m = enn.Softmax(1)
    del m.__dict__["dim"]
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.dim is None


# -- GLU -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim,shape", [(-1, (3, 4)), (0, (4, 3)), (1, (2, 6, 3)), (-1, (6,))])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_glu_matches_torch(dim, shape, dtype):
    e, t, el, tl = leaf_pair(shape, dtype, layout="transposed" if len(shape) > 1 else "contiguous")
    check_module(enn.GLU(dim), torch.nn.GLU(dim), [e], [t], [el], [tl], dtype)


@pytest.mark.parametrize("shape", [(3, 5), ()])
def test_glu_errors(shape):
    with pytest.raises(RuntimeError):
        torch.nn.GLU()(torch.ones(shape))
    with pytest.raises(RuntimeError):
        enn.GLU()(ember.ones(shape))


def test_celu_zero_alpha_errors():
    with pytest.raises(RuntimeError):
        torch.nn.CELU(0.0)(torch.ones(3))
    with pytest.raises(RuntimeError):
        enn.CELU(0.0)(ember.ones(3))


def test_modules_without_parameters_have_empty_state():
    for name in ["ReLU", "GELU", "Softmax", "Tanh"]:
        m = getattr(enn, name)()
        assert m.state_dict() == {} if hasattr(m.state_dict(), "keys") else True
        assert list(m.parameters()) == []


# -- functional forms: edge values and PyTorch's exception types -------------------------------

def _F(m):
    return torch.nn.functional if m is torch else enn.functional


def _x(m):
    return m.tensor([-3.0, -0.5, 0.0, 0.5, 3.0, float("inf"), float("-inf"), float("nan")])


FUNCTIONAL_VALUES = [
    lambda m: _F(m).hardshrink(_x(m), 0.5),
    lambda m: _F(m).softshrink(_x(m), 0.5),
    lambda m: _F(m).softshrink(_x(m), 0.0),
    lambda m: _F(m).logsigmoid(_x(m)),
    lambda m: _F(m).celu_(_x(m), 0.5),
    lambda m: _F(m).selu_(_x(m)),
    lambda m: _F(m).elu_(_x(m), 0.5),
    lambda m: _F(m).leaky_relu_(_x(m), 0.5),
    lambda m: _F(m).hardtanh_(_x(m), -2.0, 2.0),
    lambda m: _F(m).threshold_(_x(m), 0.1, 20.0),
    lambda m: _F(m).relu_(_x(m)),
    lambda m: _F(m).rrelu_(_x(m)),
    lambda m: _F(m).softmin(_x(m)[:5], 0, dtype=m.float64),
    lambda m: _F(m).log_softmax(_x(m)[:5], 0, dtype=m.float64),
    lambda m: _F(m).softmax(_x(m)[:5], -1, dtype=m.float64),
    lambda m: _F(m).relu6(m.tensor([-3, 0, 4, 9])),
    lambda m: _F(m).hardtanh(m.tensor([-3, 0, 4, 9]), -2, 5),
    lambda m: _F(m).threshold(m.tensor([-3, 0, 4, 9]), 1, 7),
    lambda m: _F(m).softsign(m.tensor([-3, 0, 4, 9])),
]


@pytest.mark.parametrize("fn", FUNCTIONAL_VALUES, ids=[str(i) for i in range(len(FUNCTIONAL_VALUES))])
def test_functional_edge_values(fn):
    assert_close(fn(ember), fn(torch))


FUNCTIONAL_ERRORS = [
    (RuntimeError, lambda m: _F(m).softshrink(m.ones(3), -1.0)),
    (IndexError, lambda m: _F(m).glu(m.ones(4, 2), 2)),
    (NotImplementedError, lambda m: _F(m).prelu(m.tensor([1, -2]), m.tensor([1]))),
    (NotImplementedError, lambda m: _F(m).leaky_relu(m.tensor([1, -2]))),
    (NotImplementedError, lambda m: _F(m).gelu(m.tensor([1, -2]))),
    (NotImplementedError, lambda m: _F(m).softmax(m.tensor([1, -2]), 0)),
    (RuntimeError, lambda m: _F(m).relu(m.tensor([True, False]))),
    (ValueError, lambda m: _F(m).hardtanh(m.ones(2), 2.0, 1.0)),
    (RuntimeError, lambda m: _F(m).gelu(m.ones(2), approximate="fast")),
]


@pytest.mark.parametrize("exc,fn", FUNCTIONAL_ERRORS, ids=[str(i) for i in range(len(FUNCTIONAL_ERRORS))])
def test_functional_errors(exc, fn):
    with pytest.raises(exc):
        fn(torch)
    with pytest.raises(exc):
        fn(ember)


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("dim", [-1, 0])
def test_gumbel_softmax(hard, dim):
    ember.manual_seed(0)
    base = ember.tensor(np.random.default_rng(0).standard_normal((4, 5)), requires_grad=True)
    y = enn.functional.gumbel_softmax(base, tau=0.5, hard=hard, dim=dim)
    ys = to_np(y)
    np.testing.assert_allclose(ys.sum(dim), 1.0, rtol=1e-12)
    if hard:
        assert set(np.unique(ys)) <= {0.0, 1.0} and np.all((ys == 1).sum(dim) == 1)
    # Gradients flow through the soft sample (straight-through when hard).
    (y * ember.tensor(np.arange(20.0).reshape(4, 5))).sum().backward()
    assert float(base.grad.abs().sum()) > 0
    with pytest.warns(UserWarning, match="eps"):
        enn.functional.gumbel_softmax(base, eps=1e-3)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_seeded_matches_torch(hard, transposed):
    """Same seed, same sample: the Gumbel noise is drawn contiguous (logical order) whatever the
    logits' layout, as PyTorch."""
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    outs = []
    for lib in (ember, torch):
        lib.manual_seed(3)
        logits = lib.tensor(x.T.copy()).t() if transposed else lib.tensor(x)
        y = lib.nn.functional.gumbel_softmax(logits, tau=0.7, hard=hard, dim=0)
        outs.append((y.detach().numpy(), lib.rand(2).numpy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("name,args", [("ReLU", ()), ("GELU", ()), ("SiLU", ()), ("ELU", ()), ("Hardswish", ()),
                                       ("LeakyReLU", (0.1,)), ("Softplus", ()), ("Mish", ()), ("Softmax", (1,)),
                                       ("LogSoftmax", (-1,)), ("Hardshrink", ()), ("Tanh", ()), ("Sigmoid", ())])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_forward(name, args, dtype):
    data = np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6)
    e = ember.tensor(data).to(getattr(ember, dtype))
    t = torch.tensor(data).to(getattr(torch, dtype))
    e_out, t_out = getattr(enn, name)(*args)(e), getattr(torch.nn, name)(*args)(t)
    assert e_out.dtype is e.dtype
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    np.testing.assert_allclose(to_np(e_out.float()), t_out.float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,bounds", [("float32", ()), ("float64", (0.1, 0.7))])
def test_rrelu_training_draws_match_torch(dtype, bounds):
    # Only x <= 0 draws a slope (one float64 uniform each, bounds rounded to the compute type),
    # so a seeded run gives torch's output, gradient and following stream.
    x = np.random.default_rng(3).standard_normal((30, 7)).astype(dtype)
    torch.manual_seed(4)
    ember.manual_seed(4)
    xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    yt = torch.nn.functional.rrelu(xt, *bounds, training=True)
    ye = ember.nn.functional.rrelu(xe, *bounds, training=True)
    yt.sum().backward()
    ye.sum().backward()
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(ember.rand(3).numpy(), torch.rand(3).numpy())


_LAYOUT_FNS = ["relu", "gelu", "silu", "leaky_relu", "elu", "hardtanh", "softplus", "rrelu", "relu6", "selu",
               "celu", "mish", "hardswish", "hardsigmoid", "sigmoid", "tanh", "logsigmoid", "softsign",
               "tanhshrink", "hardshrink", "softshrink"]


def _layout_inputs(lib):
    base = lib.arange(120, dtype=lib.float32).reshape(2, 3, 4, 5) - 50
    return {"transposed": base[0, 0].t(), "channels_last": base.contiguous(memory_format=lib.channels_last),
            "sliced": base[:, :, ::2], "permuted": base.permute(3, 1, 0, 2), "expanded": base[:, :1].expand(2, 3, 4, 5)}


@pytest.mark.parametrize("fn, training", [(fn, False) for fn in _LAYOUT_FNS] + [("rrelu", True)])
def test_activation_output_strides_match_torch(fn, training):
    # rrelu and logsigmoid allocate contiguous results; the TensorIterator ones keep a dense input's layout.
    kwargs = {"training": training} if fn == "rrelu" else {}
    ins_e, ins_t = _layout_inputs(ember), _layout_inputs(torch)
    for key in ins_t:
        ye = getattr(ember.nn.functional, fn)(ins_e[key], **kwargs)
        yt = getattr(torch.nn.functional, fn)(ins_t[key], **kwargs)
        assert ye.stride() == yt.stride(), (fn, key)
        if not (fn == "rrelu" and training):
            np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-6, atol=1e-6)
    # Tensor-level torch.rrelu too.
    xe, xt = ins_e["transposed"], ins_t["transposed"]
    assert ember.rrelu(xe, training=training).stride() == torch.rrelu(xt, training=training).stride()


def test_rrelu_lower_above_upper_refused_as_pytorch():
    # ember drew slopes from the reversed interval
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="^Lower bound should be less than or equal to the upper bound$"):
            lib.nn.functional.rrelu(lib.ones(2), lower=0.5, upper=0.1, training=True)
