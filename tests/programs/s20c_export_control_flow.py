# torch.cond, map and while_loop inside exported programs: branches that call submodules, a cond on a
# dynamic size, nested cond, a while_loop counting to a data-dependent bound, map over a batch; each
# exported program is run on new inputs against eager, and the higher-order nodes are counted.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim, export


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 4)
        self.down = nn.Linear(4, 4)

    def forward(self, x):
        def pos(t):
            return self.up(t).relu()

        def neg(t):
            return self.down(t).tanh()

        return torch.cond(x.mean() > 0, pos, neg, (x,))


class Nested(nn.Module):
    def forward(self, x, y):
        def outer_true(a, b):
            return torch.cond(b.sum() > 0, lambda p, q: p + q, lambda p, q: p - q, (a, b))

        def outer_false(a, b):
            return a * b

        return torch.cond(a_gt(x), outer_true, outer_false, (x, y))


def a_gt(x):
    return x.max() > 0.5


class SizeCond(nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 3, lambda t: t.cumsum(0), lambda t: t * 2, (x,))


class Counter(nn.Module):
    def forward(self, n, x):
        def cond_fn(i, acc):
            return i < n

        def body_fn(i, acc):
            return i + 1, acc * 2 + 1

        return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), x))


class Mapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, xs):
        return hop_map(lambda row: self.lin(row).sigmoid(), xs)


def count(ep, name):
    return sum(1 for n in ep.graph.nodes if n.op == "call_function" and name in str(n.target))


b = seed_free_init(Branchy(), 1)
x = data((3, 4), 1)
ep = export(b, (x,))
print("cond nodes", count(ep, "cond"), "graph modules", len([n for n in ep.graph.nodes if n.op == "get_attr"]))
for inp in (x + 2, x - 2):
    print("branchy", torch.allclose(ep.module()(inp), b(inp), atol=1e-6))
epn = export(Nested(), (x, x.clone()))  # (one tensor twice is traced as one input by torch)
for p, q in ((x + 1, x), (x + 1, -x - 1), (x - 1, x)):
    print("nested", torch.allclose(epn.module()(p, q), Nested()(p, q), atol=1e-6))
eps = export(SizeCond(), (data((5, 2), 2),), dynamic_shapes={"x": {0: Dim("n", min=2, max=10)}})
for n in (5, 2, 8):
    inp = data((n, 2), n)
    print("size cond", n, tuple(eps.module()(inp).shape), torch.allclose(eps.module()(inp), SizeCond()(inp), atol=1e-6))
epw = export(Counter(), (torch.tensor(3), data((2,), 3)))
for n in (3, 5, 0):
    i, acc = epw.module()(torch.tensor(n), torch.ones(2))
    print("while", n, i.item(), acc.tolist())
print("while eager", [t.tolist() for t in Counter()(torch.tensor(4), torch.zeros(2))])
mp = seed_free_init(Mapper(), 2)
epm = export(mp, (data((4, 3), 4),))
print("map", torch.allclose(epm.module()(data((4, 3), 5)), mp.lin(data((4, 3), 5)).sigmoid(), atol=1e-6))
print("map nodes", count(epm, "map"))
try:
    export(Branchy(), (x,)).module()(torch.ones(3, 5))
except Exception as e:
    print("bad input", type(e).__name__)
