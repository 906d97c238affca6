# Gradient-level idioms: torch.autograd.grad with create_graph for a gradient penalty (WGAN-GP),
# higher-order derivatives, Jacobian/Hessian from torch.autograd.functional, detach_/requires_grad_
# toggling, retain_grad on non-leaves, grad accumulation across backward calls, per-parameter grad
# hooks that scale gradients, and torch.func.grad/vmap per-sample gradients.
import torch
import torch.nn as nn
from torch.autograd.functional import hessian, jacobian

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
real, fake = torch.randn(8, 4), torch.randn(8, 4)
alpha = torch.rand(8, 1)
interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
out = critic(interp)
grads = torch.autograd.grad(outputs=out, inputs=interp, grad_outputs=torch.ones_like(out),
                            create_graph=True, retain_graph=True)[0]
gp = ((grads.norm(2, dim=1) - 1) ** 2).mean()
loss = critic(fake).mean() - critic(real).mean() + 10 * gp
loss.backward()
print("gp {:.6f} loss {:.6f} grad {:.6f}".format(gp.item(), loss.item(), critic[0].weight.grad.abs().sum().item()))
x = torch.tensor(1.5, requires_grad=True)
y = x ** 4 + torch.sin(x)
(d1,) = torch.autograd.grad(y, x, create_graph=True)
(d2,) = torch.autograd.grad(d1, x, create_graph=True)
(d3,) = torch.autograd.grad(d2, x)
print("derivatives", [round(v.item(), 6) for v in (d1, d2, d3)])


def f(v):
    return torch.stack([v[0] * v[1], v[1].exp(), v.pow(2).sum()])


v = torch.tensor([0.5, -1.0])
print("jacobian", jacobian(f, v).numpy().round(6).tolist())
print("hessian", hessian(lambda t: (t ** 3).sum() + t[0] * t[1], v).numpy().round(6).tolist())
h = torch.randn(3, requires_grad=True)
mid = h * 3
mid.retain_grad()
(mid ** 2).sum().backward()
print("retain_grad", torch.allclose(mid.grad, 2 * mid.detach()), torch.allclose(h.grad, 18 * h.detach()))
w = torch.ones(3, requires_grad=True)
for _ in range(3):
    (w * torch.arange(3.0)).sum().backward()
print("accumulated", w.grad.tolist())
lin = nn.Linear(3, 2)
lin.weight.register_hook(lambda g: g * 0.5)
lin(torch.ones(4, 3)).sum().backward()
print("hooked grad", lin.weight.grad.tolist(), lin.bias.grad.tolist())
t = torch.randn(3, requires_grad=True)
u = t * 2
u.detach_()
print("detach_", u.requires_grad, u.grad_fn is None)
params = {k: v.detach() for k, v in lin.named_parameters()}
xs, ys = torch.randn(5, 3), torch.randn(5, 2)


def loss_fn(p, xb, yb):
    pred = torch.func.functional_call(lin, p, (xb.unsqueeze(0),))
    return ((pred - yb.unsqueeze(0)) ** 2).mean()


per_sample = torch.func.vmap(torch.func.grad(loss_fn), in_dims=(None, 0, 0))(params, xs, ys)
print("per-sample grads", tuple(per_sample["weight"].shape), per_sample["bias"].numpy().round(5).tolist())
full = torch.func.grad(lambda p: sum(loss_fn(p, xs[i], ys[i]) for i in range(5)) / 5)(params)
print("mean matches", torch.allclose(per_sample["weight"].mean(0), full["weight"], atol=1e-6))
try:
    torch.autograd.grad((t * 2).sum(), torch.randn(3, requires_grad=True))
except RuntimeError as e:
    print("RuntimeError", e)
try:
    torch.autograd.grad((t * 2).sum(), t, grad_outputs=torch.ones(2))
except RuntimeError as e:
    print("RuntimeError", e)
print("allow_unused", torch.autograd.grad((t * 2).sum(), [t, torch.randn(1, requires_grad=True)], allow_unused=True)[1])
