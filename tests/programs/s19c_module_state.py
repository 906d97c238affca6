# A compiled nn.Module with forward hooks, a buffer it mutates, BatchNorm running statistics, and
# train/eval switches: outputs and state equal eager's.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("calls", torch.zeros(()))
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x):
        self.calls += 1
        h = self.bn(self.lin(x))
        self.ema.mul_(0.9).add_(h.detach().mean(0), alpha=0.1)
        return h.tanh()


def build():
    m = seed_free_init(Counter(), 5)
    log = []
    m.lin.register_forward_hook(lambda mod, inp, out: log.append(("lin", tuple(out.shape))))
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,))
    return m, log


x = data((6, 4), 4)
eager, elog = build()
comp, clog = build()
cm = torch.compile(comp)
for i in range(3):
    a, b = eager(x + i), cm(x + i)
    print("step", i, torch.allclose(a, b, atol=1e-5))
print("calls", eager.calls.item(), comp.calls.item())
print("ema", torch.allclose(eager.ema, comp.ema, atol=1e-5), comp.ema.round(decimals=4).tolist())
print("bn stats", torch.allclose(eager.bn.running_mean, comp.bn.running_mean, atol=1e-5),
      comp.bn.num_batches_tracked.item())
print("hooks", elog == clog, len(clog))
eager.eval()
comp.eval()
print("eval", torch.allclose(eager(x), cm(x), atol=1e-5), comp.calls.item())
handle = comp.lin.register_forward_hook(lambda mod, inp, out: out * 0)
print("new hook", cm(x).abs().sum().item() == 0)
handle.remove()
print("hook removed", torch.allclose(cm(x), eager(x), atol=1e-5))
with torch.no_grad():
    comp.lin.weight.fill_(0.1)
    eager.lin.weight.fill_(0.1)
print("weights changed", torch.allclose(cm(x), eager(x), atol=1e-5))
