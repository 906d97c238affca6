"""register_multi_grad_hook (modes "all" and "any"), in-place writes into a view of a base
that is not contiguous (CopySlices), and which inputs the recording saves: against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ag_helpers import grads_match_torch, make_arrays

import ember


def _leaves(lib, n=3):
    rng = np.random.default_rng(0)
    return [lib.tensor(rng.uniform(-1, 1, (2, 3)), requires_grad=True) for _ in range(n)]


def _run(lib, mode, use, how="backward", repeat=1):
    """Registers a multi-grad hook on three leaves and runs backward through those in ``use``."""
    xs = _leaves(lib)
    calls = []

    def fn(grads):
        if mode == "all":
            calls.append([None if g is None else g.detach().numpy().copy() for g in grads])
        else:
            calls.append(grads.detach().numpy().copy())

    handle = lib.autograd.graph.register_multi_grad_hook(xs, fn, mode=mode)
    for r in range(repeat):
        loss = sum(((r + 2.0) * xs[i] * xs[i]).sum() for i in use)
        if how == "backward":
            loss.backward()
        else:
            lib.autograd.grad(loss, [xs[use[0]]])
    handle.remove()
    (xs[use[0]] * 2).sum().backward()  # removed: no further calls
    return calls


def _same_calls(e_calls, t_calls):
    assert len(e_calls) == len(t_calls)
    for e, t in zip(e_calls, t_calls):
        if isinstance(t, list):
            assert [g is None for g in e] == [g is None for g in t]
            for eg, tg in zip(e, t):
                if tg is not None:
                    np.testing.assert_allclose(eg, tg)
        else:
            np.testing.assert_allclose(e, t)


@pytest.mark.parametrize("use", [(0, 1, 2), (0, 2), (1,)], ids=["all_used", "one_unused", "only_one"])
@pytest.mark.parametrize("mode", ["all", "any"])
def test_multi_grad_hook(mode, use):
    _same_calls(_run(ember, mode, use, repeat=2), _run(torch, mode, use, repeat=2))


def test_multi_grad_hook_any_with_autograd_grad():
    _same_calls(_run(ember, "any", (0, 1), how="grad"), _run(torch, "any", (0, 1), how="grad"))


def test_multi_grad_hook_all_on_leaves_with_autograd_grad_raises_like_torch():
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="A leaf node was passed to _will_engine_execute_node"):
            _run(lib, "all", (0, 1), how="grad")


def test_multi_grad_hook_on_intermediates():
    def run(lib):
        x = _leaves(lib, 1)[0]
        a, b = x * 2, x.exp()
        seen = []
        lib.autograd.graph.register_multi_grad_hook((a, b), lambda gs: seen.append([g.numpy().copy() for g in gs]))
        (a * b).sum().backward()
        return seen

    _same_calls(run(ember), run(torch))


def test_multi_grad_hook_bad_mode():
    for lib in (ember, torch):
        with pytest.raises(ValueError):
            lib.autograd.graph.register_multi_grad_hook(_leaves(lib), lambda g: None, mode="some")


def _root_multi_hook_calls(lib):
    """Multi-grad hooks that include a backward root: PyTorch's engine starts a one-root run at the
    root's node itself, which _will_engine_execute_node then does not count (the hook on a lone
    root never fires; on a root and an intermediate it fires once per tensor); several roots go
    through a GraphRoot that does count them."""
    x, w = _leaves(lib, 2)
    seen = []

    def record(tag):
        return lambda gs: seen.append((tag, [g is not None for g in gs]))

    cases = [
        ("backward", lambda y: y.backward()),
        ("grad", lambda y: lib.autograd.grad(y, x)),
        ("inputs", lambda y: y.backward(inputs=[x])),
        ("two roots", lambda y: lib.autograd.backward([y, (x * 2).sum()])),
    ]
    for tag, run in cases:
        y = (x * w).sum()
        lib.autograd.graph.register_multi_grad_hook((y,), record(tag))
        lib.autograd.graph.register_multi_grad_hook((y,), lambda g, tag=tag: seen.append((tag + " any", None)),
                                                    mode="any")
        run(y)
    m = x * w
    s = m.sum()
    lib.autograd.graph.register_multi_grad_hook((m, s), record("root and intermediate"))
    s.backward()
    y = (x * w).sum()
    lib.autograd.graph.register_multi_grad_hook((y, x), record("root and leaf"))
    y.backward()
    return seen


def test_multi_grad_hook_on_a_root_fires_as_in_torch():
    assert _root_multi_hook_calls(ember) == _root_multi_hook_calls(torch)


def _accumulate_order(lib, how):
    x, w, b = _leaves(lib, 3)
    log = []
    for name, t in (("x", x), ("w", w), ("b", b)):
        t.register_hook(lambda g, name=name: log.append("hook " + name))
        t.register_post_accumulate_grad_hook(lambda t, name=name: log.append(name))
    losses = [
        lambda: (x * w).sum() + (w * 2).sum(),
        lambda: (x * w * b).sum() + (b * x).sum() * (w * b).sum(),
        lambda: [(x * b).sum(), (w * x).sum(), (b * 2).sum()],
    ]
    for loss in losses:
        out = loss()
        if how == "backward":
            lib.autograd.backward(out)
        elif how == "inputs":
            lib.autograd.backward(out, inputs=[x, w])
        else:
            with lib.autograd.detect_anomaly():
                lib.autograd.backward(out)
        log.append("|")
    return log


@pytest.mark.filterwarnings("ignore:Anomaly Detection")
@pytest.mark.parametrize("how", ["backward", "inputs", "anomaly"])  # the native loop and the Python one
def test_accumulate_grad_runs_in_torch_order(how):
    """Every AccumulateGrad has the same (highest) sequence number: PyTorch's ready queue, a binary
    heap on that number alone fed in edge order, decides which leaf's hooks run first."""
    assert _accumulate_order(ember, how) == _accumulate_order(torch, how)


# -- in-place on a view of a non-contiguous base ----------------------------------------------------


def _inplace_on_view(m, x, w, c):
    base = (x * 1.0).t().clone()  # clone keeps the transposed strides: a base that is not contiguous
    view = base[1:3, :2]
    view.mul_(w)
    return base * c, view


def test_inplace_on_view_of_transposed_base():
    grads_match_torch(_inplace_on_view, make_arrays([(3, 4), (2, 2), (4, 3)], 16))


def test_inplace_on_view_of_offset_transposed_base():
    def fn(m, x, w):
        base = (x * 1.0).t().clone()
        col = base[:, 1]
        col.mul_(w)
        return base * 1.5, col

    grads_match_torch(fn, make_arrays([(3, 4), (4,)], 17))


# -- what the recording saves ------------------------------------------------------------------------


def test_formula_that_reads_no_input_saves_none_like_torch():
    # add's backward reads neither input, so an in-place change of one is no error (PyTorch saves
    # nothing for it either); mul's reads both, so it is.
    for lib in (ember, torch):
        x = lib.ones(3, requires_grad=True)
        y = x * 2
        z = y + 1
        y.add_(1)
        z.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0, 2.0])
        y = x * 2
        z = y * x
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()
