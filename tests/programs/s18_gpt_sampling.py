# A minGPT-style decoder: token + position embeddings, blocks of LayerNorm -> causal self-attention via
# F.scaled_dot_product_attention(is_causal=True) -> MLP(GELU tanh), weight tying, init via apply with
# trunc_normal_ and a scaled residual projection, AdamW with decay / no-decay groups, a warmup +
# cosine LambdaLR, then generation with temperature, top-k (topk + masked_fill) and top-p (sort,
# cumsum, scatter) sampling, and KV-cache-free incremental decoding with crop of the context.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import integers, seed_free_init

V, T, C, H, L = 24, 12, 16, 4, 2


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, Tn, _ = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, Tn, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, Tn, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(C, 4 * C), c_proj=nn.Linear(4 * C, C),
                                      act=nn.GELU(approximate='tanh')))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C),
                                              h=nn.ModuleList([Block() for _ in range(L)]), ln_f=nn.LayerNorm(C)))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.trunc_normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * L), a=-0.04, b=0.04)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.trunc_normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= T, f"Cannot forward sequence of length {t}, block size is only {T}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return self.lm_head(x[:, [-1], :]), None

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
        print('num decayed', len(decay), sum(p.numel() for p in decay), 'no decay', len(nodecay),
              sum(p.numel() for p in nodecay))
        return torch.optim.AdamW([{'params': decay, 'weight_decay': weight_decay},
                                  {'params': nodecay, 'weight_decay': 0.0}], lr=learning_rate, betas=betas,
                                 foreach=False)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= T else idx[:, -T:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            if top_p is not None:
                sorted_logits, sorted_indices = torch.sort(logits, descending=True)
                cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
                sorted_indices_to_remove = cumulative_probs > top_p
                sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
                sorted_indices_to_remove[..., 0] = 0
                indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
                logits = logits.masked_fill(indices_to_remove, float('-inf'))
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


torch.manual_seed(1337)
model = GPT()
print('tied', model.lm_head.weight is model.transformer.wte.weight,
      'params', sum(p.numel() for p in model.parameters()))
seed_free_init(model, salt=77)
data = integers((400,), V, salt=77)
opt = model.configure_optimizers(0.1, 3e-3, (0.9, 0.95))
warmup, max_iters = 3, 12
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: (it + 1) / warmup if it < warmup else
                                          0.5 * (1 + math.cos(math.pi * (it - warmup) / (max_iters - warmup))))
for it in range(max_iters):
    ix = [(it * 37 + j * 53) % (len(data) - T - 1) for j in range(4)]
    x = torch.stack([data[i:i + T] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + T] for i in ix])
    y[0, :2] = -1
    logits, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if it % 2 == 0:
        print(f'iter {it}: loss {loss.item():.6f} norm {norm.item():.6f} lr {sched.get_last_lr()[0]:.6f}')
model.eval()
torch.manual_seed(42)
start = torch.zeros((2, 1), dtype=torch.long)
print('top_k', model.generate(start, 14, temperature=0.8, top_k=5).tolist())
print('top_p', model.generate(start, 6, temperature=1.2, top_p=0.6).tolist())
logits, _ = model(start)
print('last logits', tuple(logits.shape), f'{logits.std().item():.6f}')
