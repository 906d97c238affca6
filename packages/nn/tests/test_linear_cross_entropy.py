"""F.linear_cross_entropy / nn.LinearCrossEntropyLoss / nn.LinearCrossEntropyOptions against PyTorch 2.13:
the reference path (K-dimensional weights, probabilities, label smoothing, class weights, ignore_index,
unbatched input) and the chunked path (options), values and gradients, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402


def _run(lib, x, w, t, b=None, cw=None, **kwargs):
    xs = lib.tensor(x, requires_grad=True)
    ws = lib.tensor(w, requires_grad=True)
    bs = None if b is None else lib.tensor(b, requires_grad=True)
    options = kwargs.pop("options", None)
    if options is not None:
        options = lib.nn.LinearCrossEntropyOptions(**options)
    out = lib.nn.functional.linear_cross_entropy(xs, ws, lib.tensor(t), linear_bias=bs,
                                                 weight=None if cw is None else lib.tensor(cw), options=options,
                                                 **kwargs)
    (out * lib.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)), dtype=out.dtype)).sum().backward()
    grads = [xs.grad, ws.grad] + ([] if bs is None else [bs.grad])
    return [out.detach().numpy()] + [g.numpy() for g in grads]


def _compare(*args, **kwargs):
    for e, t in zip(_run(ember, *args, **dict(kwargs)), _run(torch, *args, **dict(kwargs)), strict=True):
        np.testing.assert_allclose(e, t, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunked", [None, {"batch_chunk_size": 3}, {}])
@pytest.mark.parametrize("extras", ["plain", "bias", "class_weight", "ignore"])
def test_class_indices(reduction, chunked, extras):
    rng = np.random.default_rng(0)
    n, f, c = 10, 4, 7
    x, w = rng.standard_normal((n, f)), rng.standard_normal((c, f))
    t = rng.integers(0, c, n)
    kwargs = {"reduction": reduction, "options": chunked}
    b = rng.standard_normal(c) if extras == "bias" else None
    cw = rng.uniform(0.5, 2.0, c) if extras == "class_weight" else None
    if extras == "ignore":
        t[[1, 4]] = 2
        kwargs["ignore_index"] = 2
    _compare(x, w, t, b, cw, **kwargs)


@pytest.mark.parametrize("case", ["probabilities", "label_smoothing", "k_dim", "unbatched", "unbatched_chunked"])
def test_reference_cases(case):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    t = rng.integers(0, 4, 5)
    if case == "probabilities":
        p = rng.uniform(size=(5, 4))
        _compare(x, w, p / p.sum(1, keepdims=True))
    elif case == "label_smoothing":
        _compare(x, w, t, label_smoothing=0.2)
    elif case == "k_dim":
        wk = rng.standard_normal((4, 2, 3, 3))
        _compare(x, wk, rng.integers(0, 4, (5, 2, 3)), rng.standard_normal((4, 2, 3)))
    elif case == "unbatched":
        _compare(x[0], w, t[0])
    else:
        _compare(x[0], w, t[0], reduction="none", options={"batch_chunk_size": 2})


def test_options_ignored_warns_and_matches():
    rng = np.random.default_rng(2)
    x, w, t = rng.standard_normal((5, 3)), rng.standard_normal((4, 3)), rng.integers(0, 4, 5)
    with pytest.warns(UserWarning, match="options.*ignored"):
        ember.nn.functional.linear_cross_entropy(ember.tensor(x), ember.tensor(w), ember.tensor(t),
                                                 label_smoothing=0.1, options=ember.nn.LinearCrossEntropyOptions())


def test_module_matches_torch():
    for bias, out_features in ((False, ()), (True, ()), (True, (2,))):
        mods = []
        for lib in (ember, torch):
            lib.manual_seed(0)
            m = lib.nn.LinearCrossEntropyLoss(3, 4, out_features=out_features, bias=bias, reduction="sum")
            mods.append(m)
        e, t = mods
        with torch.no_grad():
            for (_, pe), (_, pt) in zip(e.named_parameters(), t.named_parameters(), strict=True):
                pt.copy_(torch.tensor(pe.detach().numpy()))
        assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
        x = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)
        target = np.random.default_rng(4).integers(0, 4, (6, *out_features))
        ye, yt = e(ember.tensor(x), ember.tensor(target)), t(torch.tensor(x), torch.tensor(target))
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert repr(e) == repr(t)


@pytest.mark.parametrize("case", ["rank3_input", "rank1_weight", "in_features", "bias_shape", "k_unbatched",
                                  "prob_ignore", "class_weight_shape", "smoothing_range"])
def test_errors_match(case):
    def call(lib):
        x, w, t = lib.ones(2, 3), lib.ones(4, 3), lib.zeros(2, dtype=lib.int64)
        F = lib.nn.functional
        with pytest.raises(Exception) as info:
            if case == "rank3_input":
                F.linear_cross_entropy(lib.ones(2, 2, 3), w, t)
            elif case == "rank1_weight":
                F.linear_cross_entropy(x, lib.ones(3), t)
            elif case == "in_features":
                F.linear_cross_entropy(x, lib.ones(4, 5), t)
            elif case == "bias_shape":
                F.linear_cross_entropy(x, w, t, linear_bias=lib.ones(5))
            elif case == "k_unbatched":
                F.linear_cross_entropy(lib.ones(3), lib.ones(4, 2, 3), t)
            elif case == "prob_ignore":
                F.linear_cross_entropy(x, w, lib.ones(2, 4) / 4, ignore_index=1)
            elif case == "class_weight_shape":
                lib.nn.LinearCrossEntropyLoss(3, 4, weight=lib.ones(3))
            else:
                lib.nn.LinearCrossEntropyLoss(3, 4, label_smoothing=1.5)
        return type(info.value), str(info.value)

    assert call(ember) == call(torch)
