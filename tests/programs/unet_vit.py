# Dense-prediction and patch-based vision models: a small U-Net (double conv blocks, max-pool
# down, F.interpolate bilinear up with and without align_corners, skip connections through
# torch.cat, a 1x1 head) trained on a segmentation-like target with BCEWithLogits + Dice loss,
# and a vision transformer whose patch embedding is F.unfold + Linear (checked against a strided
# Conv2d), a class token, learned position embeddings, nn.TransformerEncoder (batch_first,
# norm_first, GELU) and a classification head trained with AdamW + cosine schedule.
import torch
import torch.nn as nn
import torch.nn.functional as F


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.net(x)


class UNet(nn.Module):
    def __init__(self, cin=1, base=4, align=False):
        super().__init__()
        self.align = align
        self.inc = DoubleConv(cin, base)
        self.down1 = DoubleConv(base, base * 2)
        self.down2 = DoubleConv(base * 2, base * 4)
        self.up1 = DoubleConv(base * 4 + base * 2, base * 2)
        self.up2 = DoubleConv(base * 2 + base, base)
        self.head = nn.Conv2d(base, 1, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(F.max_pool2d(x1, 2))
        x3 = self.down2(F.max_pool2d(x2, 2))
        u = F.interpolate(x3, scale_factor=2, mode="bilinear", align_corners=self.align)
        u = self.up1(torch.cat([x2, u], dim=1))
        u = F.interpolate(u, size=x1.shape[-2:], mode="bilinear", align_corners=self.align)
        u = self.up2(torch.cat([x1, u], dim=1))
        return self.head(u)


def dice_loss(logits, target, eps=1.0):
    p = torch.sigmoid(logits)
    inter = (p * target).sum(dim=(1, 2, 3))
    union = p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
    return (1 - (2 * inter + eps) / (union + eps)).mean()


torch.manual_seed(0)
images = torch.rand(4, 1, 12, 12)
masks = (F.avg_pool2d(images, 3, stride=1, padding=1) > 0.5).float()
for align in (False, True):
    model = UNet(align=align)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(4):
        opt.zero_grad()
        logits = model(images)
        loss = F.binary_cross_entropy_with_logits(logits, masks) + dice_loss(logits, masks)
        loss.backward()
        opt.step()
        print(f"unet align={align} step {step} loss {loss.item():.5f}")
    model.eval()
    with torch.no_grad():
        pred = model(images[:1]) > 0
        print(
            "unet eval iou", round(((pred & (masks[:1] > 0)).sum() / ((pred | (masks[:1] > 0)).sum() + 1e-6)).item(), 4)
        )
    print("unet running_mean", [round(v, 5) for v in model.inc.net[1].running_mean.tolist()])

# interpolate variants on an odd size
z = torch.arange(2 * 3 * 5 * 5, dtype=torch.float32).view(2, 3, 5, 5) / 10
for mode, kw in [
    ("nearest", {}),
    ("nearest-exact", {}),
    ("bilinear", {"align_corners": False}),
    ("bilinear", {"align_corners": True}),
    ("bicubic", {"align_corners": False}),
    ("area", {}),
]:
    out = F.interpolate(z, size=(7, 3), mode=mode, **kw)
    w = torch.linspace(-1, 1, out.numel()).view_as(out)
    print("interpolate", mode, kw, tuple(out.shape), round((out * w).sum().item(), 4), round(out[1, 2, 3, 1].item(), 5))
print("interpolate scale 1.5", tuple(F.interpolate(z, scale_factor=1.5, mode="bilinear").shape))
print(
    "interpolate recompute",
    round(F.interpolate(z, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True).sum().item(), 4),
)
print("upsample module", round(nn.Upsample(scale_factor=2, mode="nearest")(z).mean().item(), 5))


class PatchEmbed(nn.Module):
    def __init__(self, patch, cin, dim):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(cin * patch * patch, dim)

    def forward(self, x):
        cols = F.unfold(x, kernel_size=self.patch, stride=self.patch)  # (B, C*p*p, L)
        return self.proj(cols.transpose(1, 2))


class ViT(nn.Module):
    def __init__(self, img=8, patch=4, cin=3, dim=16, depth=2, heads=2, classes=5):
        super().__init__()
        self.embed = PatchEmbed(patch, cin, dim)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            dim, heads, dim * 2, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        t = self.embed(x)
        t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], dim=1) + self.pos
        t = self.encoder(t)
        return self.head(self.norm(t[:, 0]))


vit = ViT()
x = torch.randn(6, 3, 8, 8)
y = torch.randint(0, 5, (6,))
# the unfold patch embedding equals a strided convolution with the same weights
conv = nn.Conv2d(3, 16, 4, stride=4)
with torch.no_grad():
    conv.weight.copy_(vit.embed.proj.weight.view(16, 3, 4, 4))
    conv.bias.copy_(vit.embed.proj.bias)
    ref = conv(x).flatten(2).transpose(1, 2)
print("patch embed vs conv", torch.allclose(vit.embed(x), ref, atol=1e-5))
cols = F.unfold(x, 3, padding=1, stride=2, dilation=1)
print("unfold shape", tuple(cols.shape), "fold back", tuple(F.fold(cols, (8, 8), 3, padding=1, stride=2).shape))
ones = torch.ones(1, 1, 6, 6)
print("fold counts", F.fold(F.unfold(ones, 3), (6, 6), 3).view(6, 6)[0].tolist())
opt = torch.optim.AdamW(vit.parameters(), lr=3e-3, weight_decay=0.05)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=1e-4)
for step in range(5):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(vit(x), y, label_smoothing=0.1)
    loss.backward()
    gn = nn.utils.clip_grad_norm_(vit.parameters(), 1.0)
    opt.step()
    sched.step()
    print(f"vit step {step} loss {loss.item():.5f} grad norm {gn.item():.5f} lr {sched.get_last_lr()[0]:.6f}")
vit.eval()
with torch.no_grad():
    print("vit predictions", vit(x).argmax(1).tolist())
