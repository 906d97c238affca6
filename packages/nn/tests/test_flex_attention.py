"""``ember.nn.attention.flex_attention`` against ``torch.nn.attention.flex_attention`` (PyTorch
2.13's eager path): outputs, log-sum-exp, gradients, score/mask mods (causal, ALiBi, relative
bias by indexing, document masks, and_masks/or_masks), GQA, fully masked rows, the BlockMask's
fields and methods, and the errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.nn.attention import flex_attention as efa

torch = pytest.importorskip("torch")
tfa = pytest.importorskip("torch.nn.attention.flex_attention")


def _t(x):
    return torch.tensor(x.detach().numpy())


def _close(a, b, tol=2e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


def _torch_flex(*args, **kwargs):
    # PyTorch's eager path without its torch.compile wrapper (the same hop, minutes less of dynamo in
    # this file); it refuses backward on the CPU either way.
    previous = tfa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    tfa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tfa.flex_attention(*args, **kwargs)
    finally:
        tfa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = previous


def _qkv(B=2, Hq=4, Hkv=4, L=7, S=9, E=8, Ev=6, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev))]
    return [ember.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def window(b, h, q_idx, kv_idx):
    return (q_idx - kv_idx).abs() <= 2


def _mods(lib):
    bias = lib.tensor(np.linspace(-1.0, 1.0, 4 * 7 * 9).reshape(4, 7, 9).astype("float32"))

    def relative(score, b, h, q_idx, kv_idx):
        return score + (q_idx - kv_idx) * 0.1

    def alibi(score, b, h, q_idx, kv_idx):
        return score - (h + 1) * 0.25 * (q_idx - kv_idx).abs()

    def table(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx, kv_idx]

    def causal_score(score, b, h, q_idx, kv_idx):
        return lib.where(q_idx >= kv_idx, score, -float("inf"))

    return {"relative": relative, "alibi": alibi, "table": table, "causal_score": causal_score}


@pytest.mark.parametrize("mod", [None, "relative", "alibi", "table", "causal_score"])
def test_score_mods_match_torch(mod):
    (q, k, v), (tq, tk, tv) = _qkv()
    e_mod = _mods(ember)[mod] if mod else None
    t_mod = _mods(torch)[mod] if mod else None
    out, lse = efa.flex_attention(q, k, v, score_mod=e_mod, return_aux=efa.AuxRequest(lse=True))
    t_out, t_aux = _torch_flex(tq, tk, tv, score_mod=t_mod, return_aux=tfa.AuxRequest(lse=True))
    _close(out, t_out)
    _close(lse.lse, t_aux.lse)
    assert lse.max_scores is None and t_aux.max_scores is None


@pytest.mark.parametrize("mask", ["causal", "window", "and", "or", "document"])
@pytest.mark.parametrize("block", [128, 2, (4, 3)])
def test_block_masks_match_torch(mask, block):
    doc_np = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2])

    def mods(lib):
        doc = lib.tensor(doc_np)

        def document(b, h, q_idx, kv_idx):
            return doc[q_idx] == doc[kv_idx]

        return {"causal": causal, "window": window, "document": document,
                "and": (efa if lib is ember else tfa).and_masks(causal, window),
                "or": (efa if lib is ember else tfa).or_masks(causal, document)}[mask]

    e_bm = efa.create_block_mask(mods(ember), 2, None, 7, 9, BLOCK_SIZE=block)
    t_bm = tfa.create_block_mask(mods(torch), 2, None, 7, 9, device="cpu", BLOCK_SIZE=block)
    for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                  "q_indices", "full_q_num_blocks", "full_q_indices"):
        got, want = getattr(e_bm, field), getattr(t_bm, field)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], field
        assert got.tolist() == want.tolist(), field
    assert e_bm.to_dense().tolist() == t_bm.to_dense().tolist()
    assert e_bm.shape == t_bm.shape and e_bm.BLOCK_SIZE == t_bm.BLOCK_SIZE and e_bm.numel() == t_bm.numel()
    assert e_bm.sparsity() == pytest.approx(t_bm.sparsity())
    assert str(e_bm) == str(t_bm)
    assert repr(e_bm).replace("ember.Size", "torch.Size") == repr(t_bm)
    assert efa.create_mask(mods(ember), 2, 1, 7, 9).tolist() == tfa.create_mask(mods(torch), 2, 1, 7, 9,
                                                                              device="cpu").tolist()
    (q, k, v), (tq, tk, tv) = _qkv()
    _close(efa.flex_attention(q, k, v, block_mask=e_bm), _torch_flex(tq, tk, tv, block_mask=t_bm))


def test_gqa_scale_and_fully_masked_rows():
    (q, k, v), (tq, tk, tv) = _qkv(Hq=4, Hkv=2, seed=3)

    def none_before_3(b, h, q_idx, kv_idx):
        return q_idx >= 3

    e_bm = efa.create_block_mask(none_before_3, None, None, 7, 9, BLOCK_SIZE=4)
    t_bm = tfa.create_block_mask(none_before_3, None, None, 7, 9, device="cpu", BLOCK_SIZE=4)
    out, lse = efa.flex_attention(q, k, v, block_mask=e_bm, scale=0.3, enable_gqa=True,
                                  return_aux=efa.AuxRequest(lse=True))
    t_out, t_aux = _torch_flex(tq, tk, tv, block_mask=t_bm, scale=0.3, enable_gqa=True,
                               return_aux=tfa.AuxRequest(lse=True))
    _close(out, t_out)
    assert float(out[:, :, :3].abs().max()) == 0.0
    assert lse.lse[:, :, :3].isneginf().all()
    _close(lse.lse[:, :, 3:], t_aux.lse[:, :, 3:])
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        efa._WARNED.discard("deprecated_return_lse")
        pair = efa.flex_attention(q, k, v, enable_gqa=True, return_lse=True)
    assert isinstance(pair, tuple) and pair[1].shape == (2, 4, 7)


def test_float64_and_bfloat16_outputs():
    (q, k, v), (tq, tk, tv) = _qkv(dtype="float64", seed=4)
    _close(efa.flex_attention(q, k, v, score_mod=_mods(ember)["alibi"]),
           _torch_flex(tq, tk, tv, score_mod=_mods(torch)["alibi"]), 1e-12)
    qb, kb, vb = (x.to(ember.bfloat16) for x in (q, k, v))
    tqb, tkb, tvb = (x.to(torch.bfloat16) for x in (tq, tk, tv))
    got = efa.flex_attention(qb, kb, vb)
    want = _torch_flex(tqb, tkb, tvb)
    assert got.dtype == ember.bfloat16
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), atol=2e-2, rtol=2e-2)


def test_gradients_match_torch_math_reference():
    """PyTorch 2.13 refuses backward through flex_attention on the CPU (NotImplementedError); ember
    differentiates it (docs/deviations.md), checked against the same attention written in torch ops."""
    (q, k, v), (tq, tk, tv) = _qkv(Hq=4, Hkv=2, seed=5)
    for x in (q, k, v, tq, tk, tv):
        x.requires_grad_(True)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        _torch_flex(tq, tk, tv, enable_gqa=True)
    e_bm = efa.create_block_mask(causal, None, None, 7, 9, BLOCK_SIZE=4)
    out = efa.flex_attention(q, k, v, score_mod=_mods(ember)["alibi"], block_mask=e_bm, enable_gqa=True)
    kk, vv = tk.repeat_interleave(2, 1), tv.repeat_interleave(2, 1)
    qi, ki = torch.arange(7).view(1, 1, 7, 1), torch.arange(9).view(1, 1, 1, 9)
    h = torch.arange(4).view(1, 4, 1, 1)
    scores = tq @ kk.transpose(-2, -1) / 8 ** 0.5 - (h + 1) * 0.25 * (qi - ki).abs()
    t_out = torch.softmax(scores.masked_fill(qi < ki, -float("inf")), -1) @ vv
    _close(out, t_out)
    g = np.random.default_rng(6).standard_normal(tuple(out.shape)).astype("float32")
    out.backward(ember.tensor(g))
    t_out.backward(torch.tensor(g))
    for a, b in ((q, tq), (k, tk), (v, tv)):
        _close(a.grad, b.grad, 5e-5)


def test_block_mask_slicing_and_from_kv_blocks():
    e_bm = efa.create_block_mask(causal, 2, 3, 8, 8, BLOCK_SIZE=2)
    t_bm = tfa.create_block_mask(causal, 2, 3, 8, 8, device="cpu", BLOCK_SIZE=2)
    for index in (0, (1, 2), (slice(0, 2), slice(1, 2)), -1):
        got, want = e_bm[index], t_bm[index]
        assert got.kv_num_blocks.tolist() == want.kv_num_blocks.tolist()
        assert got.q_indices.tolist() == want.q_indices.tolist()
        assert got.shape == want.shape
    (q, k, v), _ = _qkv(B=2, Hq=3, Hkv=3, L=8, S=8)
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        efa.flex_attention(q, k, v, block_mask=e_bm[0:2])
    num = ember.tensor([[[1, 2]]], dtype=ember.int32)
    idx = ember.tensor([[[[0, 1], [1, 0]]]], dtype=ember.int32)
    got = efa.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=4)
    want = tfa.BlockMask.from_kv_blocks(_t(num), _t(idx), BLOCK_SIZE=4)
    assert got.seq_lengths == want.seq_lengths and got.q_num_blocks.tolist() == want.q_num_blocks.tolist()
    assert got.as_tuple()[:2] == want.as_tuple()[:2] and got.mask_mod is efa.noop_mask
    adjusted, t_adjusted = e_bm._adjust(5, 6), t_bm._adjust(5, 6)
    assert adjusted.to_dense().tolist() == t_adjusted.to_dense().tolist() and adjusted.shape == t_adjusted.shape


def _head(err) -> str:
    # The message up to its values (object addresses differ between the two libraries' mods).
    return str(err).split(" but ")[0].split(" at 0x")[0]


def test_errors_match_torch():
    (q, k, v), (tq, tk, tv) = _qkv(Hq=4, Hkv=2)
    e_bm = efa.create_block_mask(causal, None, None, 8, 9)
    t_bm = tfa.create_block_mask(causal, None, None, 8, 9, device="cpu")
    cases = [
        (lambda: efa.flex_attention(q, k, v), lambda: _torch_flex(tq, tk, tv)),
        (lambda: efa.flex_attention(q, k[:1, :1], v[:1, :1], enable_gqa=True),
         lambda: _torch_flex(tq, tk[:1, :1], tv[:1, :1], enable_gqa=True)),
        (lambda: efa.flex_attention(q[..., :4], k, v, enable_gqa=True),
         lambda: _torch_flex(tq[..., :4], tk, tv, enable_gqa=True)),
        (lambda: efa.flex_attention(q[0], k[0], v[0]), lambda: _torch_flex(tq[0], tk[0], tv[0])),
        (lambda: efa.flex_attention(q, k, v, block_mask=e_bm, enable_gqa=True),
         lambda: _torch_flex(tq, tk, tv, block_mask=t_bm, enable_gqa=True)),
        (lambda: efa.flex_attention(q, k, v, enable_gqa=True, return_aux=efa.AuxRequest(max_scores=True)),
         lambda: _torch_flex(tq, tk, tv, enable_gqa=True, return_aux=tfa.AuxRequest(max_scores=True))),
        (lambda: efa.flex_attention(q, k, v, enable_gqa=True, return_lse=True, return_aux=efa.AuxRequest()),
         lambda: _torch_flex(tq, tk, tv, enable_gqa=True, return_lse=True, return_aux=tfa.AuxRequest())),
        (lambda: efa.create_block_mask(lambda s, b, h, q, k: s, 1, 1, 4, 4),
         lambda: tfa.create_block_mask(lambda s, b, h, q, k: s, 1, 1, 4, 4, device="cpu")),
    ]
    for got, want in cases:
        with pytest.raises(Exception) as t_err:
            want()
        with pytest.raises(type(t_err.value)) as e_err:
            got()
        assert _head(e_err.value) == _head(t_err.value)


def test_reachable_as_torch_spells_it():
    import ember.nn.attention

    assert ember.nn.attention.flex_attention is efa
    assert set(tfa.__all__) <= set(dir(efa)) | {"flex_attention_hop", "setup_compilation_env", "FlexKernelOptions"}
