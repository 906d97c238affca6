"""ember-nn on the op database: nn.functional entries and the recurrent kernels' modules.

Entries are registered into ember.testing._opdb (``register``) and run by the database's own
forward comparison and a gradient comparison against PyTorch: the recurrent-cell entries are
what the op table's fused RNN kernels (``_lstm_cell_fused``, ``_gru_layer``, ...) name as their
coverage (``covered_by``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn  # noqa: F401  (ember.nn.functional for the entries)
from ember.testing import _opdb as db
from ember.testing._opdb import OpEntry, Sample, T

F32 = ("float32",)


def _fn(name):
    return lambda L: getattr(L.nn.functional, name)


def _entry(name, *samples, call=None):
    return db.register(OpEntry(name=f"nn.functional.{name}", kind="function", namespace="nn.functional",
                               call=call or _fn(name), dtypes=F32, tols={"float32": (2e-5, 1e-5)},
                               samples=lambda d, s=samples: [Sample(tuple(a), dict(k), desc=f"#{i}")
                                                             for i, (a, k) in enumerate(s)]))


X = T((3, 4))
XT = T((3, 4), layout="transposed")
IMG = T((2, 3, 6, 6))
FUNCTIONAL = [
    _entry("relu", ((X,), {}), ((XT,), {})),
    _entry("gelu", ((X,), {}), ((XT,), {"approximate": "tanh"})),
    _entry("softplus", ((X,), {"beta": 2.0})),
    _entry("linear", ((X, T((5, 4), seed=1), T((5,), seed=2)), {}), ((XT, T((5, 4), seed=1)), {})),
    _entry("conv2d", ((IMG, T((4, 3, 3, 3), seed=1)), {"padding": 1, "stride": 2})),
    _entry("max_pool2d", ((IMG, 2), {}), ((IMG, 3), {"stride": 2, "padding": 1})),
    _entry("avg_pool2d", ((IMG, 2), {})),
    _entry("layer_norm", ((X, (4,)), {}), ((XT, (4,), T((4,), seed=1), T((4,), seed=2)), {})),
    _entry("group_norm", ((T((2, 4, 3)), 2), {})),
    _entry("softmax", ((X, 1), {}), ((XT, 0), {})),
    _entry("log_softmax", ((X, -1), {})),
    _entry("cross_entropy", ((X, T((3,), kind="index", low=0, high=4)), {}),
           ((X, T((3,), kind="index", low=0, high=4)), {"label_smoothing": 0.1})),
    _entry("mse_loss", ((X, T((3, 4), seed=1)), {})),
    _entry("binary_cross_entropy_with_logits", ((X, T((3, 4), low=0, high=1, seed=1)), {}),
           ((XT, T((3, 4), low=0, high=1, seed=1)), {"pos_weight": T((4,), kind="positive", seed=2, grad=False)})),
    _entry("embedding", ((T((4,), kind="index", low=0, high=6), T((6, 3))), {})),
    _entry("pad", ((IMG, (1, 2, 0, 1)), {"mode": "reflect"}), ((T((2, 3, 5)), (2, 1)), {"mode": "replicate"})),
    _entry("interpolate", ((IMG,), {"scale_factor": 2, "mode": "bilinear"}), ((IMG,), {"size": (4, 5)})),
    _entry("scaled_dot_product_attention", ((T((2, 3, 4)), T((2, 5, 4), seed=1), T((2, 5, 4), seed=2)), {})),
]


def _module_call(kind, *shape_args):
    """A recurrent module with PyTorch's seeded initial weights on both libraries."""

    def call(L):
        torch.manual_seed(0)
        ref = getattr(torch.nn, kind)(*shape_args).double()
        if L is torch:
            return ref
        mod = getattr(ember.nn, kind)(*shape_args).double()
        mod.load_state_dict({k: ember.from_numpy(v.detach().numpy().copy()) for k, v in ref.state_dict().items()})
        return mod

    return call


RNN = [
    db.register(OpEntry(name=f"nn.{kind}", kind="function", namespace="nn", call=_module_call(kind, 4, 5),
                        dtypes=("float64",), samples=lambda d, shape=shape: [Sample((T(shape),), {}, "input")]))
    for kind, shape in (("LSTMCell", (3, 4)), ("GRUCell", (3, 4)), ("LSTM", (6, 3, 4)), ("GRU", (6, 3, 4)))
]


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.name) for e in FUNCTIONAL + RNN])
def test_nn_forward_matches_torch(entry):
    for dtype in entry.dtypes:
        for sample in entry.samples(dtype):
            db.run_forward(entry, sample, dtype)


def _float_leaves_grads(lib, entry, sample):
    res, _, _, leaves = db.call_sample(entry, sample, "float64", lib, requires_grad=True)
    outs = [r for r in (res if isinstance(res, (tuple, list)) else [res]) if isinstance(r, lib.Tensor)]
    flat = []
    for o in outs:  # LSTM returns (output, (h, c))
        flat += [o] if isinstance(o, lib.Tensor) else list(o)
    flat = [o for o in flat if o.dtype.is_floating_point and o.requires_grad]
    rng = np.random.default_rng(0)
    cts = [rng.uniform(-1, 1, tuple(o.shape)) for o in flat]
    cts = [torch.from_numpy(c) if lib is torch else ember.from_numpy(c.copy()) for c in cts]
    return lib.autograd.grad(flat, leaves, cts, allow_unused=True), leaves


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.name) for e in FUNCTIONAL + RNN])
def test_nn_grads_match_torch(entry):
    for sample in entry.samples("float64"):
        t_grads, t_leaves = _float_leaves_grads(torch, entry, sample)
        e_grads, _ = _float_leaves_grads(ember, entry, sample)
        for i, (eg, tg, leaf) in enumerate(zip(e_grads, t_grads, t_leaves)):
            tg = torch.zeros_like(leaf) if tg is None else tg
            eg = ember.zeros(tuple(leaf.shape), dtype=ember.float64) if eg is None else eg
            db.assert_match(eg, tg, tol=(1e-6, 1e-6), desc=f"{entry.name} {sample.desc}: grad of leaf {i}")
