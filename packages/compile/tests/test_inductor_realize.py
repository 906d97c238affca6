"""When the lowering stores a value instead of inlining it into every consumer, and the wrapper's
cached device scalars (CPU; the CUDA side runs on the H200)."""

from __future__ import annotations

import re

import numpy as np
from inductor_test_helpers import check, make_input

import ember
from ember.compiler.inductor import _wrapper


def _residual_stream(m, x, *weights):
    """A residual stream as a transformer's: each step normalizes the running sum, multiplies
    (an extern matmul ends the kernel) and adds the product back."""
    for w in weights:
        x = x + m.nn.functional.layer_norm(x, (x.shape[-1],)) @ w
    return x


def test_a_residual_sum_read_by_later_steps_is_stored_not_recomputed():
    inputs = [make_input((6, 32), ember.float32, specials=False)]
    inputs += [make_input((32, 32), ember.float32, seed=i, specials=False) * 0.2 for i in range(1, 7)]
    compiled = check(_residual_stream, *inputs, rtol=1e-4, atol=1e-5, lowered=False)
    source = compiled.artifact.cpp_source
    # each kernel reads the stored running sum and the last product, not every partial sum again
    signatures = re.findall(r"EMBER_KERNEL void \w+\(([^)]*)\)", source)
    assert max(len(re.findall(r"const float\*", sig)) for sig in signatures) <= 3, source


def test_device_scalars_are_cached_per_value():
    _wrapper._SCALARS.clear()
    a = _wrapper._scalar_to(ember.tensor(2.5), ember.device("cpu"))
    b = _wrapper._scalar_to(ember.tensor(2.5), ember.device("cpu"))
    assert a is b and a.item() == 2.5
    neg, pos = (_wrapper._scalar_to(ember.tensor(v), ember.device("cpu")) for v in (-0.0, 0.0))
    assert neg is not pos and np.signbit(neg.item()) and not np.signbit(pos.item())
    assert np.isnan(_wrapper._scalar_to(ember.tensor(float("nan")), ember.device("cpu")).item())
    ints = _wrapper._scalar_to(ember.tensor(3), ember.device("cpu"))
    assert ints.dtype is ember.int64 and ints is not _wrapper._scalar_to(ember.tensor(3.0), ember.device("cpu"))
