"""The __torch_function__ protocol (ember.overrides), with PyTorch as the oracle.

Each case runs one program on both libraries. Defining a Tensor subclass switches the protocol on for
the process (ember/_src/torch_function.py), so these tests run it switched on, as programs that use
it do; test_switch_is_off_in_a_fresh_process checks the default.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import pytest

import ember

torch = pytest.importorskip("torch")


def _logging_subclass(lib, log):
    class Logged(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            log.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs)

    return Logged


def _program(lib, Logged):
    x = lib.arange(12.0).reshape(3, 4).as_subclass(Logged)
    y = x + 1
    y = y * x
    z = lib.nn.functional.relu(y - 20)
    s = z.sum(0)
    r = s[1:]
    m = x @ x.t()
    w = lib.cat([r, r])
    return [y, z, s, r, m, w, x.T]


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_subclass_type_propagates(lib_name):
    lib = ember if lib_name == "ember" else torch
    log = []
    outs = _program(lib, _logging_subclass(lib, log))
    assert all(type(o).__name__ == "Logged" for o in outs)


def test_logged_function_names_match_torch():
    logs = {}
    values = {}
    for lib in (ember, torch):
        log = []
        outs = _program(lib, _logging_subclass(lib, log))
        logs[lib] = log
        values[lib] = [o.tolist() for o in outs]
    assert logs[ember] == logs[torch]
    assert values[ember] == values[torch]


def test_native_readers_reach_the_handler_as_in_torch():
    # shape/ndim are _C.TensorBase getters and numel/nelement/is_contiguous/data_ptr its methods: the gate
    # still puts the protocol in front of them (Tensor's attributes), with PyTorch's function names.
    logs, values = {}, {}
    for lib in (ember, torch):
        log = []
        x = lib.ones(2, 3).as_subclass(_logging_subclass(lib, log))
        values[lib] = [tuple(x.shape), x.ndim, x.numel(), x.nelement(), x.is_contiguous(), x.data_ptr() != 0]
        logs[lib] = log
    assert logs[ember] == logs[torch] == ["__get__", "__get__", "numel", "numel", "is_contiguous", "data_ptr"]
    assert values[ember] == values[torch]


def test_plain_subclass_keeps_its_type_and_parameter_does_not():
    class MyT(ember.Tensor):
        pass

    x = ember.ones(2, 3).as_subclass(MyT)
    assert type(x + 1) is MyT and type(x.sum()) is MyT and type(ember.exp(x)) is MyT
    assert type(x.max(1).values) is MyT
    assert all(type(t) is MyT for t in x.split(1))
    p = ember.nn.Parameter(ember.ones(2))
    assert type(p * 2) is ember.Tensor  # _disabled_torch_function_impl, as torch.nn.Parameter


def test_disable_torch_function_subclass():
    for lib in (ember, torch):
        log = []
        Logged = _logging_subclass(lib, log)
        x = lib.ones(2).as_subclass(Logged)
        with lib._C.DisableTorchFunctionSubclass():
            y = lib.add(x, 1)
            assert not lib._C._is_torch_function_enabled()
        assert log == [] and type(y) is lib.Tensor  # no handler ran, so nothing converted the result
        assert lib._C._is_torch_function_enabled()


def _scalar_tensor(lib):
    """The tensor-like of PyTorch's "Extending torch" docs."""
    handled = {}

    class ScalarTensor:
        def __init__(self, n, value):
            self._n, self._value = n, value

        def tensor(self):
            return self._value * lib.eye(self._n)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            if func not in handled or not all(issubclass(t, (lib.Tensor, ScalarTensor)) for t in types):
                return NotImplemented
            return handled[func](*args, **kwargs)

    def implements(torch_function):
        def decorator(func):
            functools.update_wrapper(func, torch_function)
            handled[torch_function] = func
            return func

        return decorator

    @implements(lib.mean)
    def mean(input):
        return float(input._value) / input._n

    @implements(lib.add)
    def add(input, other):
        if isinstance(input, ScalarTensor) and isinstance(other, ScalarTensor) and input._n == other._n:
            return ScalarTensor(input._n, input._value + other._value)
        return lib.add(input.tensor() if isinstance(input, ScalarTensor) else input,
                       other.tensor() if isinstance(other, ScalarTensor) else other)

    return ScalarTensor


def test_tensor_like_from_the_docs():
    import ember.overrides  # noqa: F401  (switches the protocol on: see the module docstring)

    results = {}
    for lib in (ember, torch):
        ScalarTensor = _scalar_tensor(lib)
        d = ScalarTensor(5, 2)
        mixed = lib.add(d, lib.ones(5, 5))
        both = lib.add(d, d)
        with pytest.raises(TypeError, match="Multiple dispatch failed for '(torch|ember).sum'"):
            lib.sum(d)
        results[lib] = (lib.mean(d), mixed.tolist(), both._value)
    assert results[ember] == results[torch]


def test_not_implemented_everywhere_is_type_error():
    for lib in (ember, torch):
        class Refuses(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                return NotImplemented

        x = lib.ones(2).as_subclass(Refuses)
        with pytest.raises(TypeError, match="Multiple dispatch failed for '(torch|ember).exp'; all __torch_fun"):
            lib.exp(x)
        with pytest.raises(TypeError):
            x + x


def test_torch_function_mode_stacks():
    import ember.overrides  # noqa: F401  (ember.overrides is an attribute once imported: deviations.md)

    for lib in (ember, torch):
        seen = []

        class Outer(lib.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(("outer", func.__name__))  # noqa: B023
                return func(*args, **(kwargs or {}))

        class Inner(lib.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(("inner", func.__name__))  # noqa: B023
                if func.__name__ == "neg":
                    return "intercepted"
                return func(*args, **(kwargs or {}))

        x = lib.ones(2)
        with Outer(), Inner():
            assert lib.neg(x) == "intercepted"
            y = lib.add(x, x)
        assert y.tolist() == [2.0, 2.0]
        assert seen == [("inner", "neg"), ("inner", "add"), ("outer", "add")], lib
        assert not lib.overrides.has_torch_function((x,))


def test_overrides_helpers():
    import ember.overrides  # noqa: F401  (ember.overrides is an attribute once imported: deviations.md)

    for lib in (ember, torch):
        class MyT(lib.Tensor):
            pass

        x = lib.ones(2)
        sub = x.as_subclass(MyT)
        assert not lib.overrides.has_torch_function_unary(x)
        assert lib.overrides.has_torch_function_unary(sub)
        assert lib.overrides.has_torch_function_variadic(x, sub)
        assert lib.overrides.is_tensor_like(x) and lib.overrides.is_tensor_like(sub)
        assert not lib.overrides.is_tensor_like(1.0)
        p = lib.nn.Parameter(lib.ones(1))
        assert not lib.overrides.has_torch_function((p,))


def test_autograd_through_a_subclass():
    grads = {}
    for lib in (ember, torch):
        log = []
        Logged = _logging_subclass(lib, log)
        w = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        x = w.as_subclass(Logged)
        assert x.requires_grad and x.grad_fn is not None
        loss = (lib.nn.functional.relu(x * x - 2) * 3).sum()
        assert type(loss) is Logged
        loss.backward()
        grads[lib] = w.grad.tolist()
    assert grads[ember] == grads[torch]


def test_switch_is_off_in_a_fresh_process():
    code = ("import ember, ember.nn.functional as F; from ember._src import torch_function as tf; "
            "x = ember.ones(2); F.relu(x); p = ember.nn.Parameter(x); "
            "assert not tf.is_enabled(); assert type(ember.add).__name__ == 'FastFront'")
    subprocess.run([sys.executable, "-c", code], check=True)
