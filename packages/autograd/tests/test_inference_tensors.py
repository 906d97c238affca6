"""Inference tensors (made under ``inference_mode``) outside inference mode, as in PyTorch: they
can be read, but not written in place, not saved for backward, not made to require grad, and
they have no version counter. Every case runs on PyTorch too and must raise (or not) alike."""

import pytest

import ember

torch = pytest.importorskip("torch")


def _inference(lib):
    with lib.inference_mode():  # (no module where ember-nn is absent: autograd tested alone)
        return lib.ones(3), (lib.nn.Linear(3, 3) if hasattr(lib, "nn") else None)


def _outcome(fn):
    try:
        fn()
    except RuntimeError as err:
        return str(err)
    return "ok"


def _save_through_custom_function(lib, x):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            (b,) = ctx.saved_tensors
            return g * b, None

    return Scale.apply(lib.ones(3, requires_grad=True), x)


def _setitem(x):
    x[0] = 2.0


CASES = {
    "mul saves it": lambda lib, x, m: (x * lib.ones(3, requires_grad=True)).sum().backward(),
    "add saves nothing": lambda lib, x, m: (x + lib.ones(3, requires_grad=True)).sum().backward(),
    "matmul saves it": lambda lib, x, m: (x.view(1, 3) @ lib.ones(3, 1, requires_grad=True)).sum(),
    "module made in inference mode": lambda lib, x, m: m(lib.ones(2, 3, requires_grad=True)).sum(),
    "custom function saves it": lambda lib, x, m: _save_through_custom_function(lib, x),
    "requires_grad_": lambda lib, x, m: x.requires_grad_(),
    "_version": lambda lib, x, m: x._version,
    "add_": lambda lib, x, m: x.add_(1),
    "mul_ under no_grad": lambda lib, x, m: _under(lib.no_grad(), lambda: x.mul_(2)),
    "zero_": lambda lib, x, m: x.zero_(),
    "copy_": lambda lib, x, m: x.copy_(lib.zeros(3)),
    "setitem": lambda lib, x, m: _setitem(x),
    "relu_": lambda lib, x, m: lib.relu_(x),
    "uniform_": lambda lib, x, m: x.uniform_(),
    "out=": lambda lib, x, m: lib.add(lib.ones(3), 1, out=x),
    "read into a normal tensor": lambda lib, x, m: lib.zeros(3).copy_(x),
    "view": lambda lib, x, m: x.view(3, 1).sum(),
    "add_ inside inference mode": lambda lib, x, m: _under(lib.inference_mode(), lambda: x.add_(1)),
}


def _under(context, fn):
    with context:
        return fn()


@pytest.mark.parametrize("case", sorted(CASES))
def test_like_pytorch(case):
    if case == "module made in inference mode":
        pytest.importorskip("ember.nn")
    theirs = _outcome(lambda: CASES[case](torch, *_inference(torch)))
    ours = _outcome(lambda: CASES[case](ember, *_inference(ember)))
    assert ours == theirs


def test_the_errors_are_raised():
    x, _ = _inference(ember)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        ember.sigmoid(x * ember.ones(3, requires_grad=True)).sum().backward()
    assert x.tolist() == [1.0, 1.0, 1.0]  # the refused write changed nothing


def test_a_clone_is_a_normal_tensor():
    x, _ = _inference(ember)
    y = x.clone()
    assert not y.is_inference()
    y.add_(1).requires_grad_()
    (y * y).sum().backward()
    assert y.grad.tolist() == [4.0, 4.0, 4.0]
