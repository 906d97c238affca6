"""gelu_backward and _softmax_backward_data/_log_softmax_backward_data on CUDA against the CPU
kernels, directly and through autograd (GPU only)."""

from __future__ import annotations

import pytest
from cuda_helpers import assert_same, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]
OPS = ember.ops


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float64], ids=str)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward(dtype, approximate):
    x, g = rand((6, 33), dtype, low=-5, high=5, seed=1), rand((6, 33), dtype, seed=2)
    assert_same(OPS["gelu_backward"](g.cuda(), x.cuda(), approximate=approximate),
                OPS["gelu_backward"](g, x, approximate=approximate))
    row = rand((33,), dtype, seed=3)  # a gradient broadcast to the input's shape
    assert_same(OPS["gelu_backward"](row.cuda(), x.cuda(), approximate=approximate),
                OPS["gelu_backward"](row, x, approximate=approximate))
    pytest.importorskip("ember.nn")  # (ember-nn: above this package)
    grads = []
    for dev in ("cpu", "cuda"):
        leaf = x.detach().to(dev).clone().requires_grad_()  # a leaf of its own per device
        ember.nn.functional.gelu(leaf, approximate=approximate).backward(g.to(dev))
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])
    with pytest.raises(RuntimeError, match="approximate argument"):
        OPS["gelu_backward"](g.cuda(), x.cuda(), approximate="erf")


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float64], ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim", [((4, 5, 37), -1), ((4, 5, 37), 1), ((3, 20000), 1), ((7,), 0)])
def test_softmax_backward(dtype, log, shape, dim):
    name = "_log_softmax_backward_data" if log else "_softmax_backward_data"
    x, g = rand(shape, dtype, seed=4), rand(shape, dtype, seed=5)
    y = ember.log_softmax(x, dim) if log else ember.softmax(x, dim)
    assert_same(OPS[name](g.cuda(), y.cuda(), dim, dtype), OPS[name](g, y, dim, dtype))
    grads = []
    for dev in ("cpu", "cuda"):
        leaf = x.detach().to(dev).clone().requires_grad_()  # a leaf of its own per device
        (ember.log_softmax(leaf, dim) if log else ember.softmax(leaf, dim)).backward(g.to(dev))
        grads.append(leaf.grad)
    assert_same(grads[1], grads[0])
