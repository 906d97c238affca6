"""Hostile inputs raise what PyTorch raises: the exception type and message a program sees
(test_hostile_inputs.py checks that nothing crashes; this file checks what is raised)."""

import math

import pytest
import torch

import ember


def outcome(lib, call):
    try:
        result = call(lib)
        return "ok", result.tolist() if hasattr(result, "tolist") else result
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return type(exc).__name__, str(exc)


def same_as_torch(call):
    assert outcome(ember, call) == outcome(torch, call)


@pytest.mark.parametrize("call", [
    lambda L: L.arange(0, 1e20),
    lambda L: L.arange(1e19),
    lambda L: L.arange(math.nan),
    lambda L: L.arange(0, math.inf),
    lambda L: L.arange(0.5, math.inf),
    lambda L: L.arange(-math.inf, 1),
    lambda L: L.arange(10, 0),
    lambda L: L.arange(0, 10, -1),
    lambda L: L.arange(0, 10, 0),
    lambda L: L.arange(0, 10, math.nan),
    lambda L: L.arange(0, 10, math.inf),
])
def test_arange_bad_ranges(call):
    same_as_torch(call)


@pytest.mark.parametrize("shapes", [((2, 3), (4,)), ((2, 3), (4, 3)), ((5, 2, 3), (2, 4)), ((3,), (2, 4)),
                                    ((2, 3), (3, 2)), ((4, 2, 3), (5, 1, 2))])  # several mismatches: the last dim's
@pytest.mark.parametrize("op", ["add", "mul", "where", "maximum", "lerp"])
def test_broadcast_mismatch_names_the_result_dim(shapes, op):
    def call(lib):
        a, b = (lib.ones(s) for s in shapes)
        if op == "lerp":
            return lib.lerp(a, b, 0.5)
        return lib.where(a > 0, a, b) if op == "where" else getattr(lib, op)(a, b)

    same_as_torch(call)


@pytest.mark.parametrize("shapes", [((2, 3), (3, 2)), ((4, 2, 3), (5, 1, 2)), ((3,), (2, 4)), ((2, 5, 3), (5, 4))])
@pytest.mark.parametrize("as_size", [False, True])
def test_broadcast_shapes_reports_the_last_mismatching_dim(shapes, as_size):
    def call(lib):
        return lib.broadcast_shapes(*(lib.Size(s) if as_size else s for s in shapes))

    kind, message = outcome(ember, call)
    assert (kind, message.replace("ember.Size", "torch.Size")) == outcome(torch, call)


@pytest.mark.parametrize("data", [
    None, [None], [1, None], "a", ["a"], {1: 2}, [[1], "a"], b"ab", [2**63], [-(2**63) - 1], 2**64, [True, 2**63],
    [[1, 2], [3]], [1, [2]], [1.5, [2]], [True, [1]], [[1, 2], 3], [1, (2,)], [[[1]], [2]], [[1], 2], range(3),
    [range(2), (3, 4)], [], [[]], [1.5, 2**70],
])
@pytest.mark.parametrize("dtype", [None, "int64", "uint8", "float32"])
def test_tensor_from_hostile_data(data, dtype):
    # The shape follows the first elements; anything that does not fit raises PyTorch's error.
    same_as_torch(lambda L: L.tensor(data, dtype=None if dtype is None else getattr(L, dtype)))


@pytest.mark.parametrize("call", [
    lambda L: L.tensor([True]) - True,
    lambda L: True - L.tensor([True]),
    lambda L: L.tensor([True]) - L.tensor([True]),
    lambda L: L.tensor([True]) - 1,
    lambda L: 1 - L.tensor([True]),
    lambda L: L.tensor([1]) - L.tensor([True]),
    lambda L: L.sub(L.tensor([True]), 1),
    lambda L: L.tensor([True]).sub_(1),
    lambda L: L.rsub(L.tensor([True]), 1),
])
def test_bool_subtraction_messages_match_torch(call):
    """Two bool operands: 'with two bool tensors ... logical_xor()'; one: 'with a bool tensor ...
    logical_not()' (a Python bool counts as a bool tensor)."""
    with pytest.raises(RuntimeError) as expected:
        call(torch)
    with pytest.raises(RuntimeError) as got:
        call(ember)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(4, 4)[::0],
    lambda L: L.zeros(4, 4)[:, ::0],
    lambda L: L.zeros(4, 4)[0, ::-1],
    lambda L: L.ones(3, dtype=L.int8).view(L.int32),
    lambda L: L.ones(5, dtype=L.float32).view(L.float64),
    lambda L: L.ones(2, 3, dtype=L.int16).view(L.float32),
])
def test_slice_step_and_dtype_view_messages(call):
    same_as_torch(call)


@pytest.mark.parametrize("call", [
    lambda L: L.ones(3)["a"],
    lambda L: L.ones(3, 3)[0, "b"],
    lambda L: L.ones(3)[b"a"],
    lambda L: L.ones(3)[1.5],
    lambda L: L.ones(3)[object()],
])
def test_non_index_subscripts_raise_as_torch(call):
    # a string is a TypeError (PyTorch reads it as data for a tensor), other objects IndexError
    kind, message = outcome(ember, call)
    want_kind, want_message = outcome(torch, call)
    assert kind == want_kind
    if kind == "TypeError":
        assert message == want_message


def _meta(lib, *shape):
    return lib.ones(*shape, device="meta")


def _device_outcome(lib, call):
    """Like outcome(), with a meta result reported by its device and shape (it has no values)."""
    try:
        result = call(lib)
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return type(exc).__name__, str(exc)
    return "ok", str(result.device), tuple(result.shape)


@pytest.mark.parametrize("call", [
    lambda L: _meta(L, 2) + L.ones(2),
    lambda L: L.ones(2) + _meta(L, 2),
    lambda L: _meta(L, 2) * L.tensor(3.0),  # a 0-d CPU tensor passes as a number
    lambda L: L.tensor(3.0) * _meta(L, 2),
    lambda L: _meta(L, 2) == L.ones(2),
    lambda L: L.maximum(_meta(L, 2), L.ones(2)),
    lambda L: L.where(_meta(L, 2) > 0, _meta(L, 2), L.ones(2)),
    lambda L: L.where(L.ones(2) > 0, _meta(L, 2), _meta(L, 2)),
    lambda L: L.lerp(_meta(L, 2), L.ones(2), 0.5),
    lambda L: L.addcmul(_meta(L, 2), L.ones(2), _meta(L, 2)),
    lambda L: L.cat([_meta(L, 2), L.ones(2)]),
    lambda L: L.cat([L.ones(2), _meta(L, 2)]),
    lambda L: _meta(L, 2).add_(L.ones(2)),  # PyTorch's meta add_/sub_/mul_/div_ do not check
    lambda L: _meta(L, 2).pow_(L.ones(2)),
    lambda L: _meta(L, 2).lerp_(L.ones(2), 0.5),
    lambda L: _meta(L, 2, 2) @ L.ones(2, 2),  # matmul does not check either
])
def test_meta_and_cpu_operands(call):
    """An op mixing meta and CPU tensors raises PyTorch's TensorIterator error, not a meta result."""
    assert _device_outcome(ember, call) == _device_outcome(torch, call)


@pytest.mark.parametrize("call", [
    lambda L: L.randint(0, 2**63, (3,)),
    lambda L: L.randint(2**63, (3,)),
    lambda L: L.randint(-2**63 - 1, 0, (3,)),
])
def test_randint_bounds_past_int64(call):
    """Bounds past int64 are the argument parser's ValueError (ember used to draw from them)."""
    with pytest.raises(ValueError) as expected:
        call(torch)
    with pytest.raises(ValueError) as got:
        call(ember)
    assert str(got.value) == str(expected.value)



@pytest.mark.parametrize("call", [
    # Python ints beyond int64 (session 14's hostile programs): PyTorch's parser refuses them first
    lambda L: L.zeros(10)[2 ** 64],
    lambda L: L.zeros(10)[-2 ** 63 - 1],
    lambda L: L.zeros(3, 3)[0, 2 ** 63],
    lambda L: L.zeros(10).select(0, 2 ** 64),
    lambda L: L.zeros(10).narrow(0, 2 ** 64, 1),
    lambda L: L.randperm(2 ** 63),
    lambda L: L.zeros(10)[2 ** 62],
    # sizes whose storage overflows, impossible unflatten sizes, an empty lookup table
    lambda L: L.ones(2).repeat(2 ** 31, 2 ** 31),
    lambda L: L.ones(6).unflatten(0, (4, -1)),
    lambda L: L.ones(2, 6).unflatten(1, (4, 2)),
    lambda L: tuple(L.ones(2, 6).unflatten(1, (3, -1)).shape),
    lambda L: L.nn.functional.embedding(L.tensor([0]), L.empty(0, 3)),
    lambda L: tuple(L.nn.functional.embedding(L.tensor([], dtype=L.long), L.empty(0, 3)).shape),
    lambda L: L.nn.functional.interpolate(L.ones(1, 1, 4), scale_factor=0.0),
    lambda L: L.nn.functional.interpolate(L.ones(1, 1, 4, 4), scale_factor=0.0),
    lambda L: L.zeros(3).scatter_(0, L.tensor([0.0]), 1.0),
    lambda L: L.zeros(3).scatter_add(0, L.tensor([0.0]), L.ones(1)),
])
def test_int64_overflow_and_size_errors(call):
    same_as_torch(call)
