# torch.cond and map in exported programs (the control-flow tutorial), run through ep.module() on both
# branches and at new sizes.
import torch
from _seedfree import seed_free_init
from torch._higher_order_ops.map import map as hop_map
from torch.export import Dim, export


class DynamicShapeCond(torch.nn.Module):
    def forward(self, x):
        def true_fn(x):
            return x.cos()

        def false_fn(x):
            return x.sin()

        return torch.cond(x.shape[0] > 4, true_fn, false_fn, (x,))


class DataCond(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, bias):
        return torch.cond(x.sum() > 0, lambda a, b: self.lin(a) + b, lambda a, b: self.lin(a) - b, (x, bias))


x = torch.linspace(-1, 1, 6).reshape(2, 3)
ep = export(DynamicShapeCond(), (torch.ones(6, 2),), dynamic_shapes={"x": {0: Dim("n")}})
m = ep.module()
print("shape cond", m(torch.ones(6, 2))[0].tolist(), m(torch.ones(3, 2))[0].tolist())
mod = seed_free_init(DataCond(), 9)
ep2 = export(mod, (x, torch.ones(3)))
print("cond nodes", sum(1 for n in ep2.graph.nodes if n.target is torch.ops.higher_order.cond))
for inp in (x, -x.abs()):
    print("data cond", torch.allclose(ep2.module()(inp, torch.ones(3)), mod(inp, torch.ones(3)), atol=1e-6))
print("eager cond", torch.cond(torch.tensor(True), lambda a: a + 1, lambda a: a - 1, (x,)).tolist())


class MapM(torch.nn.Module):
    def forward(self, xs, y):
        return hop_map(lambda x, y: x * y + 1, xs, y)


xs = torch.arange(6.0).reshape(3, 2)
print("map eager", hop_map(lambda a, b: a - b, xs, torch.ones(2)).tolist())
ep3 = export(MapM(), (xs, torch.full((2,), 2.0)))
print("map export", ep3.module()(xs, torch.full((2,), 2.0)).tolist())
try:
    torch.cond(x.sum() > 0, lambda a: a.sum(), lambda a: a, (x,))
except Exception as e:
    print("mismatched branches", type(e).__name__)
compiled = torch.compile(lambda a: torch.cond(a.sum() > 0, torch.sin, torch.cos, (a,)))
print("compiled cond", compiled(x - 0.5).round(decimals=5).tolist())
