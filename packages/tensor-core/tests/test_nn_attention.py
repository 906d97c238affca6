"""scaled_dot_product_attention vs torch: masks, causal, scale, GQA, batch shapes, dropout, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as F

import ember
from ember._src.ops.nn.attention import scaled_dot_product_attention as sdpa

from conftest import assert_same, make_pair, torch


def _qkv(qshape, kshape, vshape, name="float32"):
    return make_pair(qshape, name, low=-1, high=1), make_pair(kshape, name, low=-1, high=1, seed=1), \
        make_pair(vshape, name, low=-1, high=1, seed=2)


@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("shapes", [
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)),
    ((2, 2, 70, 8), (2, 2, 70, 8), (2, 2, 70, 8)),  # more than one block of query rows
    ((5, 4), (6, 4), (6, 3)),
    ((2, 2, 3, 4, 4), (2, 2, 3, 4, 4), (2, 2, 3, 4, 4)),
    ((2, 1, 3, 4), (2, 1, 0, 4), (2, 1, 0, 4)),
])
def test_sdpa(name, causal, shapes):
    (q, tq), (k, tk), (v, tv) = _qkv(*shapes, name=name)
    assert_same(sdpa(q, k, v, is_causal=causal), F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal),
                atol=2e-3 if name == "float16" else None)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (1, 3, 1, 7)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_masks(mask_shape, kind):
    (q, tq), (k, tk), (v, tv) = _qkv((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4))
    if kind == "bool":
        arr = np.random.default_rng(3).integers(0, 2, size=mask_shape).astype(bool)
        arr[..., 0] = True
        em, tm = ember.tensor(arr), torch.from_numpy(arr.copy())
    else:
        em, tm = make_pair(mask_shape, "float32", seed=3)
    assert_same(sdpa(q, k, v, em, scale=0.3), F.scaled_dot_product_attention(tq, tk, tv, tm, scale=0.3))


def test_sdpa_fully_masked_rows_and_gqa():
    (q, tq), (k, tk), (v, tv) = _qkv((1, 4, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4))
    assert_same(sdpa(q, k, v, enable_gqa=True), F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True))
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    em, tm = ember.tensor(mask), torch.from_numpy(mask)
    assert_same(sdpa(q, k, v, em, enable_gqa=True), F.scaled_dot_product_attention(tq, tk, tv, tm, enable_gqa=True))


def test_sdpa_dropout_is_reproducible_and_full_dropout_zeroes():
    (q, _), (k, _), (v, _) = _qkv((1, 2, 4, 4), (1, 2, 4, 4), (1, 2, 4, 4))
    ember.manual_seed(1)
    a = sdpa(q, k, v, dropout_p=0.5)
    ember.manual_seed(1)
    assert ember.equal(a, sdpa(q, k, v, dropout_p=0.5))
    assert float(sdpa(q, k, v, dropout_p=1.0).abs().sum().item()) == 0.0


def test_sdpa_errors():
    q = ember.ones(1, 2, 3, 4)
    with pytest.raises(RuntimeError, match="same dtype"):
        sdpa(q, q.double(), q)
    with pytest.raises(RuntimeError, match="is_causal"):  # the math path's check (PyTorch's CPU flash takes both)
        sdpa(q, q, q, ember.ones(3, 3, dtype=ember.bool), is_causal=True, dropout_p=0.1)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        sdpa(q, q, q, ember.ones(3, 3, dtype=ember.int64))
    with pytest.raises(RuntimeError):
        sdpa(q, ember.ones(1, 2, 3, 5), q)


@pytest.mark.parametrize("mask_shape", [(3, 4), (3, 3, 3), (1, 2, 1, 5)])
@pytest.mark.parametrize("dtype", ["bool", "float32"])
def test_sdpa_mask_that_does_not_broadcast_raises_runtime_error_as_torch(mask_shape, dtype):
    # The native kernel's own broadcast check raised ValueError.
    messages = []
    for lib, call in ((ember, sdpa), (torch, F.scaled_dot_product_attention)):
        q = lib.ones(1, 2, 3, 4)
        with pytest.raises(RuntimeError) as info:
            call(q, q, q, attn_mask=lib.zeros(mask_shape, dtype=getattr(lib, dtype)))
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def _sdpa_cpu_choice(lib, backends):
    """PyTorch's CPU choice of kernel: its flash kernel (4-D, no dropout) takes a mask and is_causal
    together; the math path refuses them; grouped heads of key and value may differ."""
    from importlib import import_module

    attention = import_module(lib.__name__ + ".nn.attention")
    rng = np.random.default_rng(0)
    q = lib.tensor(rng.standard_normal((1, 4, 3, 4)).astype("float32"), requires_grad=True)
    k = lib.tensor(rng.standard_normal((1, 2, 3, 4)).astype("float32"), requires_grad=True)
    v = lib.tensor(rng.standard_normal((1, 1, 3, 4)).astype("float32"), requires_grad=True)
    m = lib.tensor(rng.standard_normal((3, 3)).astype("float32"))
    out = []
    with attention.sdpa_kernel([getattr(attention.SDPBackend, b) for b in backends]):
        for args, kw in (((q, q, q), {"attn_mask": m, "is_causal": True}), ((q, k, v), {"enable_gqa": True}),
                         ((q[0], q[0], q[0]), {}), ((q, q, q), {"dropout_p": 0.5})):
            try:
                o = lib.nn.functional.scaled_dot_product_attention(*args, **kw)
                if kw.get("dropout_p"):
                    out.append(tuple(o.shape))
                    continue
                o.pow(2).sum().backward()
                out.append([round(float(o.sum()), 4)] + [round(float(t.grad.sum()), 3) for t in (q, k, v)
                                                         if t.grad is not None])
            except RuntimeError as e:
                out.append(str(e))
    return out


@pytest.mark.parametrize("backends", [["MATH"], ["FLASH_ATTENTION"], ["MATH", "FLASH_ATTENTION"]])
def test_sdpa_cpu_backend_choice_as_torch(backends):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _sdpa_cpu_choice(ember, backends) == _sdpa_cpu_choice(torch, backends)


def test_sdpa_kernel_checks_as_torch():
    from torch.nn.attention import sdpa_kernel as torch_kernel

    from ember.nn.attention import sdpa_kernel

    for kernel in (sdpa_kernel, torch_kernel):
        with pytest.raises(AssertionError, match="or a list of SDPBackend instances, got str"):
            kernel("math").__enter__()
    for lib in (ember, torch):
        with pytest.raises(RuntimeError) as err:
            lib.nn.functional.scaled_dot_product_attention(lib.ones(1, 3, 2, 4), lib.ones(1, 2, 2, 4),
                                                           lib.ones(1, 2, 2, 4), enable_gqa=True)
        assert str(err.value) == "Number of heads in key and value must divide the number of heads in "
