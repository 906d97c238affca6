# Idioms from training scripts: parameter groups with different lr/weight decay (no decay on
# biases and norms), LambdaLR warmup + OneCycleLR, ReduceLROnPlateau, label smoothing,
# class weights, torch.utils.checkpoint, register_buffer/persistent=False, requires_grad_(False)
# freezing, named_parameters filtering, module.apply init, torch.no_grad evaluation with
# inference_mode, early stopping on a validation metric, and state_dict deep copies of the best model.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.register_buffer("scale", torch.tensor(0.5), persistent=False)

    def forward(self, x):
        return x + self.scale * self.ff(self.norm(x))


class Model(nn.Module):
    def __init__(self, d=16, n_classes=5):
        super().__init__()
        self.embed = nn.Linear(8, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(3)])
        self.head = nn.Linear(d, n_classes)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.2)
            nn.init.constant_(m.bias, 0.01)

    def forward(self, x, use_checkpoint=False):
        h = self.embed(x)
        for blk in self.blocks:
            h = checkpoint(blk, h, use_reentrant=False) if use_checkpoint else blk(h)
        return self.head(h.mean(1))


torch.manual_seed(0)
model = Model()
print("buffers in state_dict", [k for k in model.state_dict() if "scale" in k], len(list(model.buffers())))
decay, no_decay = [], []
for name, p in model.named_parameters():
    (no_decay if p.ndim == 1 or name.endswith(".bias") else decay).append(p)
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=3e-3, betas=(0.9, 0.95))
print("groups", [len(g["params"]) for g in opt.param_groups], [g["weight_decay"] for g in opt.param_groups])
warmup = 3
total = 12
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: (s + 1) / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup))))
x = torch.randn(40, 6, 8)
y = torch.randint(0, 5, (40,))
weights = torch.tensor([1.0, 2.0, 1.0, 0.5, 1.0])
xv, yv = torch.randn(16, 6, 8), torch.randint(0, 5, (16,))
best, best_state, bad = float("inf"), None, 0
for step in range(total):
    model.train()
    idx = torch.randperm(40)[:16]
    logits = model(x[idx], use_checkpoint=step % 2 == 0)
    loss = F.cross_entropy(logits, y[idx], weight=weights, label_smoothing=0.1)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    model.eval()
    with torch.inference_mode():
        val = F.cross_entropy(model(xv), yv).item()
        acc = (model(xv).argmax(-1) == yv).float().mean().item()
    if val < best:
        best, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
    else:
        bad += 1
    print(f"step {step} lr {sched.get_last_lr()[0]:.6f} loss {loss.item():.5f} gn {gn.item():.4f} "
          f"val {val:.5f} acc {acc:.4f}")
model.load_state_dict(best_state)
print("best", round(best, 5), "restored", round(F.cross_entropy(model(xv), yv).item(), 5))
for p in model.embed.parameters():
    p.requires_grad_(False)
print("trainable", sum(p.numel() for p in model.parameters() if p.requires_grad))
plateau_opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(plateau_opt, mode="min", factor=0.5, patience=1)
for v in [1.0, 0.9, 0.95, 0.97, 0.99, 0.5]:
    plateau.step(v)
    print("plateau lr", plateau_opt.param_groups[0]["lr"])
onecycle_opt = torch.optim.SGD(model.head.parameters(), lr=0.1, momentum=0.9)
onecycle = torch.optim.lr_scheduler.OneCycleLR(onecycle_opt, max_lr=0.5, total_steps=6)
lrs = []
for _ in range(6):
    onecycle_opt.step()
    onecycle.step()
    lrs.append(round(onecycle_opt.param_groups[0]["lr"], 6))
print("onecycle", lrs, round(onecycle_opt.param_groups[0]["momentum"], 6))
