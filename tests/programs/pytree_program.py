# torch.utils._pytree as libraries use it: flatten/unflatten of nested containers (dict order,
# OrderedDict, defaultdict, deque, namedtuples, structseqs), TreeSpec properties, equality and
# JSON round trips, tree_map over several trees with their mismatch errors, the *_only variants,
# key paths (tree_flatten_with_path, keystr, key_get), custom nodes and dataclasses, tensors as
# leaves.
import collections
import dataclasses

import torch
import torch.utils._pytree as p

NT = collections.namedtuple('NT', 'x y')


def show(*a):
    print(*a)


def attempt(f):
    try:
        print(f())
    except Exception as e:  # noqa: BLE001 - the error is the result
        print(type(e).__name__, e)


show(p.tree_flatten(None))
show(p.tree_flatten({'b':1,'a':(2,[3,None])}))
show(p.tree_flatten(collections.OrderedDict(x=1,y=2))[1])
show(p.tree_flatten(collections.defaultdict(list, {'a': 1}))[1])
show(p.tree_flatten(collections.deque([1,2], maxlen=3))[1])
show(p.tree_flatten(NT(1,2))[1])
s = p.tree_structure(((1,2),{'k':3}))
show(s.num_leaves, s.num_nodes, s.num_children, s.is_leaf())
show(p.tree_flatten_with_path({'a':[1,(2,)], 'n': NT(3,4)})[0])
show([p.keystr(k) for k, _ in p.tree_flatten_with_path({'a':[1,(2,)], 'n': NT(3,4)})[0]])
show(p.treespec_dumps(s))
show(p.treespec_loads(p.treespec_dumps(s)) == s)
attempt(lambda: p.tree_unflatten([1], s))
attempt(lambda: p.tree_map(lambda a,b: a+b, (1,2), (1,2,3)))
attempt(lambda: p.tree_map(lambda a,b: a+b, (1,2), [1,2]))
attempt(lambda: p.tree_map(lambda a,b: a+b, {'a': 1}, {'b': 2}))
attempt(lambda: p.tree_map(lambda a,b: a+b, {'a': 1, 'b': 2}, collections.OrderedDict(b=3, a=4)))
show(p.tree_map(lambda a,b: (a,b), (1,2), ([5],{'q':6})))
show(p.tree_map_only(int, lambda x: x*10, (1,2.0,'s',[3])))
show(p.tree_map_only((int,float), lambda x: x*10, (1,2.0,'s',[3])))
show(p.tree_all(lambda x: x>0, [1,2,{'a':3}]), p.tree_any_only(str, lambda s: s=='s', (1,'s')),
     p.tree_all_only(int, lambda v: v > 1, (1, 'a')))
show(p.tree_flatten([1,[2,3]], is_leaf=lambda x: isinstance(x,list) and len(x)==2))
x=[1,[2]]
show(p.tree_map_(lambda v: None, x) is x)
show(s.unflatten([7,8,9]), s.flatten_up_to(((1,2),{'k':[5]})))
show(p._broadcast_to_and_flatten(0, s), p._broadcast_to_and_flatten((0,1), s), p._broadcast_to_and_flatten([0,1], s))
show(s == p.tree_structure(((5,6),{'k':7})), s == p.tree_structure(((5,6),{'j':7})))
show(p.tree_leaves((1,[2])), list(p.tree_iter((1,[2]))), p.tree_is_leaf(1), p.tree_is_leaf([1]), p.tree_is_leaf([]))
show(p.tree_structure({}), p.tree_flatten([])[1], p.tree_flatten(())[1])
show(p.treespec_pprint(p.tree_structure((1, [2, {'a': 3}]))))
show(p.tree_map_with_path(lambda kp, v: p.keystr(kp) + str(v), {'a': [1, 2], 'b': NT(3, 4)}))
show(p.tree_leaves_with_path([{'z': 1}]))
show(p.key_get({'a': [1, NT(5, 6)]}, (p.MappingKey('a'), p.SequenceKey(1), p.GetAttrKey('y'))))


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __repr__(self):
        return f"Point({self.x}, {self.y})"


p.register_pytree_node(Point, lambda pt: ([pt.x, pt.y], None), lambda v, c: Point(*v), serialized_type_name="Point")
show(p.tree_flatten([Point(1, 2)]))
show(p.tree_map(lambda v: v * 2, {'p': Point(1, 2)}))
attempt(lambda: p.register_pytree_node(Point, lambda pt: ([], None), lambda v, c: None))
attempt(lambda: p.tree_flatten_with_path(Point(1, 2)))
show(p.treespec_loads(p.treespec_dumps(p.tree_structure([Point(1, 2)]))))


@dataclasses.dataclass
class Batch:
    a: object
    b: object


p.register_dataclass(Batch)
show(p.tree_flatten(Batch(1, [2, 3]))[0], p.tree_map(lambda v: v + 1, Batch(1, [2, 3])))
show([p.keystr(k) for k, _ in p.tree_leaves_with_path(Batch(1, [2, 3]))])
t = torch.arange(3.0)
show(p.tree_map(lambda v: v * 2, {'w': t, 'n': 3, 's': 'x'}))
show(p.tree_map_only(torch.Tensor, lambda v: v.sum(), (t, [t, 1])))
show(p.tree_flatten(torch.max(torch.ones(2, 2), 0))[1].num_leaves)
show(p.LeafSpec(), p.treespec_leaf() == p.LeafSpec(),
     p.treespec_tuple([p.LeafSpec(), p.LeafSpec()]), p.treespec_dict(a=p.LeafSpec()))
attempt(lambda: p.tree_unflatten([1], [1]))
show(p.tree_flatten(torch.max(torch.ones(2, 2), 0))[1], p.tree_map(lambda v: v.sum(), torch.sort(torch.ones(3))))
