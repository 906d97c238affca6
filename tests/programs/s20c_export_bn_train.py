# Exporting a module whose forward mutates buffers: BatchNorm in train mode (running stats,
# num_batches_tracked), a step counter and an EMA buffer written in place. The graph signature names the
# mutated buffers; ep.module() updates its own buffers as eager does; eval-mode export mutates nothing.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch.export import export


class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3, momentum=0.2)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("ema", torch.zeros(3))

    def forward(self, x):
        h = self.bn(self.conv(x))
        self.steps.add_(1)
        self.ema.mul_(0.5).add_(h.mean((0, 2, 3)).detach() * 0.5)
        return h.relu().mean((2, 3))


x = data((4, 2, 5, 5), 1)
ref = seed_free_init(Tracker(), 3).train()
mod = seed_free_init(Tracker(), 3).train()
ep = export(mod, (x,))
sig = ep.graph_signature
print("buffers", sig.buffers)
# (before run_decompositions torch 2.13 keeps the buffer writes as in-place ops, ember lists them as mutations
# already: docs/deviations.md; the decomposed programs agree)
print("user outputs", len(sig.user_outputs))
print("module unchanged by export", mod.steps.item(), torch.equal(mod.bn.running_mean, torch.zeros(3)))
m = ep.module()
for i in range(3):
    inp = x + i * 0.1
    a, b = m(inp), ref(inp)
    print("step", i, torch.allclose(a, b, atol=1e-5))
print("steps", m.steps.item(), ref.steps.item())
print("running_mean", torch.allclose(m.bn.running_mean, ref.bn.running_mean, atol=1e-5),
      m.bn.running_mean.round(decimals=4).tolist())
print("running_var", torch.allclose(m.bn.running_var, ref.bn.running_var, atol=1e-5))
print("batches tracked", m.bn.num_batches_tracked.item())
print("ema", torch.allclose(m.ema, ref.ema, atol=1e-5))
print("state after", sorted(k for k in ep.state_dict))

ev = seed_free_init(Tracker(), 3).eval()
ep_eval = export(ev, (x,))
print("eval mutated", sorted(ep_eval.run_decompositions().graph_signature.buffers_to_mutate.values()))
print("eval", torch.allclose(ep_eval.module()(x), ev(x), atol=1e-5))
dec = ep.run_decompositions()
print("decomposed mutated", sorted(dec.graph_signature.buffers_to_mutate.values()))
print("decomposed output kinds", [s.kind.name for s in dec.graph_signature.output_specs])
fresh = seed_free_init(Tracker(), 3).train()
print("decomposed run", torch.allclose(dec.module()(x), fresh(x), atol=1e-5))
