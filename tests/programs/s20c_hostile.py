# Hostile inputs, session 20: bad dynamic-shape specs, wrong calls of exported programs and of loaded /
# unflattened ones, higher-order ops with mismatched branches, compile knobs and stances that refuse,
# backends that misbehave, fullgraph refusals, ONNX/jit misuse. Each case prints its result or the
# exception's type and the first line of its message; ember must do what torch does.
import io
import warnings

import torch
import torch.nn as nn
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim, export

warnings.simplefilter("ignore")


def case(name, fn):
    try:
        out = fn()
        if isinstance(out, torch.Tensor):
            out = (tuple(out.shape), str(out.dtype), out.tolist() if out.numel() <= 12 else "...")
        elif isinstance(out, tuple) and all(isinstance(o, torch.Tensor) for o in out):
            out = [tuple(o.shape) for o in out]
        print(name, "->", out)
    except Exception as e:  # noqa: BLE001
        print(name, "!!", type(e).__name__, "|", str(e).split("\n")[0][:150])
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


class Two(nn.Module):
    def forward(self, x, y):
        return x + y


class SumBoth(nn.Module):
    def forward(self, x, y):
        return x.sum() + y.sum()


ep = export(Lin(), (torch.ones(4, 3),), dynamic_shapes={"x": {0: Dim("b", min=2, max=16)}})
m = ep.module()
case("export below min", lambda: m(torch.ones(1, 3)))
case("export zero batch", lambda: m(torch.ones(0, 3)))
case("export int input", lambda: m(torch.ones(2, 3, dtype=torch.int64)))
case("export kwarg name", lambda: m(x=torch.ones(2, 3)))
case("export wrong kwarg", lambda: m(y=torch.ones(2, 3)))
case("export extra kwarg", lambda: m(torch.ones(2, 3), z=1))
case("export 3d input", lambda: m(torch.ones(2, 2, 3)))
case("export numpy input", lambda: m(torch.ones(2, 3).numpy()))
case("export dims list for dict", lambda: export(Two(), (torch.ones(2), torch.ones(2)),
                                                 dynamic_shapes={"x": [Dim("a")], "y": None}).range_constraints)
case("export dims wrong count", lambda: export(Two(), (torch.ones(2), torch.ones(2)), dynamic_shapes=({0: Dim("a")},)))
case("export dims on scalar arg", lambda: export(Two(), (torch.ones(2), 3.0),
                                                 dynamic_shapes=({0: Dim("a")}, {0: Dim("c")})))
case("export same dim unequal", lambda: export(SumBoth(), (torch.ones(2), torch.ones(3)),
                                               dynamic_shapes=({0: Dim("a")}, {0: Dim("a")})))
case("export broadcast specializes", lambda: export(Two(), (torch.ones(3), torch.ones(1)),
                                                    dynamic_shapes=({0: Dim("a")}, {0: Dim("c")})))
case("Dim min above max", lambda: Dim("q", min=9, max=3))
case("Dim float bound", lambda: Dim("q", min=1.5))
case("derived of derived range", lambda: str((2 * Dim("r", max=8) + 1).max))
case("export returns none", lambda: export(type("N", (nn.Module,), {"forward": lambda self, x: None})(),
                                           (torch.ones(2),)).module()(torch.ones(2)))
case("export returns int", lambda: export(type("I", (nn.Module,), {"forward": lambda self, x: x.shape[0]})(),
                                          (torch.ones(2),)).module()(torch.ones(2)))
case("load missing file", lambda: torch.export.load("/tmp/definitely/not/here.pt2"))
case("load empty bytes", lambda: torch.export.load(io.BytesIO(b"")))
case("unflatten non program", lambda: torch.export.unflatten(Lin()))
case("decompositions bad table", lambda: ep.run_decompositions(decomp_table=[1, 2]))
case("cond dtype mismatch", lambda: torch.cond(torch.tensor(True), lambda a: a.int(), lambda a: a, (torch.ones(2),)))
case("cond tuple vs tensor", lambda: torch.cond(torch.tensor(False), lambda a: (a, a), lambda a: a, (torch.ones(2),)))
case("cond not callable", lambda: torch.cond(torch.tensor(True), 1, lambda a: a, (torch.ones(2),)))
case("cond operands not tuple", lambda: torch.cond(torch.tensor(True), lambda a: a + 1, lambda a: a - 1, torch.ones(2)))
case("cond float pred", lambda: torch.cond(torch.tensor(1.0), lambda a: a + 1, lambda a: a - 1, (torch.ones(2),)))
case("while ok", lambda: while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2),
                                    (torch.tensor(0), torch.ones(2))))
case("while body shape", lambda: while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, torch.cat([x, x])),
                                            (torch.tensor(0), torch.ones(2))))
case("while cond non bool", lambda: while_loop(lambda i, x: x.sum(), lambda i, x: (i + 1, x),
                                               (torch.tensor(0), torch.ones(2))))
case("while body arity", lambda: while_loop(lambda i, x: i < 3, lambda i, x: i + 1, (torch.tensor(0), torch.ones(2))))
case("map ok", lambda: hop_map(lambda r: r * 2, torch.arange(6.0).reshape(3, 2)))
case("map scalar", lambda: hop_map(lambda r: r * 2, torch.tensor(3.0)))
case("fullgraph bool", lambda: torch.compile(lambda a: a * 2 if bool(a.sum() > 0) else a,
                                             fullgraph=True)(torch.ones(2)))
case("fullgraph disabled call", lambda: torch.compile(lambda a: torch.compiler.disable(torch.sin)(a) + 1,
                                                      fullgraph=True)(torch.ones(2)))
case("fullgraph graph_break", lambda: torch.compile(lambda a: (torch._dynamo.graph_break(), a + 1)[1],
                                                    fullgraph=True)(torch.ones(2)))
case("backend returns none", lambda: torch.compile(lambda a: a + 1, backend=lambda gm, ex: None)(torch.ones(2)))
case("backend raises", lambda: torch.compile(lambda a: a + 1, backend=lambda gm, ex: 1 / 0)(torch.ones(2)))
case("backend returns wrong count", lambda: torch.compile(lambda a: a + 1,
                                                          backend=lambda gm, ex: (lambda *args: 5))(torch.ones(2)))


def error_on_recompile():
    f = torch.compile(lambda a: a * 2, backend="eager", dynamic=False)
    f(torch.ones(2))
    with torch._dynamo.config.patch(error_on_recompile=True):
        return f(torch.ones(3))


case("error_on_recompile", error_on_recompile)


def fail_on_recompile():
    f = torch.compile(lambda a: a * 3, backend="eager", dynamic=False)
    f(torch.ones(2))
    with torch.compiler.set_stance("fail_on_recompile"):
        return f(torch.ones(4))


case("fail_on_recompile", fail_on_recompile)


def bad_stance():
    try:
        torch.compiler.set_stance("sometimes")
        return torch.compile(lambda a: a + 1, backend="eager")(torch.ones(2))
    finally:
        torch.compiler.set_stance("default")  # torch keeps an unknown stance and fails at its next compile


case("bad stance", bad_stance)
case("unknown knob", lambda: setattr(torch._dynamo.config, "no_such_knob", 3))
case("mark_dynamic non tensor", lambda: torch._dynamo.mark_dynamic([1, 2], 0))
case("compile a class", lambda: torch.compile(Lin)().fc.out_features)
case("compile dynamic string", lambda: torch.compile(lambda a: a, dynamic="yes")(torch.ones(2)))
case("compile generator fn", lambda: list(torch.compile(lambda a: (a * i for i in range(2)))(torch.ones(2)))[1])
case("onnx function not module", lambda: torch.onnx.export(lambda a: a + 1, (torch.ones(2),), io.BytesIO(),
                                                            dynamo=False))
case("jit load garbage", lambda: torch.jit.load(io.BytesIO(b"garbage")))
case("jit trace non tensor", lambda: torch.jit.trace(lambda a: a * 2, (3,)))
case("jit script lambda", lambda: torch.jit.script(lambda a: a * 2))
