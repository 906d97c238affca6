"""Test helpers for ember users, as ``torch.testing``."""

from ember._src.testing import assert_close, make_tensor

__all__ = ["assert_close", "make_tensor"]
