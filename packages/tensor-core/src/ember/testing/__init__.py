"""Test helpers for ember users, as ``torch.testing``."""

import warnings

from ember._src.testing import assert_close, make_tensor

__all__ = ["assert_allclose", "assert_close", "make_tensor"]

# torch.testing.assert_allclose's own (rtol, atol) table; other dtypes compare exactly.
_ALLCLOSE_TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-4, 1e-5), "float64": (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan: bool = True, msg: str = "") -> None:
    """Deprecated since PyTorch 1.12: ``assert_close`` ignoring dtype and stride, NaNs equal."""
    import ember

    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a future "
                  "release. Please use `torch.testing.assert_close()` instead. You can find detailed upgrade "
                  "instructions in https://github.com/pytorch/pytorch/issues/61844.", FutureWarning, stacklevel=2)
    if not isinstance(actual, ember.Tensor):
        actual = ember.tensor(actual)
    if not isinstance(expected, ember.Tensor):
        expected = ember.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(t.dtype.name, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, check_stride=False, msg=msg or None)
