# Generative models by likelihood and by denoising: a RealNVP normalizing flow (affine coupling
# layers with alternating masks, log-determinants, torch.distributions base density) trained by
# maximum likelihood and sampled through the inverse; the same flow wrapped as a custom
# torch.distributions.Transform inside a TransformedDistribution (with ComposeTransform,
# AffineTransform, TanhTransform and .inv), a planar flow; then a DDPM toy (linear beta schedule,
# cumprod, gather of per-timestep coefficients, sinusoidal time embeddings, epsilon prediction,
# classifier-free guidance dropout of the condition) trained with an EMA copy and sampled by the
# ancestral and the DDIM update.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import (
    AffineTransform,
    ComposeTransform,
    Independent,
    MultivariateNormal,
    Normal,
    TanhTransform,
    Transform,
    TransformedDistribution,
    constraints,
)

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


def two_moons(n):
    t = torch.rand(n) * math.pi
    upper = torch.stack([torch.cos(t), torch.sin(t)], 1)
    lower = torch.stack([1 - torch.cos(t), 0.5 - torch.sin(t)], 1)
    pick = (torch.rand(n) < 0.5).unsqueeze(1)
    return torch.where(pick, upper, lower) + 0.05 * torch.randn(n, 2)


class Coupling(nn.Module):
    def __init__(self, mask, hidden=16):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 4))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        s, t = self.net(x * self.mask).chunk(2, dim=1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return x * torch.exp(s) + t, s.sum(1)

    def inverse(self, y):
        s, t = self.net(y * self.mask).chunk(2, dim=1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return (y - t) * torch.exp(-s), -s.sum(1)


class RealNVP(nn.Module):
    def __init__(self, n_layers=4):
        super().__init__()
        masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0]) for i in range(n_layers)]
        self.layers = nn.ModuleList(Coupling(m) for m in masks)
        self.base = MultivariateNormal(torch.zeros(2), torch.eye(2))

    def to_latent(self, x):
        logdet = torch.zeros(x.size(0))
        for layer in reversed(self.layers):
            x, ld = layer.inverse(x)
            logdet = logdet + ld
        return x, logdet

    def log_prob(self, x):
        z, logdet = self.to_latent(x)
        return self.base.log_prob(z) + logdet

    def sample(self, n):
        x = self.base.sample((n,))
        for layer in self.layers:
            x, _ = layer(x)
        return x


data = two_moons(128)
flow = RealNVP()
opt = torch.optim.Adam(flow.parameters(), lr=5e-3)
for step in range(25):
    loss = -flow.log_prob(data).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 5 == 0:
        print(f"flow step {step} nll {loss.item():.5f}")
with torch.no_grad():
    samples = flow.sample(6)
    z, _ = flow.to_latent(samples)
    back = samples
    for layer in reversed(flow.layers):
        back, _ = layer.inverse(back)
print("samples", r(samples, 4))
print("round trip", torch.allclose(back, z), "latent", r(z, 4))


class FlowTransform(Transform):
    domain = constraints.real_vector
    codomain = constraints.real_vector
    bijective = True

    def __init__(self, flow):
        super().__init__(cache_size=1)
        self.flow = flow

    def __eq__(self, other):
        return isinstance(other, FlowTransform) and other.flow is self.flow

    def _call(self, z):
        for layer in self.flow.layers:
            z, _ = layer(z)
        return z

    def _inverse(self, x):
        return self.flow.to_latent(x)[0]

    def log_abs_det_jacobian(self, z, x):
        return -self.flow.to_latent(x)[1]


base = Independent(Normal(torch.zeros(2), torch.ones(2)), 1)
dist = TransformedDistribution(base, [FlowTransform(flow)])
with torch.no_grad():
    print("transformed log_prob", r(dist.log_prob(data[:5])), "direct", r(flow.log_prob(data[:5])))
    s = dist.sample((4,))
    print("transformed sample", tuple(s.shape), "event", tuple(dist.event_shape), "batch", tuple(dist.batch_shape))
    rs = dist.rsample((3,))
    print("rsample log_prob uses the cache", r(dist.log_prob(rs)))

squash = TransformedDistribution(Normal(torch.zeros(3), torch.ones(3)),
                                 ComposeTransform([AffineTransform(0.5, 2.0), TanhTransform(cache_size=1)]))
a = squash.rsample((5,))
print("squashed", r(a), "log_prob", r(squash.log_prob(a).sum(-1)))
print("inverse", r(squash.transforms[0].inv(torch.tensor([0.0, 0.5, -0.9]))))
aff = AffineTransform(loc=torch.tensor([1.0, -1.0]), scale=torch.tensor([2.0, 0.5]), event_dim=1)
print("affine ladj event_dim=1", r(aff.log_abs_det_jacobian(torch.zeros(2), aff(torch.zeros(2)))),
      "inv of inv is self", aff.inv.inv is aff)


class PlanarFlow(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.u = nn.Parameter(torch.randn(dim) * 0.1)
        self.w = nn.Parameter(torch.randn(dim) * 0.1)
        self.b = nn.Parameter(torch.zeros(1))

    def forward(self, z):
        wu = self.w @ self.u
        u_hat = self.u + (F.softplus(wu) - 1 - wu) * self.w / (self.w @ self.w)
        lin = z @ self.w + self.b
        f = z + u_hat * torch.tanh(lin).unsqueeze(1)
        psi = (1 - torch.tanh(lin) ** 2).unsqueeze(1) * self.w
        return f, torch.log(torch.abs(1 + psi @ u_hat) + 1e-8)


planar = nn.ModuleList(PlanarFlow(2) for _ in range(3))
opt = torch.optim.RMSprop(planar.parameters(), lr=1e-2)
target = Normal(torch.tensor([2.0, -1.0]), torch.tensor([0.5, 1.5]))
for step in range(20):
    z0 = torch.randn(64, 2)
    logq = Normal(0.0, 1.0).log_prob(z0).sum(1)
    z = z0
    for f in planar:
        z, ld = f(z)
        logq = logq - ld
    kl = (logq - target.log_prob(z).sum(1)).mean()
    opt.zero_grad()
    kl.backward()
    opt.step()
    if step % 5 == 0:
        print(f"planar step {step} kl {kl.item():.5f}")

# --- DDPM on 2-D points ---
T = 50
betas = torch.linspace(1e-4, 0.05, T)
alphas = 1.0 - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)
alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (1, 0), value=1.0)
sqrt_ac = alphas_cumprod.sqrt()
sqrt_1m_ac = (1.0 - alphas_cumprod).sqrt()
posterior_var = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
print("schedule", r(alphas_cumprod[[0, 10, 49]]), r(posterior_var[[1, 25, 49]], 7))


def extract(a, t, shape):
    return a.gather(-1, t).reshape(t.size(0), *((1,) * (len(shape) - 1)))


def timestep_embedding(t, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, n_classes=2, dim=32):
        super().__init__()
        self.time = nn.Sequential(nn.Linear(16, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.label = nn.Embedding(n_classes + 1, dim)  # the last row is the "no condition" token
        self.net = nn.Sequential(nn.Linear(2 + dim, dim), nn.SiLU(), nn.Linear(dim, dim), nn.SiLU(),
                                 nn.Linear(dim, 2))
        self.null = n_classes

    def forward(self, x, t, y):
        h = self.time(timestep_embedding(t, 16)) + self.label(y)
        return self.net(torch.cat([x, h], dim=1))


labels = (data[:, 1] > 0.25).long()
model = Denoiser()
ema = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step in range(30):
    idx = torch.randint(0, data.size(0), (64,))
    x0, y = data[idx], labels[idx]
    y = torch.where(torch.rand(64) < 0.2, torch.full_like(y, model.null), y)
    t = torch.randint(0, T, (64,), dtype=torch.long)
    noise = torch.randn_like(x0)
    xt = extract(sqrt_ac, t, x0.shape) * x0 + extract(sqrt_1m_ac, t, x0.shape) * noise
    loss = F.mse_loss(model(xt, t, y), noise)
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.update_parameters(model)
    if step % 6 == 0:
        print(f"ddpm step {step} loss {loss.item():.5f}")


@torch.no_grad()
def sample_ancestral(net, n, y, guidance=2.0):
    x = torch.randn(n, 2)
    null = torch.full_like(y, 2)
    for i in reversed(range(T)):
        t = torch.full((n,), i, dtype=torch.long)
        eps_c, eps_u = net(torch.cat([x, x]), torch.cat([t, t]), torch.cat([y, null])).chunk(2)
        eps = eps_u + guidance * (eps_c - eps_u)
        mean = (x - betas[i] / sqrt_1m_ac[i] * eps) / alphas[i].sqrt()
        x = mean + (posterior_var[i].sqrt() * torch.randn_like(x) if i > 0 else 0)
    return x


@torch.inference_mode()
def sample_ddim(net, n, y, steps=10):
    x = torch.randn(n, 2)
    ts = torch.linspace(T - 1, 0, steps).round().long()
    for k, i in enumerate(ts.tolist()):
        t = torch.full((n,), i, dtype=torch.long)
        eps = net(x, t, y)
        x0 = (x - sqrt_1m_ac[i] * eps) / sqrt_ac[i]
        prev = alphas_cumprod[ts[k + 1]] if k + 1 < steps else torch.tensor(1.0)
        x = prev.sqrt() * x0 + (1 - prev).sqrt() * eps
    return x, x.is_inference()


y = torch.tensor([0, 1, 0, 1])
print("ancestral", r(sample_ancestral(ema.module, 4, y), 4))
xs, inf = sample_ddim(model, 4, y)
print("ddim", r(xs, 4), "inference tensor", inf)
print("ema n_averaged", ema.n_averaged.item(), "ema differs",
      not torch.equal(ema.module.net[0].weight, model.net[0].weight))
