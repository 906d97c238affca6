# Deployment with torch.export: an HF-style attention block (rotary embeddings, a causal mask from
# triu, a padding mask applied with torch.where) exported with named dynamic dims, inspected
# through graph_signature / range_constraints, re-run at other sizes, saved and loaded with extra
# files, decomposed, unflattened; a 2*_n dim called at an odd size; a tensor of the wrong rank;
# a truncated archive; torch.jit.trace / script of small functions.
import io
import zipfile
from typing import Optional

import torch
import torch.nn as nn
from torch.export import Dim, export
from torch.export.graph_signature import InputKind, OutputKind

torch.manual_seed(0)


def r(t, n=4):
    return t.detach().numpy().round(n).tolist()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, h, attention_mask):
        b, t, _ = h.shape
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        freqs = torch.arange(t).float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        masked = causal[None, None] | (attention_mask[:, None, None, :] == 0)
        scores = (q @ k.transpose(-1, -2)) / self.hd ** 0.5
        scores = torch.where(masked, torch.full_like(scores, float("-inf")), scores)
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1))


model = Attention().eval()
h, mask = torch.randn(2, 6, 16), torch.ones(2, 6, dtype=torch.long)
batch, seq = Dim("batch", max=8), Dim("seq", min=2, max=64)
ep = export(model, (h, mask), dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
sig = ep.graph_signature
print("params", [s.target for s in sig.input_specs if s.kind == InputKind.PARAMETER])
print("buffers", [s.target for s in sig.input_specs if s.kind == InputKind.BUFFER], list(sig.buffers))
print("user", list(sig.user_inputs), [s.kind == OutputKind.USER_OUTPUT for s in sig.output_specs])
print("ranges", sorted(str(v) for v in ep.range_constraints.values()))
h2, mask2 = torch.randn(3, 9, 16), torch.ones(3, 9, dtype=torch.long)
mask2[1, 6:] = 0
with torch.no_grad():
    want = model(h2, mask2)
got = ep.module()(h2, mask2)
print("module", tuple(got.shape), torch.allclose(got, want, atol=1e-5), r(got[1, -1, :4]))
try:
    ep.module()(torch.randn(9, 16, 16), torch.ones(9, 16, dtype=torch.long))
except AssertionError as e:
    print("too big", str(e))

buf = io.BytesIO()
torch.export.save(ep, buf, extra_files={"tokenizer.json": '{"vocab": 30}'})
buf.seek(0)
extra = {"tokenizer.json": ""}
loaded = torch.export.load(buf, extra_files=extra)
print("loaded", torch.allclose(loaded.module()(h2, mask2), want, atol=1e-5), extra["tokenizer.json"])
print("loaded ranges", sorted(str(v) for v in loaded.range_constraints.values()))
truncated = buf.getvalue()[: len(buf.getvalue()) // 2]
try:  # (the exception type depends on where the cut falls: BadZipFile, ValueError, RuntimeError)
    torch.export.load(io.BytesIO(truncated))
    print("truncated archive loaded")
except Exception:
    print("truncated archive refused")
try:
    torch.export.load(io.BytesIO(b"not a zip archive at all"))
except zipfile.BadZipFile:
    print("garbage refused: BadZipFile")

dec = ep.run_decompositions({})
print("decomposed", torch.allclose(dec.module()(h2, mask2), want, atol=1e-5), dec is not ep)
u = torch.export.unflatten(ep)
print("unflatten", sorted(n for n, _ in u.named_modules() if n), torch.allclose(u(h, mask), model(h, mask),
                                                                                 atol=1e-5))


class Halves(nn.Module):
    def forward(self, x):
        return x[: x.shape[0] // 2] * 2


_n = Dim("_n", max=50)
halves = export(Halves(), (torch.randn(10, 3),), dynamic_shapes=({0: 2 * _n},)).module()
print("even", tuple(halves(torch.randn(12, 3)).shape), "odd", tuple(halves(torch.randn(11, 3)).shape))
try:
    halves(torch.randn(12))
except IndexError as e:
    print("rank 1", type(e).__name__)
print("rank 3", tuple(halves(torch.randn(12, 3, 2)).shape))


def pairwise(x, y):
    return (x[:, None] - y[None]).pow(2).sum(-1), x.mean(0)


traced = torch.jit.trace(pairwise, (torch.randn(4, 3), torch.randn(5, 3)))
d, m = traced(torch.ones(2, 3), torch.zeros(3, 3))
print("traced", r(d), r(m))


@torch.jit.script
def smooth(x, steps: int, alpha: Optional[float] = None):  # noqa: UP045 - as TorchScript code is written
    a = 0.5 if alpha is None else alpha
    for _ in range(steps):
        x = a * x + (1 - a) * x.roll(1, 0)
    return x


print("script", r(smooth(torch.arange(5.0), 2)), r(smooth(torch.arange(5.0), 1, 0.25)))
try:
    smooth(torch.arange(5.0), 1, "x")
except RuntimeError as e:
    print("script bad arg", str(e).splitlines()[0])
