# torch.export.unflatten of a model with nested submodules, a shared (tied) module and a buffer: the
# unflattened module computes the program, its children and parameter names follow the original, a
# submodule is swapped for another implementation, and preserve_module_call_signature keeps a submodule
# callable with its own signature.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch.export import export, unflatten


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(6, 6)
        self.k = nn.Linear(6, 6)

    def forward(self, x):
        w = (self.q(x) @ self.k(x).transpose(-1, -2)).softmax(-1)
        return w @ x


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
        self.norm = nn.LayerNorm(6)

    def forward(self, x):
        return self.norm(x + self.attn(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer()])
        self.out = nn.Linear(6, 3)
        self.register_buffer("bias", torch.linspace(-1, 1, 3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.out(x) + self.bias


model = seed_free_init(Model().eval(), 6)
x = data((2, 4, 6), 1)
ep = export(model, (x,))
uf = unflatten(ep)
print("unflattened", torch.allclose(uf(x), model(x), atol=1e-5))
print("children", [n for n, _ in uf.named_children()])
print("layer children", [n for n, _ in getattr(uf.layers, "0").named_children()])
print("params", sorted(dict(uf.named_parameters()))[:4])
print("buffers", sorted(dict(uf.named_buffers())))
print("attn alone", torch.allclose(getattr(uf.layers, "1").attn(x), model.layers[1].attn(x), atol=1e-5))


class Doubled(nn.Module):
    def forward(self, x):
        return x * 2


ep2 = export(model, (x,), preserve_module_call_signature=("layers.0.attn",))
uf2 = unflatten(ep2)
getattr(uf2.layers, "0").attn = Doubled()
ref = model.out(model.layers[1](model.layers[0].norm(x + x * 2))) + model.bias
print("swapped", torch.allclose(uf2(x), ref, atol=1e-5))
print("type of swapped", type(getattr(uf2.layers, "0").attn).__name__)
print("module call graph has", "layers.0.attn" in [e.fqn for e in ep2.module_call_graph])
