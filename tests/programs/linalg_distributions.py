# torch.linalg and torch.distributions in small programs: least squares and solve in a fitting
# loop, gradients through eigh/svd/qr/cholesky/inv/det/slogdet/matrix_exp, a Gaussian-process
# marginal likelihood trained through cholesky_solve, and distributions beyond the basics:
# MixtureSameFamily of Independent Normals trained by maximum likelihood, TransformedDistribution
# chains (affine + sigmoid, StickBreaking), LowRankMultivariateNormal, kl_divergence pairs,
# Dirichlet/Beta/Gamma rsample gradients, and cdf/icdf/expand.
import torch
import torch.distributions as D
from torch.distributions import transforms as T

torch.manual_seed(0)


def r(t, n=5):
    return t.detach().numpy().round(n).tolist()


A = torch.randn(10, 3, dtype=torch.float64)
b = torch.randn(10, 2, dtype=torch.float64)
sol = torch.linalg.lstsq(A, b)
print("lstsq", r(sol.solution), sol.rank, r(sol.residuals) if sol.residuals.numel() else [])
print("lstsq == pinv", torch.allclose(sol.solution, torch.linalg.pinv(A) @ b))
M = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
spd = M @ M.T + 4 * torch.eye(4, dtype=torch.float64)
rhs = torch.randn(4, 2, dtype=torch.float64)
x = torch.linalg.solve(spd, rhs)
L = torch.linalg.cholesky(spd)
evals, evecs = torch.linalg.eigh(spd)
U, S, Vh = torch.linalg.svd(M)
Q, R = torch.linalg.qr(M)
sign, logabs = torch.linalg.slogdet(M)
loss = (x.sum() + L.diagonal().log().sum() + evals.sum() + (evecs[:, -1].abs() * torch.arange(4.0)).sum()
        + S.sum() + (U[:, 0] * Vh[0]).abs().sum() + R.diagonal().abs().sum() + logabs
        + torch.linalg.inv(spd).trace() + torch.linalg.matrix_exp(M * 0.1).sum() + torch.linalg.det(M))
loss.backward()
print("decompositions", round(loss.item(), 8), r(M.grad, 6))
print("solve_triangular", r(torch.linalg.solve_triangular(L, rhs, upper=False)[0]),
      "cholesky_solve", torch.allclose(torch.cholesky_solve(rhs, L), x))
print("norms", round(torch.linalg.norm(M).item(), 6), round(torch.linalg.matrix_norm(M, "nuc").item(), 6),
      round(torch.linalg.vector_norm(M, 3).item(), 6), round(torch.linalg.cond(M).item(), 4),
      torch.linalg.matrix_rank(A).item())

X = torch.linspace(0, 1, 8, dtype=torch.float64).unsqueeze(1)
Y = torch.sin(6 * X).squeeze(1) + 0.1 * torch.randn(8, dtype=torch.float64)
log_ls = torch.zeros((), dtype=torch.float64, requires_grad=True)
log_noise = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
opt = torch.optim.Adam([log_ls, log_noise], lr=0.1)
for step in range(4):
    K = torch.exp(-0.5 * torch.cdist(X, X) ** 2 / log_ls.exp() ** 2) + log_noise.exp() * torch.eye(8, dtype=X.dtype)
    Lk = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(Y.unsqueeze(1), Lk)
    nll = 0.5 * (Y.unsqueeze(0) @ alpha).squeeze() + Lk.diagonal().log().sum()
    opt.zero_grad()
    nll.backward()
    opt.step()
    print("gp step", step, round(nll.item(), 8), round(log_ls.item(), 6))

data = torch.cat([torch.randn(30, 2) * 0.3 + torch.tensor([1.0, 1.0]), torch.randn(30, 2) * 0.5 - 1.0])
logits = torch.zeros(3, requires_grad=True)
locs = torch.randn(3, 2, requires_grad=True)
log_scales = torch.zeros(3, 2, requires_grad=True)
opt = torch.optim.Adam([logits, locs, log_scales], lr=0.05)
for step in range(5):
    gmm = D.MixtureSameFamily(D.Categorical(logits=logits), D.Independent(D.Normal(locs, log_scales.exp()), 1))
    nll = -gmm.log_prob(data).mean()
    opt.zero_grad()
    nll.backward()
    opt.step()
    print("gmm step", step, round(nll.item(), 6))
print("gmm", gmm.batch_shape, gmm.event_shape, r(gmm.mean), r(gmm.variance), tuple(gmm.sample((4,)).shape))
flow = D.TransformedDistribution(D.Normal(torch.zeros(2), torch.ones(2)),
                                 [T.AffineTransform(torch.tensor([0.5, -1.0]), torch.tensor([2.0, 0.5])),
                                  T.SigmoidTransform()])
s = flow.rsample((3,))
print("flow", r(s), r(flow.log_prob(s)))
sb = D.TransformedDistribution(D.Normal(torch.zeros(3), 1.0), T.StickBreakingTransform())
v = sb.sample()
print("stick breaking", round(v.sum().item(), 5), tuple(v.shape), round(sb.log_prob(v).item(), 4))
inv = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0)])
print("compose inverse", r(inv.inv(inv(torch.tensor([0.2, -0.4])))),
      r(inv.log_abs_det_jacobian(torch.tensor([0.2]), inv(torch.tensor([0.2])))))
lr = D.LowRankMultivariateNormal(torch.zeros(3), torch.tensor([[1.0], [0.5], [-0.2]]), torch.ones(3))
full = D.MultivariateNormal(torch.zeros(3), lr.covariance_matrix)
pt = torch.tensor([0.3, -0.2, 1.0])
print("lowrank", round(lr.log_prob(pt).item(), 5), round(full.log_prob(pt).item(), 5), round(lr.entropy().item(), 5))
pairs = [(D.Normal(0.0, 1.0), D.Normal(1.0, 2.0)), (D.Beta(2.0, 3.0), D.Beta(1.0, 1.0)),
         (D.Gamma(2.0, 1.0), D.Gamma(3.0, 2.0)), (D.Dirichlet(torch.tensor([1.0, 2.0, 3.0])),
                                                  D.Dirichlet(torch.ones(3))),
         (D.Bernoulli(0.3), D.Bernoulli(0.6)), (D.Poisson(2.0), D.Poisson(3.0)),
         (D.Exponential(2.0), D.Exponential(0.5)), (D.Laplace(0.0, 1.0), D.Laplace(1.0, 2.0)),
         (full, D.MultivariateNormal(torch.ones(3), torch.eye(3))),
         (D.Independent(D.Normal(torch.zeros(2), 1.0), 1), D.Independent(D.Normal(torch.ones(2), 2.0), 1))]
print("kl", [round(D.kl_divergence(p, q).item(), 5) for p, q in pairs])
conc = torch.tensor([2.0, 3.0], requires_grad=True)
rate = torch.tensor(1.5, requires_grad=True)
z = D.Dirichlet(conc).rsample((5,))[:, 0].sum() + D.Gamma(conc, rate).rsample((5,)).sum() + \
    D.Beta(conc[0], conc[1]).rsample((5,)).sum()
z.backward()
# (the concentration's gradient is not printed: docs/deviations.md, "gamma-family reparameterization")
print("rsample grads", round(z.item(), 5), round(rate.grad.item(), 4))
n = D.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.5]))
print("cdf/icdf", r(n.cdf(torch.tensor([0.5, 0.5]))), r(n.icdf(torch.tensor([0.1, 0.9]))),
      n.expand((3, 2)).batch_shape, r(D.Uniform(0.0, 2.0).cdf(torch.tensor(0.5))))
print("enumerate", D.Categorical(torch.ones(3)).enumerate_support().tolist(),
      r(D.Binomial(4, torch.tensor(0.3)).log_prob(torch.arange(5.0))))
for bad in [lambda: torch.linalg.cholesky(-torch.eye(2)),
            lambda: torch.linalg.solve(torch.zeros(2, 2), torch.ones(2)),
            lambda: torch.linalg.inv(torch.ones(2, 3)),
            lambda: torch.linalg.eigh(torch.ones(2, 3)),
            lambda: D.MixtureSameFamily(D.Categorical(torch.ones(2)), D.Normal(torch.zeros(3), 1.0)),
            lambda: D.Dirichlet(torch.tensor([1.0, -1.0])),
            lambda: D.kl_divergence(D.Normal(0.0, 1.0), D.Beta(1.0, 1.0))]:
    try:
        print("no error", bad())
    except (RuntimeError, ValueError, NotImplementedError) as e:
        print(type(e).__name__, str(e)[:150])
