# torchvision-style ResNet from memory: BasicBlock and Bottleneck with downsample shortcuts,
# zero-init of the last BN gamma, AdaptiveAvgPool2d((1, 1)), SGD with nesterov momentum and
# weight_decay on non-BN parameters only (param groups), MultiStepLR, label_smoothing cross entropy,
# accuracy with topk, eval mode, and the fuse-free inference path.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=5):
        super().__init__()
        self.inplanes = 8
        self.conv1 = nn.Conv2d(3, 8, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 8, layers[0])
        self.layer2 = self._make_layer(block, 16, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / batch_size) for k in topk]


images = data((3, 8, 3, 24, 24), salt=5)
targets = integers((3, 8), 5, salt=5)
for block, layers in ((BasicBlock, [2, 1]), (Bottleneck, [1, 1])):
    model = seed_free_init(ResNet(block, layers), salt=layers[0])
    for m in model.modules():
        if isinstance(m, (BasicBlock, Bottleneck)):
            last_bn = m.bn3 if isinstance(m, Bottleneck) else m.bn2
            nn.init.constant_(last_bn.weight, 0.5)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    optimizer = torch.optim.SGD([{'params': decay, 'weight_decay': 1e-4},
                                 {'params': no_decay, 'weight_decay': 0.}], lr=0.1, momentum=0.9, nesterov=True)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 4], gamma=0.1)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    for epoch in range(5):
        model.train()
        for i in range(3):
            output = model(images[i])
            loss = criterion(output, targets[i])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        acc1, acc3 = accuracy(output, targets[2], topk=(1, 3))
        scheduler.step()
        print(block.__name__, epoch, f'loss {loss.item():.6f} acc1 {acc1.item():.1f} acc3 {acc3.item():.1f}',
              'lr', scheduler.get_last_lr())
    model.eval()
    with torch.inference_mode():
        out = model(images[0])
        probs = F.softmax(out, dim=1)
    print(block.__name__, 'eval', f'{out.sum().item():.5f}', probs.argmax(1).tolist(),
          f'{model.layer1[0].bn1.running_var.mean().item():.6f}', out.requires_grad, out.is_inference())
