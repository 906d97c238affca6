"""ZeroRedundancyOptimizer (Adam) under DDP with an LR scheduler: parameters after 3 steps, the
consolidated state dict on rank 0, and a reload into a fresh optimizer that steps on the same."""

from prelude import LIB, dist, error_of, init, torch, write

if LIB == "torch":
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    from ember.distributed.optim import ZeroRedundancyOptimizer
    from ember.nn.parallel import DistributedDataParallel as DDP

nn = torch.nn
rank, world = init()
R = {}


def make():
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    with torch.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(torch.sin(torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) + i) / 3)
    return m


def rounded(values, digits=5):
    return [round(v, digits) for v in values]


model = DDP(make())
opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.05)
sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
x = torch.cos(torch.arange(32.0).reshape(8, 4)) + rank
for _ in range(3):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
    sched.step()
R["params"] = rounded(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist())
R["lr"] = [g["lr"] for g in opt.param_groups]
R["is_optimizer"] = isinstance(opt, torch.optim.Optimizer)
R["unconsolidated"] = error_of(lambda: opt.state_dict())
opt.consolidate_state_dict(to=0)
box = [opt.state_dict() if rank == 0 else None]
if rank == 0:
    sd = box[0]
    R["state_keys"] = [sorted(sd), sorted(sd["state"]), sorted(sd["state"][0]),
                       [g["params"] for g in sd["param_groups"]],
                       rounded(sd["state"][3]["exp_avg"].reshape(-1).tolist(), 6), float(sd["state"][3]["step"])]
dist.broadcast_object_list(box, src=0)
fresh = DDP(make())
opt2 = ZeroRedundancyOptimizer(fresh.parameters(), optimizer_class=torch.optim.Adam, lr=0.05)
with torch.no_grad():
    for a, b in zip(fresh.parameters(), model.parameters()):
        a.copy_(b)
opt2.load_state_dict(box[0])
for o, m in ((opt, model), (opt2, fresh)):
    o.zero_grad()
    m(x).pow(2).mean().backward()
    o.step()
R["reloaded_step_equal"] = all(bool(torch.equal(a, b)) for a, b in zip(model.parameters(), fresh.parameters()))
R["reloaded_lr"] = [g["lr"] for g in opt2.param_groups]
write(rank, R)
dist.destroy_process_group()
