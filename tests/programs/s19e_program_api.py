# ExportedProgram inspection: graph signature kinds, state_dict/buffers/constants, module() re-run,
# run_decompositions, a BatchNorm buffer in the signature, strict=False with Python-side objects.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch.export import export


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.bn = nn.BatchNorm2d(2)
        self.register_buffer("offset", torch.full((2, 1, 1), 0.5))
        self.const = torch.tensor(3.0)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + self.offset) * self.const


net = seed_free_init(Net().eval(), 2)
x = data((1, 1, 4, 4), 7)
ep = export(net, (x,))
sig = ep.graph_signature
print("kinds", [s.kind.name for s in sig.input_specs])
print("params", sig.parameters)
print("buffers", sig.buffers)
print("user inputs", sig.user_inputs, "outputs", len(sig.user_outputs))
print("state", sorted(ep.state_dict))
print("constants", len(ep.constants))
print("module", torch.allclose(ep.module()(x), net(x), atol=1e-5))
dec = ep.run_decompositions()
# (the order of the specs after run_decompositions is not compared: PyTorch lifts constants again, before buffers)
print("decomposed", torch.allclose(dec.module()(x), net(x), atol=1e-5),
      sorted(s.kind.name for s in dec.graph_signature.input_specs))
print("example inputs", type(ep.example_inputs).__name__, len(ep.example_inputs[0]))
print("call spec", ep.call_spec.in_spec is not None)
train_net = seed_free_init(Net().train(), 2)
ep_train = export(train_net, (x,))
m = ep_train.module()
before = m.bn.running_mean.clone()
m(x)
print("running mean moved", not torch.equal(before, m.bn.running_mean))
train_net(x)
print("same as eager", torch.allclose(m.bn.running_mean, train_net.bn.running_mean, atol=1e-6))


class Config:
    scale = 4


class NonStrict(nn.Module):
    def forward(self, x, cfg):
        return x * cfg.scale + len(x.shape)


for strict in (False, True):
    try:
        export(NonStrict(), (torch.ones(2), Config()), strict=strict)
        print("exported with a Config argument")
    except Exception as e:
        print("strict" if strict else "non-strict", type(e).__name__, str(e)[:60])


class Scaled(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

    def forward(self, x, n: int):
        return x * self.cfg.scale + n


ep_ns = export(Scaled(Config()), (torch.ones(2), 3), strict=False)
print("non-strict attribute", ep_ns.module()(torch.ones(2), 3).tolist())
try:
    ep_ns.module()(torch.ones(2), 4)
except Exception as e:
    print("int specialized", type(e).__name__)
print("str has graph", "graph():" in str(ep.graph))
