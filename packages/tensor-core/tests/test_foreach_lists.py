"""torch._foreach_*: every name PyTorch has, its argument forms, results and list checks, vs PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import ember

from conftest import torch


def test_every_foreach_name_exists():
    # ember had none: EMA/Polyak code calling torch._foreach_lerp_ failed with AttributeError
    theirs = {n for n in dir(torch) if n.startswith("_foreach_")}
    assert theirs <= {n for n in dir(ember) if n.startswith("_foreach_")}


CALLS = {
    "empty": lambda lib, a: lib._foreach_add([], 1),
    "length": lambda lib, a: lib._foreach_add(a, [lib.ones(2)]),
    "scalar list length": lambda lib, a: lib._foreach_mul(a, [1.0]),
    "shapes": lambda lib, a: lib._foreach_add(a, [lib.ones(3), lib.ones(3)]),
    "0-d tensor other": lambda lib, a: lib._foreach_mul(a, lib.tensor(2.0)),
    "1-d tensor other": lambda lib, a: lib._foreach_mul(a, lib.tensor([2.0])),
    "add tensor alpha": lambda lib, a: lib._foreach_add(a, lib.tensor(2.0), alpha=3),
    "add list alpha": lambda lib, a: lib._foreach_add(a, a, alpha=-2),
    "sub tensor": lambda lib, a: lib._foreach_sub(a, lib.tensor(2.0)),
    "div scalars": lambda lib, a: lib._foreach_div(a, [2, 4.0]),
    "pow scalar base": lambda lib, a: lib._foreach_pow(2.0, a),
    "pow list": lambda lib, a: lib._foreach_pow(a, [lib.full((2,), 3.0), lib.full((3,), 2.0)]),
    "norm 1": lambda lib, a: lib._foreach_norm(a, 1),
    "norm inf": lambda lib, a: lib._foreach_norm(a, float("inf")),
    "norm dtype": lambda lib, a: lib._foreach_norm(a, 2, dtype=lib.float64),
    "norm int": lambda lib, a: lib._foreach_norm([lib.tensor([1, 2])]),
    "max": lambda lib, a: lib._foreach_max([lib.tensor([1.0, 5.0]), lib.tensor([3.0])]),
    "lerp 0-d weight": lambda lib, a: lib._foreach_lerp(a, [lib.zeros(2), lib.zeros(3)], lib.tensor(0.25)),
    "lerp list weight": lambda lib, a: lib._foreach_lerp(a, [lib.zeros(2), lib.zeros(3)],
                                                         [lib.full((2,), 0.5), lib.full((3,), 0.1)]),
    "addcmul tensor values": lambda lib, a: lib._foreach_addcmul(a, a, a, lib.tensor([1.0, 2.0])),
    "addcmul scalar list": lambda lib, a: lib._foreach_addcmul(a, a, a, [1.0, 2.0]),
    "addcdiv value": lambda lib, a: lib._foreach_addcdiv(a, a, [lib.full((2,), 4.0), lib.full((3,), 8.0)], 3),
    "int plus float": lambda lib, a: lib._foreach_add([lib.ones(2, dtype=lib.long)], 1.5),
    "int plus float in place": lambda lib, a: lib._foreach_add_([lib.ones(2, dtype=lib.long)], 1.5),
    "bool sub": lambda lib, a: lib._foreach_sub([lib.ones(2, dtype=lib.bool)], 1),
    "powsum": lambda lib, a: lib._foreach_powsum(a, 2),
    "mm": lambda lib, a: lib._foreach_mm([lib.ones(2, 2)], [lib.ones(2, 2)]),
    "copy_ casts": lambda lib, a: lib._foreach_copy_([lib.zeros(2)], [lib.ones(2, dtype=lib.long)]),
    "maximum scalar": lambda lib, a: lib._foreach_maximum(a, 0.5),
    "minimum_ list": lambda lib, a: lib._foreach_minimum_([lib.full((2,), 3.0)], [lib.tensor([1.0, 4.0])]),
    "clamp_max scalars": lambda lib, a: lib._foreach_clamp_max(a, [0.5, 2]),
    "sqrt_": lambda lib, a: lib._foreach_sqrt_([lib.full((2,), 4.0)]),
    "sigmoid": lambda lib, a: lib._foreach_sigmoid(a),
    "zero_": lambda lib, a: lib._foreach_zero_([lib.ones(2)]),
}


def _outcome(lib, call):
    a = [lib.ones(2), lib.ones(3) * 2]
    try:
        out = call(lib, a)
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return (type(e).__name__, str(e).split("\n")[0])
    return (type(out).__name__, [(str(t.dtype).split(".")[-1], np.asarray(t.tolist()).tolist()) for t in out])


@pytest.mark.parametrize("name", list(CALLS))
def test_foreach_call_as_pytorch(name):
    assert _outcome(ember, CALLS[name]) == _outcome(torch, CALLS[name])


def test_in_place_returns_its_list_and_gradients_flow():
    for lib in (ember, torch):
        params = [lib.ones(2), lib.zeros(3)]
        assert lib._foreach_lerp_(params, [lib.ones(2) * 3, lib.ones(3)], 0.5) is params
        np.testing.assert_allclose(params[0].numpy(), [2.0, 2.0])
        x = lib.ones(2, requires_grad=True)
        (y,) = lib._foreach_mul([x], 3.0)
        (y * y).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [18.0, 18.0])
