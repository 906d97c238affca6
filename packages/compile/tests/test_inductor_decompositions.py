"""The decomposition table: its API, and every decomposition against the op it replaces.

Decompositions are plain functions over ember ops, so they run eagerly here (no compile): each
must agree with the op's own kernel on values, dtype and shape; make_fx then traces through them.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler import make_fx
from ember.compiler.decompositions import (
    DECOMPOSITIONS,
    core_decompositions,
    get_decompositions,
    register_decomposition,
)

ops = ember.ops


def _x(*shape, seed=0, dtype=ember.float32):
    return ember.tensor(np.random.default_rng(seed).standard_normal(shape)).to(dtype)


def _targets(rows, classes, ignore=-100):
    t = np.random.default_rng(5).integers(0, classes, rows)
    t[::3] = ignore
    return ember.tensor(t)


CASES = {
    "_class_nll": lambda: ((_x(7, 9), _targets(7, 9), _x(9, seed=1).abs() + 0.5, -100, False, True), {}),
    "_class_nll_backward": lambda: ((_x(7, seed=2), _x(7, seed=3), _x(7, 9), _targets(7, 9, ignore=4),
                                     _x(9, seed=1).abs() + 0.5, 4, False), {}),
    "_class_nll_split": lambda: ((_x(7, 9) * 1e4, _targets(7, 9), _x(9, seed=1).abs() + 0.5, -100, False, True), {}),
    "_class_nll_split_backward": lambda: _split_backward_args(),
    "softmax": lambda: ((_x(4, 9), 1), {}),
    "log_softmax": lambda: ((_x(3, 5, 4), 0, ember.float64), {}),
    "logsumexp": lambda: ((_x(4, 6), [1], True), {}),
    "native_layer_norm": lambda: ((_x(3, 8), [8], _x(8, seed=1), _x(8, seed=2), 1e-5), {}),
    "_fused_rms_norm": lambda: ((_x(3, 8), [8], _x(8, seed=1), 1e-6), {}),
    "native_layer_norm_backward": lambda: _layer_norm_backward_args(weight=True, mask=(True, True, True)),
    "var": lambda: ((_x(5, 7), [1]), {"correction": 0, "keepdim": True}),
    "std": lambda: ((_x(5, 7), None), {}),
    "var_mean": lambda: ((_x(5, 7), [0]), {}),
    "std_mean": lambda: ((_x(2, 5, 7), [0, 2]), {"keepdim": True}),
    "add_scaled": lambda: ((_x(4), _x(4, seed=1), 2.5), {}),
    "addcmul": lambda: ((_x(4), _x(4, seed=1), _x(4, seed=2), 0.5), {}),
    "addcdiv": lambda: ((_x(4), _x(4, seed=1), _x(4, seed=2).abs() + 1, -0.5), {}),
    "silu": lambda: ((_x(10),), {}),
    "mish": lambda: ((_x(10),), {}),
    "hardsigmoid": lambda: ((_x(10) * 4,), {}),
    "hardswish": lambda: ((_x(10) * 4,), {}),
    "relu6": lambda: ((_x(10) * 8,), {}),
    "softsign": lambda: ((_x(10),), {}),
    "tanhshrink": lambda: ((_x(10),), {}),
}


def _split_backward_args():
    # scores ~1e4: lse's rounding (~1e-3) is what lo gives back; eager's kernel recomputes those rows
    x, t, w = _x(7, 9) * 1e4 + 3e4, _targets(7, 9, ignore=4), _x(9, seed=1).abs() + 0.5
    _, _, _, lse, lo = ops._class_nll_split(x, t, w, 4, False, True)
    return (_x(7, seed=2), _x(7, seed=3), x, t, w, 4, False, lse, lo), {}


def _layer_norm_backward_args(weight: bool, mask, shape=(2, 3, 4, 5), normalized=(4, 5)):
    x = _x(*shape, seed=3)
    w, b = (_x(*normalized, seed=1), _x(*normalized, seed=2)) if weight else (None, None)
    _, mean, rstd = ops.native_layer_norm(x, list(normalized), w, b, 1e-5)
    return (_x(*shape, seed=4), x, list(normalized), mean, rstd, w, b, list(mask)), {}


@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("mask", [(True, False, False), (False, True, True), (True, True, False)])
def test_layer_norm_backward_decomposition_with_missing_parts(weight, mask):
    # grads the mask leaves out, and weight/bias grads without weight and bias, are None as the op's
    args, _ = _layer_norm_backward_args(weight, mask, shape=(6, 8), normalized=(8,))
    want, got = ops.native_layer_norm_backward(*args), DECOMPOSITIONS["native_layer_norm_backward"](*args)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-5, atol=2e-6)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("name", sorted(CASES))
def test_decomposition_matches_the_op(name):
    args, kwargs = CASES[name]()
    want = _flat(getattr(ops, name)(*args, **kwargs))
    got = _flat(DECOMPOSITIONS[name](*args, **kwargs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype is w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.double().numpy(), w.double().numpy(), rtol=2e-5, atol=2e-6)


def test_every_decomposition_is_tested():
    assert set(DECOMPOSITIONS) == set(CASES)
    # cross-entropy's ops stay whole in export's default set (PyTorch's core ATen keeps nll_loss)
    assert set(core_decompositions()) == set(CASES) - {"_class_nll", "_class_nll_backward", "_class_nll_split",
                                                       "_class_nll_split_backward"}


def test_table_api():
    table = get_decompositions([ops.softmax, "var", "not_an_op", ops.mm])
    assert set(table) == {"softmax", "var"}
    assert ops.softmax in table and table[ops.softmax] is DECOMPOSITIONS["softmax"]
    assert table.get(ops.var) is DECOMPOSITIONS["var"]
    with pytest.raises(ValueError):
        register_decomposition("softmax")(lambda x, dim, dtype=None: x)


def test_make_fx_traces_through_decompositions():
    def f(x, w, b):
        return ember.nn.functional.layer_norm(ember.softmax(x, -1), (8,), w, b)

    x, w, b = _x(4, 8), _x(8, seed=1), _x(8, seed=2)
    gm = make_fx(f, decomposition_table=core_decompositions())(x, w, b)
    names = {getattr(n.target, "name", None) for n in gm.graph.nodes if n.op == "call_function"}
    assert "softmax" not in names and "native_layer_norm" not in names
    assert {"amax", "exp", "sum", "mean", "rsqrt"} <= names
    np.testing.assert_allclose(gm(x, w, b).numpy(), f(x, w, b).numpy(), rtol=1e-5, atol=1e-6)
