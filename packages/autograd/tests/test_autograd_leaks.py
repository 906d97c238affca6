"""Autograd objects die by reference counting alone wherever PyTorch's do.

Each scenario builds something with a library (``ember`` or ``torch``: the APIs match), drops
it, and returns weak references to what should now be gone. It runs with the cycle collector
disabled; whatever survives there is held by a reference cycle. The rules checked: ember
frees everything by reference counting alone except where the scenario's own code builds a
cycle (USER_CYCLES, checked to be cycles in PyTorch too), and everything after
``gc.collect()``. A last test runs every scenario with ``gc.DEBUG_SAVEALL`` and names the
cyclic garbage, if any, so a regression points at its objects.
"""

from __future__ import annotations

import gc
import weakref

import pytest

import ember

torch = pytest.importorskip("torch")

# PyTorch warns about the create_graph cycle that one scenario builds on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")


class Box:
    """A weakly referenceable stand-in for anything a hook or a graph may hold."""

    def __init__(self, value=None):
        self.value = value


def _node_ref(node):
    """A weak reference that dies with ``node`` (PyTorch's C++ nodes take no weakrefs): to a
    Box that only a no-op hook on the node holds."""
    box = Box()
    node.register_prehook(lambda grads, box=box: None)
    return weakref.ref(box)


def _survivors(scenario, lib, collect: bool) -> list:
    gc.collect()
    gc.disable()
    try:
        refs = scenario(lib)
        if collect:
            gc.collect()
        return [r for r in refs if r() is not None]
    finally:
        gc.enable()


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """Moves everything alive now (torch, ember, pytest) out of the collector's sight, so each
    gc.collect() below scans only what a scenario made: milliseconds instead of ~0.3 s."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


_FUNCTIONS: dict = {}


def _scale_function(lib):
    """A custom Function that saves its input and output and keeps an intermediate on ctx."""
    if lib not in _FUNCTIONS:  # classes are cyclic objects themselves: make one per library

        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 3
                ctx.save_for_backward(x, y)
                ctx.intermediate = x + 1
                ctx.box = Box()
                return y

            @staticmethod
            def backward(ctx, grad):
                x, y = ctx.saved_tensors
                return grad * 3

        _FUNCTIONS[lib] = Scale
    return _FUNCTIONS[lib]


# -- scenarios: each returns weakrefs to what it dropped --------------------------------------


def graph_of_dropped_output(lib):
    x = lib.randn(8, requires_grad=True)
    y = (x * x).exp().sum()
    refs = [weakref.ref(y), _node_ref(y.grad_fn), _node_ref(y.grad_fn.next_functions[0][0])]
    del y
    return refs


def graph_after_backward(lib):
    x = lib.randn(8, requires_grad=True)
    y = (x.sin() * x).sum()
    y.backward()
    refs = [_node_ref(y.grad_fn), weakref.ref(x)]
    del x, y
    return refs


def saved_tensors_of_dropped_output(lib):
    boxes = []

    def pack(t):
        boxes.append(Box(t))
        return boxes[-1]

    with lib.autograd.graph.saved_tensors_hooks(pack, lambda box: box.value):
        x = lib.randn(6, requires_grad=True)
        y = (x.exp() * x).tanh().sum()
    refs = [weakref.ref(b) for b in boxes]
    del boxes[:], y
    return refs


def saved_tensors_after_backward(lib):
    # Saved tensors are released by backward even while the output itself stays alive.
    boxes = []

    def pack(t):
        boxes.append(Box(t))
        return boxes[-1]

    with lib.autograd.graph.saved_tensors_hooks(pack, lambda box: box.value):
        x = lib.randn(6, requires_grad=True)
        y = (x.exp() * x).sum()
    refs = [weakref.ref(b) for b in boxes]
    del boxes[:]
    y.backward()
    return refs


def retained_graph(lib):
    x = lib.randn(4, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    refs = [_node_ref(y.grad_fn)]
    del y
    return refs


def tensor_hook_on_output(lib):
    box = Box()
    x = lib.randn(4, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g, box=box: g)
    y.retain_grad()
    refs = [weakref.ref(box), weakref.ref(y)]
    y.sum().backward()
    del box, y
    return refs


def tensor_hook_on_leaf(lib):
    box = Box()
    x = lib.randn(4, requires_grad=True)
    x.register_hook(lambda g, box=box: g * 2)
    x.register_post_accumulate_grad_hook(lambda p, box=box: None)
    (x * x).sum().backward()
    refs = [weakref.ref(box), weakref.ref(x)]
    del box, x
    return refs


def hook_closing_over_its_tensor(lib):
    # The hook refers to the tensor it is registered on: a cycle in PyTorch too.
    x = lib.randn(4, requires_grad=True)
    holder = [x]  # not a closure cell: `del x` below must not cut the cycle

    def hook(param):
        assert holder[0] is param

    x.register_post_accumulate_grad_hook(hook)
    (x * 2).sum().backward()
    refs = [weakref.ref(x)]
    del x
    return refs


def node_hooks(lib):
    box = Box()
    x = lib.randn(4, requires_grad=True)
    y = x.exp()
    y.grad_fn.register_hook(lambda gi, go, box=box: None)
    y.grad_fn.register_prehook(lambda go, box=box: None)
    y.sum().backward()
    refs = [weakref.ref(box), _node_ref(y.grad_fn)]
    del box, y
    return refs


def custom_function_ctx(lib):
    x = lib.randn(5, requires_grad=True)
    out = _scale_function(lib).apply(x)
    ctx = out.grad_fn
    refs = [_node_ref(ctx), weakref.ref(ctx.intermediate), weakref.ref(ctx.box), weakref.ref(out)]
    del ctx, out
    return refs


def custom_function_after_backward(lib):
    x = lib.randn(5, requires_grad=True)
    out = _scale_function(lib).apply(x)
    out.sum().backward()
    refs = [_node_ref(out.grad_fn), weakref.ref(out.grad_fn.box), weakref.ref(x)]
    del out, x
    return refs


def double_backward(lib):
    x = lib.randn(4, requires_grad=True)
    (g,) = lib.autograd.grad((x**3).sum(), x, create_graph=True)
    g.sum().backward()
    refs = [weakref.ref(g), _node_ref(g.grad_fn), weakref.ref(x)]
    del g, x
    return refs


def backward_create_graph_on_leaf(lib):
    # x.grad's graph leads back to x: PyTorch documents this cycle (and needs gc for it).
    x = lib.randn(4, requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    refs = [weakref.ref(x)]
    del x
    return refs


def views_and_inplace(lib):
    x = lib.randn(4, 3, requires_grad=True)
    y = x.clone()
    y[1].mul_(2)
    y.t()[0].add_(1)
    z = y.sum()
    refs = [weakref.ref(y), _node_ref(z.grad_fn)]
    z.backward()
    del y, z
    return refs


def no_grad_and_detach(lib):
    x = lib.randn(4, requires_grad=True)
    with lib.no_grad():
        a = x * 2
    b = (x * 3).detach()
    refs = [weakref.ref(a), weakref.ref(b), weakref.ref(x)]
    del a, b, x
    return refs


SCENARIOS = [
    graph_of_dropped_output,
    graph_after_backward,
    saved_tensors_of_dropped_output,
    saved_tensors_after_backward,
    retained_graph,
    tensor_hook_on_output,
    tensor_hook_on_leaf,
    hook_closing_over_its_tensor,
    node_hooks,
    custom_function_ctx,
    custom_function_after_backward,
    double_backward,
    backward_create_graph_on_leaf,
    views_and_inplace,
    no_grad_and_detach,
]


# Scenarios whose own code builds a reference cycle (a hook or pack hook holding what holds
# it): only gc.collect() frees them, in PyTorch as well. Every other scenario must be freed by
# reference counting alone, even where PyTorch itself needs the collector.
USER_CYCLES = {"saved_tensors_of_dropped_output", "hook_closing_over_its_tensor", "backward_create_graph_on_leaf"}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.__name__ not in USER_CYCLES], ids=lambda s: s.__name__)
def test_freed_without_gc(scenario):
    scenario(ember)  # warm-up: lazily created caches are not leaks
    alive = _survivors(scenario, ember, collect=False)
    assert not alive, f"kept alive by a reference cycle: {[type(r()).__name__ for r in alive]}"


@pytest.mark.parametrize("name", sorted(USER_CYCLES))
def test_user_cycles_are_cycles_in_pytorch_too(name):
    scenario = next(s for s in SCENARIOS if s.__name__ == name)
    # (Some of these PyTorch never frees: the cycle runs through hooks its C++ side holds.)
    assert _survivors(scenario, torch, collect=False), f"PyTorch frees {name} without gc: so must ember"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_freed_after_gc_collect(scenario):
    assert not _survivors(scenario, ember, collect=True)


def test_no_cyclic_garbage_from_any_scenario():
    """Names the objects of any cycle a refcount-freeable scenario leaves (DEBUG_SAVEALL)."""
    for scenario in SCENARIOS:
        scenario(ember)
    found = {}
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for scenario in SCENARIOS:
            if scenario.__name__ in USER_CYCLES:
                continue
            scenario(ember)
            gc.collect()
            if gc.garbage:
                found[scenario.__name__] = sorted({type(o).__name__ for o in gc.garbage})
                gc.garbage.clear()
                gc.set_debug(0)  # free what was saved, or every later collect finds it again
                gc.collect()
                gc.set_debug(gc.DEBUG_SAVEALL)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not found, f"reference cycles: {found}"
