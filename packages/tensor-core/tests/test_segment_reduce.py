"""ember.segment_reduce against torch.segment_reduce: every reduction, lengths or offsets, batched
lengths along a later axis, initial, empty segments, gradients (ties included) and the errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402

REDUCES = ["sum", "mean", "max", "min", "prod"]


def _pair(array):
    return ember.tensor(array), torch.tensor(array)


def _close(e, t):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("initial", [None, 0.5, -2.0])
@pytest.mark.parametrize("use_offsets", [False, True])
def test_values_and_gradients_1d_lengths(reduce, initial, use_offsets):
    rng = np.random.default_rng(0)
    lengths = np.array([2, 0, 3, 1, 0, 4])
    data = rng.standard_normal((int(lengths.sum()), 3))
    data[3, 1] = data[4, 1]  # a tie inside a segment: max/min share its gradient
    kwargs_for = (lambda lib: {"offsets": lib.tensor(np.concatenate([[0], np.cumsum(lengths)]))}) if use_offsets \
        else (lambda lib: {"lengths": lib.tensor(lengths)})
    outs = []
    for lib in (ember, torch):
        x = lib.tensor(data, requires_grad=True)
        out = lib.segment_reduce(x, reduce, axis=0, initial=initial, **kwargs_for(lib))
        weight = lib.tensor(np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape)))
        (out.nan_to_num(0.0, 0.0, 0.0) * weight).sum().backward()
        outs.append((out, x.grad))
    _close(outs[0][0], outs[1][0])
    _close(outs[0][1], outs[1][1])


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("axis", [1, -2])
def test_batched_lengths_along_a_later_axis(reduce, axis):
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 6, 2)).astype(np.float32)
    lengths = np.array([[2, 4, 0], [3, 0, 3]])
    e = ember.segment_reduce(ember.tensor(data), reduce, lengths=ember.tensor(lengths), axis=axis)
    t = torch.segment_reduce(torch.tensor(data), reduce, lengths=torch.tensor(lengths), axis=axis)
    assert e.dtype == ember.float32 and tuple(e.shape) == tuple(t.shape)
    _close(e, t)


def test_dtypes_empty_and_unsafe():
    for dtype in ("float64", "bfloat16", "float16"):
        e = ember.segment_reduce(ember.ones(4, dtype=getattr(ember, dtype)), "mean", lengths=ember.tensor([1, 3]))
        t = torch.segment_reduce(torch.ones(4, dtype=getattr(torch, dtype)), "mean", lengths=torch.tensor([1, 3]))
        assert str(e.dtype).split(".")[1] == dtype and e.float().tolist() == t.float().tolist()
    assert ember.segment_reduce(ember.ones(0, 3), "sum", lengths=ember.tensor([0, 0])).tolist() == [[0.0] * 3] * 2
    e = ember.segment_reduce(ember.ones(4), "sum", lengths=ember.tensor([1, 2]), unsafe=True)
    assert e.tolist() == torch.segment_reduce(torch.ones(4), "sum", lengths=torch.tensor([1, 2]), unsafe=True).tolist()
    e = ember.segment_reduce(ember.tensor([1.0, 2.0]), "sum", lengths=ember.tensor([1, 1], dtype=ember.int32))
    assert e.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("case", ["sum_mismatch", "indices", "neither", "negative", "float_lengths", "bad_axis",
                                  "bad_reduce", "int_data", "lengths_rank"])
def test_errors_match(case):
    def call(lib):
        d = lib.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        args = {
            "sum_mismatch": ((d, "sum"), {"lengths": lib.tensor([2, 2])}),
            "indices": ((d, "sum"), {"lengths": lib.tensor([2, 4]), "indices": lib.tensor([0])}),
            "neither": ((d, "sum"), {}),
            "negative": ((d, "sum"), {"lengths": lib.tensor([-1, 7])}),
            "float_lengths": ((d, "sum"), {"lengths": lib.tensor([2.0, 4.0])}),
            "bad_axis": ((d.reshape(2, 3), "sum"), {"lengths": lib.tensor([1, 2]), "axis": 1}),
            "bad_reduce": ((d, "median"), {"lengths": lib.tensor([2, 4])}),
            "int_data": ((lib.tensor([1, 2]), "sum"), {"lengths": lib.tensor([1, 1])}),
            "lengths_rank": ((d, "sum"), {"lengths": lib.tensor([[3, 3]])}),
        }[case]
        with pytest.raises(Exception) as info:
            lib.segment_reduce(*args[0], **args[1])
        return type(info.value), str(info.value).split("  (Could this")[0]

    assert call(ember) == call(torch)
