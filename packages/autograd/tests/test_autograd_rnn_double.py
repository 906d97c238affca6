"""Double backward through the fused recurrent ops (``_lstm_layer``, ``_gru_layer``,
``_lstm_cell_fused``, ``_gru_cell_fused``) as ember.nn's LSTM / GRU and their cells use them:
gradgradcheck in float64, and second derivatives (a gradient penalty's gradient) against
PyTorch 2.13 with identical weights; first-order gradients stay those of the fused kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.autograd import gradgradcheck

enn = pytest.importorskip("ember.nn")
ernn = pytest.importorskip("ember.nn.utils.rnn")


def _pair(name, *args, **kwargs):
    """A torch module and an ember module of the same class holding the same float64 weights."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, name)(*args, **kwargs).double()
    em = getattr(enn, name)(*args, **kwargs).double()
    with ember.no_grad():
        for pname, p in tm.named_parameters():
            getattr(em, pname).copy_(ember.from_numpy(p.detach().numpy().copy()))
    return tm, em


def _tensors(shape, rng):
    x = rng.standard_normal(shape)
    return torch.tensor(x, requires_grad=True), ember.tensor(x, dtype=ember.float64, requires_grad=True)


def _close(e, t, tol=1e-10):
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def _flat(out):
    """The output tensors of a layer or cell call, states flattened."""
    if isinstance(out, tuple):
        return [p for part in out for p in _flat(part)]
    return [out]


def _compare_second_order(tm, em, t_call, e_call, t_inputs, e_inputs):
    """First-order gradients (plain and create_graph) and the gradient of the sum of squared
    input gradients with respect to every weight and input, against torch."""
    rng = np.random.default_rng(1)
    t_outs, e_outs = _flat(t_call()), _flat(e_call())
    weights = [rng.standard_normal(tuple(t.shape)) for t in t_outs]
    for e, t in zip(e_outs, t_outs, strict=True):
        _close(e, t)

    def loss(outs, m):
        return sum((o * m.tensor(w, dtype=o.dtype)).sum() for o, w in zip(outs, weights, strict=True))

    t_params, e_params = list(tm.parameters()), list(em.parameters())
    # first order through the fused backward kernels
    e_plain = ember.autograd.grad(loss(e_outs, ember), e_inputs + e_params)
    t_g = torch.autograd.grad(loss(t_outs, torch), t_inputs + t_params, create_graph=True)
    for e, t in zip(e_plain, t_g, strict=True):
        _close(e, t)
    # the same through the composite recomputation, then differentiated again
    e_g = ember.autograd.grad(loss(_flat(e_call()), ember), e_inputs + e_params, create_graph=True)
    for e, t in zip(e_g, t_g, strict=True):
        _close(e, t)
    n = len(t_inputs)
    t_pen = sum((g * g).sum() for g in t_g[:n])
    e_pen = sum((g * g).sum() for g in e_g[:n])
    t_gg = torch.autograd.grad(t_pen, t_inputs + t_params, allow_unused=True)
    e_gg = ember.autograd.grad(e_pen, e_inputs + e_params, allow_unused=True)
    for e, t in zip(e_gg, t_gg, strict=True):
        if t is None:
            assert e is None or not e.abs().sum().item()
        else:
            _close(e, t, 1e-9)


def _states(name, rng, shape, proj=None):
    th, eh = _tensors(shape[:-1] + (proj or shape[-1],), rng)
    if name == "GRU":
        return (th, eh), [th], [eh]
    tc, ec = _tensors(shape, rng)
    return ((th, tc), (eh, ec)), [th, tc], [eh, ec]


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
@pytest.mark.parametrize(("num_layers", "bidirectional", "batch_first"),
                         [(1, False, False), (2, True, False), (1, True, True), (2, False, True)])
@pytest.mark.parametrize("with_state", [False, True])
def test_layer_second_derivatives_match_torch(name, num_layers, bidirectional, batch_first, with_state):
    tm, em = _pair(name, 2, 3, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((2, 3, 2) if batch_first else (3, 2, 2), rng)  # batch 2, 3 steps
    t_in, e_in = [tx], [ex]
    t_state = e_state = None
    if with_state:
        (t_state, e_state), t_s, e_s = _states(name, rng, (num_layers * (1 + bidirectional), 2, 3))
        t_in, e_in = t_in + t_s, e_in + e_s
    _compare_second_order(tm, em, lambda: tm(tx, t_state), lambda: em(ex, e_state), t_in, e_in)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_projected_lstm_second_derivatives_match_torch(bidirectional):
    tm, em = _pair("LSTM", 2, 3, num_layers=2, bidirectional=bidirectional, proj_size=2)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((3, 2, 2), rng)
    (t_state, e_state), t_s, e_s = _states("LSTM", rng, (2 * (1 + bidirectional), 2, 3), proj=2)
    _compare_second_order(tm, em, lambda: tm(tx, t_state), lambda: em(ex, e_state), [tx] + t_s, [ex] + e_s)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_packed_second_derivatives_match_torch(name):
    # shrinking steps forward, growing ones in the reverse direction
    tm, em = _pair(name, 2, 3, num_layers=2, bidirectional=True)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((4, 3, 2), rng)
    lengths = [4, 2, 1]

    def t_call():
        out, h = tm(torch.nn.utils.rnn.pack_padded_sequence(tx, lengths))
        return out.data, h

    def e_call():
        out, h = em(ernn.pack_padded_sequence(ex, lengths))
        return out.data, h

    _compare_second_order(tm, em, t_call, e_call, [tx], [ex])


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_cell_second_derivatives_match_torch(name, with_state, bias):
    tm, em = _pair(name, 2, 3, bias=bias)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((2, 2), rng)
    t_in, e_in = [tx], [ex]
    t_state = e_state = None
    if with_state:
        (t_state, e_state), t_s, e_s = _states(name[:-4], rng, (2, 3))
        t_in, e_in = t_in + t_s, e_in + e_s
    _compare_second_order(tm, em, lambda: tm(tx, t_state), lambda: em(ex, e_state), t_in, e_in)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
@pytest.mark.parametrize(("num_layers", "bidirectional", "batch_first"), [(2, False, False), (1, True, True)])
def test_layer_gradgradcheck(name, num_layers, bidirectional, batch_first):
    _, em = _pair(name, 2, 2, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((1, 2, 2) if batch_first else (2, 1, 2)), dtype=ember.float64,
                     requires_grad=True)
    layers = num_layers * (1 + bidirectional)
    h0 = ember.tensor(rng.standard_normal((layers, 1, 2)), dtype=ember.float64, requires_grad=True)
    if name == "LSTM":
        c0 = ember.tensor(rng.standard_normal((layers, 1, 2)), dtype=ember.float64, requires_grad=True)
        assert gradgradcheck(lambda x, h, c: _flat(em(x, (h, c))), (x, h0, c0))
    else:
        assert gradgradcheck(lambda x, h: _flat(em(x, h)), (x, h0))


@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
def test_cell_gradgradcheck(name):
    _, em = _pair(name, 2, 3)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((2, 2)), dtype=ember.float64, requires_grad=True)
    h = ember.tensor(rng.standard_normal((2, 3)), dtype=ember.float64, requires_grad=True)
    if name == "LSTMCell":
        c = ember.tensor(rng.standard_normal((2, 3)), dtype=ember.float64, requires_grad=True)
        assert gradgradcheck(lambda x, h, c: em(x, (h, c)), (x, h, c))
    else:
        assert gradgradcheck(lambda x, h: em(x, h), (x, h))


def _f64(rng, *shape):
    return ember.tensor(rng.standard_normal(shape), dtype=ember.float64, requires_grad=True)


@pytest.mark.parametrize(("sizes", "reverse", "proj"), [([2, 2], False, False), ([2, 1], False, True),
                                                       ([2, 1], True, False)])
def test_lstm_layer_op_gradgradcheck(sizes, reverse, proj):
    # every tensor argument of the op checked, the weights included, over packed steps
    rng = np.random.default_rng(0)
    hidden, width = (2, 1) if proj else (1, 1)
    xp, h0, c0 = _f64(rng, sum(sizes), 4 * hidden), _f64(rng, 2, width), _f64(rng, 2, hidden)
    args = (xp, h0, c0, _f64(rng, 4 * hidden, width)) + ((_f64(rng, 1, 2),) if proj else ())

    def fn(xp, h0, c0, w_hh, w_hr=None):
        return ember.ops["_lstm_layer"](xp, h0, c0, w_hh, w_hr, sizes, reverse)[:3]

    assert gradgradcheck(fn, args)


@pytest.mark.parametrize(("sizes", "reverse", "bias"), [([2, 2], False, False), ([2, 1], True, True)])
def test_gru_layer_op_gradgradcheck(sizes, reverse, bias):
    rng = np.random.default_rng(0)
    args = (_f64(rng, sum(sizes), 6), _f64(rng, 2, 2), _f64(rng, 6, 2)) + ((_f64(rng, 6),) if bias else ())

    def fn(xp, h0, w_hh, b_hh=None):
        return ember.ops["_gru_layer"](xp, h0, w_hh, b_hh, sizes, reverse)[:2]

    assert gradgradcheck(fn, args)


def _torch_lstm_layer(xp, h0, c0, w_hh, sizes, reverse):
    """The layer op's outputs (out, h_n, c_n, acts, cs, tanh_cs) as a torch loop."""
    offsets = np.cumsum([0] + sizes[:-1]).tolist()
    order = list(range(len(sizes)))[::-1] if reverse else list(range(len(sizes)))
    h, c, per = h0, c0, {}
    for t in order:
        b, off = sizes[t], offsets[t]
        i, f, g, o = (xp[off:off + b] + h[:b] @ w_hh.t()).chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        c_new = f * c[:b] + i * g
        h_new = o * c_new.tanh()
        per[t] = (h_new, torch.cat([i, f, g, o], 1), c_new, c_new.tanh())
        h, c = torch.cat([h_new, h[b:]]), torch.cat([c_new, c[b:]])
    cat = [torch.cat([per[t][k] for t in range(len(sizes))]) for k in range(4)]
    return cat[0], h, c, cat[1], cat[2], cat[3]


@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_of_saved_intermediates(reverse):
    # gradients reaching the layer's acts / cs / tanh_cs and the GRU cell's rzn (first order)
    rng = np.random.default_rng(0)
    sizes = [2, 1]
    e_args = [_f64(rng, 3, 8), _f64(rng, 2, 2), _f64(rng, 2, 2), _f64(rng, 8, 2)]
    t_args = [torch.tensor(a.detach().numpy(), requires_grad=True) for a in e_args]
    e_outs = ember.ops["_lstm_layer"](*e_args, None, sizes, reverse)[:6]
    t_outs = _torch_lstm_layer(*t_args, sizes, reverse)
    weights = [rng.standard_normal(tuple(t.shape)) for t in t_outs]
    sum((t * torch.tensor(w)).sum() for t, w in zip(t_outs, weights, strict=True)).backward()
    sum((e * ember.tensor(w, dtype=ember.float64)).sum() for e, w in zip(e_outs, weights, strict=True)).backward()
    for e, t in zip(e_args, t_args, strict=True):
        _close(e.grad, t.grad)
    xg, hg, hp = _f64(rng, 2, 6), _f64(rng, 2, 6), _f64(rng, 2, 2)
    txg, thg, thp = (torch.tensor(a.detach().numpy(), requires_grad=True) for a in (xg, hg, hp))
    ember.ops["_gru_cell_fused"](xg, hg, hp)[1].sum().backward()
    r, z = (txg[:, :2] + thg[:, :2]).sigmoid(), (txg[:, 2:4] + thg[:, 2:4]).sigmoid()
    n = (txg[:, 4:] + r * thg[:, 4:]).tanh()
    torch.cat([r, z, n], 1).sum().backward()
    for e, t in ((xg, txg), (hg, thg)):
        _close(e.grad, t.grad)
    assert hp.grad is None and thp.grad is None


def test_fused_backward_ops_are_non_differentiable():
    from ember.autograd.formulas import FORMULAS, NON_DIFFERENTIABLE

    for name in ("_lstm_cell_fused_backward", "_gru_cell_fused_backward", "_lstm_layer_backward",
                 "_gru_layer_backward"):
        assert name in NON_DIFFERENTIABLE and name not in FORMULAS
