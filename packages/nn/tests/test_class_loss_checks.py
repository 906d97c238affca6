"""cross_entropy / nll_loss on class indices reject mismatched targets as PyTorch does: the same
exception type and message, checked in the same order (batch size, target shape, dtype), and
the same result shape where the call is accepted."""

import pytest

import ember

torch = pytest.importorskip("torch")

SHAPES = [
    ((3,), ()), ((3,), (1,)), ((3,), (2,)), ((3,), (1, 1)), ((2, 3), (2,)), ((2, 3), (3,)), ((2, 3), (2, 1)),
    ((2, 3), ()), ((2, 3, 4), (2, 4)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (2, 5)), ((2, 3, 4), (2,)),
    ((2, 3, 4), (2, 4, 1)), ((2, 3, 4, 5), (2, 4, 5)), ((2, 3, 4, 5), (2, 4)), ((2, 3, 4, 5), (3, 4, 5)),
    ((2, 3, 4, 5), (2, 4, 6)), ((2, 3, 4, 5, 6), (2, 4, 5, 6)), ((2, 3, 4, 5, 6), (2, 4, 5, 7)),
    ((2, 3, 4, 5, 6), (2, 4)),
]


def _outcome(lib, fn, input_shape, target_shape, dtype, reduction):
    try:
        out = getattr(lib.nn.functional, fn)(lib.zeros(input_shape), lib.zeros(target_shape, dtype=getattr(lib, dtype)),
                                             reduction=reduction)
    except (RuntimeError, ValueError) as err:
        return type(err).__name__, str(err)
    return "ok", tuple(out.shape)


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("dtype", ["int64", "float32", "int32"])
@pytest.mark.parametrize("input_shape,target_shape", SHAPES)
@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_like_pytorch(fn, input_shape, target_shape, dtype, reduction):
    ours = _outcome(ember, fn, input_shape, target_shape, dtype, reduction)
    theirs = _outcome(torch, fn, input_shape, target_shape, dtype, reduction)
    assert ours == theirs
