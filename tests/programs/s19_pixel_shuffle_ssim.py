# Super-resolution building blocks beyond ESPCN: PixelUnshuffle down / PixelShuffle up as an
# inverse pair, ICNR-style init (a sub-kernel repeated over the shuffle groups), a residual SR net
# with nn.Upsample(bicubic) skip, the Charbonnier loss, SSIM with a Gaussian window by grouped
# conv2d, PSNR, and Adam with a CosineAnnealingLR; repr of the modules.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


def gaussian_window(size=5, sigma=1.5, channels=1):
    g = torch.tensor([math.exp(-(x - size // 2) ** 2 / (2 * sigma ** 2)) for x in range(size)])
    g = (g / g.sum()).unsqueeze(1)
    w = g.mm(g.t()).float().unsqueeze(0).unsqueeze(0)
    return w.expand(channels, 1, size, size).contiguous()


def ssim(img1, img2, window, c=1):
    mu1 = F.conv2d(img1, window, padding=2, groups=c)
    mu2 = F.conv2d(img2, window, padding=2, groups=c)
    s11 = F.conv2d(img1 * img1, window, padding=2, groups=c) - mu1.pow(2)
    s22 = F.conv2d(img2 * img2, window, padding=2, groups=c) - mu2.pow(2)
    s12 = F.conv2d(img1 * img2, window, padding=2, groups=c) - mu1 * mu2
    C1, C2 = 0.01 ** 2, 0.03 ** 2
    m = ((2 * mu1 * mu2 + C1) * (2 * s12 + C2)) / ((mu1.pow(2) + mu2.pow(2) + C1) * (s11 + s22 + C2))
    return m.mean()


def icnr_(weight, scale=2):
    out_c, in_c, kh, kw = weight.shape
    sub = torch.empty(out_c // scale ** 2, in_c, kh, kw)
    sub.copy_(weight[: out_c // scale ** 2])
    with torch.no_grad():
        weight.copy_(sub.repeat_interleave(scale ** 2, dim=0))


class SRNet(nn.Module):
    def __init__(self, scale=2, c=3):
        super().__init__()
        self.head = nn.Conv2d(c, 16, 3, padding=1)
        self.body = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.PReLU(16), nn.Conv2d(16, 16, 3, padding=1))
        self.up = nn.Sequential(nn.Conv2d(16, c * scale ** 2, 3, padding=1), nn.PixelShuffle(scale))
        self.skip = nn.Upsample(scale_factor=scale, mode='bicubic', align_corners=False)

    def forward(self, x):
        h = self.head(x)
        h = h + self.body(h)
        return self.up(h) + self.skip(x)


hr = data((4, 3, 16, 16), salt=4, low=0.0, high=1.0)
unshuffle, shuffle = nn.PixelUnshuffle(2), nn.PixelShuffle(2)
packed = unshuffle(hr)
print('unshuffle', tuple(packed.shape), torch.equal(shuffle(packed), hr), packed[0, :4, 0, 0].tolist())
lr_img = F.avg_pool2d(hr, 2)
net = seed_free_init(SRNet(), salt=5)
icnr_(net.up[0].weight)
print(net)
window = gaussian_window(channels=3)
opt = torch.optim.Adam(net.parameters(), lr=2e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-4)
for step in range(6):
    sr = net(lr_img)
    loss = torch.sqrt((sr - hr).pow(2) + 1e-6).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    with torch.no_grad():
        mse = F.mse_loss(sr.clamp(0, 1), hr)
        psnr = 10 * math.log10(1 / mse.item())
        s = ssim(sr, hr, window, c=3)
    print(f'step {step} charbonnier {loss.item():.6f} psnr {psnr:.4f} ssim {s.item():.6f}',
          f'lr {sched.get_last_lr()[0]:.6g}')
print(net.body[1].weight[:3].tolist(), F.pixel_unshuffle(hr[:1, :1, :4, :4], 2).flatten().tolist())
