"""nn.MultiheadAttention against PyTorch with identical weights."""

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn


def _to_ember(t: torch.Tensor, requires_grad=False):
    out = ember.from_numpy(t.detach().numpy().copy())
    return out.requires_grad_(requires_grad) if requires_grad else out


def _pair(dtype=torch.float64, **kwargs):
    tm = torch.nn.MultiheadAttention(**kwargs).to(dtype)
    em = nn.MultiheadAttention(**kwargs).to(getattr(ember, str(dtype).split(".")[1]))
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]
    with ember.no_grad():
        for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
            ep.copy_(_to_ember(tp))
    return tm, em


def _inputs(shape_q, shape_kv, kdim, vdim, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*shape_q, generator=g, dtype=torch.float64)
    k = torch.randn(*shape_kv, kdim, generator=g, dtype=torch.float64)
    v = torch.randn(*shape_kv, vdim, generator=g, dtype=torch.float64)
    return q, k, v


def _close(e, t, tol=1e-10):
    if t is None:
        assert e is None
        return
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


CASES = [
    dict(),
    dict(batch_first=True),
    dict(kdim=6, vdim=5),
    dict(add_bias_kv=True),
    dict(add_zero_attn=True),
    dict(bias=False),
    dict(add_bias_kv=True, add_zero_attn=True, batch_first=True),
]


@pytest.mark.parametrize("options", CASES, ids=lambda o: ",".join(o) or "default")
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_kind", ["none", "bool_attn", "float_attn", "key_padding", "both"])
def test_mha_forward_backward_matches_pytorch(options, need_weights, mask_kind):
    embed, heads, L, S, N = 8, 2, 4, 5, 3
    tm, em = _pair(embed_dim=embed, num_heads=heads, **options)
    kdim, vdim = options.get("kdim", embed), options.get("vdim", embed)
    bf = options.get("batch_first", False)
    q, k, v = _inputs((N, L, embed) if bf else (L, N, embed), (N, S) if bf else (S, N), kdim, vdim)
    g = torch.Generator().manual_seed(1)
    attn_mask = kpm = None
    if mask_kind in ("bool_attn", "both"):
        attn_mask = torch.rand(L, S, generator=g) > 0.7
        attn_mask[:, 0] = False  # keep every row attending somewhere
    if mask_kind == "float_attn":
        attn_mask = torch.randn(L, S, generator=g, dtype=torch.float64)
    if mask_kind in ("key_padding", "both"):
        kpm = torch.zeros(N, S, dtype=torch.bool)
        kpm[0, -2:] = True
    tq, tk, tv = (x.clone().requires_grad_(True) for x in (q, k, v))
    eq, ek, ev = (_to_ember(x, True) for x in (q, k, v))
    t_out, t_w = tm(tq, tk, tv, key_padding_mask=kpm, need_weights=need_weights, attn_mask=attn_mask)
    e_out, e_w = em(eq, ek, ev, key_padding_mask=None if kpm is None else _to_ember(kpm),
                    need_weights=need_weights, attn_mask=None if attn_mask is None else _to_ember(attn_mask))
    _close(e_out, t_out)
    _close(e_w, t_w)
    t_out.square().sum().backward()
    e_out.square().sum().backward()
    for ex, tx in ((eq, tq), (ek, tk), (ev, tv)):
        _close(ex.grad, tx.grad, 1e-9)
    for (_, tp), (_, ep) in zip(tm.named_parameters(), em.named_parameters()):
        _close(ep.grad, tp.grad, 1e-9)


def test_mha_self_attention_unbatched_causal_and_per_head_weights():
    tm, em = _pair(embed_dim=6, num_heads=3)
    x = torch.randn(5, 6, dtype=torch.float64)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    t_out, t_w = tm(x, x, x, attn_mask=mask, average_attn_weights=False)
    ex = _to_ember(x)
    e_out, e_w = em(ex, ex, ex, attn_mask=_to_ember(mask), average_attn_weights=False)
    _close(e_out, t_out)
    _close(e_w, t_w)
    t_out, _ = tm(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)
    e_out, _ = em(ex, ex, ex, attn_mask=_to_ember(mask), need_weights=False, is_causal=True)
    _close(e_out, t_out)


def test_mha_default_init_and_errors():
    m = nn.MultiheadAttention(16, 4)
    assert float(m.in_proj_bias.abs().sum()) == 0 and float(m.out_proj.bias.abs().sum()) == 0
    bound = (6 / (16 + 48)) ** 0.5
    assert float(m.in_proj_weight.abs().max()) <= bound
    assert [n for n, _ in m.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                    "out_proj.bias"]
    with pytest.raises(AssertionError):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(ValueError):
        nn.MultiheadAttention(0, 1)
    x = ember.randn(4, 2, 16)
    with pytest.raises(RuntimeError):
        m(x, x, x, need_weights=False, is_causal=True)
    with pytest.raises(RuntimeError):
        m(x, x, x, attn_mask=ember.zeros(3, 3))
    with pytest.raises(AssertionError):
        m(x, x, ember.randn(4, 16))


def _mixed_mask_warnings(lib):
    """Warnings from MultiheadAttention, TransformerEncoderLayer and TransformerEncoder given a
    float attention mask and a bool padding mask (PyTorch: one deprecation warning per call)."""
    import warnings

    lib.manual_seed(0)
    mha = lib.nn.MultiheadAttention(8, 2)
    layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = lib.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    q = lib.randn(5, 3, 8)
    float_mask, pad = lib.zeros(5, 5), lib.zeros(3, 5, dtype=lib.bool)
    pad[0, -1] = True
    seen = []
    for call in (lambda: mha(q, q, q, attn_mask=float_mask, key_padding_mask=pad),
                 lambda: layer(q, src_mask=float_mask, src_key_padding_mask=pad),
                 lambda: enc(q, mask=float_mask, src_key_padding_mask=pad),
                 lambda: enc(q, mask=float_mask > 0, src_key_padding_mask=pad)):  # same types: no warning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        seen.append([(w.category.__name__, str(w.message)) for w in caught])
    return seen


def test_mismatched_mask_types_warn_as_pytorch():
    assert _mixed_mask_warnings(ember) == _mixed_mask_warnings(torch)
