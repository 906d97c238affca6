# Exponential moving averages of weights three ways: a hand-rolled EMA with torch._foreach_lerp_ /
# _foreach_mul_ / _foreach_add_ over parameter lists (timm/diffusers style), AveragedModel with
# get_ema_multi_avg_fn and use_buffers=True, and SWA (AveragedModel default average + SWALR +
# update_bn over a DataLoader); the three must agree where they compute the same thing.
import copy

import torch
import torch.nn as nn
from _seedfree import data, seed_free_init
from torch.optim.swa_utils import SWALR, AveragedModel, get_ema_multi_avg_fn, update_bn

model = seed_free_init(nn.Sequential(nn.Linear(4, 10), nn.BatchNorm1d(10), nn.Tanh(), nn.Linear(10, 2)), salt=21)
X = data((48, 4), salt=21)
Y = torch.stack([X[:, 0] * X[:, 1], X[:, 2] - X[:, 3]], dim=1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
decay = 0.9
ema_params = [p.detach().clone() for p in model.parameters()]
ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)
swa_model = AveragedModel(model)
swa_sched = SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy='cos')
print('averaged', type(ema_model.module).__name__, ema_model.n_averaged.item(), sorted(ema_model.state_dict())[:3])
for epoch in range(4):
    for i in range(0, 48, 12):
        loss = nn.functional.mse_loss(model(X[i:i + 12]), Y[i:i + 12])
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            params = [p.detach() for p in model.parameters()]
            torch._foreach_lerp_(ema_params, params, 1 - decay)
        ema_model.update_parameters(model)
    if epoch >= 1:
        swa_model.update_parameters(model)
        swa_sched.step()
    print(f'epoch {epoch} loss {loss.item():.6f} lr {opt.param_groups[0]["lr"]:.6f}',
          ema_model.n_averaged.item(), swa_model.n_averaged.item())
ema_sd = [p for p in ema_model.module.parameters()]
print('ema agree', all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ema_params, ema_sd)),
      f'{sum(p.sum() for p in ema_params).item():.6f}')
manual = [p.detach().clone() for p in model.parameters()]
torch._foreach_mul_(manual, 0.5)
torch._foreach_add_(manual, [torch.ones_like(p) for p in manual], alpha=0.25)
norms = torch._foreach_norm(manual)
print('foreach', [round(n.item(), 5) for n in norms])
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=16)
bn = swa_model.module[1]
before = bn.running_mean.clone()
update_bn(loader, swa_model)
print('update_bn changed', not torch.equal(before, bn.running_mean), bn.momentum, bn.num_batches_tracked.item(),
      f'{bn.running_var.mean().item():.6f}')
swa_model.eval()
ema_model.eval()
with torch.no_grad():
    print('swa out', f'{swa_model(X[:5]).sum().item():.6f}', 'ema out', f'{ema_model(X[:5]).sum().item():.6f}',
          'model out', f'{model.eval()(X[:5]).sum().item():.6f}')
clone = copy.deepcopy(ema_model)
print('deepcopy', torch.equal(clone.module[0].weight, ema_model.module[0].weight), clone.n_averaged.item())
