# Two convolution idioms: StyleGAN2's modulated convolution (per-sample weights from a style vector,
# demodulation by rsqrt of the summed squares, the batch folded into groups of one F.conv2d call,
# equalised-learning-rate scaling, leaky_relu * sqrt(2)) checked against a per-sample loop and
# trained a few Adam steps; and a Conv1d autoencoder for anomaly detection (ConvTranspose1d decoder,
# reconstruction error per window, threshold from torch.quantile, kthvalue/median/nanmean stats).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class ModulatedConv(nn.Module):
    def __init__(self, cin, cout, k, style_dim, demodulate=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(1, cout, cin, k, k))
        self.affine = nn.Linear(style_dim, cin)
        self.scale = 1 / math.sqrt(cin * k * k)
        self.demodulate, self.pad = demodulate, k // 2

    def forward(self, x, style):
        b, cin, h, w = x.shape
        s = self.affine(style).view(b, 1, cin, 1, 1) + 1.0
        weight = self.scale * self.weight * s
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(b, -1, 1, 1, 1)
        cout = weight.shape[1]
        weight = weight.view(b * cout, cin, *weight.shape[3:])
        out = F.conv2d(x.reshape(1, b * cin, h, w), weight, padding=self.pad, groups=b)
        return F.leaky_relu(out.view(b, cout, h, w), 0.2) * math.sqrt(2)


x = data((4, 3, 8, 8), salt=141)
style = data((4, 5), salt=142)
layer = seed_free_init(ModulatedConv(3, 6, 3, 5), salt=141)
out = layer(x, style)
loop = torch.cat([layer(x[i:i + 1], style[i:i + 1]) for i in range(4)])
print('grouped == loop', torch.allclose(out, loop, atol=1e-5), tuple(out.shape), f'{out.std().item():.6f}')
opt = torch.optim.Adam(layer.parameters(), lr=0.01, betas=(0.0, 0.99), eps=1e-8)
target = data((4, 6, 8, 8), salt=143)
for step in range(5):
    loss = F.mse_loss(layer(x, style), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('modconv', step, f'{loss.item():.7f}')


class ConvAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv1d(1, 8, 5, stride=2, padding=2), nn.ReLU(),
                                 nn.Conv1d(8, 4, 5, stride=2, padding=2))
        self.dec = nn.Sequential(nn.ConvTranspose1d(4, 8, 5, stride=2, padding=2, output_padding=1), nn.ReLU(),
                                 nn.ConvTranspose1d(8, 1, 5, stride=2, padding=2, output_padding=1))

    def forward(self, x):
        return self.dec(self.enc(x))


t = torch.linspace(0, 12 * math.pi, 32 * 24)
signal = (torch.sin(t) + 0.1 * data((32 * 24,), salt=144)).view(24, 1, 32)
signal[20, 0, 10:14] += 3.0
ae = seed_free_init(ConvAE(), salt=144)
opt = torch.optim.AdamW(ae.parameters(), lr=0.01, weight_decay=1e-4)
for epoch in range(6):
    recon = ae(signal[:18])
    loss = F.l1_loss(recon, signal[:18])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('ae', epoch, f'{loss.item():.7f}')
with torch.no_grad():
    err = (ae(signal) - signal).abs().mean(dim=(1, 2))
threshold = torch.quantile(err[:18], 0.95)
print('threshold', f'{threshold.item():.6f}', 'flagged', (err > threshold).nonzero().flatten().tolist())
print(f'{err.median().item():.6f}', f'{err.kthvalue(3).values.item():.6f}',
      f'{torch.nanmean(torch.where(err > threshold, float("nan"), err)).item():.6f}',
      [round(v, 6) for v in torch.quantile(err, torch.tensor([0.25, 0.5, 0.75]), interpolation='midpoint').tolist()])
