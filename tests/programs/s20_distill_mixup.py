# Knowledge distillation (Hinton et al., as the PyTorch knowledge-distillation tutorial writes it, from memory):
# a frozen teacher in eval(), KLDivLoss(reduction='batchmean') on log_softmax(student / T) against softmax
# (teacher / T) scaled by T**2, the log_target=True variant, a cosine-embedding hidden-state loss; and mixup /
# cutmix as the timm and facebookresearch/mixup-cifar10 code write it: lam from torch.distributions.Beta
# (sampled from a seeded generator so both libraries draw the same), index permutation, a rand_bbox with
# np.clip, soft targets through one_hot + label smoothing, and SoftTargetCrossEntropy.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init
from torch.distributions import Beta


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten())
        self.classifier = nn.Sequential(nn.Linear(4 * width, 16), nn.ReLU(), nn.Linear(16, 5))

    def forward(self, x):
        h = self.features(x)
        return self.classifier(h), h


x_all = data((32, 3, 8, 8), salt=311)
y_all = integers((32,), 5, salt=312)
teacher = seed_free_init(Net(8), salt=313)
opt = torch.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9)
for ep in range(3):
    for i in range(0, 32, 16):
        loss = F.cross_entropy(teacher(x_all[i:i + 16])[0], y_all[i:i + 16])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"teacher {ep} {loss.item():.6f}")
teacher.eval()
for p in teacher.parameters():
    p.requires_grad = False

student = seed_free_init(Net(4), salt=314)
proj = seed_free_init(nn.Linear(16, 32), salt=315)
opt = torch.optim.Adam(list(student.parameters()) + list(proj.parameters()), lr=3e-3)
T, soft_w, ce_w = 2.0, 0.25, 0.75
kl = nn.KLDivLoss(reduction="batchmean")
kl_log = nn.KLDivLoss(reduction="batchmean", log_target=True)
cos = nn.CosineEmbeddingLoss()
for ep in range(3):
    for i in range(0, 32, 16):
        x, y = x_all[i:i + 16], y_all[i:i + 16]
        with torch.no_grad():
            t_logits, t_hidden = teacher(x)
        s_logits, s_hidden = student(x)
        soft_targets = F.softmax(t_logits / T, dim=-1)
        soft_prob = F.log_softmax(s_logits / T, dim=-1)
        soft_loss = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0] * (T ** 2)
        kd = kl(soft_prob, soft_targets) * T * T
        kd_log = kl_log(soft_prob, F.log_softmax(t_logits / T, dim=-1)) * T * T
        hidden = cos(proj(s_hidden), t_hidden, torch.ones(x.size(0)))
        loss = soft_w * kd + ce_w * F.cross_entropy(s_logits, y) + 0.1 * hidden
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"student {ep} loss {loss.item():.6f} manual {soft_loss.item():.6f} kd {kd.item():.6f} "
          f"log_target {kd_log.item():.6f} cos {hidden.item():.6f}")
print("teacher grads none", all(p.grad is None for p in teacher.parameters()))
print(F.kl_div(torch.tensor([[-1.0, -0.5]]), torch.tensor([[0.0, 0.5]]), reduction="none").tolist())
print(F.kl_div(torch.tensor([[-1.0, -0.5]]), torch.tensor([[-2.0, float("-inf")]]), reduction="sum",
               log_target=True).item())


def rand_bbox(size, lam, rs):
    W, H = size[2], size[3]
    cut_rat = np.sqrt(1.0 - lam)
    cut_w, cut_h = int(W * cut_rat), int(H * cut_rat)
    cx, cy = rs.randint(W), rs.randint(H)
    bbx1, bby1 = np.clip(cx - cut_w // 2, 0, W), np.clip(cy - cut_h // 2, 0, H)
    bbx2, bby2 = np.clip(cx + cut_w // 2, 0, W), np.clip(cy + cut_h // 2, 0, H)
    return bbx1, bby1, bbx2, bby2


def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value).scatter_(1, x, on_value)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


beta = Beta(torch.tensor([0.4]), torch.tensor([0.4]))
print(beta, beta.mean.tolist(), f"{beta.variance.item():.6f}", f"{beta.log_prob(torch.tensor([0.3])).item():.6f}",
      f"{beta.entropy().item():.6f}", beta.concentration1.tolist(), beta.support)
lams = torch.from_numpy(np.random.RandomState(316).beta(0.4, 0.4, size=6).astype("float32"))
perms = [torch.from_numpy(np.random.RandomState(317 + k).permutation(16)) for k in range(6)]
rs = np.random.RandomState(318)
model = seed_free_init(Net(4), salt=319)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
crit = SoftTargetCrossEntropy()
for step in range(6):
    x, y = x_all[(step % 2) * 16:(step % 2) * 16 + 16], y_all[(step % 2) * 16:(step % 2) * 16 + 16]
    lam, index = lams[step].item(), perms[step]
    if step % 2 == 0:
        mixed_x = lam * x + (1 - lam) * x[index, :]
    else:
        bbx1, bby1, bbx2, bby2 = rand_bbox(x.size(), lam, rs)
        mixed_x = x.clone()
        mixed_x[:, :, bbx1:bbx2, bby1:bby2] = x[index, :, bbx1:bbx2, bby1:bby2]
        lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (x.size()[-1] * x.size()[-2]))
    off, on = 0.1 / 5, 1 - 0.1 + 0.1 / 5
    target = one_hot(y, 5, on, off) * lam + one_hot(y[index], 5, on, off) * (1.0 - lam)
    out = model(mixed_x)[0]
    loss = crit(out, target)
    loss_pair = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[index])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"mix {step} lam {lam:.5f} loss {loss.item():.6f} pair {loss_pair.item():.6f} "
          f"target sums {target.sum(1).mean().item():.5f}")
s = Beta(torch.tensor(2.0), torch.tensor(3.0)).rsample(torch.Size([4]))
print(tuple(s.shape), bool(((s > 0) & (s < 1)).all()))
