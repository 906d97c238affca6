# nn.utils as training scripts use it: parametrizations (weight_norm, spectral_norm, orthogonal,
# a custom symmetric parametrization with right_inverse, cached), pruning (l1/random/ln
# structured, global_unstructured, custom_from_mask, remove), and stochastic weight averaging
# (AveragedModel with SWALR and update_bn, an EMA AveragedModel), with a
# CosineAnnealingWarmRestarts schedule.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as P
import torch.nn.utils.prune as prune
from torch.nn.utils import parametrizations
from torch.optim.swa_utils import SWALR, AveragedModel, get_ema_multi_avg_fn, update_bn

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


lin = nn.Linear(4, 4)
P.register_parametrization(lin, "weight", Symmetric())
print("symmetric", torch.allclose(lin.weight, lin.weight.T), P.is_parametrized(lin), P.is_parametrized(lin, "bias"))
print("keys", sorted(lin.state_dict().keys()))
lin.weight = torch.eye(4) * 2
print("right_inverse", r(lin.parametrizations.weight.original.diagonal()))
with P.cached():
    print("cached same object", lin.weight is lin.weight)
P.remove_parametrizations(lin, "weight", leave_parametrized=True)
print("removed", P.is_parametrized(lin), type(lin.weight).__name__, r(lin.weight.sum()))

wn = parametrizations.weight_norm(nn.Linear(5, 3))
print("weight_norm", sorted(n for n, _ in wn.named_parameters()), r(wn.parametrizations.weight.original0.flatten()))
sn = parametrizations.spectral_norm(nn.Linear(6, 4))
x = torch.randn(8, 6)
for _ in range(3):
    sn(x)
print("spectral sigma", round(torch.linalg.matrix_norm(sn.weight, 2).item(), 4))
sn.eval()
print("spectral eval", r(sn(x)[0]))
orth = parametrizations.orthogonal(nn.Linear(4, 4))
print("orthogonal", torch.allclose(orth.weight @ orth.weight.T, torch.eye(4), atol=1e-5))
opt = torch.optim.SGD(list(wn.parameters()) + list(orth.parameters()), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = (wn(torch.randn(6, 5)).pow(2).mean() + orth(torch.randn(6, 4)).sin().mean())
    loss.backward()
    opt.step()
    print("param step", step, round(loss.item(), 6),
          torch.allclose(orth.weight @ orth.weight.T, torch.eye(4), atol=1e-5))

net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
prune.l1_unstructured(net[0], "weight", amount=0.5)
prune.random_unstructured(net[3], "bias", amount=2)
prune.ln_structured(net[3], "weight", amount=0.4, n=2, dim=0)
print("pruned buffers", sorted(n for n, _ in net.named_buffers()))
print("sparsity", [round(float((m.weight == 0).float().mean()), 4) for m in (net[0], net[3])],
      int((net[3].bias == 0).sum()))
print("is_pruned", prune.is_pruned(net), r(net[3].weight_mask.sum(1)))
prune.global_unstructured([(net[0], "weight"), (net[3], "weight")], pruning_method=prune.L1Unstructured,
                          amount=0.3)
print("global", int((net[0].weight == 0).sum()), int((net[3].weight == 0).sum()))
out = net(torch.randn(2, 1, 6, 6))
out.sum().backward()
print("grad respects mask", bool((net[0].weight_orig.grad[net[0].weight_mask == 0] == 0).all()))
prune.custom_from_mask(net[0], "bias", torch.tensor([1.0, 0.0, 1.0, 0.0]))
prune.remove(net[0], "weight")
print("after remove", sorted(n for n, _ in net[0].named_parameters()), int((net[0].weight == 0).sum()))

model = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
swa = AveragedModel(model)
ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
swa_sched = SWALR(opt, swa_lr=0.02, anneal_epochs=2, anneal_strategy="linear")
data = [(torch.randn(16, 3), torch.randn(16, 1)) for _ in range(3)]
for epoch in range(8):
    for xb, yb in data:
        opt.zero_grad()
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
    ema.update_parameters(model)
    if epoch >= 4:
        swa.update_parameters(model)
        swa_sched.step()
    else:
        sched.step()
    print("epoch", epoch, "lr", round(opt.param_groups[0]["lr"], 6), "loss", round(loss.item(), 6))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 3)), batch_size=8)
update_bn(loader, swa)
print("swa n_averaged", int(swa.n_averaged), "ema", int(ema.n_averaged))
print("swa bn", r(swa.module[1].running_mean[:3]), r(swa.module[1].running_var[:3]))
swa.eval()
ema.eval()
print("swa out", r(swa(torch.ones(2, 3)).flatten()), "ema out", r(ema.module(torch.ones(1, 3)).flatten()))
