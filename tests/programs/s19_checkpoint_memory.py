# Activation checkpointing as memory-saving training code writes it: torch.utils.checkpoint.checkpoint
# (use_reentrant=False) around residual blocks with keyword arguments and a non-tensor argument,
# checkpoint_sequential over an nn.Sequential in segments, gradients equal to the plain run's,
# checkpointing with a frozen sub-module and with an input that does not require grad, a block that
# returns a tuple, and a short training loop with SGD(momentum, nesterov) over checkpointed blocks.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init
from torch.utils.checkpoint import checkpoint, checkpoint_sequential


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x, scale=1.0, act='gelu'):
        h = self.fc1(self.norm(x))
        h = F.gelu(h) if act == 'gelu' else F.silu(h)
        return x + scale * self.fc2(h), h.mean()


class Net(nn.Module):
    def __init__(self, d=8, n=3, use_ckpt=True):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
        self.head = nn.Linear(d, 1)
        self.use_ckpt = use_ckpt

    def forward(self, x):
        aux = 0
        for i, blk in enumerate(self.blocks):
            act = 'gelu' if i % 2 == 0 else 'silu'
            if self.use_ckpt:
                x, a = checkpoint(blk, x, 0.5, use_reentrant=False, act=act)
            else:
                x, a = blk(x, 0.5, act=act)
            aux = aux + a
        return self.head(x).squeeze(-1), aux


x = data((4, 16, 8), salt=61)
y = data((4, 16), salt=62)
plain = seed_free_init(Net(use_ckpt=False), salt=61)
ck = seed_free_init(Net(use_ckpt=True), salt=61)
for m in (plain, ck):
    out, aux = m(x[0])
    (F.mse_loss(out, y[0]) + 0.1 * aux).backward()
pairs = zip(plain.parameters(), ck.parameters())
print('grads equal', all(torch.allclose(a.grad, b.grad, atol=1e-6) for a, b in pairs))
print('grad norm', f'{torch.stack([p.grad.norm() for p in ck.parameters()]).norm().item():.6f}')

ck.blocks[0].requires_grad_(False)
ck.zero_grad()
out, aux = ck(x[1])
F.mse_loss(out, y[1]).backward()
print('frozen', ck.blocks[0].fc1.weight.grad, ck.blocks[1].fc1.weight.grad.shape)
ck.blocks[0].requires_grad_(True)

seq = seed_free_init(nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(4)]), salt=63)
inp = x[2].clone().requires_grad_(True)
out = checkpoint_sequential(seq, 2, inp, use_reentrant=False)
out.sum().backward()
g1 = inp.grad.clone()
inp.grad = None
seq(inp).sum().backward()
print('sequential', torch.allclose(g1, inp.grad, atol=1e-6), f'{out.sum().item():.6f}')

opt = torch.optim.SGD(ck.parameters(), lr=0.05, momentum=0.9, nesterov=True)
for step in range(6):
    out, aux = ck(x[step % 4])
    loss = F.mse_loss(out, y[step % 4]) + 0.01 * aux
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('train', step, f'{loss.item():.7f}')
with torch.no_grad():
    out, _ = checkpoint(ck.blocks[0], x[0], use_reentrant=False)
print('no_grad', out.requires_grad, tuple(out.shape))
