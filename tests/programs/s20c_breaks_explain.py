# Graph breaks people meet: print of a tensor, .item(), a data-dependent if, torch._dynamo.graph_break(),
# .tolist(): counted by torch._dynamo.explain (graphs, breaks, the head of each reason) and by a counting
# backend; the compiled answers equal eager's, also through a compiled module's forward.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


def with_print(x):
    y = x * 2
    print("y is", y)
    return y + 1


def with_item(x):
    m = x.max().item()
    return x / m


def with_if(x):
    if x.mean() > 0:
        return x.relu()
    return x.sigmoid()


def explicit(x):
    a = x.exp()
    torch._dynamo.graph_break()
    return a.log1p()


def with_tolist(x):
    vals = x.round().flatten().tolist()
    return x * len([v for v in vals if v > 0])


def two_breaks(x):
    a = x.sin()
    if a.sum() > 0:
        a = a * 2
    b = a.cos()
    s = b.sum().item()
    return b - s


x = data((3, 4), 1) + 0.25
for fn in (with_print, with_item, with_if, explicit, with_tolist, two_breaks):
    ex = torch._dynamo.explain(fn)(x)
    heads = [str(r.reason).splitlines()[0][:40] for r in ex.break_reasons]
    print(fn.__name__, "graphs", ex.graph_count, "breaks", ex.graph_break_count, heads)
    torch._dynamo.reset()
    out = torch.compile(fn, backend="eager")(x)
    print(fn.__name__, "same", torch.allclose(out, fn(x), atol=1e-6))
    torch._dynamo.reset()

graphs = []


def counting(gm, example_inputs):
    graphs.append(sum(1 for n in gm.graph.nodes if n.op == "call_function"))
    return gm.forward


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        if h.norm() > 1.0:
            h = h / h.norm()
        return self.b(h).tanh()


m = seed_free_init(Gate(), 2)
cm = torch.compile(m, backend=counting)
for scale in (0.01, 10.0):
    print("gate", scale, torch.allclose(cm(x * scale), m(x * scale), atol=1e-6))
print("gate graphs", len(graphs))
print("explain str has counts", "Graph Count" in str(torch._dynamo.explain(m)(x)))
