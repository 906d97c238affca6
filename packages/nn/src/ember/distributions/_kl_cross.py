"""KL divergences between distributions of different families (and the pairs kl.py leaves out):
closed forms of ``-H(p) - E_p[log q]``, infinite where p's support is not inside q's, the Bregman
divergence of one exponential family against itself, and low-rank Gaussians through their dense
covariance. Registered by ``kl.py`` importing this module."""

import math

import ember

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .continuous_bernoulli import ContinuousBernoulli
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import _EULER_GAMMA, Gumbel
from .kl import _kl_multivariatenormal_multivariatenormal, register_kl
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .pareto import Pareto
from .poisson import Poisson
from .uniform import Uniform
from .utils import _sum_rightmost

_INF = math.inf


def _infinite_like(t):
    return ember.full_like(t, _INF)


def _x_log_x(t):
    return ember.special.xlogy(t, t)  # 0 at 0


def _normal_cross_entropy(mean, variance, q):
    """-E_p[log q] for a Normal q, from p's mean and variance."""
    return 0.5 * math.log(2 * math.pi) + q.scale.log() + (variance + (mean - q.loc).pow(2)) / (2 * q.scale.pow(2))


# p's support is not inside q's: the divergence is infinite (one entry per batch element).
_INFINITE = {
    Beta: (lambda p: p.concentration1, (Pareto,)),
    ContinuousBernoulli: (lambda p: p.probs, (Pareto,)),
    Exponential: (lambda p: p.rate, (Beta, ContinuousBernoulli, Pareto)),
    Gamma: (lambda p: p.concentration, (Beta, ContinuousBernoulli, Pareto, Uniform)),
    Gumbel: (lambda p: p.loc, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
    Laplace: (lambda p: p.loc, (Beta, ContinuousBernoulli, Gamma, Pareto)),
    Normal: (lambda p: p.loc, (Beta, ContinuousBernoulli, Gamma, Pareto)),
    Pareto: (lambda p: p.scale, (Beta, ContinuousBernoulli, Uniform)),
    Poisson: (lambda p: p.rate, (Bernoulli, Binomial)),
}


def _register_infinite(type_p, param, type_q):
    @register_kl(type_p, type_q)
    def _kl_infinite(p, q):
        return _infinite_like(param(p))


for _type_p, (_param, _types_q) in _INFINITE.items():
    for _type_q in _types_q:
        _register_infinite(_type_p, _param, _type_q)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """The Bregman divergence of the log-normalizer between the natural parameters."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot be computed using Bregman "
            "divergences")
    p_params = [theta.detach().requires_grad_() for theta in p._natural_params]
    q_params = q._natural_params
    log_norm = p._log_normalizer(*p_params)
    gradients = ember.autograd.grad(log_norm.sum(), p_params, create_graph=True)
    result = q._log_normalizer(*q_params) - log_norm
    for p_theta, q_theta, g in zip(p_params, q_params, gradients):
        result = result - _sum_rightmost((q_theta - p_theta) * g, len(q.event_shape))
    return result


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - ember.log1p(-q.probs) - q._cont_bern_log_norm()


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    mean_log = p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    log_q = (q.concentration * q.rate.log() + (q.concentration - 1) * mean_log - q.rate * p.mean
             - q.concentration.lgamma())
    return -p.entropy() - log_q


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(p.mean, p.variance, q)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return ember.where((q.low > 0) | (q.high < 1), _INF, result)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + ember.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - ember.log1p(-q.probs)
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(p.mean, p.variance, q)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    # PyTorch's bounds test here is low >= 0 or high <= 1 (so Uniform(0, 1) gives inf, where Beta's
    # pair gives the finite value); followed as it is, the results being compared with PyTorch's.
    result = -p.entropy() + (q.high - q.low).log()
    return ember.where((q.low >= 0) | (q.high <= 1), _INF, result)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + ratio + q.concentration.lgamma() + q.concentration * _EULER_GAMMA
            - (1 + _EULER_GAMMA))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate = p.rate * q.scale
    loc_scale = q.loc / q.scale
    return (scale_rate.log() - 1 - loc_scale + loc_scale.exp() * scale_rate / (scale_rate + 1)
            + scale_rate.reciprocal())


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration / p.rate)


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a = p.concentration
    rate_scale = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = (a - 1) * a.digamma() - a.lgamma() - a
    t2 = rate_scale.log() + a / rate_scale
    t3 = loc_scale.exp() * (1 + rate_scale.reciprocal()).pow(-a) - loc_scale
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a, b = p.concentration, p.rate
    negative_entropy = (a - 1) * a.digamma() - a.lgamma() - a + b.log()
    return negative_entropy + _normal_cross_entropy(a / b, a / b.pow(2), q)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    negative_entropy = -(p.scale.log() + 1 + _EULER_GAMMA)
    return negative_entropy + _normal_cross_entropy(p.mean, p.variance, q)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_scale = q.loc / q.scale
    t3 = (-mean_scale + 0.5 * var_ratio + loc_scale).exp()
    return -0.5 * var_ratio.log() + mean_scale - loc_scale + t3 - 0.5 * (1 + math.log(2 * math.pi))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate = p.scale * q.rate
    result = (p.alpha / scale_rate).log() - p.alpha.reciprocal() + p.alpha * scale_rate / (p.alpha - 1) - 1
    return ember.where(p.alpha <= 1, _INF, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    mean_log = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - mean_log
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * mean_log
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return ember.where(p.alpha <= 1, _INF, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    two_var = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    return ember.where(p.alpha <= 2, _INF, t1 - p.alpha.reciprocal() + (t3 + t4) / two_var - 1)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    return ember.where(p.scale < q.scale, _INF, result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    t1 = width.log()
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    return ember.where((p.high > 1) | (p.low < 0), _INF, t3 + t4 - t1 - t2)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - ember.log1p(-q.probs) - q._cont_bern_log_norm()
    return ember.where((p.high >= 1) | (p.low <= 0), _INF, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t4 = q.rate * (p.high + p.low) / 2
    return ember.where(p.low < 0, _INF, -width.log() + t2 + t3 + t4)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    high_loc = (p.high - q.loc) / q.scale
    low_loc = (p.low - q.loc) / q.scale
    t1 = common.log() + 0.5 * (high_loc + low_loc)
    return t1 - common * ((-high_loc).exp() - (-low_loc).exp())


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return ember.where(p.low < q.scale, _INF, t2 * (q.alpha + 1) - t1)


def _dense(d):
    """A low-rank Gaussian as the MultivariateNormal of its dense covariance (the same law)."""
    if isinstance(d, MultivariateNormal):
        return d
    return MultivariateNormal(d.loc, covariance_matrix=d.covariance_matrix, validate_args=False)


def _kl_gaussians(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")
    return _kl_multivariatenormal_multivariatenormal(_dense(p), _dense(q))


for _pair in ((LowRankMultivariateNormal, LowRankMultivariateNormal),
              (LowRankMultivariateNormal, MultivariateNormal),
              (MultivariateNormal, LowRankMultivariateNormal)):
    register_kl(*_pair)(_kl_gaussians)
