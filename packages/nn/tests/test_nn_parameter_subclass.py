"""``isinstance(t, nn.Parameter)`` for a tensor of another subclass flagged ``_is_param`` (what
``nn.Parameter(dtensor)`` gives in PyTorch): True, while its type stays its own; PyTorch as oracle."""

from __future__ import annotations

import pytest

import ember


def _flagged(lib):
    class Custom(lib.Tensor):
        pass

    t = lib.ones(2).as_subclass(Custom)
    t._is_param = True
    return t


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_flagged_subclass_is_a_parameter_to_isinstance_and_modules(lib_name):
    lib = pytest.importorskip(lib_name) if lib_name == "torch" else ember
    t = _flagged(lib)
    module = lib.nn.Module()
    module.w = t
    got = [isinstance(t, lib.nn.Parameter), type(t).__name__, issubclass(type(t), lib.nn.Parameter),
           [name for name, _ in module.named_parameters()], isinstance(lib.ones(1), lib.nn.Parameter),
           isinstance(lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter)]
    assert got == [True, "Custom", False, ["w"], False, True]
