"""The dispatcher's native fast path (csrc/common/fast_dispatch.cpp) against the Python path and
PyTorch: the same values, dtypes, shapes and exceptions over dtypes, broadcasting and scalars."""

import itertools

import numpy as np
import pytest
import torch

import ember
from ember._src import dispatch
from ember._src.ops.pointwise import elementwise as pw


class _PassThrough(dispatch.DispatchMode):
    """Entering any mode sends calls through the Python dispatcher (the reference path)."""


def _python_path(fn):
    with _PassThrough():
        return fn()


DTYPES = ["float32", "float64", "int64", "int32", "int16", "uint8", "bool", "float16"]
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,)), ((0, 3), (3,))]
BINARY = sorted(pw._NATIVE_BINARY)


def _make(lib, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        data = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.startswith(("int", "uint")):
        data = rng.integers(1, 9, size=shape).astype(dtype)
    else:
        data = (rng.random(size=shape) * 4 + 0.5).astype(dtype)
    return lib.tensor(data) if lib is ember else torch.from_numpy(np.ascontiguousarray(data))


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - the exception type is what is compared
        return type(e)
    return r


def _check_same(ours, ref, theirs=None):
    if isinstance(ours, type) or isinstance(ref, type):
        assert ours is ref, (ours, ref)
        return
    assert ours.dtype is ref.dtype and ours.shape == ref.shape
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    if theirs is not None and not isinstance(theirs, type):
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_tensors_agree(name, dtype):
    op = getattr(pw, f"{name}_op")
    tfn = getattr(torch, name)
    for k, (sa, sb) in enumerate(SHAPES):
        a, b = _make(ember, sa, dtype, k), _make(ember, sb, dtype, k + 10)
        ta, tb = _make(torch, sa, dtype, k), _make(torch, sb, dtype, k + 10)
        fast = _outcome(lambda a=a, b=b: op(a, b))
        slow = _outcome(lambda a=a, b=b: _python_path(lambda: op(a, b)))
        theirs = _outcome(lambda ta=ta, tb=tb: tfn(ta, tb))
        _check_same(fast, slow, theirs if name != "sub" or dtype != "bool" else None)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8"])
def test_binary_scalars_agree(name, dtype):
    op = getattr(pw, f"{name}_op")
    a = _make(ember, (2, 3), dtype, 1)
    for scalar in (3, -2, 2.5, True, 2**40, 2**70, 1 + 2j):
        for args in ((a, scalar), (scalar, a)):
            fast = _outcome(lambda args=args: op(*args))
            slow = _outcome(lambda args=args: _python_path(lambda: op(*args)))
            _check_same(fast, slow)


def test_mixed_dtypes_and_devices_fall_back():
    a = ember.ones(3, dtype=ember.float32)
    b = ember.ones(3, dtype=ember.int64)
    assert (a + b).dtype is ember.float32
    assert (b / b).dtype is ember.float32  # integer division promotes
    assert (b + 0.5).dtype is ember.float32
    m = ember.ones(3, device="meta")
    assert (m + m).device.type == "meta"


def test_shape_mismatch_raises_the_python_error():
    a, b = ember.ones(3), ember.ones(4)
    with pytest.raises(RuntimeError) as fast:
        a + b
    with pytest.raises(RuntimeError) as slow:
        _python_path(lambda: pw.add_op(a, b))
    assert str(fast.value) == str(slow.value)


@pytest.mark.parametrize("name", sorted(pw._NATIVE_UNARY))
def test_unary_agrees(name):
    op = pw.UNARY_OPS[name][0] if name in pw.UNARY_OPS else getattr(pw, f"{name}_op")
    for dtype, shape in itertools.product(["float32", "float64", "int64"], [(3, 4), (), (0,)]):
        a = _make(ember, shape, dtype, 3)
        fast = _outcome(lambda a=a: op(a))
        slow = _outcome(lambda a=a: _python_path(lambda: op(a)))
        _check_same(fast, slow)


def test_non_contiguous_and_offset_views():
    base = ember.arange(24.0).reshape(4, 6)
    v = base[1:, ::2].t()
    np.testing.assert_array_equal((v * v).numpy(), v.numpy() ** 2)
    np.testing.assert_allclose(v.exp().numpy(), np.exp(v.numpy()), rtol=1e-6, atol=1e-6)


def test_grad_and_subclasses_take_the_python_path():
    w = ember.ones(2, requires_grad=True)
    y = w * 3
    assert y.grad_fn is not None
    with ember.no_grad():
        assert (w * 3).grad_fn is None

    class Sub(ember.Tensor):
        pass

    s = ember.ones(2).as_subclass(Sub)
    assert isinstance(s + s, ember.Tensor)


def test_inference_mode_results_are_inference_tensors():
    a = ember.ones(2)
    with ember.inference_mode():
        r = a + a
    assert r.is_inference()
    assert not (a + a).is_inference()


def test_a_replaced_kernel_still_sees_modes():
    seen = []

    class Recorder(dispatch.DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    a = ember.ones(2)
    with Recorder():
        a + a
        a.exp()
    assert seen == ["add", "exp"]
