"""``ember.utils._pytree`` against ``torch.utils._pytree`` (tests/programs/pytree_program.py runs
a longer program through both), and its registry shared with ``ember.export``."""

from __future__ import annotations

import collections
import dataclasses
import io

import pytest
import torch
import torch.utils._pytree as tp

import ember
import ember.utils._pytree as ep

NT = collections.namedtuple("NT", "x y")
TREES = [None, 1, [], {}, (1, [2, {"b": 3, "a": None}]), collections.OrderedDict(z=1, a=[2]), NT(1, (2, 3)),
         collections.defaultdict(list, {"k": [1, 2]}), collections.deque([1, 2], maxlen=4), [[], ((),)]]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_unflatten_and_specs_match_torch(tree):
    (el, es), (tl, ts) = ep.tree_flatten(tree), tp.tree_flatten(tree)
    assert el == tl and repr(es) == repr(ts)
    assert (es.num_leaves, es.num_nodes, es.num_children, es.is_leaf()) == (
        ts.num_leaves, ts.num_nodes, ts.num_children, ts.is_leaf())
    assert ep.tree_unflatten(el, es) == tree
    assert [ep.keystr(k) for k, _ in ep.tree_leaves_with_path(tree)] == [
        tp.keystr(k) for k, _ in tp.tree_leaves_with_path(tree)]
    if isinstance(tree, NT):  # an unnamed namedtuple class cannot be serialized
        with pytest.raises(NotImplementedError, match="_register_namedtuple"):
            ep.treespec_dumps(es)
        return
    assert ep.treespec_dumps(es) == tp.treespec_dumps(ts)
    assert ep.treespec_loads(ep.treespec_dumps(es)) == es


def test_named_namedtuple_serializes_as_torch():
    named = collections.namedtuple("Named", "a b")
    tp._register_namedtuple(named, serialized_type_name="test_pytree.Named")
    ep._register_namedtuple(named, serialized_type_name="test_pytree.Named")
    text = ep.treespec_dumps(ep.tree_structure(named(1, [2])))
    assert text == tp.treespec_dumps(tp.tree_structure(named(1, [2])))
    assert ep.treespec_loads(text) == ep.tree_structure(named(3, [4]))


def test_map_variants_and_errors_match_torch():
    for mod in (ep, tp):
        assert mod.tree_map(lambda a, b: a * b, (1, [2]), (3, [4])) == (3, [8])
        assert mod.tree_map_only(int, lambda v: -v, (1, 2.0, "s")) == (-1, 2.0, "s")
        assert mod.tree_all_only(int, lambda v: v > 0, (1, "s")) and not mod.tree_any(lambda v: v > 5, [1, {"a": 2}])
    for bad in [((1, 2), (1, 2, 3)), ((1, 2), [1, 2]), ({"a": 1}, {"b": 2})]:
        msgs = []
        for mod in (tp, ep):
            with pytest.raises(ValueError) as err:
                mod.tree_map(lambda a, b: a, *bad)
            msgs.append(str(err.value))
        assert msgs[0] == msgs[1]


def test_tensors_are_leaves_and_structseqs_are_nodes():
    t = ember.arange(3.0)
    assert ep.tree_leaves({"w": t, "n": [t]})[0] is t
    assert repr(ep.tree_structure(ember.max(ember.ones(2, 2), 0))) == repr(
        tp.tree_structure(torch.max(torch.ones(2, 2), 0)))


@dataclasses.dataclass
class _Inputs:
    x: ember.Tensor
    y: ember.Tensor


class _Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


def test_a_type_registered_here_is_a_container_for_export():
    pytest.importorskip("ember.export", reason="ember-export is above ember-nn")
    # one registry: torch.utils._pytree.register_pytree_node is how libraries add their types,
    # and export must then flatten them (and save them by their serialized name)
    ep.register_pytree_node(_Pair, lambda p: ([p.a, p.b], None), lambda v, c: _Pair(*v),
                            serialized_type_name="test_pytree._Pair")
    ep.register_dataclass(_Inputs, serialized_type_name="test_pytree._Inputs")
    try:
        class M(ember.nn.Module):
            def forward(self, pair, inputs):
                return pair.a * 2 + pair.b + inputs.x - inputs.y

        args = (_Pair(ember.ones(2), ember.arange(2.0)), _Inputs(ember.ones(2), ember.zeros(2)))
        prog = ember.export.export(M(), args)
        assert len(prog.graph_signature.user_inputs) == 4
        buf = io.BytesIO()
        ember.export.save(prog, buf)
        buf.seek(0)
        loaded = ember.export.load(buf)
        assert loaded.module()(*args).tolist() == [3.0, 4.0]
    finally:
        ep._deregister_pytree_node(_Pair)
        ep._deregister_pytree_node(_Inputs)


def test_register_twice_raises_as_torch():
    with pytest.raises(ValueError, match="already registered"):
        ep.register_pytree_node(tuple, lambda t: (list(t), None), lambda v, c: tuple(v))
