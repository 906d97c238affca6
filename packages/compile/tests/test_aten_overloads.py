"""``torch.ops.aten.<name>.<overload>`` over ember's ops: graph passes written against PyTorch's
ATen names find, compare, call and insert ember's graph targets (torch as the oracle)."""

from __future__ import annotations

import pickle

import pytest
import torch

import ember
from ember.compiler import make_fx


def _program(lib):
    def f(x):
        return lib.relu(x + 1).sum()
    return f


def _targets(lib, gm):
    aten = lib.ops.aten
    wanted = (aten.add.Tensor, aten.relu.default, aten.sum.default)
    return [[n.target == w for w in wanted] for n in gm.graph.nodes if n.op == "call_function"]


def test_graph_targets_compare_equal_to_aten_overloads_like_torch():
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    tgm = torch_make_fx(_program(torch))(torch.ones(3))
    egm = make_fx(_program(ember))(ember.ones(3))
    assert _targets(ember, egm) == _targets(torch, tgm)
    for lib, gm in ((torch, tgm), (ember, egm)):
        aten = lib.ops.aten
        assert [n.name for n in gm.graph.find_nodes(op="call_function", target=aten.relu.default)] == ["relu"]
        relu = next(n for n in gm.graph.nodes if n.name == "relu")
        assert {aten.relu.default: "r"}.get(relu.target) == "r"
        assert isinstance(relu.target, lib._ops.OpOverload)
        assert not isinstance(relu.target, lib._ops.OpOverloadPacket)


def test_aten_overloads_call_print_and_pickle_like_torch():
    for lib in (torch, ember):
        aten = lib.ops.aten
        assert str(aten.relu) == "aten.relu" and str(aten.relu.default) == "aten.relu.default"
        assert repr(aten.relu.default) == "<OpOverload(op='aten.relu', overload='default')>"
        assert aten.relu.default.name() == "aten::relu" and aten.add.Tensor.name() == "aten::add.Tensor"
        assert aten.relu.default.overloadpacket == aten.relu
        assert aten.add.Tensor != aten.relu.default
        assert aten.relu.default._schema is not None
        assert aten.relu.default(lib.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
        assert aten.relu(lib.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
        mm = aten.mm.default(lib.ones(2, 3), lib.ones(3, 2))
        assert mm.tolist() == [[3.0, 3.0], [3.0, 3.0]]
        with pytest.raises(AttributeError):
            aten.no_such_op_anywhere  # noqa: B018
    assert pickle.loads(pickle.dumps(ember.ops.aten.relu.default)) == ember.ops.aten.relu.default
