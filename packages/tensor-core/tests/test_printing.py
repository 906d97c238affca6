"""repr/str match PyTorch's text exactly (after renaming ``torch.`` to ``ember.``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember

from conftest import torch

NAN, INF = math.nan, math.inf


def pair(values, name=None):
    arr = np.asarray(values)
    if name is not None and name != "bfloat16":
        arr = arr.astype(name)
    e = ember.tensor(arr)
    t = torch.tensor(arr)
    if name == "bfloat16":
        e, t = e.to(ember.bfloat16), t.to(torch.bfloat16)
    return e, t


def check(e, t):
    expected = repr(t).replace("torch.", "ember.")
    assert repr(e) == expected
    assert str(e) == str(t).replace("torch.", "ember.")


rng = np.random.default_rng(0)

CASES = {
    "ints": ([1, -2, 300], None),
    "int_matrix": ([[1, 20], [-300, 4]], None),
    "int32": ([5, 6], "int32"),
    "uint8": ([[0, 255]], "uint8"),
    "int8_3d": (np.arange(-12, 12).reshape(2, 3, 4), "int8"),
    "bool": ([True, False, True], None),
    "bool_all_true": ([[True, True]], None),
    "float_simple": ([1.5, 2.25, -3.125], "float32"),
    "float_int_valued": ([1.0, 2.0, -30.0], "float32"),
    "float_mixed_magnitude": ([1.5, 1e-5, 100.0], "float32"),
    "float_large": ([1e10, 1.0], "float32"),
    "float_int_valued_sci": ([1e9, 2.0], "float64"),
    "float_tiny": ([[1e-10, 1.0]], "float32"),
    "float_nan_inf": ([NAN, 1.0, INF, -INF], "float32"),
    "float_only_nan": ([NAN, NAN], "float32"),
    "float_inf_large": ([1e20, INF], "float32"),
    "neg_zero": ([-0.0, 0.0], "float32"),
    "neg_zero_frac": ([-0.0, 1.5], "float32"),
    "zeros": ([[0.0, 0.0], [0.0, 0.0]], "float32"),
    "float64": ([0.1, 0.2], "float64"),
    "float16": ([0.1, 0.25, 65504.0], "float16"),
    "bfloat16": ([0.1, 3.0, -7.5], "bfloat16"),
    "scalar_float": (3.5, "float32"),
    "scalar_int": (7, None),
    "scalar_bool": (False, None),
    "scalar_f64_sci": (1.0e-7, "float64"),
    "scalar_half": (2.0, "float16"),
    "random_3d": (rng.standard_normal((2, 3, 4)), "float32"),
    "random_4d": (rng.standard_normal((2, 2, 2, 3)) * 1000, "float64"),
    "wide_row": (np.arange(30.0) * 1.5, "float32"),
    "wide_matrix": (rng.standard_normal((3, 25)), "float32"),
    "wide_ints": (np.arange(40) * 12345, None),
    "wide_sci": (np.logspace(-5, 5, 17), "float32"),
    "summarized_vector": (np.arange(2000.0), "float32"),
    "summarized_matrix": (rng.standard_normal((40, 50)), "float32"),
    "summarized_3d": (np.arange(1200).reshape(10, 12, 10), "int64"),
    "summarized_bool": (np.arange(1500) % 3 == 0, None),
    "summarized_half": (np.linspace(-1, 1, 1001), "float16"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_repr_matches_torch(name):
    values, dtype = CASES[name]
    check(*pair(values, dtype))


@pytest.mark.parametrize("shape,name", [((0,), "float32"), ((0,), "int64"), ((2, 0), "float32"),
                                        ((0, 3), "int32"),
                                        ((1, 0, 2), "bool"), ((0,), "float16")])
def test_empty(shape, name):
    check(ember.zeros(shape, dtype=getattr(ember, name)), torch.zeros(shape, dtype=getattr(torch, name)))


@pytest.mark.parametrize("shape,name", [((2, 3), "float32"), ((4,), "int64"), ((), "float64")])
def test_meta(shape, name):
    check(ember.zeros(shape, dtype=getattr(ember, name), device="meta"),
          torch.zeros(shape, dtype=getattr(torch, name), device="meta"))


def test_views_print_their_values():
    base_e, base_t = pair(np.arange(24.0).reshape(4, 6) / 7, "float32")
    check(base_e.t(), base_t.t())
    check(base_e.narrow(1, 2, 3), base_t.narrow(1, 2, 3))
    check(base_e.select(0, 1).expand(2, 6), base_t.select(0, 1).expand(2, 6))


def test_default_dtype_changes_the_suffix():
    try:
        ember.set_default_dtype(ember.float64)
        torch.set_default_dtype(torch.float64)
        check(*pair([1.5, 2.0], "float64"))
        check(*pair([1.5, 2.0], "float32"))
        check(ember.zeros(0, dtype=ember.float64), torch.zeros(0, dtype=torch.float64))
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("options", [
    {"precision": 2}, {"precision": 8}, {"sci_mode": True}, {"sci_mode": False}, {"threshold": 5},
    {"edgeitems": 1, "threshold": 5}, {"linewidth": 40}, {"linewidth": 200}, {"profile": "short"},
    {"profile": "full"}, {"edgeitems": 0, "threshold": 5},
])
def test_print_options(options):
    cases = [pair(rng.standard_normal((6, 7)), "float32"), pair(np.arange(12), None),
             pair([1e-6, 1.0, 123.0], "float64"), pair(np.arange(30.0), "float32")]
    try:
        ember.set_printoptions(**options)
        torch.set_printoptions(**options)
        for e, t in cases:
            check(e, t)
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")


def test_suffixes_wrap_at_linewidth():
    # A long last line pushes the dtype suffix onto its own line.
    check(*pair(np.arange(10) * 1111111, "int32"))
    check(*pair(np.arange(7.0) * 1.25, "float64"))
    shape = (2, 3, 4, 5, 6, 7, 0)
    check(ember.zeros(shape, dtype=ember.int16), torch.zeros(shape, dtype=torch.int16))


def test_format_of_zero_dim():
    e, t = pair(2.5, "float32")
    assert f"{e:.3f}" == f"{t:.3f}" and format(e) == format(t)


def test_requires_grad_and_subclass_prefix():
    check(ember.ones(2, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True))

    class EmberSub(ember.Tensor):
        pass

    class TorchSub(torch.Tensor):
        pass

    e = ember.arange(12.0).reshape(3, 4).as_subclass(EmberSub)
    t = torch.arange(12.0).reshape(3, 4).as_subclass(TorchSub)
    assert repr(e).replace("EmberSub", "Sub") == repr(t).replace("TorchSub", "Sub")
