# A mixture density network (Bishop's inverse-sine toy problem): a tanh trunk with pi (logits), mu and
# sigma heads (sigma through exp and through softplus + eps), the negative log-likelihood written by
# hand with log_softmax + Normal.log_prob + logsumexp, checked against
# MixtureSameFamily(Categorical, Independent(Normal)) and trained with Adam; then the mixture's
# mean/variance/cdf, and the most probable component's mean as the point prediction.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _seedfree import data, seed_free_init
from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal


class MDN(nn.Module):
    def __init__(self, n_hidden=20, n_gauss=3, softplus=False):
        super().__init__()
        self.z_h = nn.Sequential(nn.Linear(1, n_hidden), nn.Tanh())
        self.z_pi = nn.Linear(n_hidden, n_gauss)
        self.z_mu = nn.Linear(n_hidden, n_gauss)
        self.z_sigma = nn.Linear(n_hidden, n_gauss)
        self.softplus = softplus

    def forward(self, x):
        h = self.z_h(x)
        s = self.z_sigma(h)
        sigma = F.softplus(s) + 1e-3 if self.softplus else torch.exp(s)
        return self.z_pi(h), self.z_mu(h), sigma


def mdn_loss(logits, mu, sigma, y):
    log_pi = F.log_softmax(logits, dim=1)
    log_prob = Normal(mu, sigma).log_prob(y.expand_as(mu))
    return -torch.logsumexp(log_pi + log_prob, dim=1).mean()


y_data = data((64, 1), salt=71, low=-1.0, high=1.0)
x_data = torch.sin(2.5 * y_data) + 0.3 * y_data + 0.05 * data((64, 1), salt=72)
for softplus in (False, True):
    net = seed_free_init(MDN(softplus=softplus), salt=71)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for step in range(8):
        logits, mu, sigma = net(x_data)
        loss = mdn_loss(logits, mu, sigma, y_data)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print('softplus' if softplus else 'exp', step, f'{loss.item():.7f}')
    with torch.no_grad():
        logits, mu, sigma = net(x_data)
        components = Independent(Normal(mu.unsqueeze(-1), sigma.unsqueeze(-1)), 1)
        mix = MixtureSameFamily(Categorical(logits=logits), components)
        lp = mix.log_prob(y_data)
        print('mixture nll', f'{-lp.mean().item():.6f}', f'{mdn_loss(logits, mu, sigma, y_data).item():.6f}',
              tuple(mix.batch_shape), tuple(mix.event_shape))
        print('mean/var', f'{mix.mean.sum().item():.6f}', f'{mix.variance.sum().item():.6f}')
        best = mu.gather(1, logits.argmax(1, keepdim=True))
        print('argmax pred mse', f'{F.mse_loss(best, y_data).item():.6f}')
m1 = MixtureSameFamily(Categorical(probs=torch.tensor([0.3, 0.7])),
                       Normal(torch.tensor([-1.0, 1.0]), torch.tensor([0.5, 0.2])))
print(m1.cdf(torch.tensor([0.0, 1.0])).tolist(), m1.log_prob(torch.tensor(0.9)).item(), m1.mean.item(),
      m1.variance.item())
print(m1)
print(Normal(0.0, 1.0).log_prob(torch.tensor(1.0)).item() + 0.5 * math.log(2 * math.pi))
