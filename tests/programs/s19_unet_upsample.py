# A U-Net as the Pytorch-UNet repository writes it: DoubleConv (conv-BN-ReLU twice), Down
# (MaxPool2d + DoubleConv), Up with either nn.Upsample(bilinear, align_corners=True) or
# ConvTranspose2d, F.pad to match odd skip sizes, torch.cat skips, OutConv; trained with
# BCEWithLogitsLoss(pos_weight) + a soft Dice loss, RMSprop(momentum, weight_decay) and
# ReduceLROnPlateau('max') on the Dice score; nearest-exact and area interpolation of masks.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class DoubleConv(nn.Module):
    def __init__(self, cin, cout, mid=None):
        super().__init__()
        mid = mid or cout
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, cin, cout, bilinear=True):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
            self.conv = DoubleConv(cin, cout, cin // 2)
        else:
            self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(cin, cout)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        diffY, diffX = x2.size()[2] - x1.size()[2], x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, n_channels=2, n_classes=1, bilinear=True):
        super().__init__()
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, 8)
        self.down1 = Down(8, 16)
        self.down2 = Down(16, 32 // factor)
        self.up1 = Up(32, 16 // factor, bilinear)
        self.up2 = Up(16, 8, bilinear)
        self.outc = nn.Conv2d(8, n_classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x = self.up1(x3, x2)
        return self.outc(self.up2(x, x1))


def dice_coeff(pred, target, eps=1e-6):
    inter = 2 * (pred * target).sum(dim=(-1, -2))
    sets = pred.sum(dim=(-1, -2)) + target.sum(dim=(-1, -2))
    sets = torch.where(sets == 0, inter, sets)
    return ((inter + eps) / (sets + eps)).mean()


imgs = data((3, 4, 2, 18, 18), salt=31)
masks = (imgs[:, :, :1] + 0.3 * imgs[:, :, 1:] > 0.2).float()
for bilinear in (True, False):
    net = seed_free_init(UNet(bilinear=bilinear), salt=31)
    opt = torch.optim.RMSprop(net.parameters(), lr=1e-3, weight_decay=1e-8, momentum=0.9)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, 'max', patience=1, factor=0.5)
    crit = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.5]))
    for epoch in range(3):
        net.train()
        for i in range(3):
            pred = net(imgs[i])
            loss = crit(pred, masks[i]) + (1 - dice_coeff(torch.sigmoid(pred), masks[i]))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
        net.eval()
        with torch.no_grad():
            score = dice_coeff((torch.sigmoid(net(imgs[0])) > 0.5).float(), masks[0])
        sched.step(score)
        print('bilinear' if bilinear else 'transposed', epoch, f'loss {loss.item():.6f} dice {score.item():.6f}',
              opt.param_groups[0]['lr'])
small = F.interpolate(masks[0], size=(7, 7), mode='nearest-exact')
area = F.interpolate(masks[0], size=(6, 6), mode='area')
big = F.interpolate(small, scale_factor=2.5, mode='nearest')
print(small.sum().item(), f'{area.sum().item():.5f}', tuple(big.shape), big.sum().item(),
      F.interpolate(masks[0], scale_factor=0.5, mode='bilinear', recompute_scale_factor=True).shape)
