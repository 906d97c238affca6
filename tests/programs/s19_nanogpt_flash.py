# nanoGPT's model.py/train.py idioms, from memory: CausalSelfAttention with one c_attn Linear split
# into q/k/v, F.scaled_dot_product_attention(is_causal=True, dropout_p=0 in eval), a bias-free
# LayerNorm option, weight tying wte/lm_head, configure_optimizers with decay for dim>=2 params only,
# AdamW(betas=(0.9, 0.95)), get_lr warmup + cosine set by hand into param_groups, gradient
# accumulation, clip_grad_norm_, estimate_loss under no_grad with eval()/train(), crop_block_size,
# and generate() with temperature and top-k (greedy here, so both libraries pick the same tokens).
import math

import torch
import torch.nn as nn
from _seedfree import integers, seed_free_init
from torch.nn import functional as F


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias=False)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = LayerNorm(n_embd, bias=False)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd, bias=False), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd, bias=False))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=17, block_size=12, n_layer=2, n_head=2, n_embd=16):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]), ln_f=LayerNorm(n_embd, bias=False)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def get_num_params(self, non_embedding=True):
        n = sum(p.numel() for p in self.parameters())
        return n - self.transformer.wpe.weight.numel() if non_embedding else n

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return self.lm_head(x[:, [-1], :]), None

    def crop_block_size(self, block_size):
        self.block_size = block_size
        self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
        groups = [{'params': decay, 'weight_decay': weight_decay}, {'params': nodecay, 'weight_decay': 0.0}]
        print(f"num decayed parameter tensors: {len(decay)}, with {sum(p.numel() for p in decay):,} parameters")
        print(f"num non-decayed parameter tensors: {len(nodecay)}, with {sum(p.numel() for p in nodecay):,} "
              "parameters")
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=False)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, probs.argmax(-1, keepdim=True)), dim=1)
        return idx


model = seed_free_init(GPT(), salt=41)
print("number of parameters: %.4fM" % (model.get_num_params() / 1e6,), model.get_num_params(False))
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95))
tokens = integers((400,), 17, salt=41)
offsets = integers((10, 2, 4), 400 - 13, salt=42)


def get_batch(it, micro):
    ix = offsets[it, micro]
    x = torch.stack([tokens[i:i + 12] for i in ix.tolist()])
    y = torch.stack([tokens[i + 1:i + 13] for i in ix.tolist()])
    return x, y


def get_lr(it, warmup_iters=3, lr_decay_iters=10, learning_rate=6e-4, min_lr=6e-5):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = torch.zeros(3)
    for k in range(3):
        _, loss = model(*get_batch(9, k % 2))
        losses[k] = loss.item()
    model.train()
    return losses.mean()


for it in range(9):
    lr = get_lr(it)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr
    if it % 4 == 0:
        print(f"step {it}: val loss {estimate_loss():.4f}")
    for micro in range(2):
        X, Y = get_batch(it, micro)
        _, loss = model(X, Y)
        loss = loss / 2
        loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {it}: loss {loss.item() * 2:.6f}, norm {norm.item():.6f}, lr {lr:.4e}")
model.crop_block_size(8)
out = model.generate(tokens[:5].unsqueeze(0), 10, temperature=0.8, top_k=5)
print(out.tolist(), model.transformer.wpe.weight.shape, model.lm_head.weight is model.transformer.wte.weight)
