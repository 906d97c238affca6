# Polynomial regression three ways: features built with torch.stack of powers (and
# torch.vander), fitted by LBFGS with a closure (strong_wolfe line search and the default one,
# history_size, tolerance_grad), by Adam on a Huber loss with a quantile (pinball) companion, and
# in closed form by torch.linalg.lstsq; the optimizer's repr and state_dict keys.
import torch
import torch.nn as nn
from _seedfree import data


def make_features(x, degree=4):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, degree + 1)], 1)


W_target = torch.tensor([[0.5], [-1.2], [0.3], [0.8]])
b_target = torch.tensor([0.25])
x = data((64,), salt=9)
X = make_features(x)
y = X.mm(W_target) + b_target + 0.01 * data((64, 1), salt=10)
print('vander', torch.allclose(torch.vander(x, N=5, increasing=True)[:, 1:], X), X.shape)

for line_search in (None, 'strong_wolfe'):
    fc = nn.Linear(4, 1)
    with torch.no_grad():
        fc.weight.zero_()
        fc.bias.zero_()
    opt = torch.optim.LBFGS(fc.parameters(), lr=1, max_iter=20, history_size=5, tolerance_grad=1e-9,
                            line_search_fn=line_search)
    evals = []

    def closure(opt=opt, fc=fc, evals=evals):
        opt.zero_grad()
        loss = nn.functional.mse_loss(fc(X), y)
        loss.backward()
        evals.append(loss.item())
        return loss

    for step in range(3):
        loss = opt.step(closure)
        print(line_search, step, f'{loss.item():.7f}', len(evals), opt.state[fc.weight]['n_iter']
              if fc.weight in opt.state else opt.state[opt.param_groups[0]['params'][0]]['n_iter'])
    print(line_search, [round(v, 4) for v in fc.weight.view(-1).tolist()], round(fc.bias.item(), 4))
print(opt)
sd = opt.state_dict()
print(sorted(sd['state'][0].keys()), sd['param_groups'][0]['params'])

fc = nn.Linear(4, 1)
with torch.no_grad():
    fc.weight.fill_(0.1)
    fc.bias.fill_(0.0)
opt = torch.optim.Adam(fc.parameters(), lr=0.05)
huber = nn.HuberLoss(delta=0.5)
for step in range(8):
    pred = fc(X)
    loss = huber(pred, y)
    err = y - pred
    pinball = torch.max(0.9 * err, (0.9 - 1) * err).mean()
    opt.zero_grad()
    (loss + 0.1 * pinball).backward()
    opt.step()
    print('adam', step, f'{loss.item():.7f} {pinball.item():.7f}')

A = torch.cat([X, torch.ones(64, 1)], 1)
sol = torch.linalg.lstsq(A, y)
print('lstsq', [round(v, 3) for v in sol.solution.view(-1).tolist()], sol.rank, sol.residuals.shape)
print('poly_desc', ' + '.join(f'{w:+.2f} x^{i + 1}' for i, w in enumerate(W_target.view(-1).tolist())))
