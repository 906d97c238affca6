"""grad_fn class names of nn.functional results, as PyTorch prints them (programs and tutorials print
``y.grad_fn``): PyTorch title-cases each word of the op's name (MaxPool2DWithIndicesBackward0), and
names interpolation and padding after the op of each mode (UpsampleBilinear2DBackward0)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

CALLS = {
    "max_pool2d": lambda F, x: F.max_pool2d(x, 2),
    "avg_pool2d": lambda F, x: F.avg_pool2d(x, 2),
    "adaptive_max_pool2d": lambda F, x: F.adaptive_max_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda F, x: F.adaptive_avg_pool2d(x, 3),
    "log1p": lambda F, x: x.log1p(),
    "unfold": lambda F, x: F.unfold(x, 2),
    "nearest": lambda F, x: F.interpolate(x, scale_factor=2),
    "nearest_exact": lambda F, x: F.interpolate(x, scale_factor=2, mode="nearest-exact"),
    "bilinear": lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
    "bicubic": lambda F, x: F.interpolate(x, size=(5, 7), mode="bicubic"),
    "linear": lambda F, x: F.interpolate(x[0], scale_factor=2, mode="linear"),
    "nearest1d": lambda F, x: F.interpolate(x[0], scale_factor=2),
    "trilinear": lambda F, x: F.interpolate(x.unsqueeze(2), scale_factor=2, mode="trilinear"),
    "reflect2d": lambda F, x: F.pad(x, (1, 1, 2, 2), mode="reflect"),
    "reflect1d": lambda F, x: F.pad(x[0], (1, 2), mode="reflect"),
    "replicate2d": lambda F, x: F.pad(x, (1, 1, 2, 2), mode="replicate"),
    "replicate3d": lambda F, x: F.pad(x.unsqueeze(2), (1, 1, 1, 1, 0, 1), mode="replicate"),
    "constant": lambda F, x: F.pad(x, (1, 1)),
    "pixel_shuffle": lambda F, x: F.pixel_shuffle(x.reshape(1, 4, 3, 6), 2),
    "pixel_unshuffle": lambda F, x: F.pixel_unshuffle(x, 2),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_grad_fn_names_match_torch(name):
    data = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
    names = []
    for lib in (torch, ember):
        x = lib.tensor(data, requires_grad=True)
        out = CALLS[name](lib.nn.functional, x)
        out = out[0] if isinstance(out, tuple) else out
        names.append(type(out.grad_fn).__name__)
        out.sum().backward()  # the renamed node still differentiates
        assert x.grad is not None
    assert names[1] == names[0]
