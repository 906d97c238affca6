# Dynamic shapes: automatic dynamic after a size change, dynamic=True, dynamic=False and mark_dynamic,
# counted by a backend that records how often it is called.
import torch

compiles = []


def backend(gm, example_inputs):
    compiles.append(1)
    return gm.forward


def f(x):
    return (x * 2).sum(0) + x.shape[0]


def run(label, fn, sizes):
    compiles.clear()
    torch._dynamo.reset()
    outs = [fn(torch.arange(float(n * 3)).reshape(n, 3)).tolist() for n in sizes]
    print(label, len(compiles), outs[-1])


run("automatic", torch.compile(f, backend=backend), [2, 3, 4, 5])
run("dynamic=True", torch.compile(f, backend=backend, dynamic=True), [2, 3, 4, 5])
run("dynamic=False", torch.compile(f, backend=backend, dynamic=False), [2, 3, 4])


def g(x):
    return x.relu() * x.shape[0]


compiles.clear()
torch._dynamo.reset()
cg = torch.compile(g, backend=backend)
x = torch.randn(4, 3)
torch._dynamo.mark_dynamic(x, 0)
print("mark_dynamic", torch.allclose(cg(x), g(x)), len(compiles))
y = torch.randn(7, 3)
print("mark_dynamic second", torch.allclose(cg(y), g(y)), len(compiles))


def h(x, n):
    return x[:n] * n


compiles.clear()
torch._dynamo.reset()
ch = torch.compile(h, backend=backend)
t = torch.arange(10.0)
print("int arg", [ch(t, n).sum().item() for n in (2, 3, 4, 5)], len(compiles))
compiles.clear()
torch._dynamo.reset()
cd = torch.compile(lambda x: x * 2, backend=backend, dynamic=True)
print("literal sizes", [cd(torch.ones(n)).sum().item() for n in (2, 3, 4)], len(compiles))
