"""``torch._subclasses``: ``FakeTensor`` and ``FakeTensorMode`` (ember.compiler's fake tensors)."""

from . import fake_tensor
from .fake_tensor import FakeTensor, FakeTensorMode

__all__ = ["FakeTensor", "FakeTensorMode", "fake_tensor"]
