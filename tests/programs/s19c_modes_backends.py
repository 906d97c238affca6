# One model compiled with each mode and named backend on CPU; every answer equals eager's.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x).softmax(-1)


model = seed_free_init(MLP().eval())
x = data((5, 8))
with torch.no_grad():
    ref = model(x)
for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(model, mode=mode)(x)
    print(mode, torch.allclose(out, ref, atol=1e-5), out.shape)
for backend in ("eager", "aot_eager", "inductor"):
    torch._dynamo.reset()
    out = torch.compile(model, backend=backend)(x)
    print(backend, torch.allclose(out, ref, atol=1e-5), out.requires_grad)
print("backends listed", all(b in torch._dynamo.list_backends() for b in ("inductor",)))
try:
    torch.compile(model, mode="fastest")
except Exception as e:
    print("bad mode", type(e).__name__)
try:
    torch.compile(model, backend="no_such_backend")(x)
except Exception as e:
    print("bad backend", type(e).__name__)
try:
    torch.compile(model, mode="default", options={"trace.enabled": False})
except Exception as e:
    print("mode and options", type(e).__name__, e)
m2 = seed_free_init(MLP().eval())
m2.compile()
print("module.compile", torch.allclose(m2(x), ref, atol=1e-5), type(m2).__name__)
print("state keys", list(m2.state_dict())[:2])
opt_model = torch.compile(model)
print("wrapper", type(opt_model).__name__, opt_model._orig_mod is model, list(opt_model.state_dict())[:2])
