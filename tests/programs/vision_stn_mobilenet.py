# Vision building blocks from the tutorials and torchvision's mobile models: the spatial transformer
# network tutorial's localisation net (affine_grid + grid_sample with align_corners both ways and
# each padding_mode, initialised to the identity transform), MobileNetV2/V3-style inverted
# residuals (depthwise convolutions with groups=channels, Hardswish, squeeze-excitation with
# Hardsigmoid, ReLU6, BatchNorm momentum/eps), the whole model in channels_last memory format
# (strides, is_contiguous(memory_format=...), gradients' layout), and a temporal convolutional
# network (dilated causal Conv1d with left padding, parametrizations.weight_norm, GLU gating, PReLU,
# Mish, a residual 1x1 downsample), trained a few steps each.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import weight_norm

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


class STN(nn.Module):
    def __init__(self):
        super().__init__()
        self.localization = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(4, 6, kernel_size=3), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(6 * 3 * 3, 16), nn.ReLU(True), nn.Linear(16, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
        self.classifier = nn.Sequential(nn.Conv2d(1, 6, 3), nn.ReLU(), nn.AdaptiveMaxPool2d(2), nn.Flatten(),
                                        nn.Linear(24, 3))

    def stn(self, x):
        xs = self.localization(x)
        theta = self.fc_loc(xs.view(-1, 6 * 3 * 3)).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False), theta

    def forward(self, x):
        x, theta = self.stn(x)
        return F.log_softmax(self.classifier(x), dim=1), theta


imgs = torch.rand(8, 1, 14, 14)
labels = torch.randint(0, 3, (8,))
stn = STN()
with torch.no_grad():
    warped, theta0 = stn.stn(imgs)
print("identity warp", torch.allclose(warped, imgs, atol=1e-5), r(theta0[0]))
opt = torch.optim.SGD(stn.parameters(), lr=0.05)
for step in range(6):
    opt.zero_grad()
    out, theta = stn(imgs)
    loss = F.nll_loss(out, labels)
    loss.backward()
    opt.step()
    print(f"stn step {step} loss {loss.item():.5f} theta {r(theta[0, 0], 4)}")

# grid_sample on a rotated, scaled grid: every mode and padding mode, align_corners both ways
angle = torch.tensor(0.3)
rot = torch.stack([torch.stack([angle.cos(), -angle.sin(), torch.tensor(0.2)]),
                   torch.stack([angle.sin(), angle.cos(), torch.tensor(-0.1)])]).unsqueeze(0) * 1.2
src = torch.arange(30.0).view(1, 1, 5, 6)
for align in (False, True):
    grid = F.affine_grid(rot, (1, 1, 4, 5), align_corners=align)
    print("grid", align, r(grid[0, 0], 4))
    for mode in ("bilinear", "nearest", "bicubic"):
        for pad in ("zeros", "border", "reflection"):
            out = F.grid_sample(src, grid, mode=mode, padding_mode=pad, align_corners=align)
            print("sample", mode, pad, align, r(out[0, 0, 1], 3))
img = torch.rand(1, 2, 5, 5, requires_grad=True)
grid = (torch.rand(1, 3, 3, 2) * 2.4 - 1.2).requires_grad_()
out = F.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=True)
gi, gg = torch.autograd.grad(out.pow(2).sum(), (img, grid))
print("grid_sample grads", r(gi.sum((0, 1))[0]), r(gg[0, 0]))
grid3d = F.affine_grid(torch.eye(3, 4).unsqueeze(0), (1, 1, 2, 3, 3), align_corners=False)
print("3d grid", tuple(grid3d.shape), r(grid3d[0, 1, 2]))


def make_divisible(v, divisor=8, min_value=None):
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class SqueezeExcitation(nn.Module):
    def __init__(self, ch, squeeze):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(ch, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, ch, 1)

    def forward(self, x):
        s = self.fc2(F.relu(self.fc1(self.avgpool(x))))
        return x * F.hardsigmoid(s, inplace=True)


class InvertedResidual(nn.Module):
    def __init__(self, inp, out, stride, expand, use_se, act):
        super().__init__()
        hidden = make_divisible(inp * expand)
        self.use_res = stride == 1 and inp == out
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(inp, hidden, 1, bias=False), nn.BatchNorm2d(hidden, eps=0.001, momentum=0.01), act()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                   nn.BatchNorm2d(hidden, eps=0.001, momentum=0.01), act()]
        if use_se:
            layers.append(SqueezeExcitation(hidden, make_divisible(hidden // 4)))
        layers += [nn.Conv2d(hidden, out, 1, bias=False), nn.BatchNorm2d(out, eps=0.001, momentum=0.01)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish(),
            InvertedResidual(8, 8, 1, 1, True, nn.ReLU),
            InvertedResidual(8, 16, 2, 4, False, nn.ReLU6),
            InvertedResidual(16, 16, 1, 3, True, nn.Hardswish),
        )
        self.classifier = nn.Sequential(nn.Linear(16, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
        return self.classifier(x)


net = MobileNet().to(memory_format=torch.channels_last)
w = net.features[0].weight
print("weight channels_last", w.is_contiguous(memory_format=torch.channels_last), w.is_contiguous(), w.stride())
x = torch.randn(6, 3, 16, 16).contiguous(memory_format=torch.channels_last)
y = torch.randint(0, 4, (6,))
print("input strides", x.stride(), "feature strides", net.features[:3](x).stride())
opt = torch.optim.RMSprop(net.parameters(), lr=0.01, alpha=0.9, eps=0.0316, momentum=0.9, weight_decay=1e-5)
for step in range(5):
    opt.zero_grad()
    loss = F.cross_entropy(net(x), y, label_smoothing=0.1)
    loss.backward()
    opt.step()
    print(f"mobilenet step {step} loss {loss.item():.5f}")
print("grad layout", net.features[0].weight.grad.is_contiguous(memory_format=torch.channels_last))
bn = net.features[1]
print("bn running", r(bn.running_mean[:4]), r(bn.running_var[:4]), bn.num_batches_tracked.item())
net.eval()
with torch.no_grad():
    ev = net(x)
    same = net(x.contiguous())
print("eval", r(ev[0]), "layout independent", torch.allclose(ev, same, atol=1e-5))
dw = net.features[4].block[3]
print("depthwise", dw.groups, tuple(dw.weight.shape))


class CausalConv1d(nn.Module):
    def __init__(self, cin, cout, kernel, dilation):
        super().__init__()
        self.pad = (kernel - 1) * dilation
        self.conv = weight_norm(nn.Conv1d(cin, cout, kernel, dilation=dilation))

    def forward(self, x):
        return self.conv(F.pad(x, (self.pad, 0)))


class TemporalBlock(nn.Module):
    def __init__(self, cin, cout, kernel, dilation):
        super().__init__()
        self.conv1 = CausalConv1d(cin, 2 * cout, kernel, dilation)
        self.conv2 = CausalConv1d(cout, cout, kernel, dilation)
        self.act = nn.PReLU(cout)
        self.down = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = F.glu(self.conv1(x), dim=1)
        h = self.drop(F.mish(self.conv2(h)))
        return self.act(h + self.down(x))


tcn = nn.Sequential(TemporalBlock(2, 8, 3, 1), TemporalBlock(8, 8, 3, 2), TemporalBlock(8, 8, 3, 4),
                    nn.Conv1d(8, 1, 1))
seq = torch.randn(4, 2, 30)
target = torch.roll(seq[:, :1], 1, dims=2).cumsum(2) * 0.1
print("weight_norm params", sorted(n for n, _ in tcn[0].conv1.named_parameters()))
opt = torch.optim.Adam(tcn.parameters(), lr=3e-3)
for step in range(6):
    opt.zero_grad()
    loss = F.huber_loss(tcn(seq), target, delta=0.5)
    loss.backward()
    opt.step()
    print(f"tcn step {step} loss {loss.item():.5f}")
tcn.eval()
with torch.no_grad():
    a = tcn(seq)
    changed = seq.clone()
    changed[:, :, 20:] += 1.0
    b = tcn(changed)
print("causal: prefix unchanged", torch.allclose(a[..., :20], b[..., :20], atol=1e-6),
      "suffix changed", not torch.allclose(a[..., 20:], b[..., 20:]))
g = tcn[0].conv1.conv.parametrizations.weight
print("weight_norm g", r(g.original0.flatten()[:4]), "v norm", r(g.original1.norm()))
print("prelu", r(tcn[0].act.weight[:4]), "rrelu eval", r(F.rrelu(torch.tensor([-1.0, 2.0]), training=False)))
