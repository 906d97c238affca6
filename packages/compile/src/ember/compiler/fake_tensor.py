"""Fake tensors (PyTorch's ``torch._subclasses.fake_tensor`` names)."""

from ._fake import DataDependentOutputException, FakeTensor, FakeTensorMode, fake_from_tensor

__all__ = ["DataDependentOutputException", "FakeTensor", "FakeTensorMode", "fake_from_tensor"]
