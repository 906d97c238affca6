# Regression losses a forecasting script chooses between, each training the same linear model:
# quantile (pinball) loss over several quantiles at once, nn.HuberLoss(delta) vs nn.SmoothL1Loss(beta)
# (Huber = beta * SmoothL1 when delta == beta), log-cosh, nn.GaussianNLLLoss(full=True, eps) with a
# predicted variance, nn.PoissonNLLLoss(log_input both ways, full=True), nn.L1Loss; every reduction,
# targets with outliers, and the losses' reprs.
import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init

X = data((48, 5), salt=91)
w = torch.tensor([[0.5], [-0.3], [0.8], [0.1], [-0.6]])
y = X @ w + 0.1 * data((48, 1), salt=92)
y[::7] += 3.0
quantiles = torch.tensor([0.1, 0.5, 0.9])


def pinball(pred, target, q):
    err = target - pred
    return torch.maximum(q * err, (q - 1) * err).mean()


def log_cosh(pred, target):
    d = pred - target
    return (d + F.softplus(-2.0 * d) - torch.log(torch.tensor(2.0))).mean()


losses = {
    'huber': nn.HuberLoss(delta=0.7),
    'smoothl1': nn.SmoothL1Loss(beta=0.7),
    'l1': nn.L1Loss(),
    'logcosh': log_cosh,
}
for name, crit in losses.items():
    model = seed_free_init(nn.Linear(5, 1), salt=91)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(6):
        loss = crit(model(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(name, f'{loss.item():.7f}', [round(v, 4) for v in model.weight.view(-1).tolist()])

qmodel = seed_free_init(nn.Linear(5, 3), salt=93)
opt = torch.optim.SGD(qmodel.parameters(), lr=0.2, momentum=0.5)
for step in range(6):
    loss = pinball(qmodel(X), y, quantiles)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('quantile', step, f'{loss.item():.7f}')
with torch.no_grad():
    p = qmodel(X)
    print('coverage', [round(v, 4) for v in (y < p).float().mean(0).tolist()])

pred, target = data((6, 3), salt=94), data((6, 3), salt=95) * 2
print('huber==beta*smoothl1', torch.allclose(F.huber_loss(pred, target, delta=0.5),
                                              0.5 * F.smooth_l1_loss(pred, target, beta=0.5)))
for red in ('none', 'sum', 'mean'):
    print(red, F.huber_loss(pred, target, reduction=red, delta=0.3).sum().item(),
          F.smooth_l1_loss(pred, target, reduction=red, beta=0.0).sum().item(),
          F.l1_loss(pred, target, reduction=red).sum().item())

gmodel = seed_free_init(nn.Linear(5, 2), salt=96)
gnll = nn.GaussianNLLLoss(full=True, eps=1e-4)
opt = torch.optim.Adam(gmodel.parameters(), lr=0.05)
for step in range(5):
    out = gmodel(X)
    mean, var = out[:, :1], F.softplus(out[:, 1:])
    loss = gnll(mean, y, var)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('gaussian_nll', step, f'{loss.item():.7f}')
print(F.gaussian_nll_loss(mean, y, var.squeeze(1).unsqueeze(1), reduction='sum').item(),
      F.gaussian_nll_loss(mean.squeeze(1), y.squeeze(1), torch.ones(1).expand(48) * 0.5).item())
counts = torch.tensor([0., 1., 3., 7., 2.])
rate = torch.tensor([0.5, 1.5, 2.0, 6.0, 2.5])
print('poisson', F.poisson_nll_loss(rate.log(), counts).item(),
      F.poisson_nll_loss(rate, counts, log_input=False).item(),
      F.poisson_nll_loss(rate.log(), counts, full=True, reduction='none').tolist())
print(nn.HuberLoss(delta=0.7), nn.SmoothL1Loss(beta=0.7), gnll, nn.PoissonNLLLoss(log_input=False, full=True))
