# torch.jit.trace and torch.jit.script of simple modules and functions, saved and loaded through a buffer
# and a file: outputs equal eager's at the traced size and at another batch; scripted control flow and
# annotations; the TorchScript call contract's errors.
import io
import os
import tempfile
from typing import List, Optional  # noqa: UP035 - TorchScript reads typing annotations

import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, scale: float = 1.0, mask: Optional[torch.Tensor] = None):  # noqa: UP045
        h = self.fc(x) * scale
        if mask is not None:
            h = h * mask
        return h


@torch.jit.script
def clipped_sum(xs: List[torch.Tensor], limit: float) -> torch.Tensor:  # noqa: UP006
    total = torch.zeros(xs[0].shape)
    for x in xs:
        total = total + x.clamp(max=limit)
    return total


mlp = seed_free_init(MLP().eval(), 1)
x = data((3, 4), 1)
traced = torch.jit.trace(mlp, (x,))
print("traced", type(traced).__name__, torch.allclose(traced(x), mlp(x), atol=1e-6))
print("traced other batch", torch.allclose(traced(data((6, 4), 2)), mlp(data((6, 4), 2)), atol=1e-6))
buf = io.BytesIO()
torch.jit.save(traced, buf)
buf.seek(0)
loaded = torch.jit.load(buf)
print("loaded traced", torch.allclose(loaded(data((5, 4), 3)), mlp(data((5, 4), 3)), atol=1e-6))

gated = seed_free_init(Gated().eval(), 2)
scripted = torch.jit.script(gated)
print("scripted", type(scripted).__name__.endswith("ScriptModule"))
print("scripted default", torch.allclose(scripted(x), gated(x), atol=1e-6))
mask = (x > 0).float()
print("scripted mask", torch.allclose(scripted(x, 0.5, mask), gated(x, 0.5, mask), atol=1e-6))
try:
    scripted(x, "big")
except Exception as e:
    print("scripted bad arg", type(e).__name__)
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "gated.pt")
    scripted(x, 0.5, mask)
    torch.jit.save(scripted, path)
    back = torch.jit.load(path)
    print("loaded scripted", torch.allclose(back(x, 0.5, mask), gated(x, 0.5, mask), atol=1e-6))
print("script fn", clipped_sum([x, x * 2], 0.5).round(decimals=4).tolist())
print("script fn type", type(clipped_sum).__name__)


def poly(a, b):
    return a * a + 2 * b


tf = torch.jit.trace(poly, (x, x))
print("traced fn", torch.allclose(tf(x, x + 1), poly(x, x + 1)))
frozen = torch.jit.freeze(torch.jit.script(mlp))
print("frozen", torch.allclose(frozen(x), mlp(x), atol=1e-6))
print("is_scripting", torch.jit.is_scripting())
