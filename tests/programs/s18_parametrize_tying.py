# Weight tying and parametrizations in training: an embedding/decoder tied LM, the new-style
# parametrizations.weight_norm (original0/original1), spectral_norm (power iteration buffers _u/_v,
# eval vs train), orthogonal (default, cayley, householder), a custom register_parametrization with
# right_inverse, cached(), remove_parametrizations(leave_parametrized), and their state_dict keys.
import torch
import torch.nn as nn
import torch.nn.utils.parametrize as P
from _seedfree import data, integers, seed_free_init
from torch.nn.utils import parametrizations


class TiedLM(nn.Module):
    def __init__(self, v=20, d=8):
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.proj = nn.Linear(d, d)
        self.out = nn.Linear(d, v, bias=True)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        return self.out(torch.tanh(self.proj(self.emb(idx))))


lm = seed_free_init(TiedLM(), salt=2)
print('tied', lm.out.weight is lm.emb.weight, len(list(lm.parameters())), list(lm.state_dict()))
opt = torch.optim.Adam(lm.parameters(), lr=0.01)
tokens = integers((5, 6), 20, salt=4)
for step in range(4):
    logits = lm(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 20), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'tied step {step} loss {loss.item():.6f}', lm.out.weight is lm.emb.weight)

lin = seed_free_init(nn.Linear(5, 4), salt=5)
wn = parametrizations.weight_norm(lin, name='weight', dim=0)
print('weight_norm keys', list(wn.state_dict()), tuple(wn.parametrizations.weight.original0.shape))
x = data((3, 5), salt=9)
opt = torch.optim.SGD(wn.parameters(), lr=0.1)
for step in range(3):
    loss = wn(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'wn step {step} loss {loss.item():.6f} g {wn.parametrizations.weight.original0.flatten().tolist()[:2]}')
P.remove_parametrizations(wn, 'weight')
print('wn removed', list(wn.state_dict()), P.is_parametrized(wn))

torch.manual_seed(7)
sn = parametrizations.spectral_norm(seed_free_init(nn.Linear(6, 4), salt=6), n_power_iterations=3)
print('spectral keys', sorted(sn.state_dict()))
for step in range(3):
    y = sn(x.repeat(1, 2)[:, :6])
print('spectral train', f'{torch.linalg.matrix_norm(sn.weight, ord=2).item():.5f}')
sn.eval()
w1 = sn.weight.clone()
w2 = sn.weight
print('spectral eval stable', torch.equal(w1, w2), f'{y.sum().item():.5f}')

for kind in ('matrix_exp', 'cayley', 'householder'):
    q = parametrizations.orthogonal(seed_free_init(nn.Linear(4, 4, bias=False), salt=3), orthogonal_map=kind)
    w = q.weight
    print(kind, 'orthogonal err', (w @ w.T - torch.eye(4)).abs().max().item() < 1e-5, sorted(q.state_dict()))
    o = torch.optim.SGD(q.parameters(), lr=0.1)
    for _ in range(2):
        loss = (q(x[:, :4]) - 1).pow(2).mean()
        o.zero_grad()
        loss.backward()
        o.step()
    w = q.weight
    print(kind, f'after loss {loss.item():.5f}', (w @ w.T - torch.eye(4)).abs().max().item() < 1e-4)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)

    def right_inverse(self, A):
        return A.triu()


class Scale(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s

    def forward(self, X):
        return X * self.s

    def right_inverse(self, A):
        return A / self.s


layer = seed_free_init(nn.Linear(3, 3), salt=8)
P.register_parametrization(layer, 'weight', Symmetric())
P.register_parametrization(layer, 'weight', Scale(2.0))
print('symmetric', torch.equal(layer.weight, layer.weight.T), type(layer).__name__,
      type(layer.parametrizations.weight).__name__, len(layer.parametrizations.weight))
layer.weight = torch.eye(3) * 4
print('assigned', layer.weight.diagonal().tolist(), layer.parametrizations.weight.original.diagonal().tolist())
with P.cached():
    a = layer.weight
    b = layer.weight
    print('cached same object', a is b)
print('uncached same object', layer.weight is layer.weight)
P.remove_parametrizations(layer, 'weight', leave_parametrized=False)
print('left original', layer.weight.diagonal().tolist(), type(layer).__name__)
