# Custom backends receive (gm, example_inputs) and return a callable; compiler.disable and allow_in_graph.
import torch
import torch.nn.functional as F
from torch._dynamo.backends.registry import register_backend

seen = []


def my_compiler(gm: torch.fx.GraphModule, example_inputs):
    seen.append((type(gm).__name__, [tuple(t.shape) for t in example_inputs if isinstance(t, torch.Tensor)]))
    ops = [n.op for n in gm.graph.nodes]
    print("placeholders", ops.count("placeholder"), "outputs", ops.count("output"))
    return gm.forward


@torch.compile(backend=my_compiler)
def fn(x, y):
    a = torch.cos(x)
    b = torch.sin(y)
    return a + b


x, y = torch.linspace(0, 1, 4), torch.linspace(1, 2, 4)
print(fn(x, y).round(decimals=5).tolist())
print(seen)


@torch.compiler.disable
def helper(t):
    return t.numpy().sum()


def uses_helper(x):
    return x * float(helper(x)) + 1


out = torch.compile(uses_helper, backend="eager")(x)
print("disable", torch.allclose(out, uses_helper(x)))


def plain(t):
    return t * 3


torch._dynamo.allow_in_graph(plain)
print("allow_in_graph", torch.compile(lambda t: plain(t) + 1, backend="eager")(x).tolist())


def wrapped_backend(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        return out
    return run


print("wrapped", torch.compile(lambda a: F.relu(a - 0.5).sum(), backend=wrapped_backend)(x).item())

@register_backend
def s19_counter(gm, example_inputs):
    print("registered backend called")
    return gm.forward


print("registered", torch.compile(lambda a: a * 2, backend="s19_counter")(x).tolist())
print("in list", "s19_counter" in torch._dynamo.list_backends())
