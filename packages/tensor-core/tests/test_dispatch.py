"""Dispatch modes: a recording mode sees every op of a small program run on meta tensors."""

from __future__ import annotations

import pytest

import ember
from ember._src.dispatch import DispatchMode, active_modes


class Recorder(DispatchMode):
    def __init__(self):
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append(func.name)
        return func(*args, **(kwargs or {}))


def test_records_program_on_meta():
    x = ember.empty(4, 8, device="meta")
    w = ember.empty(8, device="meta")
    with Recorder() as rec:
        y = x * w
        y = ember.exp(y) + 1.0
        z = y.transpose(0, 1)
        z = ember.where(z > 0, z, 0.0)
        z.add_(2)
    assert rec.calls == ["mul", "exp", "add", "transpose", "gt", "where", "add_"]
    assert z.device.type == "meta" and z.shape == (8, 4) and z.dtype is ember.float32
    assert active_modes() == ()


def test_nested_modes_see_calls_in_order():
    outer, inner = Recorder(), Recorder()
    x = ember.ones(3)
    with outer:
        with inner:
            ember.neg(x)
        ember.sqrt(x)
    assert inner.calls == ["neg"]
    assert outer.calls == ["neg", "sqrt"]


def test_mode_can_replace_result():
    class Zeroing(DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            return ember.zeros_like(out) if func.name == "exp" else out

    with Zeroing():
        assert ember.exp(ember.ones(2)).tolist() == [0.0, 0.0]
    assert ember.exp(ember.zeros(1)).tolist() == [1.0]


def test_modes_must_exit_in_order():
    a, b = Recorder(), Recorder()
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError):
        a.__exit__(None, None, None)
    # restore a clean stack
    from ember._src import dispatch

    dispatch._MODES.stack.clear()
    assert active_modes() == ()


def test_meta_kernels_exist_for_pointwise_ops():
    missing = [name for name, op in ember.ops.items() if "pointwise" in op.tags and "meta" not in op.kernels]
    assert missing == []
