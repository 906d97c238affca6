# Gradient accumulation as training scripts write it: loss / accum_steps, step every N micro-batches,
# clip_grad_norm_ (returning the total norm, foreach and norm_type=inf variants), clip_grad_value_,
# schedulers stepped per optimizer step: OneCycleLR (cos and linear, three_phase, momentum cycling),
# CosineAnnealingWarmRestarts stepped with fractional epochs, SequentialLR(LinearLR, ExponentialLR),
# LambdaLR, CyclicLR, PolynomialLR, and the schedulers' state_dict round trip.
import torch
import torch.nn as nn
from _seedfree import data, seed_free_init


def make():
    m = nn.Sequential(nn.Linear(6, 16), nn.SiLU(), nn.LayerNorm(16), nn.Linear(16, 1))
    return seed_free_init(m, salt=9)


X = data((32, 6), salt=7)
Y = (X[:, :1] * 2 - X[:, 1:2]).sin()


def run(name, make_opt, make_sched, steps=6, accum=4, clip='norm', frac=False):
    model = make()
    opt = make_opt(model.parameters())
    sched = make_sched(opt)
    lrs, losses, norms = [], [], []
    micro = 0
    for epoch in range(2):
        for i in range(0, 32, 4):
            loss = nn.functional.mse_loss(model(X[i:i + 4]), Y[i:i + 4]) / accum
            loss.backward()
            micro += 1
            if micro % accum == 0:
                if clip == 'norm':
                    n = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5, foreach=True)
                elif clip == 'inf':
                    n = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.05, norm_type=float('inf'))
                else:
                    nn.utils.clip_grad_value_(model.parameters(), clip_value=0.01)
                    n = torch.stack([p.grad.abs().max() for p in model.parameters()]).max()
                opt.step()
                opt.zero_grad()
                if frac:
                    sched.step(epoch + i / 32)
                else:
                    sched.step()
                lrs.append(round(opt.param_groups[0]['lr'], 7))
                norms.append(round(n.item(), 6))
            losses.append(loss.item() * accum)
    print(name, 'lrs', lrs)
    print(name, 'norms', norms)
    print(name, 'loss', ' '.join(f'{v:.6f}' for v in losses[::3]))
    if 'momentum' in opt.param_groups[0]:
        print(name, 'momentum', round(opt.param_groups[0]['momentum'], 6))
    if 'betas' in opt.param_groups[0]:
        print(name, 'betas', [round(b, 6) for b in opt.param_groups[0]['betas']])
    state = sched.state_dict()
    print(name, 'state', sorted(k for k in state if not k.startswith('_')), state['last_epoch'])
    return sched


SGD = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
Adam = lambda ps: torch.optim.Adam(ps, lr=0.01)  # noqa: E731
s = run('onecycle', SGD, lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.2, total_steps=5, pct_start=0.4),
        steps=5)
s2 = torch.optim.lr_scheduler.OneCycleLR(SGD(make().parameters()), max_lr=0.2, total_steps=5)
s2.load_state_dict(s.state_dict())
print('onecycle loaded', s2.last_epoch, s2.total_steps)
run('onecycle-lin3', Adam, lambda o: torch.optim.lr_scheduler.OneCycleLR(
    o, max_lr=0.05, total_steps=4, anneal_strategy='linear', three_phase=True, div_factor=10,
    final_div_factor=100), clip='inf')
run('warm-restarts', SGD, lambda o: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=1, T_mult=2,
                                                                                         eta_min=1e-3), frac=True)
run('sequential', Adam, lambda o: torch.optim.lr_scheduler.SequentialLR(
    o, [torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=2),
        torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8)], milestones=[2]), clip='value')
run('lambda', SGD, lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (1 + e)))
run('cyclic', SGD, lambda o: torch.optim.lr_scheduler.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=1,
                                                                mode='triangular2'))
run('poly', Adam, lambda o: torch.optim.lr_scheduler.PolynomialLR(o, total_iters=3, power=2.0))
try:
    run('onecycle-over', SGD, lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.2, total_steps=2))
except ValueError as e:
    print('ValueError', e)
