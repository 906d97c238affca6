"""ember's one pytree (``ember.autograd._pytree``) against ``torch.utils._pytree`` 2.13: flatten
orders, specs (repr, equality, hash, children), registration errors, key paths, the JSON form, the
prefix broadcasting vmap uses; and that ember.func, ember.utils._pytree and the registry are one."""

from __future__ import annotations

import collections
import dataclasses
import re
import warnings

import pytest
import torch
import torch.utils._pytree as tp

import ember
import ember.autograd._pytree as ep

NT = collections.namedtuple("NT", "x y")
TREES = [
    None, 1.5, "s", [], (), {}, (1, [2, {"b": 3, "a": None}]), collections.OrderedDict(z=1, a=[2]),
    NT(1, (2, 3)), [NT(1, 2), NT(3, {"q": 4})], collections.defaultdict(list, {"k": [1, 2]}),
    collections.deque([1, (2, 3)], maxlen=4), collections.deque([1]), [[], ((),), {"e": {}}],
    {1: "int key", "s": (None,)},
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_order_spec_and_round_trip_match_torch(tree):
    (el, es), (tl, ts) = ep.tree_flatten(tree), tp.tree_flatten(tree)
    assert el == tl
    assert repr(es) == repr(ts)
    assert (es.num_leaves, es.num_nodes, es.num_children, es.is_leaf()) == (
        ts.num_leaves, ts.num_nodes, ts.num_children, ts.is_leaf())
    assert str(es.type) == str(ts.type) and es.context == ts.context
    assert [repr(c) for c in es.children()] == [repr(c) for c in ts.children()]
    rebuilt = ep.tree_unflatten(el, es)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    assert ep.tree_leaves(tree) == tp.tree_leaves(tree) == list(ep.tree_iter(tree))
    assert [(ep.keystr(k), v) for k, v in ep.tree_flatten_with_path(tree)[0]] == [
        (tp.keystr(k), v) for k, v in tp.tree_flatten_with_path(tree)[0]]
    assert ep.treespec_pprint(es) == tp.treespec_pprint(ts)


def test_namedtuples_share_torchs_node_type_and_structseqs_are_their_own():
    assert ep.tree_structure(NT(1, 2)).type is collections.namedtuple is tp.tree_structure(NT(1, 2)).type
    assert ep.tree_structure(NT(1, 2)).context is NT
    em, tm = ember.max(ember.ones(2, 2), 0), torch.max(torch.ones(2, 2), 0)
    assert repr(ep.tree_structure(em)) == repr(tp.tree_structure(tm))
    assert ep.tree_unflatten(ep.tree_leaves(em), ep.tree_structure(em)).indices is em.indices


EQUALITY_PAIRS = [
    ((1, 2), (3, 4)), ((1, 2), [1, 2]), ({"a": 1, "b": 2}, {"b": 1, "a": 2}), ({"a": 1}, collections.OrderedDict(a=1)),
    (NT(1, 2), (1, 2)), (NT(1, 2), NT(5, [6])), (collections.deque([1], maxlen=2), collections.deque([1], maxlen=3)),
    ([None], [1]), ({"a": [1]}, {"a": [1, 2]}),
]


@pytest.mark.parametrize("pair", EQUALITY_PAIRS, ids=range(len(EQUALITY_PAIRS)))
def test_spec_equality_and_hash_match_torch(pair):
    a, b = pair
    assert (ep.tree_structure(a) == ep.tree_structure(b)) == (tp.tree_structure(a) == tp.tree_structure(b))
    assert (ep.tree_structure(a) != ep.tree_structure(b)) == (tp.tree_structure(a) != tp.tree_structure(b))
    if ep.tree_structure(a) == ep.tree_structure(b):
        assert hash(ep.tree_structure(a)) == hash(ep.tree_structure(b))


def test_spec_accessors_and_constructors_match_torch():
    es, ts = ep.tree_structure(((1, 2), {"k": 3})), tp.tree_structure(((1, 2), {"k": 3}))
    assert repr(es.child(1)) == repr(ts.child(1)) and len(es.children()) == len(ts.children()) == 2
    with pytest.warns(FutureWarning, match="children_specs` is deprecated"):
        assert es.children_specs == es.children()
    assert ep.treespec_leaf() == ep.LeafSpec() and tp.treespec_leaf() == tp.LeafSpec()
    assert repr(ep.treespec_tuple([ep.treespec_leaf()] * 2)) == repr(tp.treespec_tuple([tp.treespec_leaf()] * 2))
    assert repr(ep.treespec_dict(a=ep.treespec_leaf())) == repr(tp.treespec_dict(a=tp.treespec_leaf()))
    with pytest.raises(AssertionError, match="leaf node should not have children"):
        ep.TreeSpec(None, None, [ep.treespec_leaf()])


def test_unflatten_and_flatten_up_to_errors_match_torch():
    messages = []
    for mod in (ep, tp):
        spec = mod.tree_structure(((1, 2), {"k": 3}))
        with pytest.raises(ValueError) as err:
            mod.tree_unflatten([1], spec)
        messages.append(str(err.value))
        with pytest.raises(TypeError) as err:
            mod.tree_unflatten([1], [1])
        messages.append(str(err.value))
        for bad in [((1, 2), [5]), ((1, 2, 3), {"k": 3}), ((1, 2), {"j": 3}), [(1, 2), {"k": 3}],
                    ((1, 2), collections.deque([3]))]:
            with pytest.raises(ValueError) as err:
                spec.flatten_up_to(bad)
            messages.append(str(err.value))
        messages.append(spec.flatten_up_to(((1, [2]), collections.OrderedDict(k={"deep": 3}))))
    half = len(messages) // 2
    assert messages[:half] == messages[half:]


def test_maps_over_several_trees_match_torch():
    for mod in (ep, tp):
        assert mod.tree_map(lambda a, b: a * b, (1, [2]), (3, [4])) == (3, [8])
        assert mod.tree_map(lambda a, b: (a, b), {"b": 1, "a": 2}, {"a": 3, "b": 4}) == {"b": (1, 4), "a": (2, 3)}
        assert mod.tree_map_only((int, float), lambda v: -v, (1, 2.0, "s", [3])) == (-1, -2.0, "s", [-3])
        x = [1, [2]]
        assert mod.tree_map_(lambda v: None, x) is x
        assert mod.tree_map_with_path(lambda kp, v, m=mod: m.keystr(kp), {"a": [1], "n": NT(2, 3)}) == {
            "a": ["['a'][0]"], "n": NT("['n'].x", "['n'].y")}
        pair_is_leaf = lambda v: isinstance(v, list) and len(v) == 2  # noqa: E731
        assert mod.tree_flatten([1, [2, 3], 4], is_leaf=pair_is_leaf)[0] == [1, [2, 3], 4]


class _Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return isinstance(other, _Point) and (self.x, self.y) == (other.x, other.y)


@pytest.fixture
def point_registered():
    for mod in (ep, tp):
        mod.register_pytree_node(_Point, lambda p: ([p.x, p.y], None), lambda v, c: _Point(*v),
                                 serialized_type_name="test_autograd_pytree._Point")
    yield
    for mod in (ep, tp):
        mod._deregister_pytree_node(_Point)


def test_registration_duplicates_keys_and_dumps_match_torch(point_registered):
    tree = [_Point(1, {"a": 2}), 3]
    (el, es), (tl, ts) = ep.tree_flatten(tree), tp.tree_flatten(tree)
    assert el == tl and repr(es) == repr(ts) and ep.tree_unflatten(el, es) == tree
    assert ep.treespec_dumps(es) == tp.treespec_dumps(ts)
    assert ep.treespec_loads(ep.treespec_dumps(es)) == es
    messages = []
    for mod in (ep, tp):
        with pytest.raises(ValueError) as err:
            mod.register_pytree_node(_Point, lambda p: ([], None), lambda v, c: None)
        messages.append(str(err.value))
        with pytest.raises(ValueError) as err:  # registered without flatten_with_keys_fn
            mod.tree_flatten_with_path(tree)
        messages.append(str(err.value))
        with pytest.raises(ValueError) as err:
            mod.tree_structure(_Point(1, 2)).flatten_up_to((1, 2))
        messages.append(str(err.value))
    assert messages[:3] == messages[3:]
    assert "already registered as pytree node" in messages[0]


def test_unregistered_and_unnamed_types_fail_to_serialize_as_torch():
    class Unnamed:
        pass

    results = []
    for mod in (ep, tp):
        mod.register_pytree_node(Unnamed, lambda u: ([], None), lambda v, c: Unnamed())
        try:
            for spec in (mod.tree_structure(Unnamed()), mod.tree_structure(NT(1, 2))):
                with pytest.raises(NotImplementedError) as err:
                    mod.treespec_dumps(spec)
                results.append(str(err.value))
            with pytest.raises(NotImplementedError) as err:
                mod.treespec_loads('[1, {"type": "no.such.Type", "context": "null", "children_spec": []}]')
            results.append(str(err.value))
            with pytest.raises(ValueError) as err:
                mod.treespec_dumps(mod.tree_structure(1), protocol=7)
            results.append(str(err.value))
        finally:
            mod._deregister_pytree_node(Unnamed)
    half = len(results) // 2
    assert results[:half] == results[half:]
    with pytest.raises(KeyError):
        ep._deregister_pytree_node(Unnamed)


@pytest.mark.parametrize("tree", [(1, [2, {"b": 3, "a": 4}]), collections.OrderedDict(z=1, a=[2]),
                                  collections.defaultdict(list, {"k": [1, 2]}), collections.deque([1, 2], maxlen=4),
                                  {"nested": {"x": ((), [None])}}], ids=range(5))
def test_treespec_dumps_is_torchs_text_and_loads_back(tree):
    text = ep.treespec_dumps(ep.tree_structure(tree))
    assert text == tp.treespec_dumps(tp.tree_structure(tree))
    assert ep.treespec_loads(text) == ep.tree_structure(tree)
    assert repr(ep.treespec_loads(text)) == repr(tp.treespec_loads(text))


@dataclasses.dataclass
class _Batch:
    a: object
    b: object = None
    c: int = 7


def test_register_dataclass_matches_torch():
    for mod in (ep, tp):
        mod.register_dataclass(_Batch, drop_field_names=["c"], field_names=["a", "b"])
    try:
        for value in (_Batch([1, 2], 3), _Batch(1)):
            (el, es), (tl, ts) = ep.tree_flatten(value), tp.tree_flatten(value)
            assert el == tl and repr(es) == repr(ts) and ep.tree_unflatten(el, es) == value
            assert [ep.keystr(k) for k, _ in ep.tree_leaves_with_path(value)] == [
                tp.keystr(k) for k, _ in tp.tree_leaves_with_path(value)]
    finally:
        for mod in (ep, tp):
            mod._deregister_pytree_node(_Batch)
    messages = []
    for mod in (ep, tp):
        for kwargs in ({"field_names": ["a"]}, {"field_names": ["a", "b", "c", "d"]}):
            with pytest.raises(ValueError) as err:
                mod.register_dataclass(_Batch, **kwargs)
            messages.append(str(err.value))
        with pytest.raises(ValueError) as err:
            mod.register_dataclass(_Point)
        messages.append(str(err.value))
    # The messages print a set of field names: its order follows the strings' hashes, not the library
    assert [_sorted_sets(m) for m in messages[:3]] == [_sorted_sets(m) for m in messages[3:]]


def _sorted_sets(message: str) -> str:
    return re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", message)


PREFIXES = [
    (0, (1, [2, 3])), ((0, 1), (1, [2, 3])), ((0, (1, 2)), (1, [2, 3])), ((0, [1, 2]), (1, [2, 3])),
    ([0, 1], (1, 2)), ((0, 1, 2), (1, 2)), ((0, 1), NT(1, 2)), (NT(0, 1), NT(1, 2)), ({"a": 0}, {"a": [1, 2]}),
    (collections.OrderedDict(a=0, b=1), {"a": 1, "b": 2}), ({"a": 0, "b": 1}, collections.OrderedDict(a=1, b=2)),
    ({"a": 0}, {"a": 1, "b": 2}), ((None, 0), (1, {"x": 2, "y": 3})), (((),), ((),)), ((0,), (1,)), ([], 1),
]


@pytest.mark.parametrize("prefix,tree", PREFIXES, ids=range(len(PREFIXES)))
def test_prefix_broadcasting_matches_torch(prefix, tree):
    got = ep._broadcast_to_and_flatten(prefix, ep.tree_structure(tree))
    assert got == tp._broadcast_to_and_flatten(prefix, tp.tree_structure(tree))


def test_prefix_broadcasting_matches_dict_values_by_key():
    # PyTorch 2.13 hands a reordered dict prefix's values out in the prefix's order, so vmap gives
    # 'a' the out_dim written for 'b' (docs/deviations.md); ember matches them by key.
    spec = ep.tree_structure({"a": 1, "b": [2, 3]})
    assert ep._broadcast_to_and_flatten({"b": 1, "a": 0}, spec) == [0, 1, 1]
    x = ember.ones(3, 2)
    out = ember.func.vmap(lambda d: d, out_dims={"b": 1, "a": 0})({"a": x, "b": x})
    assert out["a"].shape == (3, 2) and out["b"].shape == (2, 3)


def test_one_registry_for_func_and_utils():
    import ember.utils._pytree as up

    assert up.SUPPORTED_NODES is ep.SUPPORTED_NODES and up.TreeSpec is ep.TreeSpec
    assert up.__all__ == ep.__all__ and all(hasattr(tp, name) for name in ep.__all__)
    up.register_pytree_node(_Point, lambda p: ([p.x, p.y], None), lambda v, c: _Point(*v))
    try:
        xs, ys = ember.arange(3.0), ember.ones(3)
        out = ember.func.vmap(lambda p: _Point(p.x * 2, p.y + p.x), in_dims=(_Point(0, None),))(_Point(xs, ys[0]))
        assert isinstance(out, _Point) and out.x.tolist() == [0.0, 2.0, 4.0] and out.y.tolist() == [1.0, 2.0, 3.0]
    finally:
        up._deregister_pytree_node(_Point)


def test_no_warning_on_plain_use():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        leaves, spec = ep.tree_flatten({"a": [1, NT(2, 3)]})
        ep.tree_unflatten(leaves, spec)
        ep.tree_map(lambda a, b: a + b, {"a": [1, NT(2, 3)]}, {"a": [1, NT(2, 3)]})
