# A torchvision-style ResNet (BasicBlock, downsampling shortcuts, kaiming init, zero-init of the
# last BN in each block) trained with SGD nesterov + weight decay, label smoothing and OneCycleLR,
# evaluated in eval mode (BatchNorm running stats), then a hinge-loss GAN whose discriminator
# uses spectral_norm (the old torch.nn.utils.spectral_norm hook API), with Adam(betas=(0, 0.9)).
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers=(1, 1, 1), width=8, num_classes=5):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(width, layers[0])
        self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 4, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        for m in self.modules():
            if isinstance(m, BasicBlock):
                nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


torch.manual_seed(0)
model = ResNet()
print("params", sum(p.numel() for p in model.parameters()), len(model.state_dict()))
decay = [p for n, p in model.named_parameters() if p.ndim > 1]
no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0}],
                      lr=0.1, momentum=0.9, nesterov=True)
images, labels = torch.randn(24, 3, 16, 16), torch.randint(0, 5, (24,))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=8, shuffle=True)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, epochs=2, steps_per_epoch=len(loader))
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
for epoch in range(2):
    model.train()
    for step, (xb, yb) in enumerate(loader):
        out = model(xb)
        loss = criterion(out, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        acc1 = (out.argmax(1) == yb).float().mean().item()
        print(f"epoch {epoch} step {step} loss {loss.item():.5f} acc {acc1:.4f} lr {sched.get_last_lr()[0]:.6f}")
    model.eval()
    with torch.no_grad():
        val = model(images[:8])
    print("eval", round(F.cross_entropy(val, labels[:8]).item(), 5), model.layer2[0].bn1.running_var[:3].tolist(),
          int(model.bn1.num_batches_tracked))

sn = nn.utils.spectral_norm
D = nn.Sequential(sn(nn.Conv2d(1, 8, 4, 2, 1)), nn.LeakyReLU(0.1), sn(nn.Conv2d(8, 16, 4, 2, 1)), nn.LeakyReLU(0.1),
                  nn.Flatten(), sn(nn.Linear(16 * 2 * 2, 1)))
G = nn.Sequential(nn.Linear(8, 16 * 2 * 2), nn.ReLU(), nn.Unflatten(1, (16, 2, 2)),
                  nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.BatchNorm2d(8), nn.ReLU(),
                  nn.ConvTranspose2d(8, 1, 4, 2, 1), nn.Tanh())
print("sn buffers", sorted(n for n, _ in D.named_buffers()), sorted(n for n, _ in D[0].named_parameters()))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.9))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.0, 0.9))
real = torch.rand(6, 1, 8, 8) * 2 - 1
for it in range(3):
    z = torch.randn(6, 8)
    fake = G(z)
    d_loss = F.relu(1 - D(real)).mean() + F.relu(1 + D(fake.detach())).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = -D(fake).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    sigma = torch.linalg.matrix_norm(D[0].weight.flatten(1), 2).item()
    print(f"gan {it} d {d_loss.item():.5f} g {g_loss.item():.5f} sigma {sigma:.4f}")
D.eval()
print("D eval", [round(v, 5) for v in D(real).flatten().tolist()])
nn.utils.remove_spectral_norm(D[0])
print("removed", sorted(n for n, _ in D[0].named_parameters()))
