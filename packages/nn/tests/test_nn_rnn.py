"""RNN / LSTM / GRU and their cells against PyTorch 2.13 with identical weights: outputs,
final states, and gradients of the input, initial states and every weight."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import ember
import ember.nn as enn
from ember.nn.utils import rnn as ernn

MODES = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("GRU", {}), ("LSTM", {})]
MODE_IDS = ["rnn_tanh", "rnn_relu", "gru", "lstm"]


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def _close(e, t, tol=1e-10):
    np.testing.assert_allclose(_np(e), _np(t), rtol=tol, atol=tol)


def _pair(name, *args, dtype=torch.float64, **kwargs):
    """A torch module and an ember module of the same class holding the same weights."""
    tm = getattr(torch.nn, name)(*args, **kwargs).to(dtype)
    em = getattr(enn, name)(*args, **kwargs).to(getattr(ember, str(dtype).split(".")[1]))
    with ember.no_grad():
        for pname, p in tm.named_parameters():
            getattr(em, pname).copy_(ember.from_numpy(p.detach().double().numpy()))
    return tm, em


def _tensors(shape, rng, grad=True):
    x = rng.standard_normal(shape)
    t, e = torch.from_numpy(x.copy()), ember.from_numpy(x.copy())
    if grad:
        t.requires_grad_()
        e.requires_grad_()
    return t, e


def _flat_states(h):
    return list(h) if isinstance(h, tuple) else [h]


def _check(tm, em, t_out, e_out, t_inputs, e_inputs, tol=1e-10):
    """Compares outputs and states, then the gradients of a weighted sum of all of them."""
    t_parts, e_parts = [t_out[0]] + _flat_states(t_out[1]), [e_out[0]] + _flat_states(e_out[1])
    if isinstance(t_parts[0], torch.nn.utils.rnn.PackedSequence):
        t_parts[0], e_parts[0] = t_parts[0].data, e_parts[0].data
    for e, t in zip(e_parts, t_parts, strict=True):
        assert tuple(e.shape) == tuple(t.shape)
        _close(e, t, tol)
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(tuple(t.shape)) for t in t_parts]
    sum(((t * torch.from_numpy(w)).sum() for t, w in zip(t_parts, weights, strict=True))).backward()
    sum(((e * ember.from_numpy(w)).sum() for e, w in zip(e_parts, weights, strict=True))).backward()
    for e, t in zip(e_inputs, t_inputs, strict=True):
        _close(e.grad, t.grad, tol)
    for name, p in tm.named_parameters():
        _close(getattr(em, name).grad, p.grad, tol)


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_layer_matches_torch(name, kw, num_layers, bidirectional, batch_first):
    tm, em = _pair(name, 3, 5, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first, **kw)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((2, 4, 3) if batch_first else (4, 2, 3), rng)
    _check(tm, em, tm(tx), em(ex), [tx], [ex])


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("bias", [True, False])
def test_initial_state(name, kw, bias):
    tm, em = _pair(name, 3, 4, num_layers=2, bidirectional=True, bias=bias, **kw)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((5, 2, 3), rng)
    th, eh = _tensors((4, 2, 4), rng)
    if name == "LSTM":
        tc, ec = _tensors((4, 2, 4), rng)
        _check(tm, em, tm(tx, (th, tc)), em(ex, (eh, ec)), [tx, th, tc], [ex, eh, ec])
    else:
        _check(tm, em, tm(tx, th), em(ex, eh), [tx, th], [ex, eh])


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_lstm_projection(num_layers, bidirectional, with_state):
    tm, em = _pair("LSTM", 3, 6, num_layers=num_layers, bidirectional=bidirectional, proj_size=2)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((4, 3, 3), rng)
    if with_state:
        d = num_layers * (2 if bidirectional else 1)
        th, eh = _tensors((d, 3, 2), rng)
        tc, ec = _tensors((d, 3, 6), rng)
        _check(tm, em, tm(tx, (th, tc)), em(ex, (eh, ec)), [tx, th, tc], [ex, eh, ec])
    else:
        _check(tm, em, tm(tx), em(ex), [tx], [ex])


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched(name, kw, with_state, batch_first):
    tm, em = _pair(name, 3, 4, num_layers=2, bidirectional=True, batch_first=batch_first, **kw)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((5, 3), rng)
    if not with_state:
        t_out, e_out = tm(tx), em(ex)
        _check(tm, em, t_out, e_out, [tx], [ex])
        return
    th, eh = _tensors((4, 4), rng)
    if name == "LSTM":
        tc, ec = _tensors((4, 4), rng)
        _check(tm, em, tm(tx, (th, tc)), em(ex, (eh, ec)), [tx, th, tc], [ex, eh, ec])
    else:
        _check(tm, em, tm(tx, th), em(ex, eh), [tx, th], [ex, eh])


@pytest.mark.parametrize(("name", "kw"), MODES + [("LSTM", {"proj_size": 2})], ids=MODE_IDS + ["lstm_proj"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_packed_input(name, kw, enforce_sorted, with_state):
    tm, em = _pair(name, 3, 4, num_layers=2, bidirectional=True, **kw)
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    rng = np.random.default_rng(0)
    tx, ex = _tensors((5, 4, 3), rng)
    t_packed = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, enforce_sorted=enforce_sorted)
    e_packed = ernn.pack_padded_sequence(ex, lengths, enforce_sorted=enforce_sorted)
    t_in, e_in = [tx], [ex]
    t_state = e_state = None
    if with_state:
        size = kw.get("proj_size", 4)
        th, eh = _tensors((4, 4, size), rng)
        t_state, e_state = th, eh
        t_in, e_in = [tx, th], [ex, eh]
        if name == "LSTM":
            tc, ec = _tensors((4, 4, 4), rng)
            t_state, e_state = (th, tc), (eh, ec)
            t_in, e_in = [tx, th, tc], [ex, eh, ec]
    t_out, e_out = tm(t_packed, t_state), em(e_packed, e_state)
    assert isinstance(e_out[0], ernn.PackedSequence)
    assert e_out[0].batch_sizes.tolist() == t_out[0].batch_sizes.tolist()
    t_pad, t_len = torch.nn.utils.rnn.pad_packed_sequence(t_out[0])
    e_pad, e_len = ernn.pad_packed_sequence(e_out[0])
    _close(e_pad, t_pad)
    assert e_len.tolist() == t_len.tolist()
    _check(tm, em, t_out, e_out, t_in, e_in)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection_without_bias(bidirectional):
    tm, em = _pair("LSTM", 3, 5, num_layers=2, bias=False, proj_size=3, bidirectional=bidirectional,
                   batch_first=True)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((2, 4, 3), rng)
    _check(tm, em, tm(tx), em(ex), [tx], [ex])


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
def test_no_grad_and_weight_only_gradients(name, kw):
    tm, em = _pair(name, 3, 4, num_layers=2, bidirectional=True, **kw)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((4, 2, 3), rng, grad=False)
    with ember.no_grad():
        e_out = em(ex)
    assert not e_out[0].requires_grad
    t_out = tm(tx)
    _close(e_out[0], t_out[0])
    # inputs without requires_grad: only the weights get gradients
    _check(tm, em, t_out, em(ex), [], [])


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
def test_empty_batch_and_empty_sequence(name, kw):
    tm, em = _pair(name, 3, 4, **kw)
    out, _ = em(ember.zeros((3, 0, 3), dtype=ember.float64))
    assert tuple(out.shape) == tuple(tm(torch.zeros(3, 0, 3, dtype=torch.float64))[0].shape)
    _same_error(lambda: tm(torch.zeros(0, 2, 3, dtype=torch.float64)),
                lambda: em(ember.zeros((0, 2, 3), dtype=ember.float64)))


def test_bfloat16_runs_close_to_torch():
    tm, em = _pair("LSTM", 3, 4, num_layers=2, dtype=torch.bfloat16)
    x = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
    t_out, _ = tm(torch.from_numpy(x).bfloat16())
    e_out, _ = em(ember.from_numpy(x).to(ember.bfloat16).requires_grad_())
    assert e_out.dtype == ember.bfloat16
    np.testing.assert_allclose(e_out.to(ember.float32).detach().numpy(), t_out.float().detach().numpy(), atol=1e-2)
    e_out.sum().backward()
    assert em.weight_hh_l1.grad.dtype == ember.bfloat16


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
def test_float32(name, kw):
    tm, em = _pair(name, 3, 8, num_layers=2, dtype=torch.float32, **kw)
    x = np.random.default_rng(0).standard_normal((6, 2, 3)).astype(np.float32)
    tx, ex = torch.from_numpy(x).requires_grad_(), ember.from_numpy(x.copy()).requires_grad_()
    t_out, e_out = tm(tx), em(ex)
    assert e_out[0].dtype == ember.float32
    _check(tm, em, t_out, e_out, [tx], [ex], tol=2e-5)


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
def test_dropout_between_layers(name, kw):
    # p=1 zeroes the first layer's output: deterministic, so it can be compared with PyTorch.
    tm, em = _pair(name, 3, 4, num_layers=2, dropout=1.0, **kw)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((4, 2, 3), rng)
    _check(tm, em, tm(tx), em(ex), [tx], [ex])
    # eval mode: no dropout at all
    tm.eval()
    em.eval()
    tx, ex = _tensors((4, 2, 3), rng)
    _check(tm, em, tm(tx), em(ex), [tx], [ex])


def test_dropout_warns_with_one_layer():
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last recurrent layer"):
        enn.LSTM(3, 4, dropout=0.5)


@pytest.mark.parametrize(("name", "kw"), MODES + [("LSTM", {"proj_size": 2})], ids=MODE_IDS + ["lstm_proj"])
@pytest.mark.parametrize("bias", [True, False])
def test_parameter_names_and_shapes(name, kw, bias):
    tm, em = _pair(name, 3, 4, num_layers=2, bidirectional=True, bias=bias, **kw)
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())
    assert [tuple(p.shape) for p in em.parameters()] == [tuple(p.shape) for p in tm.parameters()]
    assert em._flat_weights_names == tm._flat_weights_names
    assert [[tuple(w.shape) for w in ws] for ws in em.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    assert em.flatten_parameters() is None


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
def test_default_init_range(name, kw):
    em = getattr(enn, name)(3, 16, num_layers=2, **kw)
    bound = 1 / math.sqrt(16)
    for p in em.parameters():
        values = p.detach().numpy()
        assert values.min() >= -bound and values.max() <= bound
        assert values.std() > bound / 4  # actually filled, not left empty or zero


@pytest.mark.parametrize("args", [
    ("LSTM", (3, 4), {}),
    ("LSTM", (3, 4, 2), {"bias": False, "batch_first": True, "dropout": 0.5, "bidirectional": True}),
    ("LSTM", (3, 4), {"proj_size": 2}),
    ("GRU", (3, 4), {"num_layers": 3, "bidirectional": True}),
    ("RNN", (3, 4), {"nonlinearity": "relu"}),
    ("RNN", (3, 4, 1, "relu"), {}),
    ("RNNCell", (3, 4), {"nonlinearity": "relu", "bias": False}),
    ("RNNCell", (3, 4), {}),
    ("LSTMCell", (3, 4), {"bias": False}),
    ("GRUCell", (3, 4), {}),
])
def test_repr(args):
    name, a, kw = args
    assert repr(getattr(enn, name)(*a, **kw)) == repr(getattr(torch.nn, name)(*a, **kw))


def test_reassigned_weight_is_used():
    tm, em = _pair("GRU", 3, 4)
    with torch.no_grad():
        tm.weight_hh_l0 = torch.nn.Parameter(tm.weight_hh_l0 * 2)
    em.weight_hh_l0 = enn.Parameter(ember.from_numpy(tm.weight_hh_l0.detach().numpy().copy()))
    rng = np.random.default_rng(0)
    tx, ex = _tensors((3, 2, 3), rng)
    _check(tm, em, tm(tx), em(ex), [tx], [ex])


def test_double_converts_flat_weights():
    em = enn.LSTM(3, 4).double()
    out, _ = em(ember.zeros((2, 1, 3), dtype=ember.float64))
    assert out.dtype == ember.float64
    assert em._flat_weights[0].dtype == ember.float64


# --- cells -------------------------------------------------------------------------------

CELLS = [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}), ("GRUCell", {}), ("LSTMCell", {})]
CELL_IDS = ["rnn_tanh", "rnn_relu", "gru", "lstm"]


@pytest.mark.parametrize(("name", "kw"), CELLS, ids=CELL_IDS)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_cell_matches_torch(name, kw, batched, with_state, bias):
    tm, em = _pair(name, 3, 4, bias=bias, **kw)
    rng = np.random.default_rng(0)
    tx, ex = _tensors((2, 3) if batched else (3,), rng)
    t_in, e_in = [tx], [ex]
    t_state = e_state = None
    if with_state:
        th, eh = _tensors((2, 4) if batched else (4,), rng)
        t_state, e_state, t_in, e_in = th, eh, [tx, th], [ex, eh]
        if name == "LSTMCell":
            tc, ec = _tensors((2, 4) if batched else (4,), rng)
            t_state, e_state, t_in, e_in = (th, tc), (eh, ec), [tx, th, tc], [ex, eh, ec]
    t_out, e_out = tm(tx, t_state), em(ex, e_state)
    t_parts, e_parts = _flat_states(t_out), _flat_states(e_out)
    for e, t in zip(e_parts, t_parts, strict=True):
        assert tuple(e.shape) == tuple(t.shape)
        _close(e, t)
    w = [np.random.default_rng(2).standard_normal(tuple(t.shape)) for t in t_parts]
    sum((t * torch.from_numpy(x)).sum() for t, x in zip(t_parts, w, strict=True)).backward()
    sum((e * ember.from_numpy(x)).sum() for e, x in zip(e_parts, w, strict=True)).backward()
    for e, t in zip(e_in, t_in, strict=True):
        _close(e.grad, t.grad)
    for pname, p in tm.named_parameters():
        _close(getattr(em, pname).grad, p.grad)
    assert list(em.state_dict().keys()) == list(tm.state_dict().keys())


# --- errors ------------------------------------------------------------------------------

def _same_error(t_fn, e_fn):
    with pytest.raises(Exception) as t_err:
        t_fn()
    with pytest.raises(t_err.type) as e_err:
        e_fn()
    assert str(e_err.value) == str(t_err.value).replace("torch.", "ember.")


@pytest.mark.parametrize(("name", "kw"), MODES, ids=MODE_IDS)
@pytest.mark.parametrize("case", ["input_size", "hidden_batch", "hidden_size", "input_dim", "hidden_dim",
                                  "unbatched_hidden_dim", "dtype"])
def test_forward_errors(name, kw, case):
    tm, em = _pair(name, 10, 4, num_layers=2, **kw)
    shape, state = (3, 2, 10), (2, 2, 4)
    if case == "input_size":
        shape = (3, 2, 5)
    elif case == "hidden_batch":
        state = (2, 3, 4)
    elif case == "hidden_size":
        state = (2, 2, 5)
    elif case == "input_dim":
        shape = (1, 3, 2, 10)
    elif case == "hidden_dim":
        state = (2, 4)
    elif case == "unbatched_hidden_dim":
        shape = (3, 10)
    x = np.zeros(shape)
    h = np.zeros(state)
    t_dtype = torch.float32 if case == "dtype" else torch.float64
    e_dtype = ember.float32 if case == "dtype" else ember.float64

    def t_call():
        tx, th = torch.from_numpy(x).to(t_dtype), torch.from_numpy(h)
        return tm(tx, (th, th) if name == "LSTM" else th)

    def e_call():
        ex, eh = ember.from_numpy(x).to(e_dtype), ember.from_numpy(h)
        return em(ex, (eh, eh) if name == "LSTM" else eh)

    _same_error(t_call, e_call)


def test_lstm_cell_state_size_error():
    tm, em = _pair("LSTM", 3, 4)
    h = np.zeros((1, 2, 4))
    c = np.zeros((1, 2, 5))
    _same_error(lambda: tm(torch.zeros(3, 2, 3, dtype=torch.float64), (torch.from_numpy(h), torch.from_numpy(c))),
                lambda: em(ember.zeros((3, 2, 3), dtype=ember.float64), (ember.from_numpy(h), ember.from_numpy(c))))


@pytest.mark.parametrize(("name", "args", "kw"), [
    ("LSTM", (3, 4), {"dropout": 1.5}),
    ("LSTM", (3, 4), {"dropout": True}),
    ("LSTM", (3, 4), {"bias": 1}),
    ("LSTM", (3, 4), {"batch_first": 1}),
    ("LSTM", (3.0, 4), {}),
    ("LSTM", (0, 4), {}),
    ("LSTM", (3, 4.0), {}),
    ("LSTM", (3, 0), {}),
    ("LSTM", (3, 4, 0), {}),
    ("LSTM", (3, 4), {"proj_size": -1}),
    ("LSTM", (3, 4), {"proj_size": 4}),
    ("GRU", (3, 4), {"proj_size": 2}),
    ("RNN", (3, 4), {"proj_size": 2}),
    ("RNN", (3, 4), {"nonlinearity": "sigmoid"}),
])
def test_constructor_errors(name, args, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same_error(lambda: getattr(torch.nn, name)(*args, **kw), lambda: getattr(enn, name)(*args, **kw))


@pytest.mark.parametrize(("name", "x_shape", "h_shape"), [
    ("RNNCell", (2, 5), None),
    ("RNNCell", (2, 3), (3, 4)),
    ("RNNCell", (2, 3), (2, 5)),
    ("RNNCell", (1, 2, 3), None),
    ("RNNCell", (2, 3), (1, 2, 4)),
    ("GRUCell", (2, 5), None),
    ("GRUCell", (2, 3), (3, 4)),
    ("LSTMCell", (2, 5), None),
    ("LSTMCell", (2, 3), (3, 4)),
    ("LSTMCell", (2, 3), (1, 2, 4)),
])
def test_cell_errors(name, x_shape, h_shape):
    tm, em = _pair(name, 3, 4)

    def call(lib, mod):
        x = lib.zeros(x_shape, dtype=lib.float64)
        h = None if h_shape is None else lib.zeros(h_shape, dtype=lib.float64)
        if name == "LSTMCell" and h is not None:
            h = (h, h)
        return mod(x, h)

    _same_error(lambda: call(torch, tm), lambda: call(ember, em))
