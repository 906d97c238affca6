"""Helpers for the ember.fx tests: one program, run on torch.fx (the oracle) and on ember.fx."""

from __future__ import annotations

import operator

import numpy as np
import torch

import ember


def target_key(target) -> str:
    """A framework-neutral spelling of a node target (``relu`` for torch.relu and ember.relu)."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or getattr(target, "name", None) or repr(target)
    if module == "_operator" or getattr(operator, name, None) is target:
        return f"operator.{name}"
    if module == "builtins" or name in ("getattr", "len", "print"):
        return name
    return name


def structure(gm) -> list[tuple[str, str]]:
    """(op, neutral target) of every node, in order."""
    return [(n.op, target_key(n.target)) for n in gm.graph.nodes]


def full_structure(gm, kwargs: bool = True) -> list[tuple]:
    """(op, neutral target, name, neutral args[, kwargs]) of every node: the graph up to framework.

    ``kwargs=False`` leaves keyword arguments out: torch.fx records the defaults a torch function
    passes on to ``__torch_function__`` (``F.relu(x)`` as ``relu(x, inplace=False)``), ember.fx
    records the call as written.
    """

    def arg_key(a):
        if hasattr(a, "op") and hasattr(a, "name"):
            return ("node", a.name)
        if isinstance(a, (list, tuple)):
            return tuple(arg_key(x) for x in a)
        if isinstance(a, dict):
            return tuple((k, arg_key(v)) for k, v in a.items())
        if callable(a):
            return target_key(a)
        return repr(a)

    return [(n.op, target_key(n.target), n.name, arg_key(n.args)) + ((arg_key(n.kwargs),) if kwargs else ())
            for n in gm.graph.nodes]


def to_torch(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def to_ember(x):
    return ember.tensor(np.ascontiguousarray(x))


def as_numpy(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


def copy_weights(torch_module, ember_module) -> None:
    """Gives ``ember_module`` the same parameters and buffers as ``torch_module``."""
    state = {k: ember.tensor(v.detach().numpy().copy()) for k, v in torch_module.state_dict().items()}
    ember_module.load_state_dict(state)


def assert_close(actual, expected, rtol=1e-5, atol=1e-6) -> None:
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_close(a, e, rtol, atol)
        return
    if isinstance(expected, dict):
        assert actual.keys() == expected.keys()
        for k in expected:
            assert_close(actual[k], expected[k], rtol, atol)
        return
    np.testing.assert_allclose(as_numpy(actual), as_numpy(expected), rtol=rtol, atol=atol)


def build_graph(fx, lib):
    """x, y -> relu(x + y) * 2, sum; built with the Graph API."""
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=1.0)
    add = g.call_function(operator.add, (x, y))
    relu = g.call_function(lib.relu, (add,))
    mul = g.call_function(operator.mul, (relu, 2))
    total = g.call_method("sum", (mul,), {"dim": 0})
    g.output((mul, total))
    return g
