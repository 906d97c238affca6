"""grad_fn names of the operator forms PyTorch records under an overload of its op (programs and
tutorials print ``y.grad_fn``): number - tensor is rsub.Scalar (RsubBackward1), tensor ** tensor
pow.Tensor_Tensor (PowBackward1), number ** tensor pow.Scalar (PowBackward2), number / tensor a
MulBackward0, a copying contiguous() a CloneBackward0; the gradients are unchanged."""

from __future__ import annotations

import pytest
import torch

import ember

CALLS = {
    "scalar_minus_tensor": lambda L, x, y: 1 - x,
    "rsub_scalar": lambda L, x, y: L.rsub(x, 1.0),
    "rsub_tensor": lambda L, x, y: L.rsub(x, y),
    "pow_scalar_exponent": lambda L, x, y: x ** 2,
    "pow_tensor_exponent": lambda L, x, y: x ** y,
    "scalar_pow_tensor": lambda L, x, y: 2 ** x,
    "torch_pow_tensors": lambda L, x, y: L.pow(x, y),
    "torch_pow_scalar_base": lambda L, x, y: L.pow(2.0, x),
    "method_pow_tensor": lambda L, x, y: x.pow(y),
    "scalar_div_tensor": lambda L, x, y: 2 / x,
    "tensor_div_scalar": lambda L, x, y: x / 2,
    "contiguous_copy": lambda L, x, y: x.view(3, 1).expand(3, 2).contiguous(),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_overload_node_names_and_grads_match_torch(name):
    def run(L):
        x = L.tensor([1.5, 2.0, 3.0], requires_grad=True)
        y = L.tensor([0.5, 1.0, 2.0], requires_grad=True)
        out = CALLS[name](L, x, y)
        out.sum().backward()
        grads = [None if t.grad is None else [round(v, 5) for v in t.grad.tolist()] for t in (x, y)]
        return type(out.grad_fn).__name__, grads

    assert run(ember) == run(torch)
