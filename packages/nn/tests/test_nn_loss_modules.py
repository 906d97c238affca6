"""Loss modules against torch.nn: every reduction and option, input gradients, legacy arguments, errors."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import torch
from nn_layer_helpers import arrays, assert_close, check_module, check_state, leaf_pair

import ember
import ember.nn as enn

REDUCTIONS = ["none", "mean", "sum"]


def _spec(kind, shape, dtype, seed, layout):
    """(ember input, torch input, ember leaf or None, torch leaf or None) of one loss argument."""
    rng = np.random.default_rng(seed)
    if kind == "index":  # (classes, shape)
        c, shape = shape
        a = rng.integers(0, c, shape).astype(np.int64)
        return ember.tensor(a.copy()), torch.tensor(a.copy()), None, None
    if kind in ("sign", "binary"):
        a = rng.integers(0, 2, shape).astype(dtype)
        a = 2 * a - 1 if kind == "sign" else a
        return ember.tensor(a.copy()), torch.tensor(a.copy()), None, None
    low, high = {"real": (-2.0, 2.0), "prob": (0.05, 0.95), "pos": (0.2, 3.0)}[kind]
    e, t, el, tl = leaf_pair(shape, dtype, seed, low, high, layout if len(shape) >= 2 else "contiguous")
    return e, t, el, tl


def _inputs(specs, dtype, layout):
    es, ts, els, tls = [], [], [], []
    for i, (kind, shape) in enumerate(specs):
        e, t, el, tl = _spec(kind, shape, dtype, i, layout)
        es.append(e), ts.append(t)
        if el is not None:
            els.append(el), tls.append(tl)
    return es, ts, els, tls


def _tensor_kwargs(kwargs, dtype):
    """Tensor-valued options (weights) as matching ember and torch tensors of the test dtype."""
    e_kw, t_kw = {}, {}
    for k, v in kwargs.items():
        if isinstance(v, np.ndarray):
            e_kw[k] = ember.tensor(v.astype(dtype))
            t_kw[k] = torch.tensor(v.astype(dtype))
        else:
            e_kw[k] = t_kw[k] = v
    return e_kw, t_kw


W4 = np.array([0.5, 1.0, 2.0, 0.25])
W5 = np.array([0.2, 1.5, 1.0, 0.7, 3.0])

# (module name, constructor kwargs, input specs); every case runs with each reduction.
CASES = [
    ("L1Loss", {}, [("real", (3, 4)), ("real", (3, 4))]),
    ("L1Loss", {}, [("real", ()), ("real", ())]),
    ("MSELoss", {}, [("real", (3, 4)), ("real", (3, 4))]),
    ("MSELoss", {}, [("real", (2, 3, 2)), ("real", (2, 3, 2))]),
    ("HuberLoss", {}, [("real", (3, 4)), ("real", (3, 4))]),
    ("HuberLoss", {"delta": 0.5}, [("real", (3, 4)), ("real", (3, 4))]),
    ("SmoothL1Loss", {}, [("real", (3, 4)), ("real", (3, 4))]),
    ("SmoothL1Loss", {"beta": 0.3}, [("real", (3, 4)), ("real", (3, 4))]),
    ("SmoothL1Loss", {"beta": 0.0}, [("real", (3, 4)), ("real", (3, 4))]),
    ("SoftMarginLoss", {}, [("real", (3, 4)), ("sign", (3, 4))]),
    ("BCELoss", {}, [("prob", (3, 4)), ("prob", (3, 4))]),
    ("BCELoss", {"weight": W4}, [("prob", (3, 4)), ("binary", (3, 4))]),
    ("BCEWithLogitsLoss", {}, [("real", (3, 4)), ("prob", (3, 4))]),
    ("BCEWithLogitsLoss", {"weight": W4}, [("real", (3, 4)), ("binary", (3, 4))]),
    ("BCEWithLogitsLoss", {"pos_weight": W4}, [("real", (3, 4)), ("prob", (3, 4))]),
    ("BCEWithLogitsLoss", {"weight": W4, "pos_weight": W4[::-1].copy()}, [("real", (2, 3, 4)), ("prob", (2, 3, 4))]),
    ("KLDivLoss", {}, [("real", (3, 4)), ("prob", (3, 4))]),
    ("KLDivLoss", {"log_target": True}, [("real", (3, 4)), ("real", (3, 4))]),
    ("CrossEntropyLoss", {}, [("real", (3, 4)), ("index", (4, (3,)))]),
    ("CrossEntropyLoss", {}, [("real", (4,)), ("index", (4, ()))]),
    ("CrossEntropyLoss", {}, [("real", (2, 4, 3, 2)), ("index", (4, (2, 3, 2)))]),
    ("CrossEntropyLoss", {"weight": W4}, [("real", (5, 4)), ("index", (4, (5,)))]),
    ("CrossEntropyLoss", {"ignore_index": 1}, [("real", (6, 4)), ("index", (4, (6,)))]),
    ("CrossEntropyLoss", {"weight": W4, "ignore_index": 2, "label_smoothing": 0.2},
     [("real", (6, 4)), ("index", (4, (6,)))]),
    ("CrossEntropyLoss", {"label_smoothing": 0.1}, [("real", (2, 4, 3)), ("index", (4, (2, 3)))]),
    ("CrossEntropyLoss", {}, [("real", (3, 4)), ("prob", (3, 4))]),
    ("CrossEntropyLoss", {"weight": W4, "label_smoothing": 0.3}, [("real", (3, 4)), ("prob", (3, 4))]),
    ("CrossEntropyLoss", {}, [("real", (2, 4, 3)), ("prob", (2, 4, 3))]),
    ("NLLLoss", {}, [("real", (3, 4)), ("index", (4, (3,)))]),
    ("NLLLoss", {"weight": W4, "ignore_index": 0}, [("real", (6, 4)), ("index", (4, (6,)))]),
    ("NLLLoss", {}, [("real", (2, 4, 3)), ("index", (4, (2, 3)))]),
    ("MultiLabelSoftMarginLoss", {}, [("real", (3, 4)), ("binary", (3, 4))]),
    ("MultiLabelSoftMarginLoss", {"weight": W4}, [("real", (3, 4)), ("binary", (3, 4))]),
    ("MultiMarginLoss", {}, [("real", (3, 5)), ("index", (5, (3,)))]),
    ("MultiMarginLoss", {"p": 2, "margin": 0.7}, [("real", (3, 5)), ("index", (5, (3,)))]),
    ("MultiMarginLoss", {"weight": W5}, [("real", (4, 5)), ("index", (5, (4,)))]),
    ("MultiMarginLoss", {}, [("real", (5,)), ("index", (5, ()))]),
    ("CosineEmbeddingLoss", {}, [("real", (4, 3)), ("real", (4, 3)), ("sign", (4,))]),
    ("CosineEmbeddingLoss", {"margin": 0.2}, [("real", (4, 3)), ("real", (4, 3)), ("sign", (4,))]),
    ("CosineEmbeddingLoss", {"margin": -0.5}, [("real", (3,)), ("real", (3,)), ("sign", ())]),
    ("MarginRankingLoss", {}, [("real", (5,)), ("real", (5,)), ("sign", (5,))]),
    ("MarginRankingLoss", {"margin": 0.5}, [("real", (5,)), ("real", (5,)), ("sign", (5,))]),
    ("HingeEmbeddingLoss", {}, [("real", (3, 4)), ("sign", (3, 4))]),
    ("HingeEmbeddingLoss", {"margin": 2.0}, [("real", (3, 4)), ("sign", (3, 4))]),
    ("TripletMarginLoss", {}, [("real", (4, 3)), ("real", (4, 3)), ("real", (4, 3))]),
    ("TripletMarginLoss", {"margin": 0.5, "p": 1.0, "swap": True}, [("real", (4, 3)), ("real", (4, 3)),
                                                                     ("real", (4, 3))]),
    ("TripletMarginLoss", {"p": 3.0, "eps": 1e-3}, [("real", (3,)), ("real", (3,)), ("real", (3,))]),
    ("TripletMarginWithDistanceLoss", {}, [("real", (4, 3)), ("real", (4, 3)), ("real", (4, 3))]),
    ("TripletMarginWithDistanceLoss", {"swap": True, "margin": 2.0}, [("real", (4, 3)), ("real", (4, 3)),
                                                                       ("real", (4, 3))]),
    ("PoissonNLLLoss", {}, [("real", (3, 4)), ("pos", (3, 4))]),
    ("PoissonNLLLoss", {"log_input": False}, [("pos", (3, 4)), ("pos", (3, 4))]),
    ("PoissonNLLLoss", {"full": True}, [("real", (3, 4)), ("pos", (3, 4))]),
    ("PoissonNLLLoss", {"log_input": False, "full": True, "eps": 0.1}, [("pos", (3, 4)), ("pos", (3, 4))]),
    ("GaussianNLLLoss", {}, [("real", (3, 4)), ("real", (3, 4)), ("pos", (3, 4))]),
    ("GaussianNLLLoss", {"full": True}, [("real", (3, 4)), ("real", (3, 4)), ("pos", (3,))]),
    ("GaussianNLLLoss", {"eps": 0.5}, [("real", (3, 4)), ("real", (3, 4)), ("pos", (3, 1))]),
    ("GaussianNLLLoss", {}, [("real", (4,)), ("real", (4,)), ("pos", (4,))]),
    ("GaussianNLLLoss", {"eps": 1.5}, [("real", (2, 3, 4)), ("real", (2, 3, 4)), ("pos", (2, 1, 4))]),
]
# Unreduced multi-label margin losses have no gradient formula test in the table: see below.


def _case_id(case):
    name, kw, specs = case
    opts = ",".join(f"{k}" for k in kw)
    return f"{name}[{opts}]{[s[1] for s in specs]}"


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype,layout", [("float32", "transposed"), ("float64", "contiguous")])
def test_loss_matches_torch(case, reduction, dtype, layout):
    name, kwargs, specs = case
    e_kw, t_kw = _tensor_kwargs(kwargs, dtype)
    e_mod = getattr(enn, name)(reduction=reduction, **e_kw)
    t_mod = getattr(torch.nn, name)(reduction=reduction, **t_kw)
    check_state(e_mod, t_mod)
    es, ts, els, tls = _inputs(specs, dtype, layout)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {}
    check_module(e_mod, t_mod, es, ts, els, tls, dtype, **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(3, 5), (5,)])
def test_multilabel_margin_matches_torch(dtype, reduction, shape):
    target = np.full(shape, -1, np.int64)
    rows = target.reshape(-1, shape[-1])
    rows[0, :3] = [3, 0, 4]
    if rows.shape[0] > 1:
        rows[1, :1] = [2]
        rows[2, :5] = [1, 2, 3, 0, 4]
    rows[0, 4] = 1  # after the first -1: ignored
    e, t, el, tl = leaf_pair(shape, dtype)
    e_mod, t_mod = enn.MultiLabelMarginLoss(reduction=reduction), torch.nn.MultiLabelMarginLoss(reduction=reduction)
    check_module(e_mod, t_mod, [e, ember.tensor(target)], [t, torch.tensor(target)], [el], [tl], dtype)


@pytest.mark.parametrize("reduction", ["mean", "sum", "batchmean"])
def test_kl_div_batchmean(reduction):
    e, t, el, tl = leaf_pair((3, 4))
    p = arrays((3, 4), seed=3, low=0.1, high=1.0)
    ctx = pytest.warns(UserWarning) if reduction == "mean" else warnings.catch_warnings()
    with ctx:
        e_out = enn.KLDivLoss(reduction=reduction)(e, ember.tensor(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out = torch.nn.KLDivLoss(reduction=reduction)(t, torch.tensor(p))
    assert_close(e_out, t_out)


@pytest.mark.parametrize("var", [0.3, 2.0])
def test_gaussian_nll_scalar_var(var):
    e, t, el, tl = leaf_pair((3, 4), "float64")
    y = arrays((3, 4), "float64", seed=5)
    e_out = enn.GaussianNLLLoss()(e, ember.tensor(y), var)
    t_out = torch.nn.GaussianNLLLoss()(t, torch.tensor(y), var)
    assert_close(e_out, t_out)
    _both_raise(ValueError, lambda m: _nn(m).GaussianNLLLoss()(m.ones(2), m.ones(2), -1.0))
    _both_raise(TypeError, lambda m: _nn(m).GaussianNLLLoss()(m.ones(2), m.ones(2), 1))
    _both_raise(ValueError, lambda m: _nn(m).GaussianNLLLoss()(m.ones(2, 3, 4), m.ones(2, 3, 4), m.ones(1, 1, 4)))


def test_triplet_with_custom_distance():
    def e_dist(a, b):
        return 1.0 - enn.functional.cosine_similarity(a, b)

    def t_dist(a, b):
        return 1.0 - torch.nn.functional.cosine_similarity(a, b)

    es, ts, els, tls = _inputs([("real", (4, 3))] * 3, "float64", "contiguous")
    e_mod = enn.TripletMarginWithDistanceLoss(distance_function=e_dist, swap=True)
    t_mod = torch.nn.TripletMarginWithDistanceLoss(distance_function=t_dist, swap=True)
    check_module(e_mod, t_mod, es, ts, els, tls, "float64")
    assert repr(e_mod) == repr(t_mod) == "TripletMarginWithDistanceLoss()"


@pytest.mark.parametrize("size_average,reduce,expected", [(None, False, "none"), (False, None, "sum"),
                                                          (True, True, "mean"), (False, False, "none"),
                                                          (False, True, "sum")])
@pytest.mark.parametrize("name", ["MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss", "KLDivLoss",
                                  "SoftMarginLoss", "MultiMarginLoss", "HingeEmbeddingLoss", "PoissonNLLLoss",
                                  "BCEWithLogitsLoss", "SmoothL1Loss", "MarginRankingLoss", "TripletMarginLoss",
                                  "CosineEmbeddingLoss", "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss"])
def test_legacy_reduction_args(name, size_average, reduce, expected):
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        e_mod = getattr(enn, name)(size_average=size_average, reduce=reduce)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_mod = getattr(torch.nn, name)(size_average=size_average, reduce=reduce)
    assert e_mod.reduction == t_mod.reduction == expected


def test_default_reprs_and_buffers():
    w = np.array([1.0, 2.0, 3.0], np.float32)
    pairs = [
        (enn.CrossEntropyLoss(weight=ember.tensor(w)), torch.nn.CrossEntropyLoss(weight=torch.tensor(w))),
        (enn.BCEWithLogitsLoss(pos_weight=ember.tensor(w)), torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w))),
        (enn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss()),
        (enn.NLLLoss(ember.tensor(w)), torch.nn.NLLLoss(torch.tensor(w))),
        (enn.MultiMarginLoss(weight=ember.tensor(w)), torch.nn.MultiMarginLoss(weight=torch.tensor(w))),
        (enn.GaussianNLLLoss(), torch.nn.GaussianNLLLoss()),
        (enn.TripletMarginWithDistanceLoss(), torch.nn.TripletMarginWithDistanceLoss()),
    ]
    for e_mod, t_mod in pairs:
        check_state(e_mod, t_mod)
    m = enn.CrossEntropyLoss(weight=ember.tensor(w)).double()
    assert m.weight.dtype is ember.float64  # a buffer: follows module conversions
    attrs = {"ignore_index": -100, "label_smoothing": 0.0, "reduction": "mean"}
    assert {k: getattr(enn.CrossEntropyLoss(), k) for k in attrs} == attrs
    assert enn.PairwiseDistance().norm == 2.0


# -- errors (PyTorch's exception types) ------------------------------------------------------

def _both_raise(exc, fn):
    with pytest.raises(exc):
        fn(torch)
    with pytest.raises(exc):
        fn(ember)


def _nn(mod):
    return torch.nn if mod is torch else enn


@pytest.mark.parametrize("name", ["MSELoss", "L1Loss", "SmoothL1Loss", "SoftMarginLoss", "HingeEmbeddingLoss",
                                  "PoissonNLLLoss", "BCEWithLogitsLoss", "KLDivLoss"])
def test_bad_reduction_raises(name):
    _both_raise(ValueError, lambda m: getattr(_nn(m), name)(reduction="avg")(m.ones(2, 3) * 0.5,
                                                                           m.ones(2, 3) * 0.5))


def test_constructor_errors():
    _both_raise(ValueError, lambda m: _nn(m).MultiMarginLoss(p=3))
    _both_raise(ValueError, lambda m: _nn(m).MultiMarginLoss(weight=m.ones(2, 2)))
    _both_raise(ValueError, lambda m: _nn(m).TripletMarginLoss(margin=0.0))
    _both_raise(ValueError, lambda m: _nn(m).TripletMarginWithDistanceLoss(margin=-1.0))
    _both_raise(TypeError, lambda m: _nn(m).TripletMarginWithDistanceLoss(None))


def test_forward_errors():
    x = lambda m: m.tensor([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]])  # noqa: E731
    _both_raise(ValueError, lambda m: _nn(m).BCELoss()(x(m), m.ones(2, 2)))
    _both_raise(ValueError, lambda m: _nn(m).BCEWithLogitsLoss()(x(m), m.ones(3, 2)))
    _both_raise(RuntimeError, lambda m: _nn(m).BCELoss()(x(m) + 1, m.ones(2, 3)))
    _both_raise(IndexError, lambda m: _nn(m).CrossEntropyLoss()(x(m), m.tensor([0, 3])))
    _both_raise(RuntimeError, lambda m: _nn(m).CrossEntropyLoss()(x(m), m.tensor([0.0, 1.0])))
    _both_raise(ValueError, lambda m: _nn(m).CrossEntropyLoss()(x(m), m.tensor([0, 1, 1])))
    _both_raise(RuntimeError, lambda m: _nn(m).CrossEntropyLoss(weight=m.ones(2))(x(m), m.tensor([0, 1])))
    _both_raise(RuntimeError, lambda m: _nn(m).CrossEntropyLoss(label_smoothing=1.5)(x(m), m.tensor([0, 1])))
    _both_raise(RuntimeError, lambda m: _nn(m).NLLLoss()(x(m), m.tensor([0, 1], dtype=m.int32)))
    _both_raise(ValueError, lambda m: _nn(m).GaussianNLLLoss()(x(m), x(m), -m.ones(2, 3)))
    _both_raise(ValueError, lambda m: _nn(m).GaussianNLLLoss()(x(m), x(m), m.ones(3)))
    _both_raise(ValueError, lambda m: _nn(m).GaussianNLLLoss(reduction="bad")(x(m), x(m), m.ones(2, 3)))
    _both_raise(RuntimeError, lambda m: _nn(m).SmoothL1Loss(beta=-1.0)(x(m), x(m)))
    _both_raise(RuntimeError, lambda m: _nn(m).MarginRankingLoss()(m.ones(3), m.ones(3), m.ones(3, 1)))
    _both_raise(RuntimeError, lambda m: _nn(m).TripletMarginLoss()(m.ones(2, 3), m.ones(2, 3), m.ones(3)))
    _both_raise(RuntimeError, lambda m: _nn(m).MultiMarginLoss()(x(m), m.tensor([0, 5])))


def test_mse_broadcast_warns():
    with pytest.warns(UserWarning, match="target size"):
        out = enn.MSELoss()(ember.ones(2, 3), ember.ones(3))
    assert float(out) == 0.0


def _F(m):
    return torch.nn.functional if m is torch else enn.functional


# Functional calls that PyTorch rejects, with the exception type it raises.
FUNCTIONAL_ERRORS = [
    (RuntimeError, lambda m: _F(m).cosine_embedding_loss(m.ones(3, 2), m.ones(3, 2), m.ones(3, 1))),
    (RuntimeError, lambda m: _F(m).cosine_embedding_loss(m.ones(3, 2), m.ones(2), m.ones(3))),
    (RuntimeError, lambda m: _F(m).cosine_embedding_loss(m.ones(2, 2, 2), m.ones(2, 2, 2), m.ones(2, 2))),
    (RuntimeError, lambda m: _F(m).triplet_margin_with_distance_loss(m.ones(3, 2), m.ones(3, 2), m.ones(2))),
    (ValueError, lambda m: _F(m).triplet_margin_with_distance_loss(m.ones(3, 2), m.ones(3, 2), m.ones(3, 2),
                                                                   margin=-1.0)),
    (ValueError, lambda m: _F(m).triplet_margin_loss(m.ones(3, 2), m.ones(3, 2), m.ones(3, 2), margin=-1.0)),
    (RuntimeError, lambda m: _F(m).multi_margin_loss(m.ones(3, 2), m.tensor([0, 1]))),
    (RuntimeError, lambda m: _F(m).multi_margin_loss(m.ones(3, 2), m.tensor([0, 1, 2]))),
    (RuntimeError, lambda m: _F(m).multi_margin_loss(m.ones(3, 2), m.tensor([0, 1, -1]))),
    (RuntimeError, lambda m: _F(m).multi_margin_loss(m.ones(3, 2, 2), m.tensor([0, 1, 1]))),
    (RuntimeError, lambda m: _F(m).multi_margin_loss(m.ones(3, 2), m.tensor([0, 1, 1]), weight=m.ones(3))),
    (ValueError, lambda m: _F(m).multi_margin_loss(m.ones(3, 2), m.tensor([0, 1, 1]), p=3)),
    (RuntimeError, lambda m: _F(m).multilabel_margin_loss(m.ones(3, 2), m.tensor([0, 1, 1]))),
    (RuntimeError, lambda m: _F(m).multilabel_margin_loss(m.ones(3, 2), m.tensor([[0, 1], [1, 2], [0, 0]]))),
    (RuntimeError, lambda m: _F(m).multilabel_margin_loss(m.ones(3, 2), m.tensor([[0, 1], [1, 1], [0, 0]]).int())),
    (RuntimeError, lambda m: _F(m).margin_ranking_loss(m.ones(3), m.ones(2), m.ones(3))),
    (RuntimeError, lambda m: _F(m).hinge_embedding_loss(m.ones(3), m.ones(2))),
    (RuntimeError, lambda m: _F(m).soft_margin_loss(m.ones(3), m.ones(2))),
    (RuntimeError, lambda m: _F(m).multilabel_soft_margin_loss(m.ones(3, 2), m.ones(3, 3))),
    (RuntimeError, lambda m: _F(m).multilabel_soft_margin_loss(m.ones(2, 3), m.ones(2, 3), weight=m.ones(2))),
    (RuntimeError, lambda m: _F(m).poisson_nll_loss(m.ones(3, 2), m.ones(3, 3))),
    (ValueError, lambda m: _F(m).poisson_nll_loss(m.ones(3, 2), m.ones(3, 2), reduction="x")),
    (ValueError, lambda m: _F(m).multilabel_soft_margin_loss(m.ones(3, 2), m.ones(3, 2), reduction="x")),
    (ValueError, lambda m: _F(m).margin_ranking_loss(m.ones(3), m.ones(3), m.ones(3), reduction="x")),
    (ValueError, lambda m: _F(m).hinge_embedding_loss(m.ones(3, 2), -m.ones(3, 2), reduction="x")),
    (ValueError, lambda m: _F(m).cosine_embedding_loss(m.ones(3, 2), m.ones(3, 2), m.ones(3), reduction="x")),
    (RuntimeError, lambda m: _F(m).cross_entropy(m.ones(2, 3), m.ones(2, 3) / 3, ignore_index=1)),
    (RuntimeError, lambda m: _F(m).cross_entropy(m.ones(2, 3).double(), m.tensor([0, 1]), weight=m.ones(3))),
    (RuntimeError, lambda m: _F(m).nll_loss(m.ones(2, 3), m.tensor([0, 1]), weight=m.ones(3).double())),
    (RuntimeError, lambda m: _F(m).binary_cross_entropy(m.ones(2).double() / 2, m.ones(2))),
]


@pytest.mark.parametrize("exc,fn", FUNCTIONAL_ERRORS, ids=[str(i) for i in range(len(FUNCTIONAL_ERRORS))])
def test_functional_loss_errors(exc, fn):
    _both_raise(exc, fn)


# Degenerate inputs: 0-d and empty batches (mean of nothing is nan, as in PyTorch).
DEGENERATE = [
    lambda m: _F(m).multi_margin_loss(m.ones(()) * 0.3, m.tensor(0)),
    lambda m: _F(m).multilabel_margin_loss(m.ones(()) * 0.3, m.tensor(0)),
    lambda m: _F(m).multilabel_margin_loss(m.ones(0, 3), m.ones(0, 3).long(), reduction="none"),
    lambda m: _F(m).multi_margin_loss(m.ones(0, 3), m.ones(0).long(), reduction="none"),  # torch: mean is garbage
    lambda m: _F(m).cross_entropy(m.ones(0, 3), m.ones(0).long()),
    lambda m: _F(m).cross_entropy(m.ones(0, 3), m.ones(0).long(), reduction="sum"),
    lambda m: _F(m).soft_margin_loss(m.ones(0, 3), m.ones(0, 3)),
    lambda m: _F(m).cosine_embedding_loss(m.ones(0, 3), m.ones(0, 3), m.ones(0)),
    lambda m: _F(m).triplet_margin_loss(m.ones(0, 3), m.ones(0, 3), m.ones(0, 3), reduction="none"),
    lambda m: _F(m).poisson_nll_loss(m.ones(0, 3), m.ones(0, 3)),
    lambda m: _F(m).hinge_embedding_loss(m.ones(0, 3), m.ones(0, 3), reduction="sum"),
    lambda m: _F(m).multilabel_soft_margin_loss(m.ones(0, 3), m.ones(0, 3)),
    lambda m: _F(m).margin_ranking_loss(m.ones(()), m.zeros(()), -m.ones(())),
    lambda m: _F(m).gaussian_nll_loss(m.ones(0, 3), m.ones(0, 3), m.ones(0, 3)),
]


@pytest.mark.parametrize("fn", DEGENERATE, ids=[str(i) for i in range(len(DEGENERATE))])
def test_degenerate_inputs(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_close(fn(ember), fn(torch))


def test_functional_legacy_args_warn():
    with pytest.warns(UserWarning, match="size_average and reduce"):
        out = enn.functional.soft_margin_loss(ember.ones(2), ember.ones(2), size_average=False)
    assert_close(out, torch.nn.functional.soft_margin_loss(torch.ones(2), torch.ones(2), reduction="sum"))


# -- binary cross entropy at saturated probabilities ---------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_gradient_is_finite_at_zero_and_one(reduction):
    # A sigmoid that saturates gives probabilities of exactly 0 or 1: PyTorch's gradient
    # (x - t) / max(x (1 - x), 1e-12) stays finite there (0 where the prediction is right);
    # the chain rule through the clamped logs gave NaN, which ended a VAE's training.
    x = np.array([1.0, 0.0, 0.3, 1.0, 0.0, 0.7], np.float32)
    t = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.2], np.float32)
    w = np.arange(1, 7, dtype=np.float32)
    results = []
    for lib in (torch, ember):
        xl = lib.tensor(x, requires_grad=True)
        tl = lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(xl, tl, weight=lib.tensor(w), reduction=reduction)
        loss.sum().backward()
        results.append((loss.detach(), xl.grad, tl.grad, loss.grad_fn.name()))
    (tv, tgx, tgt, tname), (ev, egx, egt, ename) = results
    assert ename == tname == "BinaryCrossEntropyBackward0"
    assert_close(ev, tv, rtol=1e-6, atol=1e-6)
    assert_close(egx, tgx, rtol=1e-6, atol=0)
    assert_close(egt, tgt, rtol=1e-6, atol=0)


def test_binary_cross_entropy_second_order_and_per_sample():
    x = np.array([[0.2, 0.5, 0.9], [0.6, 0.01, 0.4]])
    t = np.array([[0.0, 1.0, 1.0], [0.5, 0.0, 1.0]])
    results = []
    for lib in (torch, ember):
        xl = lib.tensor(x, requires_grad=True)
        tl = lib.tensor(t, requires_grad=True)
        loss = lib.nn.functional.binary_cross_entropy(xl, tl)
        (gx,) = lib.autograd.grad(loss, xl, create_graph=True)
        second = lib.autograd.grad(gx.sum(), (xl, tl))
        per_sample = lib.func.vmap(functools.partial(lib.nn.functional.binary_cross_entropy, reduction="sum"))(
            lib.tensor(x), lib.tensor(t))
        results.append((gx.detach(), *second, per_sample))
    for e, t_ in zip(results[1], results[0]):
        assert_close(e, t_, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("bad", [float("nan"), -0.5, 1.5])
def test_binary_cross_entropy_input_outside_unit_interval_raises(bad):
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
            lib.nn.functional.binary_cross_entropy(lib.tensor([0.5, bad]), lib.tensor([0.0, 1.0]))


@pytest.mark.parametrize("call", [
    lambda L, x, y: L.nn.functional.mse_loss(x, y),
    lambda L, x, y: L.nn.functional.mse_loss(x, y, reduction="none"),
    lambda L, x, y: L.nn.functional.cross_entropy(x, L.tensor([0, 2])),
    lambda L, x, y: L.nn.functional.nll_loss(x, L.tensor([0, 2]), reduction="sum"),
    lambda L, x, y: L.nn.functional.smooth_l1_loss(x, y),
    lambda L, x, y: L.nn.functional.huber_loss(x, y),
    lambda L, x, y: L.nn.functional.binary_cross_entropy_with_logits(x, y),
    lambda L, x, y: L.nn.functional.soft_margin_loss(x, y),
    lambda L, x, y: L.nn.functional.multi_margin_loss(x, L.tensor([0, 2])),
    lambda L, x, y: L.dist(x, y),
    lambda L, x, y: L.stack([x, y]),
    lambda L, x, y: x.norm(),
    lambda L, x, y: x.max(),
    lambda L, x, y: x.max(1).values,
    lambda L, x, y: L.nn.functional.relu6(x),
])
def test_printed_grad_fn_names_as_torch(call):
    # print(loss) shows grad_fn=<NllLossBackward0>: composites name their last node as PyTorch's op.
    names, grads = [], []
    for lib in (torch, ember):
        x = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]], requires_grad=True)
        y = lib.tensor([[0.5, 1.0, 2.0], [1.0, 1.5, 3.0]])
        out = call(lib, x, y)
        names.append(out.grad_fn.name())
        out.sum().backward()
        grads.append(x.grad)
    assert names[1] == names[0]
    assert_close(grads[1], grads[0], rtol=1e-6, atol=1e-6)


_LEGACY_MEAN_LOSSES = {
    "mse": lambda F, L, x, t: F.mse_loss(x, t, reduction="elementwise_mean"),
    "l1": lambda F, L, x, t: F.l1_loss(x, t, reduction="elementwise_mean"),
    "smooth_l1": lambda F, L, x, t: F.smooth_l1_loss(x, t, reduction="elementwise_mean"),
    "huber": lambda F, L, x, t: F.huber_loss(x, t, reduction="elementwise_mean"),
    "bce": lambda F, L, x, t: F.binary_cross_entropy(x, t, reduction="elementwise_mean"),
    "bce_logits": lambda F, L, x, t: F.binary_cross_entropy_with_logits(x, t, reduction="elementwise_mean"),
    "cross_entropy": lambda F, L, x, t: F.cross_entropy(x, L.tensor([0, 1]), reduction="elementwise_mean"),
    "kl_div": lambda F, L, x, t: F.kl_div(x, t, reduction="elementwise_mean"),
}


@pytest.mark.parametrize("name", list(_LEGACY_MEAN_LOSSES))
def test_elementwise_mean_is_the_deprecated_mean_as_torch(name):
    """reduction='elementwise_mean' (PyTorch's old name) warns and means 'mean'; it raised ValueError."""
    def run(L):
        x, t = L.tensor([[0.2, 0.7], [0.4, 0.1]]), L.tensor([[0.0, 1.0], [1.0, 0.0]])
        with pytest.warns(UserWarning, match="elementwise_mean"):
            return float(_LEGACY_MEAN_LOSSES[name](L.nn.functional, L, x, t))

    assert run(ember) == pytest.approx(run(torch), rel=1e-6)


@pytest.mark.parametrize("target", [
    lambda L: L.tensor([1, 0]), lambda L: L.tensor([1, 0], dtype=L.int32), lambda L: L.tensor([True, False]),
])
def test_bce_with_logits_rejects_integer_and_bool_targets_as_torch(target):
    messages = []
    for L in (torch, ember):
        with pytest.raises(RuntimeError) as err:
            L.nn.functional.binary_cross_entropy_with_logits(L.tensor([0.5, -1.0]), target(L))
        messages.append(str(err.value))
    assert messages[1] == messages[0]
