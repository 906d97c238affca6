# Autograd-heavy training idioms: WGAN-GP (gradient penalty via torch.autograd.grad(create_graph=True) on
# interpolates, n_critic steps, RMSprop/Adam), activation checkpointing with
# torch.utils.checkpoint.checkpoint(use_reentrant=False) and checkpoint_sequential matching the plain
# run, module hooks (forward pre-hook with kwargs, full backward hook, tensor hook on an activation,
# retain_grad), a double-backward Hessian-vector product, and torch.autograd.functional.jacobian.
import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from _seedfree import data, seed_free_init

critic = seed_free_init(nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16), nn.Tanh(),
                                      nn.Linear(16, 1)), salt=81)
gen = seed_free_init(nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2)), salt=82)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
opt_g = torch.optim.RMSprop(gen.parameters(), lr=5e-4)
real_all = data((5, 3, 8, 2), salt=83) * 0.5 + 1.0
z_all = data((5, 4, 8, 3), salt=84)
alpha_all = data((5, 3, 8, 1), salt=85, low=0.0, high=1.0)


def gradient_penalty(real, fake, alpha):
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    d_interpolates = critic(interpolates)
    gradients = torch.autograd.grad(outputs=d_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones_like(d_interpolates), create_graph=True,
                                    retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


for it in range(5):
    for j in range(3):
        real = real_all[it, j]
        fake = gen(z_all[it, j]).detach()
        gp = gradient_penalty(real, fake, alpha_all[it, j])
        loss_c = critic(fake).mean() - critic(real).mean() + 10 * gp
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
    loss_g = -critic(gen(z_all[it, 3])).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    print(f'it {it} critic {loss_c.item():.6f} gp {gp.item():.6f} gen {loss_g.item():.6f}')


class Deep(nn.Module):
    def __init__(self, ckpt):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8)) for _ in range(4)])
        self.out = nn.Linear(8, 1)
        self.ckpt = ckpt

    def forward(self, x):
        for b in self.blocks:
            x = cp.checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
        return self.out(x)


xs = data((6, 8), salt=86)
ys = data((6, 1), salt=87)
grads = []
for ckpt in (False, True):
    m = seed_free_init(Deep(ckpt), salt=88)
    loss = nn.functional.mse_loss(m(xs), ys)
    loss.backward()
    grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    print('checkpoint', ckpt, f'{loss.item():.6f}', f'{grads[-1].norm().item():.6f}')
print('checkpoint grads equal', torch.allclose(grads[0], grads[1], atol=1e-6))
seq = seed_free_init(nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(4)]), salt=89)
inp = xs.clone().requires_grad_()
out = cp.checkpoint_sequential(seq, 2, inp, use_reentrant=False)
out.sum().backward()
g1 = inp.grad.clone()
inp.grad = None
seq(inp).sum().backward()
print('checkpoint_sequential', torch.allclose(g1, inp.grad, atol=1e-6), f'{out.sum().item():.6f}')

events = []
net = seed_free_init(nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2)), salt=90)


def pre_hook(module, args, kwargs):
    events.append(('pre', type(module).__name__, tuple(args[0].shape), sorted(kwargs)))
    return (args[0] * 2,), kwargs


def bwd_hook(module, grad_input, grad_output):
    events.append(('bwd', type(module).__name__, [None if g is None else tuple(g.shape) for g in grad_input],
                   round(grad_output[0].abs().sum().item(), 5)))


h1 = net[0].register_forward_pre_hook(pre_hook, with_kwargs=True)
h2 = net[2].register_full_backward_hook(bwd_hook)
h3 = net.register_forward_hook(lambda m, a, o: events.append(('fwd', tuple(o.shape))))
x = xs.clone().requires_grad_()
hidden = net[1](net[0](x))
hidden.retain_grad()
hidden.register_hook(lambda g: events.append(('tensor hook', round(g.abs().sum().item(), 5))) or g * 0.5)
out = net[2](hidden)
out.sum().backward()
net(xs)
for e in events:
    print(*e)
print('retain_grad', round(hidden.grad.abs().sum().item(), 5), 'x.grad', round(x.grad.abs().sum().item(), 5))
h1.remove()
h2.remove()
h3.remove()
print('hooks left', len(net[0]._forward_pre_hooks), len(net[2]._backward_hooks), len(net._forward_hooks))

w = data((5,), salt=91).requires_grad_()
f = (w.sin() * w).sum() * (w ** 2).sum()
(g,) = torch.autograd.grad(f, w, create_graph=True)
v = torch.ones(5)
(hvp,) = torch.autograd.grad(g, w, grad_outputs=v)
print('hvp', [round(a, 5) for a in hvp.tolist()])
J = torch.autograd.functional.jacobian(lambda a: net(a), xs[:2])
H = torch.autograd.functional.hessian(lambda a: (a.sin() * a).sum(), xs[0, :3])
print('jacobian', tuple(J.shape), round(J.abs().sum().item(), 5),
      'hessian', [round(a, 5) for a in H.diagonal().tolist()])
