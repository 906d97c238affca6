"""A small GPT-2-style model compiled by ember's Inductor (Triton kernels on the GPU) gives eager's
loss and gradients under bf16 autocast: attention through the flash kernel, GELU-tanh MLP, tied head,
cross-entropy over a vocabulary that is not a power of two (GPU only; needs ember-compile)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]
pytest.importorskip("ember.compiler")
nn = pytest.importorskip("ember.nn")
F = pytest.importorskip("ember.nn.functional")

D, HEADS, VOCAB, SEQ = 128, 4, 1000, 64


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, D))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, D), nn.Embedding(SEQ, D)
        self.blocks = nn.ModuleList([Block() for _ in range(layers)])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.ndim == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(4) if name.endswith(("proj.weight", "out.weight")) else 0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(ember.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB).float(), targets.view(-1))


def _loss_and_grads(compiled):
    ember.manual_seed(0)
    model = GPT().cuda()
    step = ember.compile(model) if compiled else model
    g = ember.Generator().manual_seed(1)
    idx = ember.randint(0, VOCAB, (4, SEQ + 1), generator=g).cuda()
    with ember.autocast("cuda", dtype=ember.bfloat16):
        loss = step(idx[:, :-1].contiguous(), idx[:, 1:].contiguous())
    loss.backward()
    return loss.item(), {n: host(p.grad) for n, p in model.named_parameters()}


def test_compiled_gpt_matches_eager_under_bf16_autocast():
    eager_loss, eager_grads = _loss_and_grads(False)
    compiled_loss, compiled_grads = _loss_and_grads(True)
    assert abs(compiled_loss - eager_loss) <= 2e-3 * abs(eager_loss), (compiled_loss, eager_loss)
    assert eager_grads.keys() == compiled_grads.keys()
    for name, g in eager_grads.items():
        # bf16 matmuls in a different order: compare against the gradient's own scale.
        scale = np.abs(g).max()
        assert scale > 0, name
        assert np.abs(compiled_grads[name] - g).max() <= 0.03 * scale, name
