# fullgraph=True refuses what would be a graph break: the exception type and the head of its message for
# each construct (data-dependent if, graph_break(), a call into a disabled function, tensor.tolist() of
# floats, bool(tensor)); the same functions without fullgraph give eager's answer.
import torch


def data_if(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def explicit_break(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


@torch.compiler.disable
def opaque(t):
    return t * 3


def calls_disabled(x):
    return opaque(x + 1) - 1


def float_tolist(x):
    return torch.tensor(x.tolist()) * 2


def as_bool(x):
    return x * 2 if bool(x.any()) else x


def clean(x):
    return torch.where(x > 0, x, -x).cumsum(0)


x = torch.linspace(-1, 2, 4)
for fn in (data_if, explicit_break, calls_disabled, float_tolist, as_bool, clean):
    torch._dynamo.reset()
    try:
        out = torch.compile(fn, fullgraph=True, backend="eager")(x)
        print(fn.__name__, "fullgraph ok", out.tolist())
    except Exception as e:
        print(fn.__name__, "raised", type(e).__name__, isinstance(e, torch._dynamo.exc.Unsupported),
              str(e).splitlines()[0][:60])
    torch._dynamo.reset()
    print(fn.__name__, "plain", torch.compile(fn, backend="eager")(x).tolist() == fn(x).tolist())
print("exc classes", issubclass(torch._dynamo.exc.Unsupported, torch._dynamo.exc.TorchDynamoException),
      issubclass(torch._dynamo.exc.TorchDynamoException, RuntimeError))
print("UserError", issubclass(torch._dynamo.exc.UserError, torch._dynamo.exc.Unsupported))
