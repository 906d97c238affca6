# torch.distributions in a small variational-inference program: a Normal guide trained with
# rsample and the pathwise ELBO, kl_divergence against the prior, log_prob of an Independent
# MultivariateNormal, Categorical/OneHotCategorical/Bernoulli entropies, a TransformedDistribution
# (log-normal through ExpTransform), mixture log-likelihood with MixtureSameFamily, and errors.
import torch
import torch.distributions as D
from torch.distributions import constraints, kl_divergence

torch.manual_seed(0)
data = torch.randn(50) * 0.5 + 2.0
loc = torch.zeros(1, requires_grad=True)
log_scale = torch.zeros(1, requires_grad=True)
prior = D.Normal(torch.zeros(1), torch.ones(1) * 3)
opt = torch.optim.Adam([loc, log_scale], lr=0.1)
for step in range(5):
    opt.zero_grad()
    q = D.Normal(loc, log_scale.exp())
    mu = q.rsample((8,))
    lik = D.Normal(mu, 0.5).log_prob(data).sum(-1).mean()
    elbo = lik - kl_divergence(q, prior).sum()
    (-elbo).backward()
    opt.step()
    print("step {} elbo {:.4f} loc {:.5f}".format(step, elbo.item(), loc.item()))
mvn = D.MultivariateNormal(torch.zeros(3), scale_tril=torch.tensor([[1.0, 0, 0], [0.5, 1.0, 0], [0.1, 0.2, 2.0]]))
xs = mvn.sample((4,))
print("mvn", mvn.log_prob(xs).numpy().round(5).tolist(), round(mvn.entropy().item(), 5))
print("mvn cov", mvn.covariance_matrix.numpy().round(5).tolist()[2])
ind = D.Independent(D.Normal(torch.zeros(2, 3), torch.ones(2, 3)), 1)
print("independent", ind.batch_shape, ind.event_shape, ind.log_prob(torch.zeros(2, 3)).numpy().round(5).tolist())
cat = D.Categorical(logits=torch.tensor([[0.1, 2.0, -1.0], [1.0, 1.0, 1.0]]))
s = cat.sample((3,))
print("categorical", s.tolist(), cat.log_prob(s).numpy().round(5).tolist(), cat.entropy().numpy().round(5).tolist())
print("onehot", D.OneHotCategorical(probs=torch.tensor([0.2, 0.8])).sample((2,)).tolist())
bern = D.Bernoulli(logits=torch.tensor([-1.0, 0.0, 3.0]))
print("bernoulli", bern.sample().tolist(), bern.entropy().numpy().round(5).tolist(),
      bern.mean.numpy().round(5).tolist())
logn = D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.ExpTransform()])
print("lognormal", round(logn.log_prob(torch.tensor(2.0)).item(), 6),
      round(D.LogNormal(0.0, 1.0).log_prob(torch.tensor(2.0)).item(), 6))
mix = D.MixtureSameFamily(D.Categorical(torch.tensor([0.3, 0.7])),
                          D.Normal(torch.tensor([-1.0, 2.0]), torch.tensor([0.5, 1.0])))
print("mixture", mix.log_prob(torch.tensor([0.0, 2.0])).numpy().round(5).tolist(),
      mix.sample((3,)).numpy().round(5).tolist())
print("beta/gamma", round(D.Beta(2.0, 3.0).log_prob(torch.tensor(0.4)).item(), 6),
      round(D.Gamma(2.0, 1.5).mean.item(), 6))
print("kl cat", kl_divergence(cat, D.Categorical(probs=torch.ones(3) / 3)).numpy().round(6).tolist())
print("support", constraints.positive.check(torch.tensor([-1.0, 1.0])).tolist(), D.Normal(0, 1).support)
try:
    D.Normal(torch.zeros(2), -torch.ones(2))
except ValueError as e:
    print("ValueError", e)
try:
    D.Categorical(probs=torch.tensor([0.5, 0.5])).log_prob(torch.tensor(5))
except ValueError as e:
    print("ValueError", e)
D.Distribution.set_default_validate_args(False)
print("no validate", D.Normal(torch.zeros(1), -torch.ones(1)).scale.item())
D.Distribution.set_default_validate_args(True)
