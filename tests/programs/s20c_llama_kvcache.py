# A LLaMA-style decoder block (RMSNorm, rotary embeddings, SwiGLU, a KV cache written in place) compiled and
# run prefill + decode: outputs equal eager's; compiles counted by a backend as the cached length grows
# (automatic dynamic after the first change, mark_dynamic on the sequence dim).
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, pos):
    d = x.shape[-1] // 2
    inv = 1.0 / (10000 ** (torch.arange(0, d, dtype=torch.float32) / d))
    ang = pos[:, None].float() * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


class Block(nn.Module):
    def __init__(self, dim=16, heads=2, max_len=32):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.w1 = nn.Linear(dim, 32, bias=False)
        self.w3 = nn.Linear(dim, 32, bias=False)
        self.w2 = nn.Linear(32, dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, self.hd))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, self.hd))

    def forward(self, x, start: int):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, -1)
        q, k, v = (z.view(b, t, self.heads, self.hd).transpose(1, 2) for z in (q, k, v))
        pos = torch.arange(start, start + t)
        q, k = rope(q, pos), rope(k, pos)
        self.k_cache[:, :, start:start + t] = k
        self.v_cache[:, :, start:start + t] = v
        keys, vals = self.k_cache[:, :, :start + t], self.v_cache[:, :, :start + t]
        att = F.scaled_dot_product_attention(q, keys, vals, is_causal=(t > 1))
        x = x + self.o(att.transpose(1, 2).reshape(b, t, c))
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


compiles = []


def counting(gm, example_inputs):
    compiles.append(len(gm.graph.nodes))
    return gm.forward


def generate(block, prompt, steps):
    with torch.no_grad():
        out = block(prompt, 0)
        outs = [out[:, -1]]
        cur = prompt.shape[1]
        for _ in range(steps):
            nxt = out[:, -1:] * 0.5
            out = block(nxt, cur)
            cur += 1
            outs.append(out[:, -1])
    return torch.stack(outs, 1)


eager = seed_free_init(Block().eval(), 20)
comp = seed_free_init(Block().eval(), 20)
prompt = data((1, 5, 16), 3)
ref = generate(eager, prompt, 4)
got = generate(torch.compile(comp, backend=counting), prompt, 4)
print("decode", tuple(got.shape), torch.allclose(got, ref, atol=1e-5))
print("caches", torch.allclose(eager.k_cache, comp.k_cache, atol=1e-5),
      torch.allclose(eager.v_cache, comp.v_cache, atol=1e-5))
# (torch compiles twice: the prompt, then one graph for every decode step; ember compiles more, docs/deviations.md)
print("recompiled for decode", len(compiles) >= 2)
print("last token", got[0, -1, :4].round(decimals=4).tolist())

# prefill at several prompt lengths with the sequence dim hinted dynamic (maybe_mark_dynamic)
torch._dynamo.reset()
compiles.clear()
fresh = seed_free_init(Block().eval(), 20)
cblock = torch.compile(fresh, backend=counting)
for n in (3, 6, 9):
    p = data((1, n, 16), n)
    torch._dynamo.maybe_mark_dynamic(p, 1)
    with torch.no_grad():
        a = cblock(p, 0)
        b = eager(p, 0)
    print("prefill", n, torch.allclose(a, b, atol=1e-5))
print("prefill compiles", len(compiles))

# the decode step compiled alone with dynamic=False: each new start position is a new graph
torch._dynamo.reset()
compiles.clear()
stepper = torch.compile(fresh, backend=counting, dynamic=False)
with torch.no_grad():
    for start in (3, 4, 5):
        stepper(data((1, 1, 16), start), start)
print("static decode compiles", len(compiles))
