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


# One ember op, several PyTorch overloads: the arguments given pick the name (Note [Overload
# node names] in _recording.py), on the native recorder's path and on the Python one alike.
DIM_CALLS = {
    "sum_all": lambda L, x, b: x.sum(),
    "sum_dim": lambda L, x, b: x.sum(1),
    "sum_dims_keepdim": lambda L, x, b: L.sum(x, (0, 1), keepdim=True),
    "sum_dim_dtype": lambda L, x, b: x.sum(0, dtype=L.float64),
    "mean_all": lambda L, x, b: x.mean(),
    "mean_dim": lambda L, x, b: x.mean(dim=-1),
    "prod_all": lambda L, x, b: x.prod(),
    "prod_dim": lambda L, x, b: x.prod(0),
    "squeeze_all": lambda L, x, b: x[:, None].squeeze(),
    "squeeze_dim": lambda L, x, b: x[:, None].squeeze(1),
    "squeeze_dim_keyword": lambda L, x, b: L.squeeze(x[:, None], dim=1),
    "squeeze_dims": lambda L, x, b: x[:, None].squeeze((1,)),
    "t": lambda L, x, b: x.t(),
    "torch_t": lambda L, x, b: L.t(x),
    # the native front relabels the node by swapping its class (kept after the first call): a
    # chain of t() of non-leaves, each node TBackward0, and the gradient through all of them
    "t_chain": lambda L, x, b: (x * 2).t().t().t(),
    "clamp_numbers": lambda L, x, b: x.clamp(-0.5, 0.5),
    "clamp_max_number": lambda L, x, b: x.clamp(max=0.5),
    "clamp_tensors": lambda L, x, b: x.clamp(min=b),
    "clamp_max_tensor": lambda L, x, b: L.clamp(x, None, b),
    "clamp_inplace_numbers": lambda L, x, b: x.clone().clamp_(-0.5, 0.5),
    "clamp_inplace_tensors": lambda L, x, b: x.clone().clamp_(b, b + 1),
    # composites whose last node carries the name of PyTorch's op
    "repeat": lambda L, x, b: x.repeat(2, 1),
    "roll_dims": lambda L, x, b: x.roll(1, 1),
    "roll_flat": lambda L, x, b: L.roll(x, 2),
    "narrow": lambda L, x, b: x.narrow(1, 1, 2),
    "tril": lambda L, x, b: x.tril(),
    "triu": lambda L, x, b: L.triu(x, 1),
}


@pytest.mark.parametrize("grad_x", [True, False])
@pytest.mark.parametrize("name", list(DIM_CALLS))
def test_overload_names_picked_by_arguments_match_torch(name, grad_x):
    def run(L):
        x = L.tensor([[1.5, -0.25, 0.75], [0.5, 2.0, -1.0]], requires_grad=grad_x)
        b = L.tensor([[0.0, -0.5, 1.0], [1.0, 0.5, -2.0]], requires_grad=not grad_x)
        out = DIM_CALLS[name](L, x, b)
        if out.grad_fn is None:
            return None, None
        out.sum().backward()
        return type(out.grad_fn).__name__, out.grad_fn.name(), [
            None if t.grad is None else [round(v, 5) for v in t.grad.flatten().tolist()] for t in (x, b)]

    assert run(ember) == run(torch)


def _edge_names(fn):
    return [(None if n is None else type(n).__name__, nr) for n, nr in fn.next_functions]


@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits"])
def test_composite_loss_node_edges_as_torch(loss):
    # blitz neural_networks tutorial: loss.grad_fn (MseLossBackward0), then
    # .next_functions[0][0] (the last Linear's AddmmBackward0), then its next_functions[0][0]
    # (AccumulateGrad of its bias). ember's relabeled composite node showed its own inner chain
    # (SquareBackward0, SubBackward0) instead of the op's inputs.
    results = []
    for lib in (torch, ember):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
            lin.bias.copy_(lib.tensor([0.05, -0.05]))
        x = lib.tensor([[0.5, -1.0, 2.0]])
        target = lib.tensor([[0.25, 0.75]])
        out = getattr(lib.nn.functional, loss)(lin(x), target)
        fn = out.grad_fn
        first = fn.next_functions[0][0]
        leaf = lib.tensor([0.5, 0.2], requires_grad=True)
        both = getattr(lib.nn.functional, loss)(leaf, leaf.detach() * 2 + lin.bias)
        out.backward()
        results.append((type(fn).__name__, _edge_names(fn), _edge_names(first), _edge_names(both.grad_fn),
                        both.grad_fn.next_functions[0][0].variable is leaf, lin.bias.grad.tolist()))
    assert results[0][:5] == results[1][:5]
    assert results[1][5] == pytest.approx(results[0][5], rel=1e-6)


def test_nll_loss_node_edges_as_torch():
    results = []
    for lib in (torch, ember):
        x = lib.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
        out = lib.nn.functional.nll_loss(lib.log_softmax(x * 2, 1), lib.tensor([1]))
        results.append((type(out.grad_fn).__name__, _edge_names(out.grad_fn)))
    assert results[0] == results[1]


# Note [Number operands' edges]: add/sub/mul/div list an edge (None, 0) for a number operand, after
# the tensor's, whichever side the number is on; ops with a Scalar overload list none.
EDGE_CALLS = {
    "mul_number": lambda L, x: x * 2,
    "number_add": lambda L, x: 2 + x,
    "sub_number": lambda L, x: x - 3.0,
    "number_mul": lambda L, x: 0.5 * x,
    "div_number": lambda L, x: x / 4,
    "torch_mul": lambda L, x: L.mul(x, 2),
    "torch_add_alpha": lambda L, x: L.add(x, 2, alpha=3),
    "number_minus": lambda L, x: 3.0 - x,
    "pow_number": lambda L, x: x ** 2,
    "number_pow": lambda L, x: 2 ** x,
    "clamp": lambda L, x: x.clamp(0, 1),
    "remainder": lambda L, x: x % 2,
    "mul_inplace": lambda L, x: x.clone().mul_(2),
    "add_inplace": lambda L, x: x.clone().add_(1),
    "div_inplace": lambda L, x: x.clone().div_(2),
    "two_tensors": lambda L, x: x * x.detach(),
    # Note [Non-differentiable inputs' edges]: no edge for a condition, an index or a mask
    "where_number": lambda L, x: L.where(x > 2, x, 0.0),
    "where_tensors": lambda L, x: L.where(x > 2, x, x.detach()),
    "index_select": lambda L, x: x.index_select(0, L.tensor([0, 2])),
    "gather": lambda L, x: x.gather(0, L.tensor([2, 0])),
    "index": lambda L, x: x[L.tensor([1, 2])],
    "embedding": lambda L, x: L.nn.functional.embedding(L.tensor([1, 0]), x.view(3, 1)),
}


def _number_edge_names(out):
    return [(None if fn is None else type(fn).__name__, nr) for fn, nr in out.grad_fn.next_functions]


@pytest.mark.parametrize("anomaly", [False, True], ids=["native", "python"])  # anomaly mode records in Python
@pytest.mark.parametrize("name", list(EDGE_CALLS))
def test_number_operand_edges_match_torch(name, anomaly):
    def run(L):
        x = L.tensor([1.5, 2.0, 3.0], requires_grad=True)
        with L.autograd.set_detect_anomaly(anomaly):
            out = EDGE_CALLS[name](L, x)
            out.sum().backward()
        return type(out.grad_fn).__name__, _number_edge_names(out), [round(v, 5) for v in x.grad.tolist()]

    assert run(ember) == run(torch)


VIEW_CALLS = {
    "squeeze": lambda z: z.squeeze(),
    "squeeze_dim": lambda z: z.squeeze(0),
    "squeeze_dims": lambda z: z.squeeze((0, 2)),
    "squeeze_list": lambda z: z.squeeze([0]),
    "squeeze_not_one": lambda z: z.squeeze(1),
    "squeeze_": lambda z: z.squeeze_(),
    "squeeze_dim_": lambda z: z.squeeze_(0),
    "squeeze_dims_": lambda z: z.squeeze_([0, 2]),
    "squeeze_tuple_": lambda z: z.squeeze_((0,)),
    "unsqueeze_": lambda z: z.unsqueeze_(0),
    "transpose_": lambda z: z.transpose_(0, 1),
    "swapdims_": lambda z: z.swapdims_(0, 1),
    "t_": lambda z: z[0].t_(),
    "as_strided_": lambda z: z.as_strided_((3,), (1,)),
}


@pytest.mark.parametrize("name", list(VIEW_CALLS))
def test_view_overload_node_names_match_torch(name):
    # squeeze's overloads: () 0, (dim) 1, (dims) 2; the in-place ones 3, 4, 5 (SqueezeBackward4 for
    # squeeze_(dim)); the in-place transpose_/t_/unsqueeze_/as_strided_ are their op's overload 1.
    def run(L):
        x = L.tensor([[[1.0], [2.0], [3.0]]], requires_grad=True)
        out = VIEW_CALLS[name](x.clone())
        (out * L.arange(1.0, 4.0).reshape(out.shape) if out.numel() == 3 else out).sum().backward()
        return type(out.grad_fn).__name__, x.grad.flatten().tolist()

    assert run(ember) == run(torch)
