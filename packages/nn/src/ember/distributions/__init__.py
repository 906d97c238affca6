"""``ember.distributions``: probability distributions with PyTorch's ``torch.distributions`` API.

Every family is pure Python over ember ops, so autograd flows through ``rsample``,
``log_prob``, ``entropy`` and ``kl_divergence``; sampling draws from ember's generator.
"""

from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exponential import Exponential
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .uniform import Uniform

__all__ = [
    "Bernoulli", "Categorical", "Distribution", "Exponential", "Independent", "Laplace", "MultivariateNormal",
    "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Uniform", "constraints",
    "kl_divergence", "register_kl",
]  # fmt: skip
