# torch.export with dynamic dims: Dim, dims, Dim.AUTO, Dim.DYNAMIC, derived dims; range constraints and
# the errors of calls that break them.
import torch
from torch.export import Dim, export


class M(torch.nn.Module):
    def forward(self, x, y):
        return x @ y.T + x.shape[0]


x, y = torch.randn(4, 3), torch.randn(5, 3)
batch = Dim("batch", min=2, max=64)
ep = export(M(), (x, y), dynamic_shapes={"x": {0: batch}, "y": {0: Dim("n")}})
print(sorted(str(v) for v in ep.range_constraints.values()))
print(ep.module()(torch.randn(9, 3), torch.randn(2, 3)).shape)
for bad in ((torch.randn(1, 3), y), (torch.randn(4, 4), y), (torch.randn(65, 3), y)):
    try:
        ep.module()(*bad)
    except Exception as e:
        print("bad call", type(e).__name__, str(e).splitlines()[0])
b, n = torch.export.dims("b", "n")
ep2 = export(M(), (x, y), dynamic_shapes=({0: b}, {0: n}))
print("dims", ep2.module()(torch.randn(3, 3), torch.randn(7, 3)).shape)
ep3 = export(M(), (x, y), dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO, 1: Dim.AUTO}))
print("auto", [str(s) for s in ep3.graph_signature.user_inputs], ep3.module()(torch.randn(6, 3), y).shape)
ep4 = export(M(), (x, y), dynamic_shapes=({0: Dim.DYNAMIC}, None))
print("dynamic", ep4.module()(torch.randn(8, 3), y).shape)
try:
    ep4.module()(torch.randn(8, 3), torch.randn(6, 3))
except Exception as e:
    print("static y", type(e).__name__, str(e).splitlines()[0])


class Cat(torch.nn.Module):
    def forward(self, a, b):
        return torch.cat([a, b], 0)[1:]


d = Dim("d", min=3)
ep5 = export(Cat(), (torch.randn(4, 2), torch.randn(5, 2)), dynamic_shapes=({0: d}, {0: d + 1}))
print("derived", ep5.module()(torch.randn(6, 2), torch.randn(7, 2)).shape)
print(sorted(str(v) for v in ep5.range_constraints.values()))
try:
    ep5.module()(torch.randn(6, 2), torch.randn(6, 2))
except Exception as e:
    print("derived bad", type(e).__name__, str(e).splitlines()[0])
