"""``ember.distributions``: probability distributions with PyTorch's ``torch.distributions`` API.

Every family is pure Python over ember ops, so autograd flows through ``rsample``,
``log_prob``, ``entropy`` and ``kl_divergence``; sampling draws from ember's generator.
"""

from . import constraints
from .distribution import Distribution
from .normal import Normal

__all__ = ["Distribution", "Normal", "constraints"]
