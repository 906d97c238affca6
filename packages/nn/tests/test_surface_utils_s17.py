"""Session 17's additions to ``ember.utils``, ``ember.hub``, ``ember.random`` and
``ember.autograd.graph``, against PyTorch 2.13: checkpoint's helpers and ``context_fn``, the weak
identity dictionaries, hub's constants and ``_get_torch_home``."""

from __future__ import annotations

import contextlib
import gc

import pytest

import ember
from ember.utils import checkpoint as eckpt
from ember.utils import weak as eweak

torch = pytest.importorskip("torch")
import torch.utils.checkpoint as tckpt  # noqa: E402
import torch.utils.weak as tweak  # noqa: E402


def test_checkpoint_context_fn_wraps_forward_and_recompute():
    def run(lib, ck):
        log = []

        @contextlib.contextmanager
        def tag(name):
            log.append(name)
            yield

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = ck.checkpoint(lambda a: (a * a).sum(), x, use_reentrant=False,
                          context_fn=lambda: (tag("forward"), tag("recompute")))
        log.append("backward")
        y.backward()
        return log, x.grad.tolist()

    assert run(ember, eckpt) == run(torch, tckpt) == (["forward", "backward", "recompute"], [2.0, 4.0])
    for ck, lib in ((eckpt, ember), (tckpt, torch)):
        with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
            ck.checkpoint(lambda a: a, lib.ones(1, requires_grad=True), use_reentrant=True,
                          context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext()))


def test_checkpoint_helpers_match_torch():
    assert set(tckpt.__all__) - set(eckpt.__all__) <= {"CheckpointFunction", "CheckpointPolicy",
                                                       "SelectiveCheckpointContext",
                                                       "create_selective_checkpoint_contexts", "SAC_IGNORED_OPS",
                                                       "GraphExecGroup"}
    assert issubclass(eckpt.CheckpointError, RuntimeError)
    a = ember.ones(2, requires_grad=True)
    out = eckpt.detach_variable((a, 3))
    t_out = tckpt.detach_variable((torch.ones(2, requires_grad=True), 3))
    assert out[0].requires_grad == t_out[0].requires_grad and out[0].grad_fn is None and out[1] == t_out[1]
    for ck, lib in ((eckpt, ember), (tckpt, torch)):
        with pytest.raises(RuntimeError, match="Only tuple of tensors is supported. Got Unsupported input type: list"):
            ck.detach_variable([lib.ones(1)])
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            ck.check_backward_validity((lib.ones(1),))
        assert ck.get_device_states(lib.ones(1)) == ([], [])
        ck.set_device_states([], [])
        with ck.set_checkpoint_early_stop(False), ck.set_checkpoint_debug_enabled(True):
            pass
        ctx = ck.noop_context_fn()
        assert len(ctx) == 2
    assert eckpt.DefaultDeviceType.get_device_type() == tckpt.DefaultDeviceType.get_device_type()


def test_weak_id_key_dictionary_matches_torch():
    for lib, weak in ((ember, eweak), (torch, tweak)):
        d = weak.WeakIdKeyDictionary()
        a, b = lib.ones(2), lib.ones(2)
        d[a] = "a"
        d[b] = "b"
        assert d[a] == "a" and d[b] == "b" and len(d) == 2 and a in d and lib.ones(2) not in d
        del b
        gc.collect()
        assert len(d) == 1 and list(d) == [a]
        ref = weak.WeakIdRef(a)
        assert ref() is a and hash(ref) == id(a) and ref == weak.WeakIdRef(a)
        assert weak.TensorWeakRef(a)() is a
        assert weak.WeakTensorKeyDictionary is weak.WeakIdKeyDictionary


def test_hub_constants_random_and_graph_switch(monkeypatch):
    import torch.hub

    for name in ("ENV_GITHUB_TOKEN", "ENV_TORCH_HOME", "ENV_XDG_CACHE_HOME", "DEFAULT_CACHE_DIR"):
        assert getattr(ember.hub, name) == getattr(torch.hub, name)
    assert ember.hub.HASH_REGEX.pattern == torch.hub.HASH_REGEX.pattern
    for env in ({}, {"TORCH_HOME": "/tmp/th"}, {"XDG_CACHE_HOME": "/tmp/xdg"}):
        monkeypatch.delenv("TORCH_HOME", raising=False)
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert ember.hub._get_torch_home() == torch.hub._get_torch_home()
    assert ember.random.default_generator is ember.default_generator
    ember.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(False)
    ember.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch(True)
    with pytest.raises(TypeError):
        ember.autograd.graph.set_warn_on_accumulate_grad_stream_mismatch("yes")


def test_module_accelerator_moves_match_torch():
    for method, err in (("xpu", AssertionError), ("mtia", AssertionError), ("ipu", RuntimeError)):
        for lib in (ember, torch):
            relu = lib.nn.ReLU()
            assert getattr(relu, method)() is relu  # nothing to move
            with pytest.raises(err):
                getattr(lib.nn.Linear(2, 2), method)()
