# A small vision transformer as the ViT reference code writes it: patch embedding by a strided Conv2d
# (checked against F.unfold + a Linear with the same weights), a cls token and learned position
# embedding as nn.Parameters, nn.TransformerEncoderLayer(norm_first=True, batch_first=True) with a
# GELU-tanh callable activation, the final LayerNorm on the cls token, AdamW with no weight decay
# for biases/norms/tokens (param groups by name), a linear-warmup cosine LambdaLR, and print(model).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


def gelu_tanh(x):
    return F.gelu(x, approximate='tanh')


class PatchEmbed(nn.Module):
    def __init__(self, img=16, patch=4, cin=3, dim=24):
        super().__init__()
        self.num_patches = (img // patch) ** 2
        self.proj = nn.Conv2d(cin, dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class ViT(nn.Module):
    def __init__(self, dim=24, depth=2, heads=4, classes=5):
        super().__init__()
        self.patch_embed = PatchEmbed(dim=dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0,
                                           activation=gelu_tanh, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


model = seed_free_init(ViT(), salt=21)
print(model)
imgs = data((4, 6, 3, 16, 16), salt=21)
labels = integers((4, 6), 5, salt=21)
proj = model.patch_embed.proj
cols = F.unfold(imgs[0], kernel_size=4, stride=4).transpose(1, 2)
by_unfold = cols @ proj.weight.flatten(1).t() + proj.bias
print('unfold==conv', torch.allclose(by_unfold, model.patch_embed(imgs[0]), atol=1e-5), tuple(cols.shape))

decay, no_decay = [], []
for name, p in model.named_parameters():
    (no_decay if p.ndim < 2 or name in ('cls_token', 'pos_embed') else decay).append(name)
params = dict(model.named_parameters())
opt = torch.optim.AdamW([{'params': [params[n] for n in decay], 'weight_decay': 0.05},
                         {'params': [params[n] for n in no_decay], 'weight_decay': 0.0}], lr=1e-3, betas=(0.9, 0.999))
print(len(decay), len(no_decay), no_decay[:4])
warmup, total = 3, 12


def lr_lambda(step):
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
for epoch in range(3):
    for i in range(4):
        out = model(imgs[i])
        loss = F.cross_entropy(out, labels[i], label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        print(f'epoch {epoch} it {i} loss {loss.item():.6f} lr {sched.get_last_lr()[0]:.6e}')
model.eval()
with torch.no_grad():
    logits = model(imgs[0])
print('eval', logits.argmax(-1).tolist(), f'{logits.std().item():.6f}', model.cls_token.abs().sum().item() > 0)
