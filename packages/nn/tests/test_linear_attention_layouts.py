"""F.linear on N-d inputs, scaled_dot_product_attention on strided views and MultiheadAttention's
layouts (issue 18): values and gradients against PyTorch, and the copies each one makes, counted by
a dispatch mode (a contiguous N-d linear is view + addmm + view, as PyTorch's; attention reads its
head-split views in place)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import ember
from ember.dispatch import DispatchMode

torch = pytest.importorskip("torch")

COPIES = {"_to_copy", "clone", "contiguous"}


class OpCounter(DispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.name] += 1
        return func(*args, **(kwargs or {}))


def _pair(array, requires_grad=True):
    return (ember.tensor(array, requires_grad=requires_grad), torch.tensor(array, requires_grad=requires_grad))


def _close(ours, theirs, tol=1e-4):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 2, 3, 4), (4,), (0, 3, 4), (2, 0, 4), (5, 4)])
@pytest.mark.parametrize("bias_shape", [(6,), (), (1,), None])
@pytest.mark.parametrize("transposed", [False, True])
def test_linear_nd_matches_torch(shape, bias_shape, transposed):
    rng = np.random.default_rng(0)
    x = np.asarray(rng.standard_normal(shape), dtype=np.float32)
    if transposed and x.ndim >= 2:
        x = np.ascontiguousarray(np.swapaxes(x, 0, 1))
    weight = rng.standard_normal((6, 4), dtype=np.float32)
    results = []
    for lib in (ember, torch):
        xt, wt = lib.tensor(x), lib.tensor(weight)
        xt = xt.transpose(0, 1) if transposed and x.ndim >= 2 else xt
        xt.requires_grad_() if xt.is_leaf else xt.retain_grad()
        wt.requires_grad_()
        bias = None
        if bias_shape is not None:
            bias = lib.tensor(np.arange(np.prod(bias_shape), dtype=np.float32).reshape(bias_shape), requires_grad=True)
        out = lib.nn.functional.linear(xt, wt, bias)
        (out * out).sum().backward()
        results.append((out, xt.grad, wt.grad, None if bias is None else bias.grad))
    for ours, theirs in zip(*results):
        if theirs is None:
            assert ours is None
        else:
            assert tuple(ours.shape) == tuple(theirs.shape)
            _close(ours, theirs)


def test_linear_3d_contiguous_runs_addmm_without_copies():
    x = ember.randn(4, 5, 8, requires_grad=True)
    layer = ember.nn.Linear(8, 3)
    with OpCounter() as counter:
        out = layer(x)
    assert counter.counts["addmm"] == 1 and counter.counts["mm"] == 0 and counter.counts["add"] == 0
    assert tuple(out.shape) == (4, 5, 3)
    # autograd.grad: the backward's own ops, without AccumulateGrad (which keeps a gradient without a
    # copy only when nothing else references it, a refcount test outside this check)
    with OpCounter() as counter:
        ember.autograd.grad(out.sum(), [x, *layer.parameters()])
    assert not COPIES & set(counter.counts), counter.counts


def _strided(lib, array, layout):
    """(B, H, L, E) values stored as given: contiguous, (B, L, H, E) storage, or a slice of wider rows."""
    if layout == "contiguous":
        return lib.tensor(array)
    if layout == "heads_inside_rows":
        return lib.tensor(np.ascontiguousarray(array.transpose(0, 2, 1, 3))).transpose(1, 2)
    return lib.tensor(np.concatenate([array, array], -1))[..., : array.shape[-1]]


@pytest.mark.parametrize("layout", ["contiguous", "heads_inside_rows", "row_slice"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 8, 16), (1, 3, 70, 8)])
def test_sdpa_on_strided_views_matches_torch(layout, causal, shape):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(shape, dtype=np.float32) for _ in range(3)]
    weight = rng.standard_normal(shape, dtype=np.float32)
    results = []
    for lib in (ember, torch):
        qkv = [_strided(lib, a, layout).requires_grad_() for a in arrays]
        out = lib.nn.functional.scaled_dot_product_attention(*qkv, is_causal=causal)
        (out * lib.tensor(weight)).sum().backward()
        results.append([out] + [t.grad for t in qkv])
    for ours, theirs in zip(*results):
        _close(ours, theirs)
    if layout != "row_slice":  # the output keeps the query's layout, as PyTorch's (size-1 dims aside)
        ours, theirs = results[0][0], results[1][0]
        sizes = tuple(theirs.shape)
        def kept(t):
            return [s for s, n in zip(t.stride(), sizes) if n > 1]
        assert kept(ours) == kept(theirs)


def test_sdpa_reads_views_without_copies():
    q = ember.randn(2, 8, 4, 16).transpose(1, 2).requires_grad_()
    with OpCounter() as counter:
        out = ember.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        out.sum().backward()
    assert not COPIES & set(counter.counts), counter.counts


def _mha_pair(batch_first, embed=16, heads=4, **kwargs):
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(embed, heads, batch_first=batch_first, **kwargs)
    ours = ember.nn.MultiheadAttention(embed, heads, batch_first=batch_first, **kwargs)
    with ember.no_grad():
        for tp, ep in zip(theirs.parameters(), ours.parameters()):
            ep.copy_(ember.tensor(tp.detach().numpy()))
    return ours, theirs


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_mha_self_attention_matches_torch(batch_first, need_weights, causal):
    ours, theirs = _mha_pair(batch_first)
    rng = np.random.default_rng(2)
    shape = (3, 10, 16) if batch_first else (10, 3, 16)
    x = rng.standard_normal(shape, dtype=np.float32)
    results = []
    for lib, module in ((ember, ours), (torch, theirs)):
        xt = lib.tensor(x, requires_grad=True)
        mask = lib.nn.Transformer.generate_square_subsequent_mask(10) if causal else None
        out, weights = module(xt, xt, xt, attn_mask=mask, need_weights=need_weights, is_causal=causal)
        (out * out).sum().backward()
        grads = [xt.grad] + [p.grad for p in module.parameters()]
        results.append([out] + ([weights] if need_weights else []) + grads)
    for e, t in zip(*results):
        _close(e, t)


@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_cross_attention_with_padding_matches_torch(batch_first):
    ours, theirs = _mha_pair(batch_first, kdim=8, vdim=8)
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 5, 16) if batch_first else (5, 2, 16), dtype=np.float32)
    kv = rng.standard_normal((2, 7, 8) if batch_first else (7, 2, 8), dtype=np.float32)
    pad = np.zeros((2, 7), dtype=bool)
    pad[1, 5:] = True
    results = []
    for lib, module in ((ember, ours), (torch, theirs)):
        qt, kt = lib.tensor(q, requires_grad=True), lib.tensor(kv, requires_grad=True)
        out, _ = module(qt, kt, kt, key_padding_mask=lib.tensor(pad), need_weights=False)
        (out * out).sum().backward()
        results.append([out, qt.grad, kt.grad])
    for e, t in zip(*results):
        _close(e, t)


@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_self_attention_makes_no_copies_around_attention(batch_first):
    """Projections on the stored layout, head-split views into the kernel, the kernel's output in
    the layout the output projection reads: no contiguous copy forward or backward."""
    module = ember.nn.MultiheadAttention(32, 4, batch_first=batch_first)
    x = ember.randn(4, 6, 32, requires_grad=True)
    mask = ember.nn.Transformer.generate_square_subsequent_mask(4 if not batch_first else 6)
    with OpCounter() as counter:
        out, _ = module(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)
        ember.autograd.grad(out.sum(), [x, *module.parameters()])  # (no AccumulateGrad: see above)
    copies = {k: n for k, n in counter.counts.items() if k in COPIES}
    # batch_first: one copy, the attention output's rows reordered to (L, N) before the output
    # projection, as PyTorch's general path lays the result out (dropout masks follow that layout).
    assert copies == ({"_to_copy": 1} if batch_first else {}), counter.counts
    assert counter.counts["mm"] + counter.counts["addmm"] >= 2


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_output_layout_matches_torch(batch_first, training, grad):
    """The output's strides are PyTorch's: the transposed view of a contiguous (L, N, E) result on
    its general path, a contiguous (N, L, E) one where its fused inference path runs."""
    ours, theirs = _mha_pair(batch_first)
    x = np.random.default_rng(4).standard_normal((3, 5, 16), dtype=np.float32)
    strides = []
    for lib, module in ((ember, ours), (torch, theirs)):
        module.train(training)
        xt = lib.tensor(x)
        with lib.set_grad_enabled(grad):
            out, weights = module(xt, xt, xt)
        strides.append((out.stride(), weights.stride()))
    assert strides[0] == strides[1]


def test_transformer_layer_batch_first_dropout_matches_torch_seeded():
    """Seeded training step of a batch-first encoder layer: dropout1 draws its mask in the memory
    order of the attention output, so both the layout and the draw order must be PyTorch's."""
    outs = []
    for lib in (ember, torch):
        lib.manual_seed(0)
        layer = lib.nn.TransformerEncoderLayer(8, 2, 16, 0.3, batch_first=True)
        x = lib.randn(5, 3, 8)
        outs.append(layer(x).detach().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
