# T5's relative position bias as HF transformers' T5Attention writes it, from memory: _relative_position_bucket
# (bidirectional halves, exact buckets below max_exact, log-spaced buckets above through torch.log / math.log,
# torch.min with full_like, torch.where, abs, to(torch.long)), compute_bias through an nn.Embedding permuted to
# (1, heads, q, k), T5LayerNorm (RMS without mean subtraction, variance in float32), attention without scaling,
# position_bias shared by all layers and added to an extended attention mask (1 - mask) * finfo.min, and a
# small encoder trained with Adafactor-free AdamW.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import integers, seed_free_init


def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    relative_position_if_large = torch.min(relative_position_if_large,
                                           torch.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class T5Attention(nn.Module):
    def __init__(self, d_model, n_heads, has_relative_attention_bias, bidirectional=True):
        super().__init__()
        self.n_heads, self.d_kv = n_heads, d_model // n_heads
        self.bidirectional = bidirectional
        self.has_relative_attention_bias = has_relative_attention_bias
        self.q = nn.Linear(d_model, d_model, bias=False)
        self.k = nn.Linear(d_model, d_model, bias=False)
        self.v = nn.Linear(d_model, d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(8, n_heads)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position
        buckets = _relative_position_bucket(relative_position, bidirectional=self.bidirectional, num_buckets=8,
                                            max_distance=16)
        values = self.relative_attention_bias(buckets)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden_states, mask=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.d_kv).transpose(1, 2)

        q, k, v = shape(self.q(hidden_states)), shape(self.k(hidden_states)), shape(self.v(hidden_states))
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            position_bias = self.compute_bias(seq_length, seq_length)
            if mask is not None:
                position_bias = position_bias + mask
        scores += position_bias
        attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).contiguous().view(batch_size, -1,
                                                                                       self.n_heads * self.d_kv)
        return self.o(attn_output), position_bias


class T5Block(nn.Module):
    def __init__(self, d_model, n_heads, first):
        super().__init__()
        self.layer_norm = T5LayerNorm(d_model)
        self.attn = T5Attention(d_model, n_heads, first)
        self.ff_norm = T5LayerNorm(d_model)
        self.wi = nn.Linear(d_model, 2 * d_model, bias=False)
        self.wo = nn.Linear(2 * d_model, d_model, bias=False)

    def forward(self, x, mask, position_bias):
        out, position_bias = self.attn(self.layer_norm(x), mask, position_bias)
        x = x + out
        x = x + self.wo(F.relu(self.wi(self.ff_norm(x))))
        return x, position_bias


class Encoder(nn.Module):
    def __init__(self, vocab=21, d_model=16, n_heads=2, layers=3):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.block = nn.ModuleList(T5Block(d_model, n_heads, i == 0) for i in range(layers))
        self.final_layer_norm = T5LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, input_ids, attention_mask):
        x = self.embed_tokens(input_ids)
        ext = attention_mask[:, None, None, :].to(x.dtype)
        ext = (1.0 - ext) * torch.finfo(x.dtype).min
        position_bias = None
        for blk in self.block:
            x, position_bias = blk(x, ext, position_bias)
        return self.lm_head(self.final_layer_norm(x) * (16 ** -0.5))


rp = torch.arange(-20, 21)
print("bidirectional", _relative_position_bucket(rp, True, 8, 16).tolist())
print("causal", _relative_position_bucket(rp, False, 8, 16).tolist())
print("default", _relative_position_bucket(torch.arange(-200, 201, 25)).tolist())
model = seed_free_init(Encoder(), salt=281)
print(model.block[0].attn.compute_bias(3, 4).shape, hasattr(model.block[1].attn, "relative_attention_bias"))
ids = integers((6, 4, 10), 20, salt=282) + 1
lens = integers((6, 4), 6, salt=283) + 5
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step in range(6):
    input_ids = ids[step]
    attention_mask = (torch.arange(10)[None, :] < lens[step][:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, 0)
    labels = input_ids.roll(1, dims=1).masked_fill(attention_mask == 0, -100)
    logits = model(input_ids, attention_mask)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
    bias_grad = model.block[0].attn.relative_attention_bias.weight.grad
    print(f"step {step} loss {loss.item():.6f} bias grad {bias_grad.abs().sum().item():.6f}")
