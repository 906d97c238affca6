"""Selective activation checkpointing (``create_selective_checkpoint_contexts``, ``CheckpointPolicy``)
against torch 2.13: the same ops recomputed in backward, the same gradients, errors and policy calls."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ember
from ember.dispatch import DispatchMode


def _op_name(lib, func) -> str:
    return func.name if lib is ember else func.__name__.split(".")[0]


def _counting_mode(lib):
    base = DispatchMode if lib is ember else TorchDispatchMode

    class Count(base):
        def __init__(self):
            super().__init__()
            self.counts: dict = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = _op_name(lib, func)
            self.counts[name] = self.counts.get(name, 0) + 1
            return func(*args, **(kwargs or {}))

    return Count()


def _fn(lib, x, y):
    return lib.sigmoid(lib.matmul(lib.matmul(x, y), y)) * y


def _run(lib, policy, fn=_fn, shape=(4, 4)):
    """(ops run in backward by name, grads): ops a SAC mode serves from its cache never reach the
    counting mode around backward."""
    lib.manual_seed(0)
    x = lib.randn(*shape, dtype=lib.float64, requires_grad=True)
    y = lib.randn(shape[-1], shape[-1], dtype=lib.float64, requires_grad=True)
    kwargs = {} if policy is None else {
        "context_fn": functools.partial(lib.utils.checkpoint.create_selective_checkpoint_contexts, policy(lib))}
    out = lib.utils.checkpoint.checkpoint(functools.partial(fn, lib), x, y, use_reentrant=False, **kwargs)
    counter = _counting_mode(lib)
    with counter:
        out.sum().backward()
    return counter.counts, x.grad.numpy(), y.grad.numpy()


_POLICIES = {
    "mm_list": lambda lib: [lib.ops.aten.mm.default],
    "sigmoid_bool": lambda lib: lambda ctx, op, *a, **k: op == lib.ops.aten.sigmoid.default,
    "save_all": lambda lib: lambda ctx, op, *a, **k: lib.utils.checkpoint.CheckpointPolicy.MUST_SAVE,
    "prefer_save_mm": lambda lib: lambda ctx, op, *a, **k: (
        lib.utils.checkpoint.CheckpointPolicy.PREFER_SAVE if op == lib.ops.aten.mm.default
        else lib.utils.checkpoint.CheckpointPolicy.MUST_RECOMPUTE),
    "recompute_all": lambda lib: lambda ctx, op, *a, **k: lib.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE,
}


@pytest.mark.parametrize("policy", list(_POLICIES))
def test_saved_ops_are_not_recomputed_and_grads_match_torch(policy):
    plain_t, gx, gy = _run(torch, None)
    plain_e, ex, ey = _run(ember, None)
    sac_t, sx_t, sy_t = _run(torch, _POLICIES[policy])
    sac_e, sx_e, sy_e = _run(ember, _POLICIES[policy])
    # how many calls the cache saved in backward (the last op, mul: PyTorch's recomputation stops before it,
    # ember's runs it, with or without a policy)
    for name in ("mm", "sigmoid"):
        assert plain_e.get(name, 0) - sac_e.get(name, 0) == plain_t.get(name, 0) - sac_t.get(name, 0), name
    for got, want in ((ex, gx), (ey, gy), (sx_e, sx_t), (sy_e, sy_t), (sx_e, gx)):
        assert got.shape == want.shape
        ember.testing.assert_close(ember.from_numpy(got), ember.from_numpy(want))


def _mlp(lib, x, w):
    h = lib.nn.functional.gelu(x @ w)
    h = lib.nn.functional.layer_norm(h, h.shape[-1:])
    return (h @ w).relu() @ w


def test_a_deeper_region_saving_matmuls_keeps_torch_gradients():
    policy = _POLICIES["mm_list"]
    plain_e, ex, ew = _run(ember, None, _mlp, (3, 5, 6))
    sac_e, sx, sw = _run(ember, policy, _mlp, (3, 5, 6))
    _, tx, tw = _run(torch, policy, _mlp, (3, 5, 6))
    assert plain_e.get("mm", 0) + plain_e.get("bmm", 0) > sac_e.get("mm", 0) + sac_e.get("bmm", 0)
    for got, want in ((sx, tx), (sw, tw), (ex, tx)):
        ember.testing.assert_close(ember.from_numpy(got), ember.from_numpy(want))


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_policy_is_asked_once_per_op_in_the_forward_with_its_output(lib):
    calls = []

    def policy(ctx, op, *args, **kwargs):
        calls.append((_op_name(lib, op), ctx.is_recompute, isinstance(ctx.op_output, lib.Tensor), len(args)))
        return False

    _run(lib, lambda _: policy)
    assert calls == [("mm", False, True, 2), ("mm", False, True, 2), ("sigmoid", False, True, 1),
                     ("mul", False, True, 2)]


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_second_backward_over_a_selective_region_is_refused(lib):
    x = lib.randn(3, 3, requires_grad=True)
    context_fn = functools.partial(lib.utils.checkpoint.create_selective_checkpoint_contexts, [lib.ops.aten.mm.default])
    out = lib.utils.checkpoint.checkpoint(lambda a: (a @ a).sin(), x, use_reentrant=False, context_fn=context_fn)
    out.sum().backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="^Trying to backward an extra time. You are only allowed to backward once "
                                           "on any region computed under selective activation checkpoint.$"):
        out.sum().backward()


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
@pytest.mark.parametrize("allow", [False, True])
def test_a_cached_output_changed_in_place_is_an_error_unless_allowed(lib, allow):
    x = lib.randn(3, 3, requires_grad=True)
    kept = []

    def policy(ctx, op, *args, **kwargs):
        if op == lib.ops.aten.mm.default:
            kept.append(ctx.op_output)
            return True
        return False

    context_fn = functools.partial(lib.utils.checkpoint.create_selective_checkpoint_contexts, policy,
                                   allow_cache_entry_mutation=allow)
    out = lib.utils.checkpoint.checkpoint(lambda a: (a @ a).sin(), x, use_reentrant=False, context_fn=context_fn)
    with lib.no_grad():
        kept[0].add_(1)  # the cache holds a detached alias of it: same version counter
    if allow:
        out.sum().backward()
        assert x.grad is not None
    else:
        with pytest.raises(RuntimeError, match="^Tensor cached during selective activation checkpoint has been"):
            out.sum().backward()


@pytest.mark.parametrize("bad", ["packet", "str", "int"])
def test_bad_policies_raise_as_torch(bad):
    def make(lib):
        arg = {"packet": [lib.ops.aten.mm], "str": ["mm"], "int": 3}[bad]
        return lib.utils.checkpoint.create_selective_checkpoint_contexts(arg)

    with pytest.raises(Exception) as want:
        make(torch)
    with pytest.raises(type(want.value)) as got:
        make(ember)
    assert str(got.value).replace("ember", "torch") == str(want.value)


def test_policy_enum_as_torch():
    mine, ref = ember.utils.checkpoint.CheckpointPolicy, torch.utils.checkpoint.CheckpointPolicy
    assert [(p.name, p.value) for p in mine] == [(p.name, p.value) for p in ref]
    ctx = ember.utils.checkpoint.SelectiveCheckpointContext(is_recompute=False)
    assert ctx.is_recompute is False and ctx.op_output is None


def _views_and_multi_outputs(lib, x, w):
    a, b = (x @ w).chunk(2, dim=-1)
    h = lib.nn.functional.gelu(a).transpose(0, 1) * b.t()
    h = lib.nn.functional.layer_norm(h, h.shape[-1:])
    return lib.softmax(h, -1)


@pytest.mark.parametrize("policy", ["save_all", "recompute_all", "mm_list"])
def test_multi_output_and_view_ops_give_the_uncheckpointed_gradients(policy):
    for lib in (torch, ember):
        lib.manual_seed(0)
        x = lib.randn(4, 6, dtype=lib.float64, requires_grad=True)
        w = lib.randn(6, 8, dtype=lib.float64, requires_grad=True)
        ref = _views_and_multi_outputs(lib, x, w)
        g = lib.randn_like(ref)
        ref.backward(g)
        want = x.grad.clone(), w.grad.clone()
        x.grad = w.grad = None
        context_fn = functools.partial(lib.utils.checkpoint.create_selective_checkpoint_contexts,
                                       _POLICIES[policy](lib))
        out = lib.utils.checkpoint.checkpoint(functools.partial(_views_and_multi_outputs, lib), x, w,
                                              use_reentrant=False, context_fn=context_fn)
        out.backward(g)
        assert (x.grad - want[0]).abs().max().item() == 0 and (w.grad - want[1]).abs().max().item() == 0
