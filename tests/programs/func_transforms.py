# torch.func as programs use it: a model ensemble through stack_module_state + functional_call
# + vmap, per-sample gradients with vmap(grad) over a CNN, jacrev/jacfwd/hessian of a small
# network, jvp/vjp/linearize, forward-mode AD with dual numbers (forward_ad), and
# torch.autograd.functional's jvp/vjp/hvp/vhp.
import copy

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
import torch.nn.functional as F
from torch.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stack_module_state,
    vjp,
    vmap,
)

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


models = [MLP() for _ in range(4)]
params, buffers = stack_module_state(models)
print("stacked", sorted((k, tuple(v.shape)) for k, v in params.items()))
base = copy.deepcopy(models[0]).to("meta")


def fmodel(p, b, x):
    return functional_call(base, (p, b), (x,))


x = torch.randn(5, 6)
same = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
print("ensemble same minibatch", tuple(same.shape), torch.allclose(same[2], models[2](x), atol=1e-6))
xs = torch.randn(4, 5, 6)
diff = vmap(fmodel)(params, buffers, xs)
print("ensemble own minibatch", r(diff[:, 0, 0]))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)).flatten(1))


cnn = SmallCNN()
cparams = {k: v.detach() for k, v in cnn.named_parameters()}
data, target = torch.randn(6, 1, 6, 6), torch.randint(0, 3, (6,))


def sample_loss(p, xb, yb):
    out = functional_call(cnn, p, (xb.unsqueeze(0),))
    return F.cross_entropy(out, yb.unsqueeze(0))


ps_grads = vmap(grad(sample_loss), in_dims=(None, 0, 0))(cparams, data, target)
print("per-sample", {k: tuple(v.shape) for k, v in ps_grads.items()})
print("per-sample norms", r(torch.stack([g.flatten(1).norm(dim=1) for g in ps_grads.values()]).sum(0)))
cnn.zero_grad()
F.cross_entropy(cnn(data), target, reduction="sum").backward()
print("sum matches", all(torch.allclose(ps_grads[k].sum(0), p.grad, atol=1e-5) for k, p in cnn.named_parameters()))
g, v = grad_and_value(sample_loss)(cparams, data[0], target[0])
print("grad_and_value", round(v.item(), 6), r(g["fc.bias"]))


def f(z):
    return torch.stack([z[0] ** 2 * z[1], torch.sin(z[1]) * z[2], z.exp().sum()])


z = torch.tensor([0.3, -0.7, 1.1])
print("jacrev", r(jacrev(f)(z)))
print("jacfwd == jacrev", torch.allclose(jacfwd(f)(z), jacrev(f)(z), atol=1e-6))
mlp = models[0]
mparams = {k: v.detach() for k, v in mlp.named_parameters()}
jw = jacrev(lambda p, xx: functional_call(mlp, p, (xx,)), argnums=0)(mparams, x[:2])
print("jac wrt params", {k: tuple(t.shape) for k, t in jw.items()})
print("hessian", r(hessian(lambda t: (t ** 3).sum() * t[0] + torch.tanh(t).prod())(z)))
print("jacrev has_aux", r(jacrev(lambda t: (t.sin(), t.cos().sum()), has_aux=True)(z)[1]))
print("vmap jacrev", tuple(vmap(jacrev(torch.sin))(torch.randn(3, 2)).shape))
out, tangent = jvp(f, (z,), (torch.tensor([1.0, 0.0, 0.5]),))
print("jvp", r(out), r(tangent))
out, vjp_fn = vjp(f, z)
print("vjp", r(vjp_fn(torch.tensor([1.0, -1.0, 2.0]))[0]))
out, jvp_fn = linearize(f, z)
print("linearize", r(jvp_fn(torch.tensor([0.0, 1.0, 0.0]))))
primal, t = torch.randn(4), torch.randn(4)
with fwAD.dual_level():
    dual = fwAD.make_dual(primal, t)
    y = (dual.sin() * dual.exp()).sum() + F.softplus(dual).pow(2).mean()
    p_out, t_out = fwAD.unpack_dual(y)
    lin = nn.Linear(4, 2)
    lp, lt = fwAD.unpack_dual(lin(dual))
print("forward_ad", round(p_out.item(), 5), round(t_out.item(), 5), r(lt))
ref = torch.autograd.functional.jvp(lambda a: (a.sin() * a.exp()).sum() + F.softplus(a).pow(2).mean(), primal, t)
print("autograd.functional.jvp", round(ref[1].item(), 5))
fn = lambda a: (a ** 2).sum() * a.sum()  # noqa: E731
print("vjp", r(torch.autograd.functional.vjp(fn, primal, torch.tensor(2.0))[1]))
print("hvp", r(torch.autograd.functional.hvp(fn, primal, t)[1]))
print("vhp", r(torch.autograd.functional.vhp(fn, primal, t)[1]))
jac = torch.autograd.functional.jacobian(lambda a, b: a * b.sum(), (primal, t))
print("jacobian tuple", [tuple(j.shape) for j in jac], r(jac[1][0]))
print("jacobian vectorize", torch.allclose(torch.autograd.functional.jacobian(f, z, vectorize=True),
                                           jacrev(f)(z), atol=1e-6))
for bad in [lambda: vmap(torch.sum, in_dims=1)(torch.randn(3)),
            lambda: vmap(lambda a, b: a + b)(torch.randn(3, 2), torch.randn(4, 2)),
            lambda: grad(lambda a: a * 2)(torch.randn(3)),
            lambda: jvp(f, (z,), (torch.ones(2),))]:
    try:
        print("no error", bad())
    except (RuntimeError, ValueError) as e:
        print(type(e).__name__, str(e)[:120])
