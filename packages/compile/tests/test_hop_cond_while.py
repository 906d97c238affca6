"""ember.cond and while_loop (torch.cond, torch._higher_order_ops.while_loop) eagerly, under make_fx,
ember.compile and vmap; torch 2.13 is the oracle."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._higher_order_ops import while_loop as torch_while_loop

import ember
from ember._higher_order_ops import while_loop
from ember.compiler import make_fx


def _pair(values):
    data = np.asarray(values, dtype=np.float32)
    return ember.from_numpy(data.copy()), torch.from_numpy(data.copy())


def _close(e, t, **kw):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6, **kw)


def _branches(lib, w):
    def yes(x):
        return (x * w).sin() + x.sum()

    def no(x):
        return x.exp().cumsum(0) - 1  # a different computation altogether

    return yes, no


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_eager_cond_matches_torch(sign):
    xe, xt = _pair(np.linspace(-1, 2, 5) * sign)
    we, wt = _pair([0.5, 1.0, 1.5, 2.0, 2.5])
    out_e = ember.cond(xe.sum() > 0, *_branches(ember, we), (xe,))
    out_t = torch.cond(xt.sum() > 0, *_branches(torch, wt), (xt,))
    _close(out_e, out_t)
    assert ember.cond(True, lambda a: a + 1, lambda a: a - 1, [xe]).tolist() == (xe + 1).tolist()


def test_cond_records_one_node_with_two_subgraphs():
    we, _ = _pair([0.5, 1.0, 1.5])
    yes, no = _branches(ember, we)
    gm = make_fx(lambda x: ember.cond(x.sum() > 0, yes, no, (x,)))(ember.ones(3))
    conds = [n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "name", "") == "cond"]
    assert len(conds) == 1
    true_graph, false_graph = conds[0].args[1], conds[0].args[2]
    for sub in (getattr(gm, true_graph.target), getattr(gm, false_graph.target)):
        assert isinstance(sub, ember.fx.GraphModule)
    ops_true = {n.target.name for n in getattr(gm, true_graph.target).graph.nodes if n.op == "call_function"}
    ops_false = {n.target.name for n in getattr(gm, false_graph.target).graph.nodes if n.op == "call_function"}
    assert "sin" in ops_true and "cumsum" in ops_false and "sin" not in ops_false
    # the closure's weight is an operand of the op (lifted), not data inside a subgraph
    assert len(conds[0].args[3]) == 2
    for x in (ember.ones(3), -ember.ones(3)):
        ember.testing.assert_close(gm(x), ember.cond(x.sum() > 0, yes, no, (x,)))


def test_cond_under_compile_is_one_graph_without_breaks_like_torch():
    we, wt = _pair([0.5, 1.0, 1.5, 2.0])
    compiled_graphs = []

    def backend(gm, example_inputs):
        compiled_graphs.append(gm)
        return gm

    def program(lib, w):
        yes, no = _branches(lib, w)
        return lambda x: lib.cond((x * 2).sum() > 0, yes, no, (x * 2,)) + 1

    f_e = ember.compile(program(ember, we), backend=backend, fullgraph=True)
    f_t = torch.compile(program(torch, wt), backend="eager", fullgraph=True)
    for sign in (1.0, -1.0, 1.0, -1.0):
        xe, xt = _pair(np.array([0.3, -0.2, 0.9, 0.1]) * sign)
        _close(f_e(xe), f_t(xt))
    assert len(compiled_graphs) == 1  # the same subgraphs every call: the cache hits
    explained = ember._dynamo.explain(program(ember, we))(ember.ones(4))
    assert explained.graph_count == 1 and explained.graph_break_count == 0


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cond_gradients_under_compile_match_torch(backend):
    we, wt = _pair([0.5, -1.0, 1.5, 2.0])
    we.requires_grad_()
    wt.requires_grad_()
    f_e = ember.compile(lambda x: ember.cond(x.sum() > 0, *_branches(ember, we), (x,)), backend=backend)
    for sign in (1.0, -1.0):
        xe, xt = _pair(np.array([0.3, -0.2, 0.9, 0.1]) * sign)
        xe.requires_grad_()
        xt.requires_grad_()
        (f_e(xe) * ember.arange(4.0)).sum().backward()
        (torch.cond(xt.sum() > 0, *_branches(torch, wt), (xt,)) * torch.arange(4.0)).sum().backward()
        _close(xe.grad, xt.grad)
        if wt.grad is not None and we.grad is not None:
            _close(we.grad, wt.grad)
        we.grad = None
        wt.grad = None


def test_nested_cond_and_vmap():
    def f(lib, x):
        inner = lambda v: lib.cond(v.mean() > 0.5, lambda u: u * 10, lambda u: u * 100, (v,))  # noqa: E731
        return lib.cond(x.sum() > 0, inner, lambda v: -v, (x,))

    for values in ([1.0, 2.0], [0.1, 0.2], [-1.0, -2.0]):
        xe, xt = _pair(values)
        _close(f(ember, xe), f(torch, xt))
        gm = make_fx(lambda x: f(ember, x))(xe)
        _close(gm(xe), f(torch, xt))
    batch_e, batch_t = _pair([[1.0, 2.0], [-1.0, -2.0], [0.1, 0.2]])
    # vmap: both branches run and each sample picks its own (PyTorch's batching of cond)
    _close(ember.func.vmap(lambda x: f(ember, x))(batch_e), torch.func.vmap(lambda x: f(torch, x))(batch_t))


def test_cond_errors_like_torch():
    x = ember.ones(2, 3)
    with pytest.raises(RuntimeError, match="single-element"):
        ember.cond(ember.tensor([True, False]), lambda a: a, lambda a: a, (x,))
    with pytest.raises(RuntimeError, match="same shapes and dtypes"):
        make_fx(lambda v: ember.cond(v.sum() > 0, lambda a: a.cos(), lambda a: a.sum(), (v,)))(x)
    with pytest.raises(RuntimeError):
        torch.export.export(_TorchMismatch(), (torch.ones(2, 3),))

    def writes(a):
        a.add_(1)
        return a.clone()

    with pytest.raises(RuntimeError, match="in place"):
        make_fx(lambda v: ember.cond(v.sum() > 0, writes, lambda a: a.clone(), (v,)))(x)


class _TorchMismatch(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda a: a.cos(), lambda a: a.sum(), (x,))


def _loop_fns(lib, w):
    return (lambda i, x: i < 5), (lambda i, x: (i + 1, x * w + 1))


def test_while_loop_eager_and_traced_match_torch():
    we, wt = _pair([0.5, 1.5, -1.0])
    xe, xt = _pair([1.0, 2.0, 3.0])
    for start in (0, 3, 7):
        got = while_loop(*_loop_fns(ember, we), (ember.tensor(start), xe))
        want = torch_while_loop(*_loop_fns(torch, wt), (torch.tensor(start), xt))
        assert int(got[0]) == int(want[0])
        _close(got[1], want[1])
    gm = make_fx(lambda i, x: while_loop(*_loop_fns(ember, we), (i, x)))(ember.tensor(0), xe)
    loops = [n for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "name", "") == "while_loop"]
    assert len(loops) == 1
    for start in (0, 4, 9):
        got = gm(ember.tensor(start), xe)
        want = torch_while_loop(*_loop_fns(torch, wt), (torch.tensor(start), xt))
        _close(got[1], want[1])


def test_while_loop_under_compile_and_errors():
    we, wt = _pair([0.5, 1.5, -1.0])
    f = ember.compile(lambda i, x: while_loop(*_loop_fns(ember, we), (i, x)), backend="inductor", fullgraph=True)
    xe, xt = _pair([1.0, 2.0, 3.0])
    for start in (0, 2):
        _close(f(ember.tensor(start), xe)[1], torch_while_loop(*_loop_fns(torch, wt), (torch.tensor(start), xt))[1])
    with pytest.raises(RuntimeError, match="body_fn"):
        while_loop(lambda x: x.sum() < 10, lambda x: (x.sum(),), (xe,))
    with pytest.raises(RuntimeError, match="unsupported cond_fn return type"):
        while_loop(lambda x: x.sum(), lambda x: (x + 1,), (xe,))
    with pytest.raises(RuntimeError, match="tuple or list"):
        while_loop(lambda x: x.sum() < 10, lambda x: (x + 1,), xe)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_while_loop_gradients_under_compile_match_torch(backend):
    """PyTorch 2.13 differentiates while_loop (eagerly and under torch.compile): the carried values
    and the lifted weight get torch's gradients. A loop that runs zero times is compared with
    ember's eager loop instead: torch 2.13 returns the input unchanged but differentiates it as if
    one iteration ran (d/dx = w), a torch bug ember does not copy."""
    we, wt = _pair([0.5, 1.5, -1.0])
    we.requires_grad_()
    wt.requires_grad_()
    f_e = ember.compile(lambda i, x: while_loop(*_loop_fns(ember, we), (i, x))[1], backend=backend, fullgraph=True)
    f_t = torch.compile(lambda i, x: torch_while_loop(*_loop_fns(torch, wt), (i, x))[1], backend="aot_eager",
                        fullgraph=True)
    for start in (0, 3, 4, 5):
        xe, xt = _pair([1.0, 2.0, 3.0])
        xe.requires_grad_()
        xt.requires_grad_()
        (f_e(ember.tensor(start), xe) * ember.arange(1.0, 4.0)).sum().backward()
        if start < 5:
            (f_t(torch.tensor(start), xt) * torch.arange(1.0, 4.0)).sum().backward()
            _close(xe.grad, xt.grad)
            _close(we.grad, wt.grad)
        else:
            _close(xe.grad, torch.arange(1.0, 4.0))
            assert we.grad is None or float(we.grad.abs().sum()) == 0.0
        ge_x, ge_w = xe.grad.clone(), None if we.grad is None else we.grad.clone()
        we.grad = None
        wt.grad = None
        xe.grad = None
        (while_loop(*_loop_fns(ember, we), (ember.tensor(start), xe))[1] * ember.arange(1.0, 4.0)).sum().backward()
        _close(xe.grad, ge_x)  # the eager Python loop agrees
        if ge_w is not None and we.grad is not None:
            _close(we.grad, ge_w)
        we.grad = None


def test_cond_branch_aliasing_or_disagreeing_raises_like_torch_in_every_mode():
    pytest.importorskip("ember.export")  # (ember-export: the package above ember-compile)
    # torch.cond traces both branches even in eager: one returning its input (or a view of it) is
    # an UncapturedHigherOrderOpError, branches that disagree a TorchRuntimeError.
    def cases(lib):
        return {
            "alias": lambda x: lib.cond(x.sum() > 0, lambda a: a + 1, lambda a: a, (x,)),
            "view": lambda x: lib.cond(x.sum() > 0, lambda a: a[:1], lambda a: a[1:] * 2, (x,)),
            "mismatch": lambda x: lib.cond(x.sum() > 0, lambda a: a.sum(), lambda a: a * 2, (x,)),
            "fine": lambda x: lib.cond(x.sum() > 0, lambda a: a.clone(), lambda a: a * 2, (x,)),
        }

    def outcomes(lib):
        out = {}
        for name, fn in cases(lib).items():
            class Wrap(lib.nn.Module):
                def forward(self, x, fn=fn):
                    return fn(x)

            runs = {"eager": lambda fn=fn: fn(lib.ones(2)),
                    "compile": lambda fn=fn: lib.compile(fn, fullgraph=True, backend="eager")(lib.ones(2)),
                    "export": lambda Wrap=Wrap: lib.export.export(Wrap(), (lib.ones(2),))}
            for mode, run in runs.items():
                lib._dynamo.reset()
                try:
                    run()
                    out[name, mode] = "ok"
                except RuntimeError as e:
                    out[name, mode] = type(e).__name__
        return out

    got, want = outcomes(ember), outcomes(torch)
    assert got == want
    assert got["alias", "eager"] == "UncapturedHigherOrderOpError" and got["mismatch", "export"] == "TorchRuntimeError"
    assert issubclass(ember._dynamo.exc.UncapturedHigherOrderOpError, ember._dynamo.exc.TorchDynamoException)


def test_map_matches_torch_eagerly_and_exported():
    pytest.importorskip("ember.export")  # (ember-export: the package above ember-compile)
    from torch._higher_order_ops import map as torch_map

    from ember._higher_order_ops import map as ember_map

    xs = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    y = np.arange(4, dtype=np.float32)

    def step(lib):
        return lambda d, y: {"s": d["a"].sin() + y, "p": (d["a"] * d["b"]).sum()}

    e_xs = {"a": ember.tensor(xs), "b": ember.tensor(xs[::-1].copy())}
    t_xs = {"a": torch.tensor(xs), "b": torch.tensor(xs[::-1].copy())}
    e_out, t_out = ember_map(step(ember), e_xs, ember.tensor(y)), torch_map(step(torch), t_xs, torch.tensor(y))
    for key in ("s", "p"):
        _close(e_out[key], t_out[key])

    class M(ember.nn.Module):
        def forward(self, xs, y):
            return ember_map(lambda x, y: x.cos() * y, xs, y)

    ep = ember.export.export(M(), (ember.tensor(xs), ember.tensor(y)))
    _close(ep.module()(ember.tensor(xs), ember.tensor(y)), torch_map(lambda x, y: x.cos() * y, torch.tensor(xs),
                                                                     torch.tensor(y)))
    with pytest.raises(RuntimeError, match="Leading dimensions of mapped xs must be consistent"):
        ember_map(lambda x: x, [ember.ones(3, 2), ember.ones(4, 2)])
