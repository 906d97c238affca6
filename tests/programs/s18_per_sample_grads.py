# Per-sample gradients and friends with torch.func, as the torch.func tutorials write them:
# functional_call over detached params, vmap(grad(loss), in_dims=(None, None, 0, 0)), compared with a
# Python loop; grad_and_value with has_aux; jacrev/jacfwd of a model; hessian of a small function;
# vjp/jvp; vmap with chunk_size and out_dims; model ensembling with stack_module_state.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init
from torch.func import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    stack_module_state,
    vjp,
    vmap,
)


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.fc1 = nn.Linear(4 * 3 * 3, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


model = seed_free_init(SimpleCNN(), salt=31)
x = data((6, 1, 8, 8), salt=31)
t = integers((6,), 3, salt=31)
params = {k: v.detach() for k, v in model.named_parameters()}
buffers = {k: v.detach() for k, v in model.named_buffers()}


def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    targets = target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    return F.nll_loss(predictions, targets)


ft = vmap(grad(compute_loss), in_dims=(None, None, 0, 0))(params, buffers, x, t)
loop = []
for i in range(6):
    model.zero_grad()
    F.nll_loss(model(x[i:i + 1]), t[i:i + 1]).backward()
    loop.append({k: p.grad.clone() for k, p in model.named_parameters()})
print('shapes', {k: tuple(v.shape) for k, v in ft.items()})
print('match loop', all(torch.allclose(ft[k][i], loop[i][k], atol=1e-6) for k in ft for i in range(6)))
print('norms', [round(v, 5) for v in torch.stack([g.flatten(1).norm(dim=1) for g in ft.values()]).sum(0).tolist()])
chunked = vmap(grad(compute_loss), in_dims=(None, None, 0, 0), chunk_size=2)(params, buffers, x, t)
print('chunked equal', all(torch.allclose(chunked[k], ft[k]) for k in ft))


def loss_aux(params, sample, target):
    out = functional_call(model, params, (sample,))
    loss = F.nll_loss(out, target)
    return loss, out.argmax(1)


(g, (loss, pred)) = grad_and_value(loss_aux, has_aux=True)(params, x, t)
print('grad_and_value', f'{loss.item():.6f}', pred.tolist(), f'{g["fc2.bias"].sum().item():.6f}')


def f(v):
    return (v.sin() * v.pow(2)).sum() + v.prod()


v = torch.tensor([0.5, -1.0, 2.0])
print('hessian', [[round(a, 5) for a in r] for r in hessian(f)(v).tolist()])
J1 = jacrev(lambda inp: model.fc2(inp))(data((8,), salt=3))
J2 = jacfwd(lambda inp: model.fc2(inp))(data((8,), salt=3))
print('jac', tuple(J1.shape), torch.allclose(J1, J2, atol=1e-6), torch.allclose(J1, model.fc2.weight))
out, vjp_fn = vjp(torch.sin, v)
print('vjp', [round(a, 6) for a in vjp_fn(torch.ones(3))[0].tolist()])
print('jvp', [round(a, 6) for a in jvp(torch.exp, (v,), (torch.ones(3),))[1].tolist()])
print('out_dims', tuple(vmap(lambda a: a * 2, in_dims=1, out_dims=1)(torch.ones(2, 5, 3)).shape))

models = [seed_free_init(nn.Linear(4, 2), salt=40 + i) for i in range(3)]
ens_params, ens_buffers = stack_module_state(models)
base = copy.deepcopy(models[0]).to('meta')


def fmodel(p, b, xx):
    return functional_call(base, (p, b), (xx,))


xs = data((5, 4), salt=41)
preds = vmap(fmodel, in_dims=(0, 0, None))(ens_params, ens_buffers, xs)
print('ensemble', tuple(preds.shape), torch.allclose(preds[1], models[1](xs), atol=1e-6),
      {k: tuple(v.shape) for k, v in ens_params.items()})
