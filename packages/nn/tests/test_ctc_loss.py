"""CTC loss (F.ctc_loss, nn.CTCLoss, ember.ctc_loss) against PyTorch: losses and input gradients
over padded and concatenated targets, uneven lengths, every reduction, zero_infinity, impossible
alignments, unbatched input and errors; and the other ATen-style top-level nn entry points."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _compare(T=10, N=3, C=5, S=4, reduction="mean", zero_infinity=False, concat=False, tl=(4, 2, 3),
             il=(10, 8, 6), blank=0, seed=0, lengths_as_tensors=False, softmax=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, C))
    low, high = (1, C) if blank == 0 else (0, C - 1)
    tg = rng.integers(low, high, (N, S))
    results = []
    for lib in (torch, ember):
        leaf = lib.tensor(x, requires_grad=True)
        targets = lib.tensor(tg)
        if concat:
            targets = lib.cat([targets[i, :tl[i]] for i in range(N)])
        ils, tls = (lib.tensor(il), lib.tensor(tl)) if lengths_as_tensors else (list(il), list(tl))
        log_probs = leaf.log_softmax(2) if softmax else leaf
        loss = lib.nn.functional.ctc_loss(log_probs, targets, ils, tls, blank=blank, reduction=reduction,
                                          zero_infinity=zero_infinity)
        (loss.sum() if reduction == "none" else loss).backward()
        results.append((loss.detach().numpy(), leaf.grad.numpy()))
    for e, t in zip(results[1], results[0]):
        np.testing.assert_allclose(e, t, rtol=1e-7, atol=1e-9, equal_nan=True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concat", [False, True])
def test_ctc_matches_torch(reduction, concat):
    _compare(reduction=reduction, concat=concat)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_gradient_of_log_probs_given_directly(zero_infinity):
    # PyTorch's backward returns exp(log_probs) - posterior, whatever made log_probs; ember's gave
    # the recursion's own gradient (-posterior), equal only after a log_softmax. (il 2 < the
    # third target's needed frames: an impossible alignment among the possible ones.)
    _compare(softmax=False, reduction="sum", zero_infinity=zero_infinity, il=(10, 8, 2))
    _compare(softmax=False, reduction="none", concat=True)


def test_ctc_repeats_blank_last_and_tensor_lengths():
    _compare(S=5, tl=(5, 5, 1), il=(12, 11, 2), T=12, blank=4, lengths_as_tensors=True, seed=3)
    # repeated labels need a blank between them
    rng_targets = dict(S=3, tl=(3, 3, 3), il=(5, 6, 7), T=7, C=2, seed=5)
    _compare(**rng_targets)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_impossible_alignments(zero_infinity):
    # sequence 1 has no frames left for its labels; sequence 2 has an empty target
    _compare(tl=(4, 3, 0), il=(10, 2, 5), reduction="none", zero_infinity=zero_infinity)
    _compare(tl=(4, 3, 0), il=(10, 2, 5), reduction="mean", zero_infinity=zero_infinity)


def test_ctc_module_unbatched_float32_and_toplevel():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    tg = rng.integers(1, 6, (3,))
    out = []
    for lib in (torch, ember):
        leaf = lib.tensor(x, requires_grad=True)
        loss = lib.nn.CTCLoss(blank=0, reduction="sum")(leaf.log_softmax(1), lib.tensor(tg), lib.tensor(8),
                                                         lib.tensor(3))
        loss.backward()
        top = lib.ctc_loss(leaf.detach().log_softmax(1).unsqueeze(1), lib.tensor(tg).unsqueeze(0), [8], [3], 0, 2)
        out.append((loss.detach().numpy(), leaf.grad.numpy(), top.numpy()))
    for e, t in zip(out[1], out[0]):
        np.testing.assert_allclose(e, t, rtol=1e-5, atol=1e-6)


def test_ctc_errors():
    lp = ember.randn(5, 2, 4).log_softmax(2)
    with pytest.raises(RuntimeError):
        ember.nn.functional.ctc_loss(lp, ember.ones(2, 3, dtype=ember.int64), [6, 5], [3, 3])  # input length > T
    with pytest.raises(RuntimeError):
        ember.nn.functional.ctc_loss(lp, ember.ones(2, 3, dtype=ember.int64), [5, 5], [3, 3], blank=4)
    with pytest.raises(RuntimeError):
        ember.nn.functional.ctc_loss(lp, ember.ones(2, 3, dtype=ember.int64), [5], [3, 3])
    with pytest.raises(ValueError):
        ember.nn.functional.ctc_loss(lp, ember.ones(2, 3, dtype=ember.int64), [5, 5], [3, 3], reduction="avg")


def test_aten_style_nn_entry_points_match_torch():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 6))
    theta = rng.standard_normal((2, 2, 3)) * 0.5
    v = rng.standard_normal((1, 2, 4, 4, 4))
    res = []
    for lib in (torch, ember):
        grid = lib.affine_grid_generator(lib.tensor(theta), [2, 3, 4, 4], False)
        res.append([grid.numpy(),
                    lib.grid_sampler(lib.tensor(x), grid, 0, 1, False).numpy(),
                    lib.grid_sampler_2d(lib.tensor(x), grid, 1, 0, True).numpy(),
                    lib.max_pool3d(lib.tensor(v), [2, 2, 2]).numpy(),
                    lib.max_pool3d(lib.tensor(v), [2, 2, 2], [1, 1, 1], [1, 1, 1]).numpy()])
    for e, t in zip(res[1], res[0]):
        np.testing.assert_allclose(e, t, rtol=1e-6, atol=1e-9)
    g3 = torch.rand(1, 2, 2, 2, 3) * 2 - 1
    np.testing.assert_allclose(ember.grid_sampler_3d(ember.tensor(v), ember.tensor(g3.double().numpy()), 0, 0,
                                                     False).numpy(),
                               torch.grid_sampler_3d(torch.tensor(v), g3.double(), 0, 0, False).numpy(), atol=1e-9)
    with pytest.raises(RuntimeError):
        ember.grid_sampler_2d(ember.tensor(v), ember.zeros(1, 2, 2, 2, 3, dtype=ember.float64), 0, 0, False)


def test_conv_tbc_empty_permuted_and_errors_match_torch():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((7, 2, 3)), rng.standard_normal((3, 3, 4)), rng.standard_normal(4)
    grads = []
    for lib in (torch, ember):
        leaves = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        out = lib.conv_tbc(*leaves, 1)
        out.pow(2).sum().backward()
        grads.append([out.detach().numpy()] + [leaf.grad.numpy() for leaf in leaves])
    for e, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(e, t, rtol=1e-9, atol=1e-9)
    e = ember.empty_permuted((2, 3, 4), (2, 0, 1), dtype=ember.float64)
    t = torch.empty_permuted((2, 3, 4), (2, 0, 1), dtype=torch.float64)
    assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride() and e.dtype is ember.float64
    with pytest.raises(RuntimeError):
        ember.empty_permuted((2, 3), (0, 0))
    with pytest.raises(RuntimeError):
        ember.conv_tbc(ember.ones(7, 2, 3), ember.ones(3, 2, 4), ember.ones(4))
    assert issubclass(ember.OutOfMemoryError, RuntimeError) and issubclass(ember.AcceleratorError, RuntimeError)
