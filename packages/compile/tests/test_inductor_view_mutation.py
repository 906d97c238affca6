"""In-place ops through views under the inductor: the write must reach the viewed tensor (an
input or a graph-local value), as in eager ember and in torch.compile."""

import pytest

import ember

torch = pytest.importorskip("torch")


def _input_slice(T, x, other):
    x[1:].mul_(2)
    return x.sum()


def _input_slice_and_whole(T, x, other):
    other.add_(x)
    x[1:].mul_(2)
    return (other * x).sum()


def _local_slice(T, x, other):
    y = x * 1
    y[1:].add_(5)
    return y.sum() + y[0]


def _local_view_row(T, x, other):
    y = x.exp()
    y.view(2, 2)[0].zero_()
    return y


def _transposed_view(T, x, other):
    y = (x + 1).view(2, 2)
    y.t()[0].mul_(3)
    return y.sum(0)


def _diagonal(T, x, other):
    m = other.view(2, 2)
    m.diagonal().fill_(7)
    return (m * 2).sum()


CASES = [_input_slice, _input_slice_and_whole, _local_slice, _local_view_row, _transposed_view, _diagonal]


@pytest.mark.parametrize("fn", CASES, ids=[c.__name__ for c in CASES])
def test_view_mutation_matches_eager_and_torch(fn):
    def run(T, compile_):
        x, other = T.arange(4.0), T.ones(4)
        f = (lambda a, b: fn(T, a, b))
        out = T.compile(f)(x, other) if compile_ else f(x, other)
        return out.tolist(), x.tolist(), other.tolist()

    eager = run(ember, False)
    assert run(ember, True) == eager
    assert run(torch, True) == eager
