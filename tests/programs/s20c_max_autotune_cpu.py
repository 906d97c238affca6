# mode="max-autotune-no-cudagraphs" (and friends) on CPU for a small conv net and an MLP with a backward:
# eager's answers and gradients; options dicts people pass (epilogue_fusion, max_autotune, ...) and
# torch._inductor.config knobs under patch.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        h = F.relu(self.bn(self.c1(x)))
        h = F.max_pool2d(h, 2) if h.shape[-1] > 10 else h  # (a size-dependent branch: not taken at 8x8)
        h = F.gelu(self.c2(h))
        return self.fc(h.flatten(1))


net = seed_free_init(ConvNet(), 4).eval()
x = data((2, 3, 8, 8), 1)
with torch.no_grad():
    ref = net(x)
for mode in ("max-autotune-no-cudagraphs", "max-autotune", "reduce-overhead", "default"):
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(net, mode=mode)(x)
    print(mode, tuple(out.shape), torch.allclose(out, ref, atol=1e-5))
for options in ({"epilogue_fusion": False}, {"max_autotune": True}, {"coordinate_descent_tuning": True},
                {"triton.cudagraphs": False}):
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(net, options=options)(x)
    print("options", sorted(options), torch.allclose(out, ref, atol=1e-5))

mlp = seed_free_init(nn.Sequential(nn.Linear(6, 12), nn.SiLU(), nn.Linear(12, 1)), 5)
inp = data((8, 6), 2)
eager_loss = mlp(inp).pow(2).mean()
eager_loss.backward()
eager_grads = [p.grad.clone() for p in mlp.parameters()]
mlp.zero_grad()
torch._dynamo.reset()
cmlp = torch.compile(mlp, mode="max-autotune-no-cudagraphs")
loss = cmlp(inp).pow(2).mean()
loss.backward()
print("backward", round(loss.item(), 6) == round(eager_loss.item(), 6) or abs(loss.item() - eager_loss.item()) < 1e-6,
      all(torch.allclose(p.grad, g, atol=1e-6) for p, g in zip(mlp.parameters(), eager_grads)))
import torch._inductor.config as inductor_config  # noqa: E402

with inductor_config.patch(max_autotune=True, coordinate_descent_tuning=True):
    torch._dynamo.reset()
    with torch.no_grad():
        print("inductor patch", torch.allclose(torch.compile(net)(x), ref, atol=1e-5))
print("inductor knob", inductor_config.max_autotune)
