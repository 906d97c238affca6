# fullgraph=True turns a graph break into an error; the same functions compile without it.
import torch


def data_dependent(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def item_read(x):
    return x * x.sum().item()


def fine(x):
    return torch.relu(x) @ x.T


x = torch.arange(6.0).reshape(2, 3)
for fn in (data_dependent, item_read, fine):
    try:
        out = torch.compile(fn, fullgraph=True, backend="eager")(x)
        print(fn.__name__, "ok", out.tolist())
    except Exception as e:
        print(fn.__name__, "raised", type(e).__name__, isinstance(e, RuntimeError))
    torch._dynamo.reset()
    print(fn.__name__, "without fullgraph", torch.compile(fn, backend="eager")(x).tolist())
    torch._dynamo.reset()
print("is_compiling outside", torch.compiler.is_compiling())


@torch.compile(fullgraph=True)
def probe(x):
    return x + (1 if torch.compiler.is_compiling() else 0)


print("is_compiling inside", probe(torch.zeros(2)).tolist())
