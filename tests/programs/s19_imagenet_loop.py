# pytorch/examples imagenet/main.py's loop, from memory, on a tiny ResNet-ish net: AverageMeter and
# ProgressMeter printing with format specs, torchvision-like transforms written by hand (ToTensor from
# uint8 HWC arrays, RandomResizedCrop via crop + F.interpolate(antialias=True), RandomHorizontalFlip by
# torch.flip, Normalize, Resize + CenterCrop for validation), SGD with momentum/weight decay, StepLR,
# validate under torch.no_grad, top-k accuracy, and save_checkpoint with is_best to a BytesIO.
import io
from enum import Enum

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import seed_free_init

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class Summary(Enum):
    NONE = 0
    AVERAGE = 1


class AverageMeter:
    def __init__(self, name, fmt=':f', summary_type=Summary.AVERAGE):
        self.name, self.fmt, self.summary_type = name, fmt, summary_type
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    def __init__(self, num_batches, meters, prefix=""):
        num_digits = len(str(num_batches // 1))
        self.batch_fmtstr = '[{:' + str(num_digits) + 'd}/' + '{:d}'.format(num_batches) + ']'
        self.meters, self.prefix = meters, prefix

    def display(self, batch):
        print('\t'.join([self.prefix + self.batch_fmtstr.format(batch)] + [str(m) for m in self.meters]))


def to_tensor(arr):
    return torch.from_numpy(arr).permute(2, 0, 1).contiguous().float().div(255)


def random_resized_crop(img, rs, size=16):
    _, h, w = img.shape
    ch, cw = rs.randint(h // 2, h + 1), rs.randint(w // 2, w + 1)
    top, left = rs.randint(0, h - ch + 1), rs.randint(0, w - cw + 1)
    crop = img[:, top:top + ch, left:left + cw]
    return F.interpolate(crop.unsqueeze(0), size=(size, size), mode='bilinear', align_corners=False,
                         antialias=True).squeeze(0)


def train_transform(arr, rs):
    img = random_resized_crop(to_tensor(arr), rs)
    if rs.rand() < 0.5:
        img = torch.flip(img, dims=[2])
    return (img - MEAN) / STD


def val_transform(arr):
    img = F.interpolate(to_tensor(arr)[None], size=20, mode='bilinear', align_corners=False, antialias=True)[0]
    return (img[:, 2:18, 2:18] - MEAN) / STD


def block(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(block(3, 8, 1), block(8, 16, 2), block(16, 16, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.features(x)), 1))


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        _, pred = output.topk(maxk, 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
        return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0)) for k in topk]


rs = np.random.RandomState(0)
raw = rs.randint(0, 256, size=(24, 24, 24, 3)).astype(np.uint8)
labels = torch.from_numpy(rs.randint(0, 4, size=24)).long()
model = seed_free_init(TinyNet(), salt=3)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
best_acc1 = 0
for epoch in range(3):
    batch_time, losses = AverageMeter('Time', ':6.3f'), AverageMeter('Loss', ':.4e')
    top1, top2 = AverageMeter('Acc@1', ':6.2f'), AverageMeter('Acc@2', ':6.2f')
    progress = ProgressMeter(3, [losses, top1, top2], prefix="Epoch: [{}]".format(epoch))
    model.train()
    for i in range(3):
        images = torch.stack([train_transform(raw[j], rs) for j in range(i * 8, i * 8 + 8)])
        target = labels[i * 8:i * 8 + 8]
        output = model(images)
        loss = criterion(output, target)
        acc1, acc2 = accuracy(output, target, topk=(1, 2))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        top2.update(acc2[0], images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        progress.display(i + 1)
    model.eval()
    with torch.no_grad():
        images = torch.stack([val_transform(raw[j]) for j in range(24)])
        output = model(images)
        vloss = criterion(output, labels)
        acc1, = accuracy(output, labels)
    print(f' * Acc@1 {acc1.item():.3f} loss {vloss.item():.6f}')
    scheduler.step()
    is_best = acc1.item() > best_acc1
    best_acc1 = max(acc1.item(), best_acc1)
    buf = io.BytesIO()
    torch.save({'epoch': epoch + 1, 'state_dict': model.state_dict(), 'best_acc1': best_acc1,
                'optimizer': optimizer.state_dict(), 'scheduler': scheduler.state_dict()}, buf)
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    print('checkpoint', ckpt['epoch'], is_best, sorted(ckpt['scheduler']), len(ckpt['optimizer']['state']),
          ckpt['optimizer']['param_groups'][0]['lr'], top1.avg.item() if torch.is_tensor(top1.avg) else top1.avg)
print(str(top1), str(losses).split()[0])
