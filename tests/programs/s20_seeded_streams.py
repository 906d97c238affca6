# Seeded training idioms that consume PyTorch's global random stream, as scripts write them when they do not
# copy states in: nn.Transformer with dropout in both layouts and norm_first, MultiheadAttention with kdim/vdim
# and dropout, scaled_dot_product_attention's dropout (with enable_gqa), DDPM's randint/randn_like draws,
# mixup's Beta + randperm, a shuffling DataLoader without a generator, the channel dropouts, AlphaDropout and
# rrelu, multinomial top-p draws, random_split and samplers without generators, the nn.init functions, and
# LSTM/GRU inter-layer dropout. ember draws PyTorch's CPU streams, so every printed number must agree.
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Beta

for bf in (False, True):
    torch.manual_seed(1)
    m = nn.Transformer(16, 2, 2, 2, 32, dropout=0.1, batch_first=bf, norm_first=bf, activation="gelu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    for s in range(3):
        src = torch.randn(3, 5, 16)
        tgt = torch.randn(3, 4, 16)
        if not bf:
            src, tgt = src.transpose(0, 1), tgt.transpose(0, 1)
        mask = nn.Transformer.generate_square_subsequent_mask(4)
        kpm = torch.rand(3, 5) < 0.2
        out = m(src, tgt, tgt_mask=mask, src_key_padding_mask=kpm, memory_key_padding_mask=kpm, tgt_is_causal=True)
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("transformer", bf, s, f"{loss.item():.6f}")

torch.manual_seed(2)
mha = nn.MultiheadAttention(8, 2, dropout=0.2, kdim=6, vdim=5)
q, k, v = torch.randn(4, 2, 8), torch.randn(3, 2, 6), torch.randn(3, 2, 5)
o, w = mha(q, k, v, average_attn_weights=False)
print("mha", f"{o.sum().item():.6f}", tuple(w.shape), f"{w.sum().item():.6f}")

torch.manual_seed(3)
q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
print("sdpa drop", f"{F.scaled_dot_product_attention(q, k, v, dropout_p=0.3).sum().item():.6f}")
q = torch.randn(1, 4, 3, 4)
print("sdpa drop gqa", f"{F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, enable_gqa=True).sum().item():.6f}")

torch.manual_seed(4)
t = torch.randint(0, 50, (4,)).long()
noise = torch.randn_like(torch.zeros(4, 1, 3, 3))
print("ddpm", t.tolist(), f"{noise.sum().item():.6f}")

torch.manual_seed(5)
lam = Beta(torch.tensor([0.4]), torch.tensor([0.4])).sample().item()
idx = torch.randperm(6)
print("mixup", f"{lam:.6f}", idx.tolist(), f"{torch.distributions.Beta(0.4, 0.4).sample().item():.6f}")
print("np beta", f"{np.random.RandomState(0).beta(0.4, 0.4):.6f}")

torch.manual_seed(6)
dl = torch.utils.data.DataLoader(list(range(10)), batch_size=4, shuffle=True)
print("loader", [b.tolist() for b in dl], [b.tolist() for b in dl])
torch.manual_seed(7)
x = torch.ones(2, 3, 2, 2)
print("dropout2d", nn.Dropout2d(0.5)(x).sum().item(), nn.Dropout1d(0.5)(torch.ones(2, 3, 4)).sum().item(),
      f"{nn.AlphaDropout(0.3)(torch.ones(8)).sum().item():.5f}", f"{nn.FeatureAlphaDropout(0.3)(x).sum().item():.5f}",
      f"{F.rrelu(-torch.ones(5), training=True).sum().item():.5f}")

torch.manual_seed(8)
probs = torch.softmax(torch.randn(3, 10), -1)
print("multinomial", torch.multinomial(probs, 4).tolist(), torch.multinomial(probs, 4, replacement=True).tolist())

torch.manual_seed(9)
a, b = torch.utils.data.random_split(range(8), [5, 3])
print("split", list(a), list(b), list(torch.utils.data.WeightedRandomSampler([0.1, 0.9, 0.5], 5)),
      list(torch.utils.data.SubsetRandomSampler([3, 4, 5])),
      list(torch.utils.data.RandomSampler(range(5), replacement=True)))

torch.manual_seed(10)
w = torch.empty(4, 3)
print("init", f"{nn.init.kaiming_uniform_(w, a=math.sqrt(5)).sum().item():.6f}",
      f"{nn.init.trunc_normal_(w, std=0.02).sum().item():.6f}", f"{nn.init.xavier_normal_(w).sum().item():.6f}",
      f"{nn.init.orthogonal_(w).sum().item():.6f}", f"{nn.init.sparse_(w, 0.5).sum().item():.6f}")
m = nn.Embedding(5, 3)
print("embed init", f"{m.weight.sum().item():.6f}")

torch.manual_seed(11)
lstm = nn.LSTM(3, 4, 2, dropout=0.3)
y, _ = lstm(torch.randn(5, 2, 3))
print("lstm dropout", f"{y.sum().item():.6f}")
gru = nn.GRU(3, 4, 2, dropout=0.3, batch_first=True, bidirectional=True)
y, _ = gru(torch.randn(2, 5, 3))
print("gru dropout", f"{y.sum().item():.6f}")
