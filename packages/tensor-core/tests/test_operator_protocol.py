"""Tensor's Python operators follow the operator protocol as PyTorch's do: an operand the op
cannot take gives NotImplemented (not TypeError), so Python tries the other operand's reflected
method, and raises its own "unsupported operand" error when nobody answers."""

import operator

import pytest

import ember

torch = pytest.importorskip("torch")

BINARY = [
    ("add", operator.add), ("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
    ("floordiv", operator.floordiv), ("mod", operator.mod), ("pow", operator.pow), ("matmul", operator.matmul),
    ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor), ("lshift", operator.lshift),
    ("rshift", operator.rshift),
]
INPLACE = [
    ("add", operator.iadd), ("sub", operator.isub), ("mul", operator.imul), ("truediv", operator.itruediv),
    ("pow", operator.ipow), ("and", operator.iand), ("or", operator.ior),
]


class Reflects:
    """Answers every reflected operator with its name (methods set below)."""


for _name, _ in BINARY:
    setattr(Reflects, f"__r{_name}__", (lambda n: lambda self, other: f"__r{n}__")(_name))
Reflects.__gt__ = lambda self, other: "__gt__"  # the reflection of <


def _tensor(lib, name):
    dtype = lib.int64 if name in ("and", "or", "xor", "lshift", "rshift") else lib.float32
    return lib.ones(2, dtype=dtype)


@pytest.mark.parametrize("name,op", BINARY)
def test_the_other_operands_reflected_method_answers(name, op):
    assert op(_tensor(ember, name), Reflects()) == op(_tensor(torch, name), Reflects()) == f"__r{name}__"


@pytest.mark.parametrize("name,op", INPLACE)
def test_inplace_operator_falls_back_to_the_reflected_method(name, op):
    assert op(_tensor(ember, name), Reflects()) == op(_tensor(torch, name), Reflects()) == f"__r{name}__"


def test_comparison_reflects():
    assert (ember.ones(2) < Reflects()) == (torch.ones(2) < Reflects()) == "__gt__"


@pytest.mark.parametrize("other", [object(), "a", None, [1.0, 2.0], {1: 2}])
@pytest.mark.parametrize("name,op", BINARY)
def test_unsupported_operand_raises_pythons_type_error(name, op, other):
    with pytest.raises(TypeError) as theirs:
        op(_tensor(torch, name), other)
    with pytest.raises(TypeError) as ours:
        op(_tensor(ember, name), other)
    assert str(ours.value).replace("Tensor", "T") == str(theirs.value).replace("Tensor", "T")


def test_dunder_called_directly_returns_not_implemented():
    t = ember.ones(2)
    assert t.__add__(object()) is NotImplemented
    assert t.__iadd__(object()) is NotImplemented
    assert t.__radd__("a") is NotImplemented
    assert torch.ones(2).__add__(object()) is NotImplemented


def test_functions_still_raise_type_error():
    with pytest.raises(TypeError, match="add"):
        ember.add(ember.ones(2), object())
    with pytest.raises(TypeError):
        ember.ones(2).add(object())


def test_operators_still_compute_and_raise_runtime_errors():
    a = ember.tensor([1.0, 2.0])
    assert (a + 1).tolist() == [2.0, 3.0]
    assert (2 - a).tolist() == [1.0, 0.0]
    assert (a @ a).item() == 5.0
    with pytest.raises(RuntimeError):
        a + ember.ones(3)  # shape mismatch stays a RuntimeError
    b = ember.tensor([1, 2])
    with pytest.raises(RuntimeError):
        b += 1.5  # result type float can't be cast to long
