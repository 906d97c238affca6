"""Core behaviour differences found by the session-19 user programs (tests/programs/s19_*.py), each against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _outcome(lib, fn):
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return ("raises", type(e).__name__, str(e).replace("ember.", "torch."))
    if isinstance(out, (lib.Tensor,)):
        return ("value", tuple(out.shape), out.detach().to_dense().flatten().tolist() if out.is_sparse
                else out.detach().flatten().tolist())
    return ("value", out)


def _same(fn, approx=False):
    theirs, ours = _outcome(torch, fn), _outcome(ember, fn)
    if approx and theirs[0] == ours[0] == "value":
        assert theirs[1] == ours[1]
        np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    else:
        assert theirs == ours


@pytest.mark.parametrize("method", ["size", "stride"])
@pytest.mark.parametrize("dim", [0, -1, 1, -2])
def test_size_and_stride_of_a_0d_tensor_at_a_dim_raise(method, dim):
    # ember returned 1 for any dim
    _same(lambda m: getattr(m.tensor(1.0), method)(dim))


def test_size_of_a_0d_tensor_keeps_its_other_answers():
    _same(lambda m: (tuple(m.tensor(1.0).size()), m.tensor(1.0).stride(), m.zeros(2, 3).size(-1)))


@pytest.mark.parametrize("size", [(2, 3, 4), (1, 1, 1), (5, 7, 6), (7, 9, 11), (3, 2, 5)])
def test_interpolate_area_on_5d_input(size):
    # ember raised NotImplementedError; PyTorch runs adaptive_avg_pool3d
    x = np.random.RandomState(0).rand(2, 3, 5, 7, 6).astype(np.float32)

    def run(m):
        t = m.tensor(x, requires_grad=True)
        out = m.nn.functional.interpolate(t, size=size, mode="area")
        (out * out).sum().backward()
        return m.cat([out.flatten(), t.grad.flatten()])
    _same(run, approx=True)


@pytest.mark.parametrize("mode,ndim", [("bicubic", 3), ("bicubic", 5), ("bilinear", 3), ("bilinear", 5),
                                       ("linear", 4), ("trilinear", 4), ("area", 6)])
def test_interpolate_wrong_rank_messages(mode, ndim):
    _same(lambda m: m.nn.functional.interpolate(m.zeros([1] * ndim), scale_factor=2, mode=mode))


def test_sparse_add_dense_with_alpha_does_not_crash():
    # ember's sparse + alpha * dense hit a sparse-only helper (AttributeError); ember allows sparse + dense
    # (docs/deviations.md), so the result is the dense sum
    s = ember.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()
    out = s.add(ember.ones(2, 2), alpha=0.5)
    assert out.tolist() == [[0.5, 1.5], [2.5, 0.5]]
    _same(lambda m: m.ones(2, 2).add(m.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse(), alpha=0.5))


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float32", "float16"), ("float32", "int64"),
                                    ("float64", "bfloat16"), ("float32", "complex64")])
def test_sdpa_dtype_mismatch_names_c10_types(dtypes):
    _same(lambda m: m.nn.functional.scaled_dot_product_attention(
        m.zeros(1, 2, 3, 4, dtype=getattr(m, dtypes[0])), m.zeros(1, 2, 3, 4, dtype=getattr(m, dtypes[1])),
        m.zeros(1, 2, 3, 4, dtype=getattr(m, dtypes[0]))))


@pytest.mark.parametrize("p", [1.5, -0.1])
def test_sdpa_dropout_out_of_range_is_a_runtime_error(p):
    # (for a negative p PyTorch's text comes from its flash kernel's "dropout > 0" refusal)
    def run(m):
        return m.nn.functional.scaled_dot_product_attention(m.zeros(1, 2, 3, 4), m.zeros(1, 2, 3, 4),
                                                            m.zeros(1, 2, 3, 4), dropout_p=p)
    assert _outcome(torch, run)[:2] == _outcome(ember, run)[:2] == ("raises", "RuntimeError")


@pytest.mark.parametrize("d1,d2", [("int64", "int64"), ("float32", "int64"), ("int32", "float32"), ("bool", "bool")])
def test_cdist_dtype_message_names_the_argument_and_scalar_type(d1, d2):
    _same(lambda m: m.cdist(m.ones(2, 3, dtype=getattr(m, d1)), m.ones(2, 3, dtype=getattr(m, d2))))


@pytest.mark.parametrize("factory", ["zeros", "ones", "empty"])
def test_negative_size_messages(factory):
    _same(lambda m: getattr(m, factory)(2, -1))
    _same(lambda m: getattr(m, factory)((-3,), dtype=m.long))
