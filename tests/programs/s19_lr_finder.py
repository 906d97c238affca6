# A learning-rate range test (fastai/leslie smith style) with LambdaLR growing the lr exponentially,
# an exponentially smoothed loss with bias correction, stopping when it diverges, then the
# suggested lr (steepest descent) used with ReduceLROnPlateau (threshold_mode='abs', cooldown,
# per-group min_lr, eps) over a noisy validation curve; scheduler state_dict round trips,
# CyclicLR('triangular2') with momentum cycling, CosineAnnealingWarmRestarts stepped with
# fractional epochs, and print(optimizer) before/after.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, integers, seed_free_init

X = data((64, 8), salt=101)
y = integers((64,), 3, salt=101)


def make():
    return seed_free_init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)), salt=101)


model = make()
start_lr, end_lr, num_iter = 1e-5, 10.0, 30
opt = torch.optim.SGD(model.parameters(), lr=start_lr, momentum=0.9)
gamma = (end_lr / start_lr) ** (1 / num_iter)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: gamma ** it)
avg, best, history = 0.0, float('inf'), []
for it in range(num_iter):
    i = (it % 4) * 16
    loss = F.cross_entropy(model(X[i:i + 16]), y[i:i + 16])
    opt.zero_grad()
    loss.backward()
    opt.step()
    avg = 0.98 * avg + 0.02 * loss.item()
    smoothed = avg / (1 - 0.98 ** (it + 1))
    lr = sched.get_last_lr()[0]
    history.append((lr, smoothed))
    sched.step()
    if smoothed < best:
        best = smoothed
    if it > 5 and (smoothed > 4 * best or not math.isfinite(smoothed)):
        break
print('stopped at', it, f'best {best:.6f}', f'last lr {history[-1][0]:.4e}')
grads = [(history[k + 1][1] - history[k][1]) / (math.log10(history[k + 1][0]) - math.log10(history[k][0]))
         for k in range(len(history) - 1)]
k = min(range(5, len(grads)), key=grads.__getitem__)  # skip the warm-up of the smoothing
suggested = history[k][0]
print(f'suggested lr {suggested:.4e}', f'{grads[k]:.5f}')

model = make()
opt = torch.optim.SGD([{'params': model[0].parameters()}, {'params': model[2].parameters(), 'lr': suggested / 2}],
                      lr=suggested, momentum=0.9)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode='min', factor=0.3, patience=1, threshold=0.01,
                                                     threshold_mode='abs', cooldown=1, min_lr=[2e-5, 5e-6], eps=1e-6)
print(opt)
val_curve = [1.0, 0.95, 0.949, 0.951, 0.94, 0.945, 0.946, 0.947, 0.7, 0.71, 0.72, 0.73]
for epoch, v in enumerate(val_curve):
    loss = F.cross_entropy(model(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    plateau.step(v)
    print('epoch', epoch, f'{loss.item():.7f}', [f'{g["lr"]:.5e}' for g in opt.param_groups], plateau.num_bad_epochs,
          plateau.cooldown_counter, plateau.get_last_lr() == [g['lr'] for g in opt.param_groups])
state = plateau.state_dict()
print(sorted(k for k in state if not k.startswith('_')), state['best'], state['last_epoch'])
fresh = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)
fresh.load_state_dict(state)
print(fresh.best, fresh.patience, fresh.min_lrs, fresh.threshold_mode)
print(opt)

opt = torch.optim.SGD(make().parameters(), lr=0.1, momentum=0.9)
cyc = torch.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=3, mode='triangular2',
                                        base_momentum=0.8, max_momentum=0.95)
trace = []
for _ in range(14):
    opt.step()
    cyc.step()
    trace.append((round(opt.param_groups[0]['lr'], 6), round(opt.param_groups[0]['momentum'], 6)))
print('cyclic', trace)
opt = torch.optim.AdamW(make().parameters(), lr=0.1)
warm = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001)
lrs = []
iters = 4
for epoch in range(4):
    for i in range(iters):
        opt.step()
        warm.step(epoch + i / iters)
        lrs.append(round(warm.get_last_lr()[0], 6))
print('warm restarts', lrs, warm.T_cur, warm.T_i)
