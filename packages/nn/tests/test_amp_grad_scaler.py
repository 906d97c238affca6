"""ember.amp.GradScaler against torch.amp.GradScaler('cpu') in small training loops (identical losses,
weights and scales; steps skipped on injected inf/NaN), plus autocast through ember.nn layers."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _to_torch(t):
    return torch.from_numpy(np.array(t.detach().float().numpy(), copy=True))


def _from_torch(t):
    return ember.from_numpy(t.detach().float().numpy().copy())


def _models(seed=0):
    torch.manual_seed(seed)
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 3))
    with ember.no_grad():
        for p, tp in zip(model.parameters(), tmodel.parameters()):
            p.copy_(_from_torch(tp))
    return model, tmodel


def _close(a, b, **tol):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **(tol or dict(rtol=1e-6, atol=1e-6)))


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
@pytest.mark.parametrize("explicit_unscale", [False, True])
def test_training_loop_matches_torch(bad, explicit_unscale):
    model, tmodel = _models()
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9)
    kw = dict(init_scale=2.0**10, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    scaler, tscaler = ember.amp.GradScaler("cpu", **kw), torch.amp.GradScaler("cpu", **kw)
    rng = np.random.default_rng(0)
    for step in range(7):
        x, y = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
        losses = []
        for lib, m, o, s in ((ember, model, opt, scaler), (torch, tmodel, topt, tscaler)):
            o.zero_grad()
            loss = ((m(lib.from_numpy(x.copy())) - lib.from_numpy(y.copy())) ** 2).mean()
            s.scale(loss).backward()
            if step in (2, 5):  # inject a non-finite gradient: the step must be skipped
                with lib.no_grad():
                    next(iter(m.parameters())).grad[0, 0] = bad
            if explicit_unscale:
                s.unscale_(o)
                lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            before = [p.detach().clone() for p in m.parameters()]
            s.step(o)
            if step in (2, 5):
                assert all(lib.equal(a, p) for a, p in zip(before, m.parameters()))
            s.update()
            losses.append(loss)
        _close(losses[0], losses[1])
        assert scaler.get_scale() == tscaler.get_scale()
        assert scaler._get_growth_tracker() == tscaler._get_growth_tracker()
        for p, tp in zip(model.parameters(), tmodel.parameters()):
            _close(p, tp, rtol=1e-5, atol=1e-6)
    assert scaler.state_dict() == tscaler.state_dict()


def test_scale_growth_and_backoff_sequence():
    w = ember.ones(2, requires_grad=True)
    opt = ember.optim.SGD([w], lr=0.0)
    scaler = ember.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
    scales = []
    for grad in (1.0, 1.0, 1.0, float("inf"), 1.0):
        opt.zero_grad()
        scaler.scale((w * grad).sum()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [4.0, 8.0, 8.0, 4.0, 4.0]
    scaler.update(2.5)
    assert scaler.get_scale() == 2.5
    scaler.update(ember.tensor(3.0))
    assert scaler.get_scale() == 3.0
    with pytest.raises(AssertionError, match="new_scale"):
        scaler.update(ember.tensor([1.0, 2.0]))


def test_scale_iterables():
    scaler = ember.amp.GradScaler("cpu", init_scale=8.0)
    a, b = ember.ones(2), ember.full((3,), 2.0)
    out = scaler.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].tolist() == [8.0, 8.0] and out[1][0].tolist() == [16.0] * 3
    assert [t.tolist() for t in scaler.scale(iter([a]))] == [[8.0, 8.0]]
    with pytest.raises(ValueError, match="iterable of Tensors"):
        scaler.scale(3.0)


def test_stage_errors_match_torch():
    for lib, scaler in ((ember, ember.amp.GradScaler("cpu")), (torch, torch.amp.GradScaler("cpu"))):
        w = lib.ones(2, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        with pytest.raises(AssertionError, match="_scale is None"):
            scaler.step(opt)
        scaler.scale(w.sum()).backward()
        with pytest.raises(RuntimeError, match="Closure use"):
            scaler.step(opt, closure=lambda: None)
        scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="already been called"):
            scaler.unscale_(opt)
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="after step"):
            scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
            scaler.step(opt)
        scaler.update()
        with pytest.raises(AssertionError, match="No inf checks"):
            scaler.update()
        with pytest.raises(AssertionError, match="growth factor"):
            type(scaler)("cpu", growth_factor=1.0)
        with pytest.raises(RuntimeError, match="state dict is empty"):
            scaler.load_state_dict({})


def test_fp16_grads_are_rejected():
    w = ember.ones(2, dtype=ember.float16, requires_grad=True)
    opt = ember.optim.SGD([w], lr=0.1)
    scaler = ember.amp.GradScaler("cpu")
    scaler.scale(w.float().sum()).backward()
    with pytest.raises(ValueError, match="FP16"):
        scaler.step(opt)


def test_state_dict_and_pickle_roundtrip():
    scaler = ember.amp.GradScaler("cpu", init_scale=16.0, growth_interval=3)
    w = ember.ones(2, requires_grad=True)
    opt = ember.optim.SGD([w], lr=0.1)
    scaler.scale(w.sum()).backward()
    scaler.step(opt)
    scaler.update()
    state = scaler.state_dict()
    assert state == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                     "_growth_tracker": 1}
    other = ember.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.state_dict() == state
    clone = pickle.loads(pickle.dumps(scaler))
    assert clone.state_dict() == state and clone._scale is None


def test_disabled_scaler_is_transparent():
    scaler = ember.amp.GradScaler("cpu", enabled=False)
    w = ember.ones(2, requires_grad=True)
    opt = ember.optim.SGD([w], lr=0.5)
    loss = w.sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.5, 0.5]
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {} and not scaler.is_enabled()


def test_cuda_scaler_disables_without_cuda():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = ember.amp.GradScaler()  # device defaults to "cuda", as in torch
    assert not scaler.is_enabled()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = ember.cuda.amp.GradScaler()
        told = torch.cuda.amp.GradScaler()
    assert [w.category for w in caught] == [FutureWarning, UserWarning] * 2
    assert not old.is_enabled() and not told.is_enabled()
    with pytest.warns(FutureWarning, match="torch.cpu.amp.GradScaler"):
        assert ember.cpu.amp.GradScaler().is_enabled()


# --- autocast through ember.nn (the layers and functions the core cannot see) ---------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_autocast_nn_functions(dtype):
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    # 16-bit inputs for the float32-listed functions (pools, grid_sample): their results are float32.
    v, g = rng.standard_normal((1, 2, 4, 4, 4)), rng.uniform(-1, 1, (1, 3, 3, 2))
    cases = [
        (lambda F, x, w, b: F.linear(x, w, b), (x, w, b)),
        (lambda F, x, w, b: F.prelu(x, w[:1, 0]), (x, w, b)),
        (lambda F, x, w, b: F.hinge_embedding_loss(x, x.sign()), (x, w, b)),
        (lambda F, x, w, b: F.margin_ranking_loss(b, b * 2, b.sign()), (x, w, b)),
        (lambda F, v, g: F.avg_pool3d(v, 2), (v, g)),
        (lambda F, v, g: F.max_pool3d(v, 2), (v, g)),
        (lambda F, v, g: F.adaptive_avg_pool3d(v, 1), (v, g)),
        (lambda F, v, g: F.adaptive_max_pool3d(v, 1), (v, g)),
        (lambda F, v, g: F.grid_sample(v[:, :, 0], g, align_corners=False), (v, g)),
    ]
    for fn, arrays in cases:
        low = len(arrays) == 2
        with torch.autocast("cpu", dtype=getattr(torch, dtype)):
            targs = [torch.from_numpy(a).to(getattr(torch, dtype) if low else torch.float32) for a in arrays]
            expected = fn(torch.nn.functional, *targs)
        with ember.autocast("cpu", dtype=getattr(ember, dtype)):
            got = fn(ember.nn.functional, *[ember.from_numpy(a).to(getattr(ember, dtype) if low else ember.float32)
                                            for a in arrays])
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        _close(got.float(), expected.float(), rtol=3e-2, atol=3e-2)


def test_autocast_model_forward_backward_matches_torch():
    torch.manual_seed(0)
    tmodel = torch.nn.Sequential(
        torch.nn.Conv1d(2, 3, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(3 * 6, 8), torch.nn.GELU(), torch.nn.Linear(8, 4),
    )
    model = ember.nn.Sequential(
        ember.nn.Conv1d(2, 3, 3, padding=1), ember.nn.ReLU(), ember.nn.Flatten(),
        ember.nn.Linear(3 * 6, 8), ember.nn.GELU(), ember.nn.Linear(8, 4),
    )
    with ember.no_grad():
        for p, tp in zip(model.parameters(), tmodel.parameters()):
            p.copy_(_from_torch(tp))
    x = np.random.default_rng(3).standard_normal((5, 2, 6)).astype(np.float32)
    target = [0, 1, 3, 2, 1]
    with torch.autocast("cpu"):
        tout = tmodel(torch.from_numpy(x.copy()))
        tloss = torch.nn.functional.cross_entropy(tout, torch.tensor(target))
    with ember.autocast("cpu"):
        out = model(ember.from_numpy(x.copy()))
        loss = ember.nn.functional.cross_entropy(out, ember.tensor(target))
    assert out.dtype is ember.bfloat16 and tout.dtype == torch.bfloat16
    assert loss.dtype is ember.float32 and tloss.dtype == torch.float32
    _close(out.float(), tout.float(), rtol=3e-2, atol=3e-2)
    _close(loss, tloss, rtol=2e-2, atol=2e-2)
    tloss.backward()
    loss.backward()
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        assert p.grad.dtype is ember.float32
        _close(p.grad, tp.grad, rtol=5e-2, atol=3e-2)


def _scaled_mm_function(lib):
    seen = {}

    class ScaledMM(lib.autograd.Function):
        @staticmethod
        @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
        def forward(ctx, a, b):
            seen["fwd"] = (a.dtype, lib.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a, b)
            return lib.mm(a, b) * 2

        @staticmethod
        @lib.amp.custom_bwd(device_type="cpu")
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            seen["bwd"] = lib.is_autocast_enabled("cpu")
            return lib.mm(grad, b.t()) * 2, lib.mm(a.t(), grad) * 2

    return ScaledMM, seen


def test_custom_fwd_bwd_match_torch():
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    results = {}
    for lib in (ember, torch):
        fn, seen = _scaled_mm_function(lib)
        a = lib.from_numpy(x.copy()).to(lib.bfloat16).requires_grad_()
        b = lib.from_numpy(x.T.copy()).requires_grad_()
        with lib.autocast("cpu"):
            out = fn.apply(a, b)
            assert lib.mm(a, b).dtype == lib.bfloat16  # still autocast outside the function
        out.sum().backward()
        results[lib] = (str(out.dtype).split(".")[-1], str(seen["fwd"][0]).split(".")[-1], seen["fwd"][1],
                        seen["bwd"], str(a.grad.dtype).split(".")[-1])
        assert results[lib] == ("float32", "float32", False, False, "bfloat16")
    with pytest.raises(ValueError, match="device_type"):
        ember.amp.custom_fwd(device_type=ember.device("cpu"))
