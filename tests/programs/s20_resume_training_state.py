# Saving and resuming a whole training state mid-run as timm / HF Trainer / Lightning checkpoints do it, from
# memory: model + optimizer (AdamW with two param groups) + a SequentialLR (LinearLR warmup then
# CosineAnnealingLR) + GradScaler (disabled on CPU, its state_dict still saved) + the RNG states
# (torch.get_rng_state, a dataloader Generator's get_state, random / numpy states) + epoch/step counters, with
# dropout and a shuffling DataLoader drawing from those RNGs, so the resumed run must reproduce the
# uninterrupted run's losses exactly; also a checkpoint written to a file with torch.save / torch.load
# (weights_only=False for the Python RNG tuple) and a state whose optimizer is loaded before the first step.
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init
from torch.utils.data import DataLoader, TensorDataset

X = data((48, 6), salt=321)
Y = (X[:, :3].sum(1) > X[:, 3:].sum(1)).long()
dataset = TensorDataset(X, Y)


def build():
    model = seed_free_init(nn.Sequential(nn.Linear(6, 24), nn.GELU(), nn.Dropout(0.2), nn.Linear(24, 24),
                                         nn.LayerNorm(24), nn.Dropout(0.1), nn.Linear(24, 2)), salt=322)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=4e-3, betas=(0.9, 0.99))
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=3)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-4)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    gen = torch.Generator().manual_seed(1234)
    loader = DataLoader(dataset, batch_size=12, shuffle=True, generator=gen)
    return model, opt, sched, scaler, gen, loader


def run_epochs(state, start, stop, losses):
    model, opt, sched, scaler, gen, loader = state
    for epoch in range(start, stop):
        model.train()
        for x, y in loader:
            noise = torch.randn(x.shape) * 0.01 + random.random() * 1e-3 + float(np.random.rand()) * 1e-3
            loss = F.cross_entropy(model(x + noise), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            sched.step()
            losses.append(f"{loss.item():.6f}")
        print(f"epoch {epoch} lr {sched.get_last_lr()[0]:.6e} last {losses[-1]}")


def seed_all(s):
    torch.manual_seed(s)
    random.seed(s)
    np.random.seed(s)


seed_all(7)
straight = []
run_epochs(build(), 0, 6, straight)

seed_all(7)
state = build()
resumed = []
run_epochs(state, 0, 3, resumed)
model, opt, sched, scaler, gen, loader = state
ckpt = {
    "epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
    "scaler": scaler.state_dict(), "torch_rng": torch.get_rng_state(), "loader_rng": gen.get_state(),
    "python_rng": random.getstate(), "numpy_rng": np.random.get_state(),
}
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pth")
torch.save(ckpt, path)
print("rng state", ckpt["torch_rng"].dtype, tuple(ckpt["torch_rng"].shape), ckpt["loader_rng"].dtype)
print("scheduler keys", sorted(ckpt["scheduler"]), "scaler", ckpt["scaler"])
print("optimizer groups", [sorted(g) for g in ckpt["optimizer"]["param_groups"]][0])

# something else runs in between and disturbs every generator
seed_all(99)
torch.rand(100)
del model, opt, sched, scaler, gen, loader, state

loaded = torch.load(path, weights_only=False)
state = build()
model, opt, sched, scaler, gen, loader = state
model.load_state_dict(loaded["model"])
opt.load_state_dict(loaded["optimizer"])
sched.load_state_dict(loaded["scheduler"])
scaler.load_state_dict(loaded["scaler"])
torch.set_rng_state(loaded["torch_rng"])
gen.set_state(loaded["loader_rng"])
random.setstate(loaded["python_rng"])
np.random.set_state(loaded["numpy_rng"])
print("resumed lr", f"{sched.get_last_lr()[0]:.6e}", sched.last_epoch, opt.param_groups[1]["weight_decay"],
      opt.state[model[0].weight]["step"])
run_epochs(state, loaded["epoch"], 6, resumed)
print("resumed matches straight", resumed == straight, len(resumed))
if resumed != straight:
    print([i for i, (a, b) in enumerate(zip(resumed, straight)) if a != b][:5])

fresh = build()
fresh[1].load_state_dict(loaded["optimizer"])
print("loaded before first step", len(fresh[1].state), fresh[1].param_groups[0]["initial_lr"],
      fresh[1].param_groups[0]["lr"])
try:
    torch.load(path, weights_only=True)
except Exception as e:  # noqa: BLE001
    print(type(e).__name__)
