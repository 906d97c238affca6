"""Training does not leak: RSS and live objects stay flat, and models, optimizers, hooks and
loaders die with their last reference, by reference counting alone unless the user's own
code made a cycle (which PyTorch needs the collector for too).

Scenarios are written once against a library namespace (``ember`` or ``torch``, whose APIs
match), run with the cycle collector disabled, and return weak references to what they
dropped (see packages/autograd/tests/test_autograd_leaks.py for the method).
"""

from __future__ import annotations

import gc
import os
import weakref

import pytest

import ember

torch = pytest.importorskip("torch")


class Box:
    def __init__(self, value=None):
        self.value = value


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """Keeps what is alive now out of the collector's sight: collections scan new objects only."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


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


def _mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _train(lib, model, opt, steps: int = 2):
    x, y = lib.randn(16, 4), lib.randn(16, 2)
    for _ in range(steps):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()


# -- scenarios --------------------------------------------------------------------------------


def model_after_training(lib):
    model = _mlp(lib)
    _train(lib, model, lib.optim.SGD(model.parameters(), lr=0.1))
    refs = [weakref.ref(model), *(weakref.ref(p) for p in model.parameters())]
    del model
    return refs


def optimizer_state(lib):
    model = _mlp(lib)
    opt = lib.optim.Adam(model.parameters(), lr=0.01)
    _train(lib, model, opt)
    refs = [weakref.ref(opt), *(weakref.ref(v) for s in opt.state.values() for v in s.values() if v.dim() > 0)]
    del opt
    return refs


def sgd_momentum_and_scheduler(lib):
    model = _mlp(lib)
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1)
    _train(lib, model, opt)
    sched.step()
    refs = [weakref.ref(opt), weakref.ref(sched), weakref.ref(model)]
    refs += [weakref.ref(s["momentum_buffer"]) for s in opt.state.values()]
    del opt, sched, model
    return refs


def full_backward_hooks(lib):
    box = Box()
    model = _mlp(lib)
    model.register_full_backward_hook(lambda m, gi, go, box=box: None)
    model.register_full_backward_pre_hook(lambda m, go, box=box: None)
    model[0].register_full_backward_hook(lambda m, gi, go, box=box: None)
    x = lib.randn(3, 4, requires_grad=True)
    out = model(x)
    out.sum().backward()
    refs = [weakref.ref(model), weakref.ref(box), weakref.ref(out)]
    del model, box, out, x
    return refs


def full_backward_hook_output_dropped_before_backward(lib):
    box = Box()
    model = _mlp(lib)
    model.register_full_backward_hook(lambda m, gi, go, box=box: None)
    out = model(lib.randn(3, 4, requires_grad=True))
    refs = [weakref.ref(model), weakref.ref(box), weakref.ref(out)]
    del model, box, out
    return refs


def forward_hooks(lib):
    box = Box()
    model = _mlp(lib)
    model.register_forward_pre_hook(lambda m, args, box=box: None)
    model.register_forward_hook(lambda m, args, out, box=box: None)
    model(lib.randn(2, 4)).sum().backward()
    refs = [weakref.ref(model), weakref.ref(box)]
    del model, box
    return refs


def hooks_referencing_the_module(lib):
    # A hook stored in the module that closes over the module: a cycle in PyTorch too.
    model = _mlp(lib)
    holder = [model]
    model.register_forward_hook(lambda m, args, out, holder=holder: None)
    model[0].weight.register_post_accumulate_grad_hook(lambda p, holder=holder: None)
    model(lib.randn(2, 4)).sum().backward()
    refs = [weakref.ref(model), weakref.ref(model[0].weight)]
    del model, holder
    return refs


def output_hook_referencing_the_module(lib):
    # A tensor hook on an output that refers to the module: freed with the output, no cycle.
    model = _mlp(lib)
    out = model(lib.randn(2, 4))
    out.register_hook(lambda g, model=model: g)
    refs = [weakref.ref(model), weakref.ref(out)]
    del model, out
    return refs


def dataloader_iterator(lib):
    data = lib.utils.data
    dataset = data.TensorDataset(lib.randn(10, 3), lib.randn(10))
    loader = data.DataLoader(dataset, batch_size=4, shuffle=True)
    it = iter(loader)
    first = next(it)
    refs = [weakref.ref(it), weakref.ref(first[0])]
    del it, first
    for _ in loader:
        pass
    refs += [weakref.ref(loader), weakref.ref(dataset)]
    del loader, dataset
    return refs


def recurrent_graphs(lib):
    nn = lib.nn
    refs = []
    for module in (nn.LSTM(3, 4, batch_first=True), nn.GRU(3, 4), nn.RNN(3, 4)):
        out, state = module(lib.randn(2, 5, 3))
        refs += [weakref.ref(out), weakref.ref(module)]
        del out, state
        del module
    return refs


def load_state_dict(lib):
    model = _mlp(lib)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    refs = [weakref.ref(v) for v in state.values()] + [weakref.ref(model)]
    del state, model
    return refs


def load_state_dict_pre_hook(lib):
    # The hook is called with the module but stored in it: PyTorch holds that module weakly.
    model = _mlp(lib)
    model.register_load_state_dict_pre_hook(lambda module, *args: None)
    model.load_state_dict(model.state_dict())
    refs = [weakref.ref(model), weakref.ref(model[0].weight)]
    del model
    return refs


def conv_bn_model(lib):
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3))
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    loss = nn.functional.cross_entropy(model(lib.randn(2, 1, 6, 6)), lib.tensor([0, 2]))
    loss.backward()
    opt.step()
    refs = [weakref.ref(model), weakref.ref(opt), weakref.ref(loss)]
    del model, opt, loss
    return refs


SCENARIOS = [
    model_after_training,
    optimizer_state,
    sgd_momentum_and_scheduler,
    full_backward_hooks,
    full_backward_hook_output_dropped_before_backward,
    forward_hooks,
    hooks_referencing_the_module,
    output_hook_referencing_the_module,
    dataloader_iterator,
    recurrent_graphs,
    load_state_dict,
    load_state_dict_pre_hook,
    conv_bn_model,
]


# Scenarios whose own code builds a reference cycle (a hook or pack hook holding what holds
# it): only gc.collect() frees them, in PyTorch as well. Every other scenario must be freed by
# reference counting alone, even where PyTorch itself needs the collector.
USER_CYCLES = {"hooks_referencing_the_module"}


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


def test_training_creates_no_cyclic_garbage():
    model = _mlp(ember)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _train(ember, model, opt)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _train(ember, model, opt, steps=5)
        gc.collect()
        garbage = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        gc.collect()
    assert not garbage, f"one training step leaves cycles of: {garbage}"


# -- RSS and live objects over many steps -------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _run_steps(steps: int) -> None:
    ember.manual_seed(0)
    nn = ember.nn
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = ember.randn(32, 8), ember.randn(32, 1)

    def step():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(200):  # warm-up: allocator pools, lazily built caches
        step()
    gc.collect()
    rss0, objects0 = _rss_bytes(), len(gc.get_objects())
    for _ in range(steps):
        step()
    gc.collect()
    rss_growth = _rss_bytes() - rss0
    object_growth = len(gc.get_objects()) - objects0
    # One leaked tensor per step would be >= `steps` objects and, over 10k steps, megabytes.
    assert object_growth < 50, f"{object_growth} more live objects after {steps} steps"
    assert rss_growth < 8 * 2**20, f"RSS grew {rss_growth / 2**20:.1f} MB over {steps} steps"


def test_rss_flat_over_2k_training_steps():
    _run_steps(2000)


@pytest.mark.slow
def test_rss_flat_over_10k_training_steps():
    _run_steps(10_000)
