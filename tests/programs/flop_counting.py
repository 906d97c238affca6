# torch.utils.flop_counter.FlopCounterMode over a training step: a small CNN (conv, transposed
# conv, linear) forward and backward, counted per module and per op, under no_grad, with a
# custom formula for an op it does not count, and the module-free counts of bare matmuls.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.ConvTranspose2d(8, 4, 2, stride=2), nn.ReLU())
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(4 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def counts(fc):
    return {mod: sorted((str(op), n) for op, n in ops.items()) for mod, ops in sorted(fc.get_flop_counts().items())}


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
with FlopCounterMode(display=False, depth=2) as fc:
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    opt.step()
print("train step", fc.get_total_flops(), round(loss.item(), 6))
for mod, ops in counts(fc).items():
    print(" ", mod, ops)
with FlopCounterMode(display=False) as fc:
    with torch.no_grad():
        net(x)
print("inference", fc.get_total_flops(), counts(fc)["Net.features"])
a, b = torch.randn(6, 5), torch.randn(5, 7)
with FlopCounterMode(display=False) as fc:
    a @ b
    torch.addmm(torch.zeros(7), a, b)
    torch.bmm(a.expand(3, 6, 5), b.expand(3, 5, 7))
    torch.baddbmm(torch.zeros(3, 6, 7), a.expand(3, 6, 5), b.expand(3, 5, 7))
    torch.matmul(a.expand(2, 6, 5), b)
    F.conv1d(torch.randn(2, 4, 10), torch.randn(6, 2, 3), groups=2)
print("ops", fc.get_total_flops(), counts(fc))
with FlopCounterMode(display=False, custom_mapping={torch.ops.aten.mm: lambda a, b, out_shape=None: 1}) as fc:
    a @ b
    torch.addmm(torch.zeros(7), a, b)
print("custom", fc.get_total_flops(), counts(fc))
