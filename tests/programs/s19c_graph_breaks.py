# torch.compile tutorial: graph breaks from print, .item() and data-dependent control flow, seen through
# torch._dynamo.explain and a counting backend; the compiled answers must equal eager's.
import torch


def toy(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def with_item(x):
    y = x.sin()
    s = y.sum().item()
    return y * s


def with_print(x):
    y = x.cos()
    print("inside", y.shape)
    return y + 1


a = torch.linspace(-1, 1, 10)
b = torch.linspace(1, -1, 10)
for fn in (toy,):
    explanation = torch._dynamo.explain(fn)(a, b)
    print(fn.__name__, "graphs", explanation.graph_count, "breaks", explanation.graph_break_count)
calls = []


def counting(gm, example_inputs):
    calls.append(len([t for t in example_inputs if isinstance(t, torch.Tensor)]))
    return gm.forward


opt_toy = torch.compile(toy, backend=counting)
print("toy", torch.allclose(opt_toy(a, b), toy(a, b)), torch.allclose(opt_toy(a, -b), toy(a, -b)))
print("toy graphs", len(calls))
calls.clear()
opt_item = torch.compile(with_item, backend=counting)
print("item", torch.allclose(opt_item(a), with_item(a)))
opt_print = torch.compile(with_print, backend="eager")
print("print", torch.allclose(opt_print(a), with_print(a)))
torch._dynamo.reset()
opt = torch.compile(toy)
for i in range(3):
    x = torch.linspace(-1, 1, 6) * (i - 1)
    print("loop", i, opt(x, x + 0.5).round(decimals=4).tolist())
