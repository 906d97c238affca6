# A time-series forecaster: input projection, learned positional embedding, nn.MultiheadAttention
# (batch_first) with a boolean key_padding_mask for ragged series and per-head weights
# (average_attn_weights=False), a float attn_mask, then nn.TransformerEncoder(norm_first, gelu,
# batch_first) with src_key_padding_mask in train and eval (the eval fast path), masked Huber loss,
# AdamW with amsgrad, ReduceLROnPlateau.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init

B, T, D, E = 4, 10, 3, 16
lengths = torch.tensor([10, 7, 4, 9])
pad_mask = torch.arange(T).unsqueeze(0) >= lengths.unsqueeze(1)  # True = padding


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(D, E)
        self.pos = nn.Parameter(torch.zeros(1, T, E))
        self.attn = nn.MultiheadAttention(E, 4, batch_first=True, dropout=0.0)
        self.norm = nn.LayerNorm(E)
        layer = nn.TransformerEncoderLayer(E, 2, dim_feedforward=24, dropout=0.0, activation='gelu',
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(E, D)

    def forward(self, x, key_padding_mask, attn_mask=None):
        h = self.inp(x) + self.pos
        a, w = self.attn(h, h, h, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                         need_weights=True, average_attn_weights=False)
        h = self.norm(h + a)
        h = self.encoder(h, src_key_padding_mask=key_padding_mask)
        return self.head(h), w


model = seed_free_init(Forecaster(), salt=3)
series = torch.cumsum(data((B, T + 1, D), salt=6) * 0.3, dim=1)
x, y = series[:, :-1], series[:, 1:]
valid = (~pad_mask).unsqueeze(-1).float()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05, amsgrad=True)
sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode='min', factor=0.5, patience=1)
causal = nn.Transformer.generate_square_subsequent_mask(T)
print('causal', causal[1].tolist()[:3], causal.dtype)
for step in range(8):
    model.train()
    pred, w = model(x, pad_mask, attn_mask=causal if step % 2 else None)
    loss = (F.huber_loss(pred, y, reduction='none', delta=0.5) * valid).sum() / valid.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step(loss.item() if step < 4 else 10.0)
    print(f'step {step} loss {loss.item():.6f} w {tuple(w.shape)} {w[1, 2, 3].tolist()[6:]}'
          f' lr {opt.param_groups[0]["lr"]:.5f}')
model.eval()
with torch.no_grad():
    pred, w = model(x, pad_mask)
    pred_float, _ = model(x, pad_mask.float().masked_fill(pad_mask, float('-inf')))
print('eval', f'{(pred * valid).sum().item():.5f}', f'{w.sum().item():.4f}',
      torch.allclose(pred[~pad_mask], pred_float[~pad_mask], atol=1e-5))
mha = model.attn
out, avg = mha(x.new_zeros(2, 3, E), x.new_ones(2, 5, E), x.new_ones(2, 5, E))
print('cross', tuple(out.shape), tuple(avg.shape), f'{avg.sum().item():.4f}')
out, none = mha(x.new_ones(2, 3, E), x.new_ones(2, 5, E), x.new_ones(2, 5, E), need_weights=False)
print('no weights', none, tuple(out.shape))
q = x.new_ones(3, E)
out, w = mha(q, q, q)
print('unbatched', tuple(out.shape), tuple(w.shape))
