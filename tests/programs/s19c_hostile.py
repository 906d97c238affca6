# Hostile inputs on torch.compile / torch.export: wrong shapes after export, unsupported arguments,
# recursion, huge graphs, bad dynamic_shapes specs. Each case prints its result or the exception's type and
# message; ember must raise what torch raises (or compute what it computes), never crash or hang.
import sys
import warnings

import torch
import torch.nn as nn
from torch.export import Dim, export

warnings.simplefilter("ignore")


def case(name, fn):
    try:
        out = fn()
        if isinstance(out, torch.Tensor):
            out = (tuple(out.shape), str(out.dtype), out.tolist() if out.numel() <= 12 else "...")
        print(name, "->", out)
    except Exception as e:  # noqa: BLE001
        print(name, "!!", type(e).__name__, "|", str(e).split("\n")[0][:160])
    torch._dynamo.reset()


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        with torch.no_grad():
            self.fc.weight.copy_(torch.arange(6.0).reshape(2, 3) / 10)
            self.fc.bias.fill_(0.5)

    def forward(self, x):
        return self.fc(x)


ep = export(Lin(), (torch.ones(4, 3),), dynamic_shapes={"x": {0: Dim("b", max=16)}})
m = ep.module()
case("export ok", lambda: m(torch.ones(2, 3)))
case("export wrong rank", lambda: m(torch.ones(3)))
case("export wrong last dim", lambda: m(torch.ones(2, 4)))
case("export above max", lambda: m(torch.ones(17, 3)))
case("export wrong dtype", lambda: m(torch.ones(2, 3, dtype=torch.float64)))
case("export two args", lambda: m(torch.ones(2, 3), torch.ones(2, 3)))
case("export no args", lambda: m())
case("export list arg", lambda: m([1.0, 2.0, 3.0]))
case("export ep call", lambda: ep(torch.ones(2, 3)))
case("export non module", lambda: export(lambda x: x + 1, (torch.ones(2),)))
case("export args not tuple", lambda: export(Lin(), torch.ones(2, 3)))
case("export dims bad type", lambda: export(Lin(), (torch.ones(2, 3),), dynamic_shapes={"x": {0: 5}}))
case("export dims too many", lambda: export(Lin(), (torch.ones(2, 3),), dynamic_shapes=({0: Dim("a")}, {0: Dim("b")})))
case("export dims bad name", lambda: Dim("not a name"))
case("export dim min 0", lambda: list(export(Lin(), (torch.ones(2, 3),),
                                            dynamic_shapes={"x": {0: Dim("z", min=0)}}).range_constraints.values()))
case("compile non callable", lambda: torch.compile(3))
case("compile bad mode", lambda: torch.compile(lambda x: x, mode="turbo"))
case("compile mode and options", lambda: torch.compile(lambda x: x, mode="default", options={"a": 1}))
case("compile bad option", lambda: torch.compile(lambda x: x + 1, options={"no_such_option": 1})(torch.ones(2)))
case("compile unknown backend", lambda: torch.compile(lambda x: x + 1, backend="nope")(torch.ones(2)))
case("compile shape error", lambda: torch.compile(lambda a, b: a @ b)(torch.ones(2, 3), torch.ones(2, 3)))
case("compile dtype error", lambda: torch.compile(lambda a: a.bitwise_and(1), backend="eager")(torch.ones(2)))
case("compile index error", lambda: torch.compile(lambda a: a[5])(torch.ones(2)))
case("compile raises", lambda: torch.compile(lambda a: (_ for _ in ()).throw(ValueError("mine")))(torch.ones(2)))


def fact(x, n):
    return x if n == 0 else fact(x * n, n - 1)


case("compile recursion", lambda: torch.compile(fact, backend="eager")(torch.ones(2), 5))


def forever(x):
    return forever(x + 1)


old = sys.getrecursionlimit()
sys.setrecursionlimit(400)
case("compile infinite recursion", lambda: torch.compile(forever, backend="eager")(torch.ones(2)))
sys.setrecursionlimit(old)


def long_chain(x):
    for i in range(3000):
        x = x + (i % 3)
    return x


case("compile huge graph", lambda: torch.compile(long_chain, backend="eager")(torch.zeros(2)))
case("compile empty input", lambda: torch.compile(lambda a: a.sum(0) * 2)(torch.ones(0, 3)))
case("compile nan", lambda: torch.compile(lambda a: (a / a).isnan())(torch.zeros(2)))
case("compile fullgraph item", lambda: torch.compile(lambda a: a * a.sum().item(), fullgraph=True)(torch.ones(2)))
case("compile returns none", lambda: torch.compile(lambda a: None)(torch.ones(2)))
case("compile int input", lambda: torch.compile(lambda a: a * 2)(3))
case("compile string input", lambda: torch.compile(lambda a: a + "!")("hi"))
case("mark_dynamic bad dim", lambda: torch._dynamo.mark_dynamic(torch.ones(2), 3))
case("cond bad pred", lambda: torch.cond(torch.ones(2) > 0, lambda a: a, lambda a: a, (torch.ones(2),)))
case("cond int operand", lambda: torch.cond(True, lambda a: a, lambda a: a, (3,)))
case("compile reshape bad", lambda: torch.compile(lambda a: a.reshape(3, 4))(torch.ones(10)))
case("compile fullgraph reshape bad", lambda: torch.compile(lambda a: a.reshape(3, 4), fullgraph=True)(torch.ones(10)))


def raises_inside(a):
    if a.shape[0] > 1:
        raise KeyError("no such key")
    return a


case("compile user raise", lambda: torch.compile(raises_inside)(torch.ones(2)))
case("compile fullgraph user raise", lambda: torch.compile(raises_inside, fullgraph=True)(torch.ones(2)))


class Unequal(nn.Module):
    def forward(self, x, y):
        if x.shape[0] != y.shape[0]:
            return x.sum() + y.sum()
        return x.sum() * 2


ep_ne = export(Unequal(), (torch.ones(3), torch.ones(4)), dynamic_shapes=({0: Dim("p")}, {0: Dim("q")}))
case("export ne other sizes", lambda: ep_ne.module()(torch.ones(5), torch.ones(6)))
case("export ne equal sizes", lambda: ep_ne.module()(torch.ones(5), torch.ones(5)))
case("export object input", lambda: export(Unequal(), (torch.ones(2), object())))
case("export static spec mismatch", lambda: export(Lin(), (torch.ones(2, 3),), dynamic_shapes={"x": {1: 4}}))
case("save non program", lambda: torch.export.save(Lin(), "/tmp/never.pt2"))
