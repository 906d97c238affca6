"""``ember.distributions``: probability distributions with PyTorch's ``torch.distributions`` API.

Every family is pure Python over ember ops, so autograd flows through ``rsample``,
``log_prob``, ``entropy`` and ``kl_divergence``; sampling draws from ember's generator.
"""

from . import constraints, transforms
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .constraint_registry import biject_to, transform_to
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .poisson import Poisson
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PowerTransform,
    SigmoidTransform,
    SoftmaxTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .uniform import Uniform

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
    "ComposeTransform", "Dirichlet", "Distribution", "ExpTransform", "Exponential", "Gamma", "Geometric",
    "Gumbel", "HalfNormal", "Independent", "IndependentTransform", "Laplace", "LogNormal",
    "LowerCholeskyTransform", "Multinomial", "MultivariateNormal", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Poisson", "PowerTransform", "SigmoidTransform", "SoftmaxTransform",
    "StickBreakingTransform", "StudentT", "TanhTransform", "Transform", "TransformedDistribution", "Uniform",
    "biject_to", "constraints", "identity_transform", "kl_divergence", "register_kl", "transform_to",
    "transforms",
]  # fmt: skip
