# Autoregressive forecasting with recurrent cells unrolled by hand: LSTMCell, GRUCell and
# RNNCell(nonlinearity='relu') stacked two deep, teacher forcing for the first half of the window then
# feeding predictions back, a future horizon, in float64 (model.double()), trained with Adam + an
# MSE loss and a MultiStepLR; hx given and omitted, unbatched cell calls, and the cells' reprs.
import math

import torch
import torch.nn as nn
from _seedfree import seed_free_init

t = torch.arange(0, 40, dtype=torch.float64)
series = torch.stack([torch.sin(t / 3 + k) + 0.1 * torch.cos(t / 1.3 * (k + 1)) for k in range(6)])


class Forecaster(nn.Module):
    def __init__(self, kind, hidden=12):
        super().__init__()
        cell = {'lstm': nn.LSTMCell, 'gru': nn.GRUCell, 'rnn': lambda i, h: nn.RNNCell(i, h, nonlinearity='relu')}[kind]
        self.kind = kind
        self.cell1, self.cell2 = cell(1, hidden), cell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)
        self.hidden = hidden

    def step(self, cell, x, state):
        if self.kind == 'lstm':
            h, c = cell(x, state)
            return h, (h, c)
        h = cell(x, state)
        return h, h

    def forward(self, inp, future=0, teacher=None):
        n = inp.size(0)
        z = torch.zeros(n, self.hidden, dtype=torch.double)
        s1 = (z, z) if self.kind == 'lstm' else z
        s2 = (z, z) if self.kind == 'lstm' else z
        outputs = []
        out = None
        for i in range(inp.size(1) + future):
            if i < inp.size(1) and (teacher is None or i < teacher or out is None):
                x = inp[:, i:i + 1]
            else:
                x = out
            h1, s1 = self.step(self.cell1, x, s1)
            h2, s2 = self.step(self.cell2, h1, s2)
            out = self.linear(h2)
            outputs.append(out)
        return torch.cat(outputs, dim=1)


inp, target = series[:4, :-1], series[:4, 1:]
test_inp, test_target = series[4:, :-1], series[4:, 1:]
for kind in ('lstm', 'gru', 'rnn'):
    model = seed_free_init(Forecaster(kind), salt=111).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 5], gamma=0.5)
    crit = nn.MSELoss()
    for epoch in range(6):
        out = model(inp, teacher=20)
        loss = crit(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        print(kind, epoch, f'{loss.item():.10f}')
    with torch.no_grad():
        pred = model(test_inp, future=5)
        test_loss = crit(pred[:, :-5], test_target)
    print(kind, 'test', f'{test_loss.item():.10f}', tuple(pred.shape), pred.dtype,
          [round(v, 6) for v in pred[0, -3:].tolist()])
cell = seed_free_init(nn.LSTMCell(3, 4), salt=112)
h, c = cell(torch.ones(3))
h2, c2 = cell(torch.ones(1, 3), (h.unsqueeze(0), c.unsqueeze(0)))
print(tuple(h.shape), tuple(h2.shape), [round(v, 6) for v in c2.view(-1).tolist()])
g = seed_free_init(nn.GRUCell(3, 4, bias=False), salt=113)
print(g, nn.RNNCell(3, 4, nonlinearity='relu'), cell, math.isclose(g(torch.zeros(2, 3)).abs().sum().item(), 0.0))
