"""split/chunk/unbind give their pieces one backward node (PyTorch's SplitBackward0,
SplitWithSizesBackward0, UnbindBackward0) whose gradient is the pieces' gradients concatenated
(stacked), not a node per piece writing into full-size zeros; gradients match PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_CASES = [
    ("split", lambda x: x.split(2)),
    ("split_dim1", lambda x: x.split(2, dim=1)),
    ("split_sizes", lambda x: x.split([1, 3], dim=0)),
    ("chunk", lambda x: x.chunk(3, dim=1)),
    ("unbind", lambda x: x.unbind(0)),
    ("unbind_neg", lambda x: x.unbind(-1)),
    ("ember_split", lambda x: type(x).split(x, 3, 1)),
]


def _program(fw, make, x0, used):
    x = fw.tensor(x0, requires_grad=True)
    y = x * 2
    pieces = make(y)
    loss = sum(((p ** 2) * (i + 1)).sum() for i, p in enumerate(pieces) if i in used)
    loss.backward()
    return pieces, x.grad


@pytest.mark.parametrize("name,make", _CASES, ids=[c[0] for c in _CASES])
@pytest.mark.parametrize("used", [(0, 1), (1,)], ids=["all_or_first_two", "one"])
def test_pieces_share_one_node_and_match_pytorch(name, make, used):
    x0 = np.arange(20.0, dtype=np.float32).reshape(4, 5) / 7
    pieces, grad = _program(ember, make, x0, used)
    tpieces, tgrad = _program(torch, make, x0, used)
    assert len(pieces) == len(tpieces)
    assert pieces[0].grad_fn.name() == tpieces[0].grad_fn.name()
    assert all(p.grad_fn is pieces[0].grad_fn for p in pieces)
    assert all(p._base is not None for p in pieces)  # still views of the input
    np.testing.assert_allclose(grad.numpy(), tgrad.numpy(), rtol=1e-6, atol=1e-6)


def test_second_order_and_in_place_piece():
    for fw in (ember, torch):
        x = fw.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
        a, b, c = x.unbind(0)
        (g,) = fw.autograd.grad((a * b * c).sum(), x, create_graph=True)
        (gg,) = fw.autograd.grad(g.sum(), x)
        if fw is ember:
            e_g, e_gg = g.detach().numpy(), gg.numpy()
        else:
            np.testing.assert_allclose(e_g, g.detach().numpy())
            np.testing.assert_allclose(e_gg, gg.numpy())
    # a piece written in place raises as in PyTorch (test_inplace_on_a_multi_output_view_raises_like_torch);
    # under no_grad it is allowed, and the base sees the write
    x = ember.ones(4, 2, requires_grad=True)
    y = x * 2
    with ember.no_grad():
        p, q = y.split(2)
        p.mul_(3)
    assert y.tolist() == [[6.0, 6.0], [6.0, 6.0], [2.0, 2.0], [2.0, 2.0]]


def test_no_grad_and_single_piece():
    x = ember.ones(4, 2, requires_grad=True)
    with ember.no_grad():
        assert all(p.grad_fn is None for p in x.split(2))
    (only,) = x.split(4)
    (tonly,) = torch.ones(4, 2, requires_grad=True).split(4)
    assert only.grad_fn.name() == tonly.grad_fn.name()
    (only * 3).sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0]] * 4


@pytest.mark.parametrize("call", [
    lambda L, x: x.clone().split(2)[0].add_(1),
    lambda L, x: x.clone().chunk(2)[1].mul_(2),
    lambda L, x: x.clone().split([1, 3])[0].zero_(),
    lambda L, x: x.clone().unbind(1)[2].copy_(L.ones(4)),
    lambda L, x: x.split(2)[0].add_(1),  # of a leaf: the multi-view error comes first, as PyTorch's
    lambda L, x: x.clone().tensor_split(2)[0].add_(1),  # narrow views: allowed
    lambda L, x: x.detach().split(2)[0].add_(1),  # no grad: allowed
])
def test_inplace_on_a_multi_output_view_raises_like_torch(call):
    def outcome(L):
        x = L.arange(12.0).reshape(4, 3).requires_grad_()
        try:
            call(L, x)
        except RuntimeError as e:
            return str(e)
        return "ok"

    assert outcome(ember) == outcome(torch)
