# The optimizer and lr-scheduler zoo a training script reaches for: RMSprop (momentum, centered),
# Adagrad, Adamax, NAdam (momentum_decay, decoupled_weight_decay), RAdam, ASGD, Rprop, Adam with
# amsgrad and maximize, SGD with dampening, foreach on and off; per-group options, add_param_group,
# zero_grad(set_to_none=False), optimizer state_dict round trips; schedulers chained and
# sequenced (SequentialLR of LinearLR warmup + CosineAnnealingLR, ChainedScheduler, ConstantLR,
# ExponentialLR, MultiplicativeLR, PolynomialLR, CyclicLR triangular2/exp_range with momentum
# cycling, OneCycleLR three_phase/linear, CosineAnnealingWarmRestarts stepped by fractional
# epochs, ReduceLROnPlateau in max mode with cooldown), and a run saved halfway through
# torch.save/torch.load(weights_only=True) that resumes with the same learning rates and losses.
import copy
import io

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler

torch.manual_seed(0)
X = torch.randn(32, 5)
Y = (X @ torch.randn(5, 1) + 0.1 * torch.randn(32, 1)).squeeze(1)


def make_model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))


def loss_of(model):
    return F.mse_loss(model(X).squeeze(1), Y)


OPTIMIZERS = {
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=1e-3),
    "rmsprop plain": lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, foreach=False),
    "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=1e-3),
    "adamax": lambda p: torch.optim.Adamax(p, lr=0.05, weight_decay=1e-3),
    "nadam": lambda p: torch.optim.NAdam(p, lr=0.02, momentum_decay=4e-3),
    "nadam decoupled": lambda p: torch.optim.NAdam(p, lr=0.02, weight_decay=0.1, decoupled_weight_decay=True),
    "radam": lambda p: torch.optim.RAdam(p, lr=0.02),
    "radam decoupled": lambda p: torch.optim.RAdam(p, lr=0.02, weight_decay=0.1, decoupled_weight_decay=True),
    "asgd": lambda p: torch.optim.ASGD(p, lr=0.05, t0=3, lambd=1e-3),
    "rprop": lambda p: torch.optim.Rprop(p, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-5, 1.0)),
    "adam amsgrad": lambda p: torch.optim.Adam(p, lr=0.02, amsgrad=True, weight_decay=1e-2),
    "adam maximize": lambda p: torch.optim.Adam(p, lr=0.02, maximize=True, foreach=False),
    "adamw amsgrad": lambda p: torch.optim.AdamW(p, lr=0.02, amsgrad=True, foreach=True),
    "sgd dampening": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.3, weight_decay=1e-3),
    "sgd nesterov maximize": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.5, nesterov=True, maximize=True),
    "adadelta": lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.8, weight_decay=1e-3),
}

for name, make in OPTIMIZERS.items():
    model = make_model()
    opt = make(model.parameters())
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = loss_of(model)
        if "maximize" in name:
            (-loss).backward()
        else:
            loss.backward()
        opt.step()
        losses.append(round(loss.item(), 5))
    state = opt.state_dict()
    keys = sorted(state["state"][0].keys())
    print(name, losses, "state keys", keys)

# per-group options, add_param_group, zero_grad(set_to_none=False), and the state dict round trip
model = make_model()
opt = torch.optim.Adam([{"params": model[0].parameters(), "lr": 0.05},
                        {"params": model[2].weight, "weight_decay": 0.1}], lr=0.01, betas=(0.8, 0.99))
opt.add_param_group({"params": [model[2].bias], "lr": 0.001, "betas": (0.5, 0.9)})
print("groups", [(g["lr"], g["betas"], g["weight_decay"], len(g["params"])) for g in opt.param_groups])
for _ in range(3):
    opt.zero_grad(set_to_none=False)
    loss_of(model).backward()
    opt.step()
opt.zero_grad(set_to_none=False)
print("grads zeroed not None", all(p.grad is not None and not p.grad.any() for p in model.parameters()))
sd = opt.state_dict()
print("state dict", sorted(sd["state"].keys()), [g["params"] for g in sd["param_groups"]],
      sd["state"][0]["step"].item(), round(sd["state"][3]["exp_avg_sq"].sum().item(), 8))
model2 = make_model()
model2.load_state_dict(model.state_dict())
opt2 = torch.optim.Adam([{"params": model2[0].parameters()}, {"params": model2[2].weight}], lr=0.3)
opt2.add_param_group({"params": [model2[2].bias]})
opt2.load_state_dict(copy.deepcopy(sd))
print("loaded groups", [(g["lr"], g["betas"]) for g in opt2.param_groups])
for m, o in ((model, opt), (model2, opt2)):
    o.zero_grad()
    loss_of(m).backward()
    o.step()
print("same after load", all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters())))


def trace(make_sched, steps=12, base_lr=0.1, momentum=0.9, metric=None, optim="sgd"):
    p = nn.Parameter(torch.zeros(1))
    if optim == "sgd":
        o = torch.optim.SGD([p], lr=base_lr, momentum=momentum)
    else:
        o = torch.optim.Adam([p], lr=base_lr)
    s = make_sched(o)
    lrs = []
    for i in range(steps):
        o.step()
        if metric is None:
            s.step()
        else:
            s.step(metric[i])
        lrs.append(round(o.param_groups[0]["lr"], 6))
    return lrs, o, s


def sequential(o):
    warm = lr_scheduler.LinearLR(o, start_factor=0.1, end_factor=1.0, total_iters=4)
    cos = lr_scheduler.CosineAnnealingLR(o, T_max=8, eta_min=1e-3)
    return lr_scheduler.SequentialLR(o, schedulers=[warm, cos], milestones=[4])


SCHEDULERS = {
    "sequential warmup cosine": sequential,
    "chained constant exponential": lambda o: lr_scheduler.ChainedScheduler(
        [lr_scheduler.ConstantLR(o, factor=0.5, total_iters=3), lr_scheduler.ExponentialLR(o, gamma=0.9)]),
    "multiplicative": lambda o: lr_scheduler.MultiplicativeLR(o, lr_lambda=lambda e: 0.95 if e % 2 else 1.0),
    "polynomial": lambda o: lr_scheduler.PolynomialLR(o, total_iters=8, power=2.0),
    "cyclic triangular2": lambda o: lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                          mode="triangular2"),
    "cyclic exp_range": lambda o: lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                        step_size_down=2, mode="exp_range", gamma=0.9),
    "onecycle three phase": lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=12, three_phase=True,
                                                              anneal_strategy="linear", pct_start=0.25),
    "onecycle cos": lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=4,
                                                      div_factor=10.0, final_div_factor=100.0),
    "multistep": lambda o: lr_scheduler.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5),
    "linear down": lambda o: lr_scheduler.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=6),
}
for name, make in SCHEDULERS.items():
    lrs, o, s = trace(make)
    print(name, lrs, "last", [round(x, 6) for x in s.get_last_lr()],
          "momentum", round(o.param_groups[0]["momentum"], 6))
lrs, o, s = trace(lambda o: lr_scheduler.OneCycleLR(o, max_lr=0.5, total_steps=12), optim="adam")
print("onecycle adam betas", lrs, o.param_groups[0]["betas"])

plateau_metric = [0.5, 0.6, 0.6, 0.6, 0.6, 0.61, 0.61, 0.61, 0.61, 0.7, 0.7, 0.7]
lrs, o, s = trace(lambda o: lr_scheduler.ReduceLROnPlateau(o, mode="max", factor=0.5, patience=1, cooldown=2,
                                                          threshold=0.05, threshold_mode="abs", min_lr=0.02),
                  metric=plateau_metric)
print("plateau max", lrs, "best", s.best, "bad epochs", s.num_bad_epochs)

# CosineAnnealingWarmRestarts stepped with fractional epochs inside the epoch loop
p = nn.Parameter(torch.zeros(1))
o = torch.optim.SGD([p], lr=0.1)
s = lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.001)
iters = 4
seen = []
for epoch in range(5):
    for i in range(iters):
        o.step()
        s.step(epoch + i / iters)
        seen.append(round(o.param_groups[0]["lr"], 6))
print("warm restarts fractional", seen, "T_i", s.T_i, "T_cur", round(s.T_cur, 6))


# a run checkpointed in the middle resumes bit for bit
def build():
    model = make_model()
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)
    warm = lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=3)
    cos = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    sched = lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])
    return model, opt, sched


def train(model, opt, sched, steps, log):
    for _ in range(steps):
        idx = torch.randint(0, 32, (8,))
        drop = F.dropout(torch.ones(8), p=0.25)
        opt.zero_grad()
        loss = (F.mse_loss(model(X[idx]).squeeze(1), Y[idx], reduction="none") * drop).mean()
        loss.backward()
        opt.step()
        sched.step()
        log.append((round(loss.item(), 6), round(sched.get_last_lr()[0], 6)))


torch.manual_seed(5)
full_log = []
m, o, s = build()
train(m, o, s, 10, full_log)

torch.manual_seed(5)
part_log = []
m, o, s = build()
train(m, o, s, 4, part_log)
buf = io.BytesIO()
torch.save({"model": m.state_dict(), "opt": o.state_dict(), "sched": s.state_dict(),
            "rng": torch.get_rng_state(), "epoch": 4}, buf)
train(m, o, s, 3, [])  # wander off, then restore
buf.seek(0)
ckpt = torch.load(buf, weights_only=True)
print("checkpoint keys", sorted(ckpt), "sched keys", sorted(ckpt["sched"]), "rng", ckpt["rng"].dtype,
      tuple(ckpt["rng"].shape))
m, o, s = build()
m.load_state_dict(ckpt["model"])
o.load_state_dict(ckpt["opt"])
s.load_state_dict(ckpt["sched"])
torch.set_rng_state(ckpt["rng"])
train(m, o, s, 6, part_log)
print("full run", full_log)
print("resumed identical", part_log == full_log)
