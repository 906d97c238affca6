# Deployment and resumption idioms: torch.jit.script/trace of small modules (with control flow,
# submodules, methods), save/load round trips through a buffer, torch.compile of a model and of a
# whole training step, torch.export of a model with a dynamic batch dim, and a checkpoint of
# model + optimizer + scheduler + RNG state that, loaded into fresh objects, continues with the
# same losses as the uninterrupted run.
import io

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x: torch.Tensor, flag: bool = True) -> torch.Tensor:
        h = self.lin(x)
        if flag:
            h = torch.relu(h) * self.scale
        else:
            h = torch.tanh(h)
        for _ in range(2):
            h = h + x
        return h


gate = Gate()
x = torch.randn(3, 4)
scripted = torch.jit.script(gate)
print("script", torch.allclose(scripted(x), gate(x)), torch.allclose(scripted(x, False), gate(x, False)))
traced = torch.jit.trace(gate, (x,))
print("trace", torch.allclose(traced(x * 2), gate(x * 2)))
buf = io.BytesIO()
torch.jit.save(scripted, buf)
buf.seek(0)
loaded = torch.jit.load(buf)
# (the archive holds the forward exported at the last call, scripted(x, False): docs/deviations.md, ember.jit)
print("jit load", torch.allclose(loaded(x, False), gate(x, False)),
      torch.allclose(loaded(x * 3, False), gate(x * 3, False)))
print("state", sorted(loaded.state_dict().keys()))


@torch.jit.script
def fused(a, b):
    return (a * b).sigmoid().sum(1)


print("script fn", r(fused(x, x + 1)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.bn(self.conv(x))), 1).flatten(1))


net = Net()
imgs, labels = torch.randn(8, 1, 6, 6), torch.randint(0, 3, (8,))
net.eval()
compiled = torch.compile(net)
print("compile eval", torch.allclose(compiled(imgs), net(imgs), atol=1e-6))
net.train()
ep = torch.export.export(net.eval(), (imgs,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2)}})
print("export", torch.allclose(ep.module()(imgs[:3]), net(imgs[:3]), atol=1e-6),
      [tuple(s.shape) for s in ep.graph_signature.user_inputs and [imgs[:1]]],
      sorted(ep.state_dict.keys())[:2])
net.train()
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)


@torch.compile
def train_step(xb, yb):
    opt.zero_grad()
    loss = F.cross_entropy(net(xb), yb)
    loss.backward()
    opt.step()
    return loss


eager_net = Net()
eager_net.load_state_dict(net.state_dict())
eager_opt = torch.optim.SGD(eager_net.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    loss = train_step(imgs, labels)
    eager_opt.zero_grad()
    eager_loss = F.cross_entropy(eager_net(imgs), labels)
    eager_loss.backward()
    eager_opt.step()
    print("compiled step", step, round(loss.item(), 5), abs(loss.item() - eager_loss.item()) < 1e-5)


def make():
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(5, 16), nn.Dropout(0.2), nn.ReLU(), nn.Linear(16, 2))
    o = torch.optim.AdamW(m.parameters(), lr=0.01)
    s = torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=10)
    return m, o, s


def run(m, o, s, steps):
    out = []
    for _ in range(steps):
        xb = torch.randn(6, 5)
        loss = F.cross_entropy(m(xb), (xb.sum(1) > 0).long())
        o.zero_grad()
        loss.backward()
        o.step()
        s.step()
        out.append(round(loss.item(), 6))
    return out


model, opt2, sched = make()
straight = run(model, opt2, sched, 8)
model, opt2, sched = make()
first = run(model, opt2, sched, 4)
ckpt = io.BytesIO()
torch.save({"model": model.state_dict(), "opt": opt2.state_dict(), "sched": sched.state_dict(),
            "rng": torch.get_rng_state(), "epoch": 4}, ckpt)
ckpt.seek(0)
torch.manual_seed(123)
model, opt2, sched = make()
state = torch.load(ckpt, weights_only=True)
model.load_state_dict(state["model"])
opt2.load_state_dict(state["opt"])
sched.load_state_dict(state["sched"])
torch.set_rng_state(state["rng"])
resumed = first + run(model, opt2, sched, 4)
print("straight", straight)
print("resumed == straight", resumed == straight, state["epoch"], sorted(state["opt"]["state"][0].keys()))
print("sched", sched.last_epoch, round(sched.get_last_lr()[0], 6), state["opt"]["param_groups"][0]["lr"] > 0)
for bad in [lambda: torch.jit.trace(gate, (torch.randn(3, 5),)),
            lambda: opt2.load_state_dict({"state": {}, "param_groups": []}),
            lambda: model.load_state_dict({"0.weight": torch.zeros(16, 5)}),
            lambda: ep.module()(torch.randn(1, 1, 6, 6))]:
    try:
        print("no error", bad())
    except (RuntimeError, ValueError, AssertionError) as e:
        print(type(e).__name__, str(e)[:150])
