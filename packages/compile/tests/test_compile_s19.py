"""Session-19 compile fixes, against torch 2.13 where it has an answer: dynamic shapes with an int literal equal
to a size (one graph, as Dynamo), duck-sized sizes that later differ or coincide, TorchRuntimeError for a bad op in
a compiled function, ``torch.ops.higher_order``, ``mark_dynamic`` of an absent dim, cond's predicate message."""

from __future__ import annotations

import pytest
import torch

import ember


def _counting(lib, fn, **kwargs):
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        return gm.forward

    lib._dynamo.reset()
    return lib.compile(fn, backend=backend, **kwargs), calls


def _literal(x):
    return x * 2


def _literal_and_size(x):
    return (x * 2).sum(0) + x.shape[0]


def _size_only(x):
    return x * x.shape[0]


def _reflected(x):
    return 3 - x.sum(2) * x.shape[1]


@pytest.mark.parametrize("fn, shapes", [
    (_literal, [(2,), (3,), (4,)]),
    (_literal_and_size, [(2, 3), (3, 3), (4, 3), (5, 3)]),
    (_size_only, [(2,), (3,), (4,)]),
    (_reflected, [(2, 2, 2), (2, 3, 2), (2, 4, 2)]),
    (lambda x: x.unsqueeze(0).expand(3, -1, -1), [(3, 2), (4, 2), (5, 2)]),  # a literal in a size list
    (lambda x: x.topk(2).values, [(2,), (3,), (4,)]),  # a method call (CPython's inline caches)
    (lambda x: x.new_zeros(x.shape[0], 4) + x.sum(), [(2, 4), (3, 4), (5, 4)]),
])
def test_dynamic_true_compiles_as_often_as_torch(fn, shapes):
    results = {}
    for lib in (torch, ember):
        compiled, calls = _counting(lib, fn, dynamic=True)
        values = []
        for shape in shapes:
            x = lib.arange(float(int(__import__("math").prod(shape)))).reshape(shape)
            values.append(compiled(x).tolist())
            assert values[-1] == fn(x).tolist()  # eager's answer
        results[lib.__name__] = (values, len(calls))
    assert results["ember"] == results["torch"]


def test_literal_equal_to_a_size_stays_right_at_every_size():
    # the constant must not become the size symbol: x * 2 at size 2, then sizes 3 and 4 (and back)
    compiled, calls = _counting(ember, lambda x: x * 2 + x.shape[0], dynamic=True)
    for n in (2, 3, 4, 2, 7):
        x = ember.ones(n)
        assert compiled(x).tolist() == [2.0 + n] * n
    assert len(calls) == 1


def test_number_argument_and_literal():
    # f(x, n) with n equal to a literal of the code: the literal stays a constant, n stays n
    compiled, calls = _counting(ember, lambda x, n: x[:n] * 2 + n, dynamic=True)
    t = ember.arange(10.0)
    for n in (2, 3, 5):
        assert compiled(t, n).tolist() == (t[:n] * 2 + n).tolist()
    assert len(calls) == 1


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("case", ["matmul", "broadcast", "index", "reshape", "view", "user raise"])
def test_bad_op_in_compiled_function_raises_torch_type(case, fullgraph):
    def user_raise(a, b):
        raise RuntimeError("the user's own")

    fn = {"matmul": lambda a, b: a @ b, "broadcast": lambda a, b: (a + 1) + b, "index": lambda a, b: a[5],
          "reshape": lambda a, b: (a * b).reshape(4, 4), "view": lambda a, b: a.view(-1, 4),
          "user raise": user_raise}[case]
    out = {}
    for lib in (torch, ember):
        lib._dynamo.reset()
        b = lib.ones(4, 3) if case == "broadcast" else lib.ones(2, 3)
        with pytest.raises(Exception) as info:
            lib.compile(fn, backend="eager", fullgraph=fullgraph)(lib.ones(2, 3), b)
        out[lib.__name__] = (type(info.value).__name__, isinstance(info.value, RuntimeError),
                             str(info.value).splitlines()[0])
    assert out["ember"] == out["torch"]


def test_eager_bad_op_keeps_its_type():
    with pytest.raises(RuntimeError) as info:
        ember.ones(2, 3) @ ember.ones(2, 3)
    assert type(info.value) is RuntimeError


def test_higher_order_namespace():
    pytest.importorskip("ember.export")  # (ember-export: the package above ember-compile)
    class M(ember.nn.Module):
        def forward(self, x):
            return ember.cond(x.sum() > 0, lambda a: a + 1, lambda a: a - 1, (x,))

    ep = ember.export.export(M(), (ember.ones(3),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert ember.ops.higher_order.cond in targets
    assert sum(t is ember.ops.higher_order.cond for t in targets) == 1
    assert ember.ops.higher_order.while_loop is ember.ops.while_loop
    with pytest.raises(AttributeError):
        ember.ops.higher_order.no_such_op  # noqa: B018


def test_mark_dynamic_of_an_absent_dim_is_accepted_as_torch():
    for lib in (torch, ember):
        t = lib.ones(3)
        lib._dynamo.mark_dynamic(t, 3)
        lib._dynamo.reset()
        assert lib.compile(lambda a: a * 2)(t).tolist() == [2.0, 2.0, 2.0]


def test_cond_pred_message_prints_the_tensor():
    msgs = []
    for lib in (torch, ember):
        with pytest.raises(RuntimeError) as info:
            lib.cond(lib.ones(2) > 0, lambda a: a, lambda a: a, (lib.ones(2),))
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def _forever(x):
    return _forever(x + 1)


def _raises_key_error(x):
    if x.shape[0] > 1:
        raise KeyError("no such key")
    return x


@pytest.mark.parametrize("case", ["recursion", "user raise", "user raise fullgraph"])
def test_python_errors_in_compiled_functions_follow_dynamo(case):
    import sys

    fn = _forever if case == "recursion" else _raises_key_error
    out = {}
    limit = sys.getrecursionlimit()
    for lib in (torch, ember):
        lib._dynamo.reset()
        sys.setrecursionlimit(400)
        try:
            with pytest.raises(Exception) as info:
                lib.compile(fn, backend="eager", fullgraph=case.endswith("fullgraph"))(lib.ones(2))
        finally:
            sys.setrecursionlimit(limit)
        out[lib.__name__] = (type(info.value).__name__, str(info.value).splitlines()[0])
    assert out["ember"] == out["torch"]
