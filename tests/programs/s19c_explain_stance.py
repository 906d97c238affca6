# Inspecting compilation: torch._dynamo.explain on functions with and without breaks, the compile counters,
# config.patch, set_stance("force_eager") and torch.compiler.disable as a context around a compiled call.
import torch
from torch._dynamo.utils import counters


def clean(x, y):
    return torch.tanh(x) * y + 1


def with_breaks(x):
    x = x * 2
    if x.sum() > 0:
        x = x + 1
    n = int(x.max().item())
    return x * n


x = torch.linspace(-1, 2, 6)
for fn, args in ((clean, (x, x)), (with_breaks, (x,))):
    ex = torch._dynamo.explain(fn)(*args)
    print(fn.__name__, "graphs", ex.graph_count, "breaks", ex.graph_break_count, "reasons", len(ex.break_reasons))
    print(fn.__name__, "out_guards listed", isinstance(ex.out_guards, list))
torch._dynamo.reset()
counters.clear()
cf = torch.compile(clean, backend="eager")
cf(x, x)
cf(x, x)
print("unique graphs", counters["stats"]["unique_graphs"])
torch._dynamo.reset()
compiled = []


def backend(gm, example_inputs):
    compiled.append(1)
    return gm.forward


cb = torch.compile(clean, backend=backend)
torch.compiler.set_stance("force_eager")
out = cb(x, x)
print("force_eager", len(compiled), torch.allclose(out, clean(x, x)))
torch.compiler.set_stance("default")
out = cb(x, x)
print("default stance", len(compiled), torch.allclose(out, clean(x, x)))
with torch._dynamo.config.patch(cache_size_limit=1):
    print("patched limit", torch._dynamo.config.cache_size_limit)
print("restored", torch._dynamo.config.cache_size_limit)
with torch.compiler.set_stance("force_eager"):
    cb(x + 1, x)
print("stance as context", len(compiled))
print("with_breaks", torch.allclose(torch.compile(with_breaks, backend="eager")(x), with_breaks(x)))
