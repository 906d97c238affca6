# A LLaMA-style decoder as meta-llama/llama's model.py and its many re-implementations write it, from
# memory: RMSNorm (x * rsqrt(mean(x^2) + eps)), rotary embeddings both ways (precompute_freqs_cis with
# torch.polar / view_as_complex / view_as_real, and the cos/sin rotate_half form of HF), SwiGLU feed-forward,
# grouped-query attention (repeat_interleave of k/v heads, and scaled_dot_product_attention(enable_gqa=True)),
# a KV cache filled during generation, and sampling with temperature, top-k and top-p (nucleus) through
# torch.multinomial with a seeded Generator.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import integers, seed_free_init


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x) * self.weight


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(dim, end, theta=10000.0):
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    t = torch.arange(end).float()
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def repeat_kv(x, n_rep):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return x[:, :, :, None, :].expand(bs, slen, n_kv_heads, n_rep, head_dim).reshape(bs, slen, n_kv_heads * n_rep,
                                                                                    head_dim)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, max_batch, max_seq, rope_style):
        super().__init__()
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.rope_style = rope_style
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.register_buffer("cache_k", torch.zeros(max_batch, max_seq, n_kv_heads, self.head_dim), persistent=False)
        self.register_buffer("cache_v", torch.zeros(max_batch, max_seq, n_kv_heads, self.head_dim), persistent=False)

    def forward(self, x, start_pos, rope, mask, use_cache):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        if self.rope_style == "complex":
            xq, xk = apply_rotary_emb(xq, xk, rope)
        else:
            cos, sin = rope
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            xq = xq * cos + rotate_half(xq) * sin
            xk = xk * cos + rotate_half(xk) * sin
        if use_cache:
            self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
            self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
            keys = self.cache_k[:bsz, : start_pos + seqlen]
            values = self.cache_v[:bsz, : start_pos + seqlen]
        else:
            keys, values = xk, xv
        xq = xq.transpose(1, 2)
        if self.rope_style == "complex":
            keys = repeat_kv(keys, self.n_rep).transpose(1, 2)
            values = torch.repeat_interleave(values, self.n_rep, dim=2).transpose(1, 2)
            scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            output = torch.matmul(scores, values)
        else:
            output = F.scaled_dot_product_attention(xq, keys.transpose(1, 2), values.transpose(1, 2),
                                                    attn_mask=None if mask is None else mask.bool().logical_not(),
                                                    enable_gqa=True)
        return self.wo(output.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, multiple_of):
        super().__init__()
        hidden_dim = int(2 * hidden_dim / 3)
        hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, rope_style):
        super().__init__()
        self.attention = Attention(dim, n_heads, n_kv_heads, 2, 24, rope_style)
        self.feed_forward = FeedForward(dim, 4 * dim, 8)
        self.attention_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)

    def forward(self, x, start_pos, rope, mask, use_cache):
        h = x + self.attention(self.attention_norm(x), start_pos, rope, mask, use_cache)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, vocab=23, dim=16, n_layers=2, n_heads=4, n_kv_heads=2, rope_style="complex"):
        super().__init__()
        self.rope_style = rope_style
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(TransformerBlock(dim, n_heads, n_kv_heads, rope_style) for _ in range(n_layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        if rope_style == "complex":
            self.freqs_cis = precompute_freqs_cis(dim // n_heads, 48)
        else:
            self.cos, self.sin = rope_cos_sin(dim // n_heads, 48)

    def forward(self, tokens, start_pos=0, use_cache=False):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        if self.rope_style == "complex":
            rope = self.freqs_cis[start_pos: start_pos + seqlen]
        else:
            rope = (self.cos[start_pos: start_pos + seqlen], self.sin[start_pos: start_pos + seqlen])
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            if use_cache:
                mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
        for layer in self.layers:
            h = layer(h, start_pos, rope, mask, use_cache)
        return self.output(self.norm(h)).float()


def sample_top_p(probs, p, generator):
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    next_token = torch.multinomial(probs_sort, num_samples=1, generator=generator)
    return torch.gather(probs_idx, -1, next_token)


def top_k_logits(logits, k):
    v, _ = torch.topk(logits, k)
    return logits.masked_fill(logits < v[:, [-1]], float("-inf"))


tokens = integers((300,), 23, salt=201)
for style in ("complex", "cos_sin"):
    model = seed_free_init(Transformer(rope_style=style), salt=202)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=8, pct_start=0.25)
    for step in range(8):
        ix = [(step * 37 + 11 * b) % 280 for b in range(2)]
        x = torch.stack([tokens[i: i + 12] for i in ix])
        y = torch.stack([tokens[i + 1: i + 13] for i in ix])
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        print(f"{style} step {step} loss {loss.item():.6f} gnorm {gn.item():.6f} lr {sched.get_last_lr()[0]:.6e}")

    model.eval()
    with torch.inference_mode():
        prompt = tokens[:6].view(1, 6).repeat(2, 1)
        full = model(prompt)
        prev = 0
        cached = []
        for cur in (4, 6):
            cached.append(model(prompt[:, prev:cur], start_pos=prev, use_cache=True)[:, -1])
            prev = cur
        print(style, "cache matches full", torch.allclose(cached[-1], full[:, -1], atol=1e-5),
              tuple(model.layers[0].attention.cache_k.shape))
        out = prompt
        gen = torch.Generator().manual_seed(7)
        nxt = prompt
        pos = 0
        for i in range(6):
            logits = model(nxt, start_pos=pos, use_cache=True)[:, -1]
            pos += nxt.shape[1]
            probs = torch.softmax(top_k_logits(logits / 0.8, 5), dim=-1)
            greedy = torch.argmax(probs, dim=-1, keepdim=True)
            drawn = sample_top_p(probs, 0.9, gen)
            print(style, "gen", i, greedy.flatten().tolist(), drawn.shape, drawn.dtype,
                  bool(((drawn >= 0) & (drawn < 23)).all()), round(probs.sum().item(), 5))
            nxt = greedy
            out = torch.cat([out, nxt], dim=-1)
        print(style, out.tolist())
