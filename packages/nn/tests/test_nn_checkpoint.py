"""ember.utils.checkpoint: same gradients as running the segment normally, activations freed."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.utils.checkpoint import checkpoint, checkpoint_sequential


def _model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2))


def _grads(model):
    return [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gradients_equal_plain_backward(use_reentrant):
    plain, ckpt = _model(), _model()
    x = ember.randn(3, 4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    plain(x).tanh().sum().backward()
    out = checkpoint(lambda t: ckpt(t).tanh(), x2, use_reentrant=use_reentrant)
    out.sum().backward()
    for a, b in zip(_grads(plain), _grads(ckpt)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_non_reentrant_reaches_parameters_without_input_grad():
    plain, ckpt = _model(), _model()
    x = ember.randn(3, 4)
    plain(x).sum().backward()
    checkpoint(ckpt, x, use_reentrant=False).sum().backward()
    for a, b in zip(_grads(plain), _grads(ckpt)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_reentrant_without_input_grad_warns():
    with pytest.warns(UserWarning):
        out = checkpoint(_model(), ember.randn(2, 4), use_reentrant=True)
    assert not out.requires_grad


def test_dropout_mask_is_replayed_in_recompute():
    x = ember.ones(64, requires_grad=True)

    def f(t):
        return ember.nn.functional.dropout(t, 0.5, training=True) * 3

    ember.manual_seed(5)
    out = checkpoint(f, x, use_reentrant=False)
    out.sum().backward()
    kept = out.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 6.0, 0.0))


def test_checkpoint_sequential_and_kwargs():
    plain, ckpt = _model(), _model()
    x = ember.randn(5, 4)
    plain(x).sum().backward()
    checkpoint_sequential(ckpt, 2, x, use_reentrant=False).sum().backward()
    for a, b in zip(_grads(plain), _grads(ckpt)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError):
        checkpoint(lambda t, scale: t * scale, x, use_reentrant=True, scale=2)
    y = checkpoint(lambda t, scale: t * scale, x.requires_grad_(), use_reentrant=False, scale=2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full((5, 4), 2.0))


def test_non_reentrant_output_requires_grad_only_when_something_reachable_does():
    # ember's non-reentrant checkpoint made every output require grad (its private anchor input);
    # PyTorch's requires grad only when an argument or a parameter used inside does.
    import functools

    import torch

    results = []
    for lib in (torch, ember):
        x = lib.ones(2)
        lin, frozen = lib.nn.Linear(2, 2), lib.nn.Linear(2, 2).requires_grad_(False)
        fns = [lambda v: v * 2, lin, lambda v, lin=lin: lin(v), frozen, lambda v, f=frozen: f(v),
               functools.partial(lambda m, v: m(v), lin), lin.forward]
        row = [lib.utils.checkpoint.checkpoint(f, x, use_reentrant=False).requires_grad for f in fns]
        row.append(lib.utils.checkpoint.checkpoint(lambda v: v * 2, x.requires_grad_(), use_reentrant=False)
                   .requires_grad)
        results.append(row)
    assert results[1] == results[0]


def _lib_grads_through_checkpoint(lib):
    """autograd.grad and backward(inputs=...) through non-reentrant checkpoints, as PyTorch runs them."""
    lib.manual_seed(0)
    seq = lib.nn.Sequential(*[lib.nn.Sequential(lib.nn.Linear(4, 4), lib.nn.Tanh()) for _ in range(4)])
    x = lib.randn(3, 4, requires_grad=True)
    ck = lib.utils.checkpoint.checkpoint_sequential(seq, 2, x, use_reentrant=False).sum()
    grads = lib.autograd.grad(ck, [x, *seq.parameters()])
    untouched = all(p.grad is None for p in seq.parameters())
    out = lib.utils.checkpoint.checkpoint(seq, x, use_reentrant=False).pow(2).sum()
    out.backward(inputs=[x])
    only_x = all(p.grad is None for p in seq.parameters())

    def nested(t):  # a checkpoint inside a checkpoint
        return lib.utils.checkpoint.checkpoint(seq[0], t, use_reentrant=False) * 2

    lib.utils.checkpoint.checkpoint(nested, x, use_reentrant=False).sum().backward()
    return [g.detach().numpy() for g in grads], untouched, only_x, x.grad.numpy(), seq[0][0].weight.grad.numpy()


def test_non_reentrant_grad_reaches_parameters_without_accumulating():
    # ember's non-reentrant checkpoint was the reentrant node plus an anchor input: autograd.grad
    # with respect to a parameter used inside failed ("appears to not have been used in the
    # graph") and a backward accumulated every parameter's .grad whatever was asked for.
    import torch

    theirs, ours = _lib_grads_through_checkpoint(torch), _lib_grads_through_checkpoint(ember)
    for a, b in zip(theirs[0], ours[0]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert ours[1:3] == theirs[1:3] == (True, True)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[4], theirs[4], rtol=1e-5, atol=1e-6)


def _recompute_outcomes(lib):
    calls = [0]

    def more(t):  # saves an extra tensor when re-run: early stop never runs it
        calls[0] += 1
        return t.exp() if calls[0] == 1 else t.sin().exp()

    def fewer(t):
        calls[0] += 1
        return t.sin().exp() if calls[0] == 1 else t.exp()

    def reshaped(t):
        calls[0] += 1
        return (t if calls[0] == 1 else t[:2]).exp().sum()

    cp = lib.utils.checkpoint
    runs = [(more, {}, True), (more, {}, False), (fewer, {}, True), (reshaped, {}, True),
            (reshaped, {"determinism_check": "none"}, True)]
    out = []
    for fn, kw, early in runs:
        calls[0] = 0
        x = lib.ones(3, requires_grad=True)
        try:
            with cp.set_checkpoint_early_stop(early):
                cp.checkpoint(fn, x, use_reentrant=False, **kw).sum().backward()
            out.append("ok")
        except Exception as e:  # noqa: BLE001 - the outcome is compared
            out.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")
    return out


def test_non_reentrant_recompute_that_saves_differently_is_refused():
    import torch

    assert _recompute_outcomes(ember) == _recompute_outcomes(torch)


def _misuse_outcomes(lib):
    cp = lib.utils.checkpoint
    out = []
    x = lib.ones(3, requires_grad=True)
    y = cp.checkpoint(lambda t: t.exp(), x, use_reentrant=True).sum()
    for run in (lambda: lib.autograd.grad(y, x, retain_graph=True), lambda: y.backward(inputs=[x])):
        try:
            run()
            out.append("ok")
        except RuntimeError as e:
            out.append(str(e))
    # an argument modified in place after the forward: the recomputation would read the new values
    x2 = lib.ones(3, requires_grad=True) * 1
    y2 = cp.checkpoint(lambda t: t.exp(), x2, use_reentrant=False)
    x2.mul_(2)
    try:
        y2.sum().backward()
        out.append("ok")
    except RuntimeError as e:
        out.append(str(e).replace("torch.", "").replace("ember.", ""))
    return out


def test_checkpoint_misuse_raises_as_pytorch():
    # ember's reentrant checkpoint ran its inner backward under autograd.grad (filling .grad), and
    # the non-reentrant one recomputed from an argument changed in place (a wrong gradient).
    import torch

    assert _misuse_outcomes(ember) == _misuse_outcomes(torch)
