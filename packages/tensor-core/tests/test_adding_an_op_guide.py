"""Follows docs/adding-an-op.md step by step with a toy op, so the guide stays true: the record
(with its meta), the kernel, the test entry - and nothing else - give the op every public form."""

import pytest

import ember
from ember._src import bindings
from ember._src.device import META
from ember._src.dispatch import OPS, DispatchMode, define
from ember._src.tensor import new_empty_tensor

from conftest import assert_same, make_pair, torch

NAME = "softsign2_guide"


def _softsign2_meta(x):
    dtype = x.dtype if x.dtype.is_floating_point else ember.get_default_dtype()
    return new_empty_tensor(x._shape, dtype, META)


@pytest.fixture
def softsign2():
    if NAME in OPS:  # left over by an interrupted run
        bindings.unbind(NAME)
    # Step 1: the record, with its meta.
    op = define(f"{NAME}(Tensor self) -> Tensor", ("pointwise",), meta=_softsign2_meta,
                variants="function method inplace out", differentiable=False)
    op.kernels["meta"] = _softsign2_meta

    # Step 2: the kernel.
    @op.kernel("cpu")
    def _softsign2_cpu(x):
        return x / (1 + x.abs())

    yield op
    bindings.unbind(NAME)


def test_the_guide_adds_a_working_op(softsign2):
    # Step 3: the test entry - the op against the oracle, in each of its generated forms.
    x, tx = make_pair((3, 4), "float32", layout="transposed")
    expected = torch.nn.functional.softsign(tx)
    assert_same(ember.ops[NAME](x), expected)
    assert_same(getattr(ember, NAME)(x), expected)  # function
    assert_same(getattr(x, NAME)(), expected)  # method
    out = ember.empty(0)
    assert getattr(ember, NAME)(x, out=out) is out  # out=
    assert_same(out, expected)
    y = x.clone()
    assert getattr(y, NAME + "_")() is y  # in-place
    assert_same(y, expected)
    m = getattr(ember, NAME)(ember.empty(2, 5, device="meta"))  # the meta device runs it without data
    assert m.device.type == "meta" and m.shape == (2, 5)

    # Wrong arguments: TypeError naming the signature, as PyTorch's argument parser.
    with pytest.raises(TypeError, match=r"softsign2_guide\(\) received an invalid combination .*\(Tensor self\)"):
        getattr(ember, NAME)("not a tensor")
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        getattr(ember, NAME)(x, alpha=2)
    with pytest.raises(TypeError, match="takes 1 positional"):
        getattr(x, NAME)(2)

    # A dispatch mode sees the call (and so would every upper layer).
    seen = []

    class Record(DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    with Record():
        getattr(ember, NAME)(x)
    assert seen == [NAME]


def test_the_toy_op_is_removed_without_a_trace(softsign2):
    assert hasattr(ember, NAME) and hasattr(ember.Tensor, NAME + "_")
    bindings.unbind(NAME)
    assert NAME not in OPS
    assert not hasattr(ember, NAME)
    assert not hasattr(ember.Tensor, NAME) and not hasattr(ember.Tensor, NAME + "_")
    assert not any(name == NAME for _, name in bindings._CLAIMED)
