"""The fused recurrent-cell ops (_lstm_cell_fused, _gru_cell_fused): values against the
PyTorch composite they replace, and their derivatives against PyTorch's autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

OPS = ember.ops


def _pair(shape, rng, dtype="float64"):
    x = rng.uniform(-2, 2, shape)
    e = ember.tensor(x.copy(), dtype=getattr(ember, dtype), requires_grad=True)
    t = torch.tensor(x.copy(), dtype=getattr(torch, dtype), requires_grad=True)
    return e, t


def _close(e, t, tol):
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().to(ember.float64).numpy(), t.detach().double().numpy(), rtol=tol, atol=tol)


def _torch_lstm(input_gates, hidden_gates, c_prev):
    i, f, g, o = (input_gates + hidden_gates).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    c = f * c_prev + i * g
    tc = c.tanh()
    return torch.cat([i, f, g, o], 1), c, tc, o * tc


def _torch_gru(xg, hg, h_prev):
    xr, xz, xn = xg.chunk(3, 1)
    hr, hz, hn = hg.chunk(3, 1)
    r, z = (xr + hr).sigmoid(), (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h_prev - n), torch.cat([r, z, n], 1)


TOLS = {"float32": 2e-6, "float64": 1e-12, "bfloat16": 2e-2}


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize(("rows", "hidden"), [(3, 5), (1, 40), (0, 4)])
def test_lstm_cell_fused(dtype, rows, hidden):
    rng = np.random.default_rng(0)
    eg, tg = _pair((rows, 4 * hidden), rng, dtype)
    eh, th = _pair((rows, 4 * hidden), rng, dtype)
    ec, tc = _pair((rows, hidden), rng, dtype)
    e_out = OPS["_lstm_cell_fused"](eg, eh, ec)
    t_out = _torch_lstm(tg, th, tc)
    for e, t in zip(e_out, t_out, strict=True):
        assert e.dtype == eg.dtype
        _close(e, t, TOLS[dtype])
    if dtype == "bfloat16" or rows == 0:
        return
    # gradients reaching every output, the saved acts and tanh(c) included
    weights = [rng.standard_normal(tuple(t.shape)) for t in t_out]
    sum((t * torch.tensor(w, dtype=t.dtype)).sum() for t, w in zip(t_out, weights, strict=True)).backward()
    sum((e * ember.tensor(w, dtype=e.dtype)).sum() for e, w in zip(e_out, weights, strict=True)).backward()
    for e, t in ((eg, tg), (eh, th), (ec, tc)):
        _close(e.grad, t.grad, TOLS[dtype] * 10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_cell_fused_only_h_used(dtype):
    rng = np.random.default_rng(1)
    eg, tg = _pair((4, 12), rng, dtype)
    ec, tc = _pair((4, 3), rng, dtype)
    hidden_gates = np.zeros((4, 12))
    OPS["_lstm_cell_fused"](eg, ember.tensor(hidden_gates, dtype=eg.dtype), ec)[3].sum().backward()
    _torch_lstm(tg, torch.tensor(hidden_gates, dtype=tg.dtype), tc)[3].sum().backward()
    _close(eg.grad, tg.grad, TOLS[dtype] * 10)
    _close(ec.grad, tc.grad, TOLS[dtype] * 10)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize(("rows", "hidden"), [(3, 5), (2, 33), (0, 2)])
def test_gru_cell_fused(dtype, rows, hidden):
    rng = np.random.default_rng(0)
    exg, txg = _pair((rows, 3 * hidden), rng, dtype)
    ehg, thg = _pair((rows, 3 * hidden), rng, dtype)
    eh, th = _pair((rows, hidden), rng, dtype)
    e_h, e_rzn = OPS["_gru_cell_fused"](exg, ehg, eh)
    t_h, t_rzn = _torch_gru(txg, thg, th)
    _close(e_h, t_h, TOLS[dtype])
    _close(e_rzn, t_rzn, TOLS[dtype])
    if dtype == "bfloat16" or rows == 0:
        return
    w = rng.standard_normal(tuple(t_h.shape))
    (t_h * torch.tensor(w, dtype=t_h.dtype)).sum().backward()
    (e_h * ember.tensor(w, dtype=e_h.dtype)).sum().backward()
    for e, t in ((exg, txg), (ehg, thg), (eh, th)):
        _close(e.grad, t.grad, TOLS[dtype] * 10)


def test_gru_rzn_gradient_is_not_implemented():
    rng = np.random.default_rng(0)
    exg, _ = _pair((2, 6), rng)
    ehg, _ = _pair((2, 6), rng)
    eh, _ = _pair((2, 2), rng)
    _, rzn = OPS["_gru_cell_fused"](exg, ehg, eh)
    with pytest.raises(RuntimeError, match="not implemented"):
        rzn.sum().backward()


def test_meta_shapes():
    gates = ember.empty((3, 8), device="meta")
    shapes = [tuple(t.shape) for t in OPS["_lstm_cell_fused"](gates, gates, ember.empty((3, 2), device="meta"))]
    assert shapes == [(3, 8), (3, 2), (3, 2), (3, 2)]
    h, rzn = OPS["_gru_cell_fused"](ember.empty((3, 6), device="meta"), ember.empty((3, 6), device="meta"),
                                    ember.empty((3, 2), device="meta"))
    assert (tuple(h.shape), tuple(rzn.shape), h.device.type) == ((3, 2), (3, 6), "meta")


@pytest.mark.parametrize(("gates", "hidden_gates", "state"), [
    ((3, 7), (3, 7), (3, 1)), ((3, 8), (3, 8), (2, 2)), ((3, 8), (3, 8), (3, 3)), ((8,), (8,), (2,)),
    ((3, 8), (2, 8), (3, 2)),
])
def test_lstm_shape_errors(gates, hidden_gates, state):
    with pytest.raises(RuntimeError, match="_lstm_cell_fused"):
        OPS["_lstm_cell_fused"](ember.zeros(gates), ember.zeros(hidden_gates), ember.zeros(state))


def test_dtype_errors():
    with pytest.raises(RuntimeError, match="expected dtype"):
        OPS["_lstm_cell_fused"](ember.zeros((2, 8)), ember.zeros((2, 8)), ember.zeros((2, 2), dtype=ember.float64))
    with pytest.raises(RuntimeError, match="floating point"):
        OPS["_gru_cell_fused"](ember.zeros((2, 6), dtype=ember.int64), ember.zeros((2, 6), dtype=ember.int64),
                               ember.zeros((2, 2), dtype=ember.int64))


def test_non_contiguous_inputs():
    rng = np.random.default_rng(3)
    g = rng.standard_normal((8, 5))
    c = rng.standard_normal((2, 5))
    e_out = OPS["_lstm_cell_fused"](ember.tensor(g).t(), ember.tensor(g).flip(0).t(), ember.tensor(c).t())
    t_out = _torch_lstm(torch.tensor(g).t(), torch.tensor(g).flip(0).t(), torch.tensor(c).t())
    for e, t in zip(e_out, t_out, strict=True):
        _close(e, t, 1e-12)


# --- _lstm_layer: a whole layer direction --------------------------------------------------

def _torch_lstm_layer(xp, h0, c0, w_hh, w_hr, sizes, reverse):
    """Reference: the step loop in torch ops, with PyTorch's packed-sequence state handling."""
    offsets = [sum(sizes[:t]) for t in range(len(sizes))]
    h, c = h0, c0
    outs = [None] * len(sizes)
    for t in (reversed(range(len(sizes))) if reverse else range(len(sizes))):
        b = sizes[t]
        gates = xp[offsets[t]:offsets[t] + b] + h[:b] @ w_hh.t()
        i, f, g, o = gates.chunk(4, 1)
        c_new = f.sigmoid() * c[:b] + i.sigmoid() * g.tanh()
        h_new = o.sigmoid() * c_new.tanh()
        if w_hr is not None:
            h_new = h_new @ w_hr.t()
        outs[t] = h_new
        h = torch.cat([h_new, h[b:]])
        c = torch.cat([c_new, c[b:]])
    return torch.cat(outs), h, c


@pytest.mark.parametrize("sizes", [[3, 3, 3, 3], [3, 2, 2, 1], [1]])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("proj", [0, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lstm_layer(sizes, reverse, proj, dtype):
    rng = np.random.default_rng(0)
    hidden, batch = 4, sizes[0]
    size = proj or hidden
    exp, txp = _pair((sum(sizes), 4 * hidden), rng, dtype)
    eh, th = _pair((batch, size), rng, dtype)
    ec, tc = _pair((batch, hidden), rng, dtype)
    ew, tw = _pair((4 * hidden, size), rng, dtype)
    ewr, twr = _pair((proj, hidden), rng, dtype) if proj else (None, None)
    e_out = OPS["_lstm_layer"](exp, eh, ec, ew, ewr, sizes, reverse)[:3]
    t_out = _torch_lstm_layer(txp, th, tc, tw, twr, sizes, reverse)
    tol = TOLS[dtype] * 10
    for e, t in zip(e_out, t_out, strict=True):
        _close(e, t, tol)
    weights = [rng.standard_normal(tuple(t.shape)) for t in t_out]
    sum((t * torch.tensor(w, dtype=t.dtype)).sum() for t, w in zip(t_out, weights, strict=True)).backward()
    sum((e * ember.tensor(w, dtype=e.dtype)).sum() for e, w in zip(e_out, weights, strict=True)).backward()
    for e, t in [(exp, txp), (eh, th), (ec, tc), (ew, tw)] + ([(ewr, twr)] if proj else []):
        _close(e.grad, t.grad, tol)


def test_lstm_layer_meta_and_errors():
    meta = {"device": "meta"}
    outs = OPS["_lstm_layer"](ember.empty((6, 8), **meta), ember.empty((3, 2), **meta), ember.empty((3, 2), **meta),
                              ember.empty((8, 2), **meta), None, [3, 3], False)
    assert [tuple(t.shape) for t in outs] == [(6, 2), (3, 2), (3, 2), (6, 8), (6, 2), (6, 2), (0, 2)]
    args = (ember.zeros((6, 8)), ember.zeros((3, 2)), ember.zeros((3, 2)), ember.zeros((8, 2)), None)
    for sizes in ([3, 2], [2, 4], [3, 3, 0], [4, 2]):
        with pytest.raises(RuntimeError, match="batch_sizes"):
            OPS["_lstm_layer"](*args, sizes, False)
    with pytest.raises(RuntimeError, match="w_hh"):
        OPS["_lstm_layer"](args[0], args[1], args[2], ember.zeros((8, 3)), None, [3, 3], False)


def _torch_gru_layer(xp, h0, w_hh, b_hh, sizes, reverse):
    offsets = [sum(sizes[:t]) for t in range(len(sizes))]
    h = h0
    outs = [None] * len(sizes)
    for t in (reversed(range(len(sizes))) if reverse else range(len(sizes))):
        b = sizes[t]
        gh = h[:b] @ w_hh.t() + (0 if b_hh is None else b_hh)
        h_new, _ = _torch_gru(xp[offsets[t]:offsets[t] + b], gh, h[:b])
        outs[t] = h_new
        h = torch.cat([h_new, h[b:]])
    return torch.cat(outs), h


@pytest.mark.parametrize("sizes", [[3, 3, 3, 3], [3, 2, 2, 1], [1]])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gru_layer(sizes, reverse, bias, dtype):
    rng = np.random.default_rng(0)
    hidden, batch = 4, sizes[0]
    exp, txp = _pair((sum(sizes), 3 * hidden), rng, dtype)
    eh, th = _pair((batch, hidden), rng, dtype)
    ew, tw = _pair((3 * hidden, hidden), rng, dtype)
    eb, tb = _pair((3 * hidden,), rng, dtype) if bias else (None, None)
    e_out = OPS["_gru_layer"](exp, eh, ew, eb, sizes, reverse)[:2]
    t_out = _torch_gru_layer(txp, th, tw, tb, sizes, reverse)
    tol = TOLS[dtype] * 10
    for e, t in zip(e_out, t_out, strict=True):
        _close(e, t, tol)
    weights = [rng.standard_normal(tuple(t.shape)) for t in t_out]
    sum((t * torch.tensor(w, dtype=t.dtype)).sum() for t, w in zip(t_out, weights, strict=True)).backward()
    sum((e * ember.tensor(w, dtype=e.dtype)).sum() for e, w in zip(e_out, weights, strict=True)).backward()
    for e, t in [(exp, txp), (eh, th), (ew, tw)] + ([(eb, tb)] if bias else []):
        _close(e.grad, t.grad, tol)


def test_gru_layer_errors():
    args = (ember.zeros((6, 6)), ember.zeros((3, 2)), ember.zeros((6, 2)))
    with pytest.raises(RuntimeError, match="batch_sizes"):
        OPS["_gru_layer"](*args, None, [3, 2], False)
    with pytest.raises(RuntimeError, match="b_hh"):
        OPS["_gru_layer"](*args, ember.zeros(5), [3, 3], False)
    outs = OPS["_gru_layer"](*(ember.empty(a.shape, device="meta") for a in args), None, [3, 3], True)
    assert [tuple(t.shape) for t in outs] == [(6, 2), (3, 2), (6, 6), (6, 2)]
