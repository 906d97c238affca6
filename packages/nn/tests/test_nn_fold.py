"""nn.Fold / nn.Unfold layers (im2col / col2im) against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_helpers import assert_close, input_pair

import ember
import ember.nn as nn

UNFOLD_CASES = [
    ((2,), {}, (2, 3, 5, 4)),
    (((2, 3),), {"dilation": (2, 1), "padding": 1, "stride": (1, 2)}, (2, 2, 6, 7)),
    ((3,), {"padding": (0, 1), "stride": 2}, (3, 7, 5)),  # unbatched
    ((1,), {}, (1, 4, 3, 3)),
]


def _backward_both(ye, yt, xe, xt, dtype):
    g = np.random.default_rng(2).standard_normal(tuple(yt.shape)).astype(dtype)
    ye.backward(ember.tensor(g))
    yt.backward(torch.tensor(g))
    assert_close(xe.grad, xt.grad, dtype)


@pytest.mark.parametrize("case", UNFOLD_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unfold_matches_torch(case, dtype):
    args, kwargs, shape = case
    em, tm = nn.Unfold(*args, **kwargs), torch.nn.Unfold(*args, **kwargs)
    assert repr(em) == repr(tm)
    xe, xt = input_pair(shape, dtype)
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt, dtype)
    _backward_both(ye, yt, xe, xt, dtype)


FOLD_CASES = [
    ((4, 2), {}, (2, 3 * 4, 9)),
    (((5, 6), (2, 3)), {"dilation": (2, 1), "padding": 1, "stride": (1, 2)}, (2, 2 * 6, 15)),
    ((5, 3), {"stride": 2}, (2 * 9, 4)),  # unbatched
    (((3, 4), 2), {"padding": 1, "stride": 2}, (1, 4, 6)),
]


@pytest.mark.parametrize("case", FOLD_CASES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fold_matches_torch(case, dtype):
    args, kwargs, shape = case
    em, tm = nn.Fold(*args, **kwargs), torch.nn.Fold(*args, **kwargs)
    assert repr(em) == repr(tm)
    xe, xt = input_pair(shape, dtype)
    ye, yt = em(xe), tm(xt)
    assert_close(ye, yt, dtype)
    _backward_both(ye, yt, xe, xt, dtype)


def test_fold_of_unfold_counts_overlaps():
    # fold(unfold(x)) multiplies each pixel by how many blocks cover it, as PyTorch's docs say.
    xe, xt = input_pair((1, 2, 5, 5), "float64")
    ye = nn.Fold((5, 5), 3, padding=1)(nn.Unfold(3, padding=1)(xe))
    yt = torch.nn.Fold((5, 5), 3, padding=1)(torch.nn.Unfold(3, padding=1)(xt))
    assert_close(ye, yt)


ERRORS = [
    (lambda m: m.Unfold(2), (1, 1, 1, 2, 2)),  # 5-d input
    (lambda m: m.Unfold(5), (1, 2, 3, 3)),  # kernel bigger than the image
    (lambda m: m.Fold(4, 2), (2, 5, 9)),  # C*kh*kw does not divide
    (lambda m: m.Fold(4, 2), (2, 4, 8)),  # block count mismatch
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: str(c[1]))
def test_errors_match_torch_type(case):
    make, shape = case
    with pytest.raises(RuntimeError):
        make(torch.nn)(torch.zeros(shape))
    with pytest.raises(RuntimeError):
        make(nn)(ember.zeros(shape))
