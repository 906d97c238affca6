# torch.export dynamic dims: Dim("batch", min=, max=), a derived dim 2*d, d + 1 between two inputs, the same
# Dim on two inputs (equal sizes), Dim.AUTO next to a static dim; range_constraints printed, the exported
# module run at new sizes, and each violated guard's exception type and first line.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch.export import Dim, export


class Pairwise(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, a, b):
        return self.proj(a) @ b.transpose(0, 1)


class Halves(nn.Module):
    def forward(self, x, y):
        return (x[0::2] + x[1::2]) * y


class Window(nn.Module):
    def forward(self, x, y):
        return x[1:] + y


def show(label, ep):
    print(label, sorted(str(r) for r in ep.range_constraints.values()))


def attempt(label, fn, text=True):
    try:
        out = fn()
        print(label, "->", tuple(out.shape))
    except Exception as e:
        # (text=False: which guard torch words depends on its reasoning about the program's own ops, e.g.
        # "(1 + x.size()[0]) // 2 == y.size()[0]" for x[0::2]; ember checks the spec "x.size()[0] == 2 * y.size()[0]")
        print(label, "raised", type(e).__name__, "|", str(e).splitlines()[0][:90] if text else str(e)[:12])


batch = Dim("batch", min=2, max=32)
m = seed_free_init(Pairwise(), 3)
ep = export(m, (data((4, 4), 1), data((6, 4), 2)), dynamic_shapes={"a": {0: batch}, "b": {0: Dim("other", max=100)}})
show("pairwise", ep)
attempt("pairwise 7x9", lambda: ep.module()(data((7, 4), 3), data((9, 4), 4)))
a7, b9 = data((7, 4), 3), data((9, 4), 4)
print("pairwise values", torch.allclose(ep.module()(a7, b9), m(a7, b9), atol=1e-5))
attempt("pairwise batch 1", lambda: ep.module()(data((1, 4), 3), data((9, 4), 4)))
attempt("pairwise batch 33", lambda: ep.module()(data((33, 4), 3), data((9, 4), 4)))
attempt("pairwise other 101", lambda: ep.module()(data((3, 4), 3), data((101, 4), 4)))

half = Dim("half", min=1, max=16)
eph = export(Halves(), (data((6, 3), 1), data((3, 3), 2)), dynamic_shapes={"x": {0: 2 * half}, "y": {0: half}})
show("halves", eph)
attempt("halves 10/5", lambda: eph.module()(data((10, 3), 1), data((5, 3), 2)))
attempt("halves 10/4", text=False, fn=lambda: eph.module()(data((10, 3), 1), data((4, 3), 2)))
attempt("halves 9/4", text=False, fn=lambda: eph.module()(data((9, 3), 1), data((4, 3), 2)))

d = Dim("d", min=2, max=20)
epw = export(Window(), (data((5, 2), 1), data((4, 2), 2)), dynamic_shapes={"x": {0: d + 1}, "y": {0: d}})
show("window", epw)
attempt("window 8/7", lambda: epw.module()(data((8, 2), 1), data((7, 2), 2)))
attempt("window 8/8", text=False, fn=lambda: epw.module()(data((8, 2), 1), data((8, 2), 2)))

same = Dim("same")
eps = export(Halves(), (data((4, 3), 1), data((2, 3), 2)), dynamic_shapes={"x": {0: 2 * same}, "y": {0: same}})
show("same", eps)


class Mixed(nn.Module):
    def forward(self, x):
        return x.sum(-1) * x.shape[1]


epa = export(Mixed(), (data((3, 5), 1),), dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.STATIC}})
show("auto", epa)
attempt("auto 9x5", lambda: epa.module()(data((9, 5), 2)))
attempt("auto 9x6", lambda: epa.module()(data((9, 6), 2)))
print("auto value", epa.module()(torch.ones(2, 5)).tolist())
