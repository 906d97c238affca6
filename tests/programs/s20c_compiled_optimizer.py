# Compiling the optimizer step (the "compiling the optimizer" recipe): opt.step wrapped in torch.compile,
# a tensor learning rate driven by a scheduler, and a whole train step (forward, backward, step) compiled
# with fullgraph=False. Losses and weights equal the eager loop's.
import torch
import torch.nn as nn
from _seedfree import data, integers, seed_free_init


def make():
    return seed_free_init(nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)), 7)


x, y = data((32, 8), 1), integers((32,), 4, 3)
loss_fn = nn.CrossEntropyLoss()


def run(opt_cls, compile_step, steps=4, **kw):
    model = make()
    opt = opt_cls(model.parameters(), **kw)
    step = torch.compile(opt.step) if compile_step else opt.step
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        step()
        losses.append(round(loss.item(), 5))
    return losses, model


for opt_cls, kw in ((torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
                    (torch.optim.Adam, {"lr": 0.01}),
                    (torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
                    (torch.optim.RMSprop, {"lr": 0.01})):
    torch._dynamo.reset()
    le, me = run(opt_cls, False, **kw)
    lc, mc = run(opt_cls, True, **kw)
    same = all(torch.allclose(p, q, atol=1e-5) for p, q in zip(me.parameters(), mc.parameters()))
    print(opt_cls.__name__, le == lc, same, lc)

# a tensor lr (so the scheduler's change does not recompile) with a scheduler stepping it
torch._dynamo.reset()
model = make()
opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0, end_factor=0.25, total_iters=3)


@torch.compile(fullgraph=False)
def opt_step():
    opt.step()


ref = make()
ref_opt = torch.optim.Adam(ref.parameters(), lr=0.01)
ref_sched = torch.optim.lr_scheduler.LinearLR(ref_opt, start_factor=1.0, end_factor=0.25, total_iters=3)
for i in range(4):
    for m, o, s, st in ((model, opt, sched, opt_step), (ref, ref_opt, ref_sched, ref_opt.step)):
        o.zero_grad()
        loss_fn(m(x), y).backward()
        st()
        s.step()
    print("tensor lr", i, round(float(opt.param_groups[0]["lr"]), 6),
          all(torch.allclose(p, q, atol=1e-5) for p, q in zip(model.parameters(), ref.parameters())))
print("lr is tensor", isinstance(opt.param_groups[0]["lr"], torch.Tensor))

# a whole compiled train step with gradient clipping
torch._dynamo.reset()
m1, m2 = make(), make()
o1 = torch.optim.SGD(m1.parameters(), lr=0.5)
o2 = torch.optim.SGD(m2.parameters(), lr=0.5)


def train_step(model, opt):
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    return loss.detach(), norm


cstep = torch.compile(train_step)
for i in range(3):
    le, ne = train_step(m1, o1)
    lc, nc = cstep(m2, o2)
    print("clipped step", i, round(le.item(), 5), round(lc.item(), 5), torch.allclose(ne, nc, atol=1e-5))
print("state keys", sorted(o2.state_dict()["state"].keys()), len(o2.state_dict()["param_groups"]))
