"""Normalization layers (batch, instance, layer, group, RMS, local response) against torch.nn."""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch
from layer_helpers import assert_close, check_buffers, check_layer, check_state_dict, input_pair, make_pair

import ember
import ember.nn as nn


def _steps(tm, em, shape, dtype, n=3, start_seed=0):
    """n training steps with fresh inputs; outputs, grads and running stats agree after each.

    (PyTorch's instance norm with running stats fails its own backward for unbatched or batch-1
    inputs, so those cases use larger batches.)
    """
    for step in range(n):
        tm.zero_grad()
        em.zero_grad()
        check_layer(tm, em, shape, dtype, seed=start_seed + 10 * step)


BN_CASES = [
    ("BatchNorm1d", (3,), {}, (4, 3)),
    ("BatchNorm1d", (3,), {"momentum": 0.3}, (2, 3, 5)),
    ("BatchNorm1d", (2,), {"momentum": None}, (3, 2, 4)),
    ("BatchNorm1d", (3,), {"affine": False, "eps": 1e-3}, (5, 3)),
    ("BatchNorm1d", (3,), {"track_running_stats": False}, (4, 3, 2)),
    ("BatchNorm2d", (3,), {}, (2, 3, 4, 5)),
    ("BatchNorm2d", (2,), {"momentum": None, "bias": False}, (3, 2, 3, 3)),
    ("BatchNorm2d", (4,), {"affine": False, "track_running_stats": False}, (2, 4, 3, 2)),
    ("BatchNorm3d", (2,), {}, (2, 2, 3, 2, 3)),
    ("BatchNorm3d", (2,), {"momentum": 0.5, "affine": False}, (1, 2, 2, 3, 2)),
]


@pytest.mark.parametrize("case", BN_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{'-'.join(map(str, c[2].items()))}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_train_then_eval(case, dtype):
    name, args, kwargs, shape = case
    tm, em = make_pair(getattr(torch.nn, name), getattr(nn, name), *args, dtype=dtype, **kwargs)
    if kwargs.get("affine", True):  # non-trivial affine parameters
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
            if tm.bias is not None:
                tm.bias.uniform_(-0.5, 0.5)
        em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    _steps(tm, em, shape, dtype)
    tm.eval()
    em.eval()
    _steps(tm, em, shape, dtype, n=2, start_seed=100)
    assert repr(em) == repr(tm)
    check_state_dict(tm, em)


def test_num_batches_tracked_is_int64_scalar_and_counts():
    em, tm = nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2)
    assert em.num_batches_tracked.dtype is ember.int64 and em.num_batches_tracked.shape == ()
    for _ in range(3):
        em(ember.randn(4, 2))
    assert em.num_batches_tracked.item() == 3
    em.eval()
    em(ember.randn(4, 2))
    assert em.num_batches_tracked.item() == 3
    assert [n for n, _ in em.named_buffers()] == [n for n, _ in tm.named_buffers()]


def test_cumulative_average_with_momentum_none():
    em = nn.BatchNorm1d(2, momentum=None, affine=False)
    xs = [ember.randn(6, 2) for _ in range(4)]
    for x in xs:
        em(x)
    means = ember.stack([x.mean(0) for x in xs]).mean(0)
    np.testing.assert_allclose(em.running_mean.numpy(), means.numpy(), rtol=1e-5, atol=1e-6)


def test_reset_running_stats():
    em = nn.BatchNorm2d(3)
    em(ember.randn(2, 3, 2, 2))
    em.reset_running_stats()
    assert em.num_batches_tracked.item() == 0
    assert bool((em.running_mean == 0).all()) and bool((em.running_var == 1).all())


def test_default_init_values():
    for em, tm in ((nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)), (nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)),
                   (nn.LayerNorm((2, 3)), torch.nn.LayerNorm((2, 3))), (nn.RMSNorm(3), torch.nn.RMSNorm(3)),
                   (nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
                    torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True))):
        check_state_dict(tm, em)
        for ve, vt in zip(em.state_dict().values(), tm.state_dict().values()):
            assert_close(ve, vt, rtol=0, atol=0)
        assert all(p.requires_grad for p in em.parameters())


@pytest.mark.parametrize("name,shape", [("BatchNorm1d", (2, 3, 4, 5)), ("BatchNorm1d", (3,)),
                                        ("BatchNorm2d", (2, 3, 4)), ("BatchNorm3d", (2, 3, 4, 5)),
                                        ("InstanceNorm1d", (3,)), ("InstanceNorm2d", (2, 3, 4, 5, 6)),
                                        ("InstanceNorm3d", (3, 4, 5))])
def test_input_rank_errors(name, shape):
    em, tm = getattr(nn, name)(3), getattr(torch.nn, name)(3)
    xe, xt = input_pair(shape)
    with pytest.raises(ValueError) as t_err:
        tm(xt)
    with pytest.raises(ValueError) as e_err:
        em(xe)
    assert str(e_err.value) == str(t_err.value)


def test_one_value_per_channel_in_training():
    em, tm = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    xe, xt = input_pair((1, 3))
    for m, x in ((tm, xt), (em, xe)):
        with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
            m(x)
        m.eval()
        m(x)  # fine with running statistics


def test_wrong_channel_count_is_runtime_error():
    em, tm = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    xe, xt = input_pair((2, 4, 2, 2))
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        tm(xt)
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 3"):
        em(xe)


# -- state dict: num_batches_tracked as PyTorch loads it ----------------------------------------

def test_load_old_checkpoint_without_num_batches_tracked():
    em, tm = nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2)
    em.num_batches_tracked.fill_(5)
    tm.num_batches_tracked.fill_(5)
    # A plain dict has no version metadata: it is taken as a version-1 checkpoint.
    state = {"weight": [2.0, 3.0], "bias": [0.5, 0.5], "running_mean": [1.0, 1.0], "running_var": [2.0, 2.0]}
    result_e = em.load_state_dict({k: ember.tensor(v) for k, v in state.items()})
    result_t = tm.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
    assert result_e.missing_keys == result_t.missing_keys == []
    assert em.num_batches_tracked.item() == tm.num_batches_tracked.item() == 5
    check_buffers(tm, em, {"rtol": 0, "atol": 0})


def test_load_current_checkpoint_missing_num_batches_tracked_fails():
    em, tm = nn.BatchNorm1d(2), torch.nn.BatchNorm1d(2)
    for m in (em, tm):
        state = m.state_dict()
        del state["num_batches_tracked"]
        with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "num_batches_tracked"'):
            m.load_state_dict(state)
        assert m.load_state_dict(state, strict=False).missing_keys == ["num_batches_tracked"]


def test_nested_old_checkpoint_and_metadata_version():
    em = nn.Sequential(nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2))
    state = em.state_dict()
    assert state._metadata["1"]["version"] == 2
    del state["1.num_batches_tracked"]
    state._metadata["1"] = {"version": 1}
    em.load_state_dict(state)
    legacy = OrderedDict((k, v) for k, v in em.state_dict().items() if "num_batches" not in k)
    em.load_state_dict(legacy)


def test_instance_norm_rejects_old_running_stats():
    em, tm = nn.InstanceNorm1d(2), torch.nn.InstanceNorm1d(2)
    for m, lib in ((tm, torch), (em, ember)):
        state = {"running_mean": lib.zeros(2), "running_var": lib.ones(2)}
        with pytest.raises(RuntimeError, match='Unexpected running stats buffer\\(s\\) "running_mean" and '
                                               '"running_var" for InstanceNorm1d'):
            m.load_state_dict(state)


# -- instance norm ---------------------------------------------------------------------------

IN_CASES = [
    ("InstanceNorm1d", (3,), {}, (2, 3, 5)),
    ("InstanceNorm1d", (3,), {"affine": True}, (3, 6)),  # unbatched
    ("InstanceNorm1d", (2,), {"track_running_stats": True, "momentum": 0.2}, (3, 2, 4)),
    ("InstanceNorm2d", (3,), {"affine": True, "track_running_stats": True}, (2, 3, 3, 4)),
    ("InstanceNorm2d", (2,), {"track_running_stats": True, "momentum": None}, (3, 2, 3, 3)),
    ("InstanceNorm2d", (2,), {}, (2, 3, 3)),  # unbatched
    ("InstanceNorm3d", (2,), {"affine": True, "bias": False}, (2, 2, 2, 3, 2)),
    ("InstanceNorm3d", (2,), {"track_running_stats": True}, (2, 2, 2, 3, 2)),
    ("InstanceNorm3d", (2,), {"affine": True}, (2, 2, 3, 2)),  # unbatched
]


@pytest.mark.parametrize("case", IN_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{'-'.join(map(str, c[2].items()))}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_instance_norm_train_then_eval(case, dtype):
    name, args, kwargs, shape = case
    tm, em = make_pair(getattr(torch.nn, name), getattr(nn, name), *args, dtype=dtype, **kwargs)
    _steps(tm, em, shape, dtype, n=2)
    tm.eval()
    em.eval()
    _steps(tm, em, shape, dtype, n=1, start_seed=50)
    assert repr(em) == repr(tm)
    check_state_dict(tm, em)


def test_instance_norm_channel_mismatch():
    xe, xt = input_pair((2, 4, 5))
    for mod, x in ((torch.nn, xt), (nn, xe)):
        with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(3\), but "
                                             r"got: 4\."):
            mod.InstanceNorm1d(3, affine=True)(x)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mod.InstanceNorm1d(3)(x)
        assert any("does not match num_features" in str(w.message) for w in caught)


def test_instance_norm_single_spatial_element():
    xe, xt = input_pair((2, 3, 1))
    for mod, x in ((torch.nn, xt), (nn, xe)):
        with pytest.raises(ValueError, match="Expected more than 1 spatial element when training"):
            mod.InstanceNorm1d(3)(x)


# -- layer / group / RMS / local response norm ------------------------------------------------

OTHER_CASES = [
    ("LayerNorm", (5,), {}, (2, 3, 5)),
    ("LayerNorm", ((3, 4),), {"eps": 1e-3}, (2, 3, 4)),
    ("LayerNorm", ([4],), {"bias": False}, (4,)),
    ("LayerNorm", (4,), {"elementwise_affine": False}, (3, 2, 4)),
    ("GroupNorm", (2, 4), {}, (2, 4, 3)),
    ("GroupNorm", (3, 6), {"eps": 1e-3}, (2, 6, 2, 3)),
    ("GroupNorm", (1, 3), {"affine": False}, (3, 3, 2, 2, 2)),
    ("GroupNorm", (4, 4), {"bias": False}, (2, 4, 3)),
    ("RMSNorm", (5,), {}, (2, 3, 5)),
    ("RMSNorm", ((2, 3),), {"eps": 1e-4}, (4, 2, 3)),
    ("RMSNorm", (3,), {"elementwise_affine": False}, (3,)),
    ("LocalResponseNorm", (3,), {}, (2, 5, 4)),
    ("LocalResponseNorm", (2,), {"alpha": 0.1, "beta": 0.5, "k": 2.0}, (2, 4, 3, 3)),
    ("LocalResponseNorm", (4,), {"alpha": 0.5}, (1, 6, 2, 3, 2)),
]


@pytest.mark.parametrize("case", OTHER_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{'-'.join(map(str, c[2].items()))}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_other_norms_match_torch(case, dtype):
    name, args, kwargs, shape = case
    tm, em = make_pair(getattr(torch.nn, name), getattr(nn, name), *args, dtype=dtype, **kwargs)
    with torch.no_grad():  # non-trivial affine parameters
        for p in tm.parameters():
            p.uniform_(0.5, 1.5)
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    check_layer(tm, em, shape, dtype)
    assert repr(em) == repr(tm)
    check_state_dict(tm, em)
    for attr in ("normalized_shape", "eps", "elementwise_affine", "num_groups", "num_channels", "affine", "size"):
        if hasattr(tm, attr):
            assert getattr(em, attr) == getattr(tm, attr), attr


@pytest.mark.parametrize("call,exc,match", [
    (lambda m, x: m.LayerNorm(4)(x), RuntimeError, r"Given normalized_shape=\[4\], expected input with shape "
                                                   r"\[\*, 4\], but got input of size\[2, 3, 5\]"),
    (lambda m, x: m.LayerNorm((2, 5))(x), RuntimeError, r"Given normalized_shape=\[2, 5\]"),
    (lambda m, x: m.GroupNorm(2, 4)(x), RuntimeError, "Expected number of channels in input to be divisible by "
                                                      "num_groups, but got input of shape"),
    (lambda m, x: m.GroupNorm(2, 3), ValueError, r"num_channels \(3\) must be divisible by num_groups \(2\)"),
    (lambda m, x: m.GroupNorm(3, 3)(x[:1, :, :1]), ValueError, "Expected more than 1 value per channel"),
    (lambda m, x: m.GroupNorm(3, 3)(x[0, :, 0]), RuntimeError, "Expected at least 2 dimensions"),
    (lambda m, x: m.RMSNorm(4)(x), RuntimeError, r"Given normalized_shape=\[4\], expected input with shape"),
    (lambda m, x: m.LocalResponseNorm(2)(x[0]), ValueError, r"Expected 3D or higher dimensionality\s+input "
                                                            r"\(got 2 dimensions\)"),
])
def test_other_norm_errors(call, exc, match):
    xe, xt = input_pair((2, 3, 5))
    with pytest.raises(exc, match=match):
        call(torch.nn, xt)
    with pytest.raises(exc, match=match):
        call(nn, xe)


def test_rms_norm_gradients_and_second_order():
    # The core's _fused_rms_norm had no derivative; this checks the one now registered, twice.
    xe, _ = input_pair((3, 2, 4), "float64")
    we, _ = input_pair((4,), "float64", seed=3)
    fn = lambda x, w: nn.functional.rms_norm(x, [4], w, 1e-3)  # noqa: E731
    assert ember.autograd.gradcheck(fn, (xe, we))
    assert ember.autograd.gradgradcheck(fn, (xe, we))


# -- nn.functional edge cases (empty inputs, integer inputs, rank errors) ------------------------

@pytest.mark.parametrize("call", [
    lambda F, x, lib: F.group_norm(x[:0], 3),
    lambda F, x, lib: F.instance_norm(x[:0]),
    lambda F, x, lib: F.layer_norm(x[:0], [5]),
    lambda F, x, lib: F.batch_norm(x[:0], lib.zeros(3), lib.ones(3)),
])
def test_functional_norms_of_empty_batches(call):
    xe, xt = input_pair((2, 3, 5))
    assert_close(call(nn.functional, xe, ember), call(torch.nn.functional, xt, torch))


@pytest.mark.parametrize("call,exc", [
    (lambda F, x, lib: F.batch_norm(x.long(), None, None, training=True), NotImplementedError),
    (lambda F, x, lib: F.layer_norm(x.long(), [5]), NotImplementedError),
    (lambda F, x, lib: F.group_norm(x.long(), 3), NotImplementedError),
    (lambda F, x, lib: F.rms_norm(x.long(), [5]), NotImplementedError),
    (lambda F, x, lib: F.batch_norm(x[0, 0], None, None, training=True), IndexError),
    (lambda F, x, lib: F.group_norm(x, 0), ZeroDivisionError),
])
def test_functional_norm_error_types(call, exc):
    xe, xt = input_pair((2, 3, 5))
    with pytest.raises(exc):
        call(torch.nn.functional, xt, torch)
    with pytest.raises(exc):
        call(nn.functional, xe, ember)


@pytest.mark.parametrize("name", ["BatchNorm2d", "InstanceNorm2d"])
def test_shared_norm_applied_twice_in_training_backpropagates(name):
    # A siamese network runs one BatchNorm on both inputs before one backward: the second forward
    # updates the running statistics in place, which the first forward's backward does not read.
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, 4, 5, 5)).astype(np.float32) for _ in range(2))
    grads = []
    for lib in (torch, ember):
        layer = getattr(lib.nn, name)(4, affine=True, track_running_stats=True)
        xa = lib.from_numpy(a).requires_grad_()
        ((layer(xa) * 2).sum() + layer(lib.from_numpy(b)).pow(2).sum()).backward()
        grads.append((xa.grad, layer.weight.grad, layer.bias.grad, layer.running_mean))
    for t, e in zip(*grads):
        assert_close(e, t, atol=1e-4, rtol=1e-4)


def test_sync_batch_norm_without_a_process_group_is_batch_norm_as_in_torch():
    # Programs call convert_sync_batchnorm unconditionally; one process (no group) is BatchNorm.
    def run(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(3)))
        synced = lib.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        x = lib.tensor(np.linspace(-2, 3, 2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3) ** 2,
                       requires_grad=True)
        out = synced[1](x)
        (out * out).sum().backward()
        errors = []
        for bad in (lib.ones(3), lib.ones(2, 0, 4)):
            try:
                lib.nn.SyncBatchNorm(3)(bad)
            except ValueError as e:
                errors.append(str(e))
        return (repr(synced).replace("ember", "torch"), synced[1].weight is model[1].weight,
                np.round(np.array(out.detach().tolist()), 4).tolist(), np.round(np.array(x.grad.tolist()), 4).tolist(),
                np.round(np.array(synced[1].running_var.tolist()), 5).tolist(), sorted(synced.state_dict()), errors)

    assert run(ember) == run(torch)
