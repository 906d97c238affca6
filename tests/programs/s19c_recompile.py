# Recompilation on dtype, shape, grad mode, a global's value and requires_grad; reset() starts over.
import torch

count = 0


def counting(gm, example_inputs):
    global count
    count += 1
    return gm.forward


SCALE = 2.0


def f(x):
    return x * SCALE + 1


cf = torch.compile(f, backend=counting, dynamic=False)
x = torch.ones(3)
cf(x)
cf(x)
print("same input", count)
cf(x.double())
print("dtype", count, cf(x.double()).dtype)
cf(torch.ones(4))
print("shape", count)
SCALE = 3.0
print("global", cf(x).tolist(), count)
cf(torch.ones(3, requires_grad=True))
print("requires_grad", count)
with torch.no_grad():
    cf(torch.ones(3, requires_grad=True))
print("no_grad", count)
torch._dynamo.reset()
count = 0
cf2 = torch.compile(f, backend=counting, dynamic=False)
cf2(x)
print("after reset", count)
torch.compiler.reset()
print("compiler.reset", cf2(x).tolist(), count)
torch._dynamo.config.cache_size_limit = 2
count = 0
torch._dynamo.reset()
cf3 = torch.compile(lambda t: t.sum() * 2, backend=counting, dynamic=False)
results = [cf3(torch.ones(n)).item() for n in range(1, 6)]
print("cache limit", results, count <= 3)
