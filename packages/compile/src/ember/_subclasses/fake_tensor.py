"""``torch._subclasses.fake_tensor``: tensors with metadata and no data (``ember.compiler.fake_tensor``)."""

from ember.compiler.fake_tensor import (
    DataDependentOutputException,
    FakeTensor,
    FakeTensorMode,
    fake_from_tensor,
)

__all__ = ["DataDependentOutputException", "FakeTensor", "FakeTensorMode", "fake_from_tensor"]
