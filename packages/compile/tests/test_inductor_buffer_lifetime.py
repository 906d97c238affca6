"""The generated wrapper drops each intermediate at its last use (``del``), as eager autograd
drops a value once nothing reads it: a block freed mid-call goes back to the allocator's cache
for the next buffer of its size, where one held to the end of the call made every call take
fresh memory (and page-fault it). PyTorch (eager) is the oracle for the values."""

from __future__ import annotations

import ast

import numpy as np
import pytest
import torch
from inductor_test_helpers import spy_on_builds

import ember


@pytest.fixture
def builds(monkeypatch):
    return spy_on_builds(monkeypatch)


def _mlp(nn):
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.LayerNorm(32), nn.Linear(32, 8))


def _mlp_pair():
    """torch's MLP (seed 0), ember's with the same weights, and an input batch."""
    torch.manual_seed(0)
    tmodel = _mlp(torch.nn)
    emodel = _mlp(ember.nn)
    emodel.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    return tmodel, emodel, np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)


def _statements(source: str) -> list:
    call = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "call")
    return call.body


def _loads(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _lifetimes(source: str):
    """(names deleted, {extern result: statement index}, names read by an extern, names returned,
    names loaded after their ``del``)."""
    body = _statements(source)
    deleted, externs, extern_read, returned, late = set(), {}, set(), set(), set()
    for i, st in enumerate(body):
        if isinstance(st, ast.Delete):
            for t in st.targets:
                deleted.add(t.id)
                if any(t.id in _loads(later) for later in body[i + 1:]):
                    late.add(t.id)
        elif isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) \
                and getattr(st.value.func, "id", None) == "_layout":
            name = st.targets[0].id
            if name not in _loads(st.value):  # not the tuple-output rebinding of an extern result
                externs[name] = i
                extern_read |= _loads(st.value.args[0]) - {name}
        elif isinstance(st, ast.Return):
            returned = _loads(st)
    return deleted, externs, extern_read, returned, late


def test_training_step_backward_drops_intermediates_at_their_last_use(builds):
    tmodel, emodel, x = _mlp_pair()
    compiled = ember.compile(emodel)
    for _ in range(2):  # the second call runs the generated code compiled by the first
        emodel.zero_grad()
        compiled(ember.tensor(x)).square().mean().backward()
    tmodel(torch.from_numpy(x)).square().mean().backward()
    for (name, p), tp in zip(emodel.named_parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
    backward = next(a for a in builds if "tangents" in a.wrapper_source)
    forward = next(a for a in builds if "tangents" not in a.wrapper_source)
    for art in (forward, backward):
        deleted, externs, extern_read, returned, late = _lifetimes(art.wrapper_source)
        assert not late, (late, art.wrapper_source)
        assert not deleted & returned, art.wrapper_source
        # every GEMM result that is not an output, and every kernel buffer a GEMM read, is gone
        # after its last use rather than held to the end of the call
        bufs = {n for n in extern_read if n.startswith("buf")}
        assert (set(externs) | bufs) - returned <= deleted, art.wrapper_source
    # (the forward returns all it makes, as saved values; the backward's GEMM results are its own)
    deleted, externs, _, returned, _ = _lifetimes(backward.wrapper_source)
    assert len(set(externs) - returned) >= 2 and len(deleted) >= 4, backward.wrapper_source


def test_a_value_read_again_after_an_extern_is_kept_until_then(builds):
    # y feeds the first GEMM and is read again by the last kernel: its del comes after that kernel
    def program(m, x, w):
        y = (x * 2).exp()
        z = y @ w
        t = (z.relu() @ w.t()) + y
        return t.sum(-1)

    g = np.random.default_rng(1)
    x, w = g.standard_normal((8, 6)).astype(np.float32), g.standard_normal((6, 6)).astype(np.float32)
    fn = ember.compile(lambda a, b: program(ember, a, b))
    got = fn(ember.tensor(x), ember.tensor(w)).numpy()
    want = program(torch, torch.from_numpy(x), torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    source = builds[-1].wrapper_source
    deleted, _, _, returned, late = _lifetimes(source)
    assert deleted and not late and not deleted & returned, source


def _saved_activation_storages(out):
    """Weak references to the storages of the compiled node's saved values that no parameter or
    input holds (the forward's activations), found from ``out``'s autograd graph."""
    import weakref

    node, seen, stack = None, set(), [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if type(fn).__name__ == "CompiledFunctionBackward":
            node = fn
            break
        stack.extend(n for n, _ in fn.next_functions)
    assert node is not None
    return [weakref.ref(s.data._storage) for s in node._saved if s is not None and not s.data.requires_grad]


@pytest.mark.parametrize("retain", [False, True])
def test_backward_frees_saved_activations_after_their_last_read(builds, retain):
    # The compiled backward gets its saved activations in a list it empties, and the autograd node
    # lets go of them first (unless the graph is retained): by the backward's last kernel the
    # activations read only early on are freed, as eager autograd frees a node's saved values.
    tmodel, emodel, x = _mlp_pair()
    compiled = ember.compile(emodel)
    compiled(ember.tensor(x)).square().mean().backward()  # compiles both graphs
    backward = next(a for a in builds if "tangents" in a.wrapper_source)
    namespace = backward.call.__globals__
    kernels = sorted(n for n in namespace if n.startswith("kernel") and n[6:].isdigit())
    last = max(kernels, key=lambda n: backward.wrapper_source.index(f"    {n}("))
    dead_at_last: list = []
    refs: list = []

    def spy(*a, _f=namespace[last]):
        dead_at_last.append(sum(r() is None for r in refs))
        return _f(*a)

    namespace[last] = spy
    emodel.zero_grad()
    loss = compiled(ember.tensor(x)).square().mean()
    refs.extend(_saved_activation_storages(loss))
    assert len(refs) >= 3
    loss.backward(retain_graph=retain)
    if retain:
        assert dead_at_last == [0]
        loss.backward()  # the retained graph's saved values are intact: gradients twice
    else:
        assert dead_at_last[0] >= 2, (dead_at_last, backward.wrapper_source)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    tmodel(torch.from_numpy(x)).square().mean().backward()
    k = 2 if retain else 1
    for (name, p), tp in zip(emodel.named_parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), k * tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)
