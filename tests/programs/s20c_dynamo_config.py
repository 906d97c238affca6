# torch._dynamo.config knobs programs set: suppress_errors (a failing backend falls back to eager),
# cache_size_limit / recompile_limit (past it the function runs eagerly), capture_scalar_outputs and
# capture_dynamic_output_shape_ops (no break on .item() / nonzero), config.patch as a decorator and context.
import torch
from torch._dynamo.utils import counters

calls = []


def counting(gm, example_inputs):
    calls.append(1)
    return gm.forward


def broken_backend(gm, example_inputs):
    raise RuntimeError("backend exploded")


def f(x):
    return torch.sin(x) * 2 + 1


x = torch.linspace(0, 1, 5)
torch._dynamo.config.suppress_errors = True
out = torch.compile(f, backend=broken_backend)(x)
print("suppressed", torch.allclose(out, f(x)))
torch._dynamo.config.suppress_errors = False
# (Dynamo skips f's code from now on: its failure was suppressed once, so another function shows the error)
try:
    torch.compile(lambda t: torch.cos(t) + 1, backend=broken_backend)(x)
except Exception as e:
    print("not suppressed", type(e).__name__, "backend exploded" in str(e))
torch._dynamo.reset()

print("default limits", torch._dynamo.config.cache_size_limit, torch._dynamo.config.recompile_limit,
      torch._dynamo.config.accumulated_cache_size_limit)
with torch._dynamo.config.patch(recompile_limit=2):
    calls.clear()
    cf = torch.compile(lambda t: t.sum() * 3, backend=counting, dynamic=False)
    outs = [cf(torch.ones(n)).item() for n in range(1, 6)]
    print("recompile_limit 2", outs, len(calls))
torch._dynamo.reset()


@torch._dynamo.config.patch(capture_scalar_outputs=True)
def scalar_run():
    torch._dynamo.reset()
    counters.clear()

    def g(t):
        s = t.sum().item()
        return t * s + 1

    out = torch.compile(g, backend="eager")(x)
    return torch.allclose(out, g(x)), dict(counters["graph_break"])


ok, breaks = scalar_run()
print("capture_scalar_outputs", ok, len(breaks))
print("patched back", torch._dynamo.config.capture_scalar_outputs)
torch._dynamo.reset()
counters.clear()


def g(t):
    s = t.sum().item()
    return t * s + 1


out = torch.compile(g, backend="eager")(x)
print("item breaks by default", torch.allclose(out, g(x)), sum(counters["graph_break"].values()) >= 1)

with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True):
    torch._dynamo.reset()
    counters.clear()

    def nz(t):
        idx = torch.nonzero(t > 0.5)
        return idx.float().sum() + t.sum()

    out = torch.compile(nz, backend="eager")(x)
    print("dynamic output shapes", out.item() == nz(x).item(), sum(counters["graph_break"].values()))
torch._dynamo.reset()
print("config type", type(torch._dynamo.config.cache_size_limit).__name__)
try:
    torch._dynamo.config.no_such_knob = 1
except Exception as e:
    print("unknown knob", type(e).__name__)
try:
    with torch._dynamo.config.patch(no_such_knob=1):
        pass
except Exception as e:
    print("unknown knob patch", type(e).__name__)
with torch._dynamo.config.patch({"cache_size_limit": 3}):
    print("dict patch", torch._dynamo.config.cache_size_limit)
print("after dict patch", torch._dynamo.config.cache_size_limit)
