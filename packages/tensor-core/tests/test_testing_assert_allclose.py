"""``ember.testing.assert_allclose``: the deprecated alias with its own tolerances."""

import pytest
import torch

import ember


@pytest.mark.parametrize("delta", [0.0, 5e-6, 1e-3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_assert_allclose_matches_torch(dtype, delta):
    values = [1.0, 2.0 + delta]
    outcomes = []
    for lib in (ember, torch):
        with pytest.warns(FutureWarning):
            try:
                lib.testing.assert_allclose(lib.tensor([1.0, 2.0], dtype=getattr(lib, dtype)), values)
                outcomes.append(True)
            except AssertionError:
                outcomes.append(False)
    assert outcomes[0] == outcomes[1]


def test_assert_allclose_nan_equal_and_dtype_ignored():
    with pytest.warns(FutureWarning):
        ember.testing.assert_allclose(ember.tensor([float("nan"), 1.0]), ember.tensor([float("nan"), 1.0],
                                                                                      dtype=ember.float64))
    with pytest.warns(FutureWarning), pytest.raises(AssertionError):
        ember.testing.assert_allclose(ember.tensor([1, 2]), [1, 3])
