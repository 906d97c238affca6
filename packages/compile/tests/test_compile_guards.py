"""The replay fast path of ember.compile: later calls skip the Python and run the cached graph
when the guards pass; every change that makes eager behave differently fails a guard.

Each case runs the same program eagerly, under ember.compile and under torch.compile, and
compares all three after each change.
"""


import numpy as np
import pytest
import torch

import ember

SCALE = 2.0
CFG = {"shift": 1.0}
LOG: list = []


def _state(fn):
    return fn._ember_compiled


def _replayed(fn, *args, **kwargs):
    """Calls ``fn`` and says whether the call took the replay path (no Python re-run)."""
    st = _state(fn)
    hit = [e for e in st.entries if e.guard(args, kwargs)]
    out = fn(*args, **kwargs)
    return out, bool(hit)


def _np(t):
    return t.detach().numpy()


def _check(out_e, out_t):
    np.testing.assert_allclose(_np(out_e), out_t.detach().numpy(), rtol=1e-6, atol=1e-6)


def _scaled(lib):
    def f(x):
        return (x * SCALE + CFG["shift"]).relu()
    return f


def test_replays_and_global_changes_fail_guards():
    global SCALE
    x = np.linspace(-2, 2, 8).astype(np.float32)
    fe = ember.compile(_scaled(ember), backend="eager")
    torch._dynamo.reset()
    ft = torch.compile(_scaled(torch), backend="eager")
    xe, xt = ember.from_numpy(x), torch.from_numpy(x)
    try:
        for step in range(6):
            if step == 2:
                SCALE = 3.0  # a new global value
            if step == 4:
                CFG["shift"] = -1.0  # a dict's content
            out, hit = _replayed(fe, xe)
            _check(out, ft(xt))
            _check(out, _scaled(torch)(xt))
            assert hit == (step not in (0, 2, 4))
    finally:
        SCALE = 2.0
        CFG["shift"] = 1.0


def test_python_scalar_argument_and_closure():
    k = 1.5

    def f(x, n, mode="add"):
        y = x * n
        return y + k if mode == "add" else y - k

    x = ember.ones(4)
    cf = ember.compile(f, backend="eager")
    for n, mode, expect_hit in ((2, "add", False), (2, "add", True), (3, "add", False), (3, "sub", False),
                                (3.0, "sub", False), (3.0, "sub", True)):
        out, hit = _replayed(cf, x, n, mode=mode)
        assert out.tolist() == f(x, n, mode).tolist()
        assert hit == expect_hit
    k = 10.0  # a closure cell rebound
    out, hit = _replayed(cf, x, 3.0, mode="sub")
    assert not hit and out.tolist() == [-7.0] * 4


class _Scaled(torch.nn.Module):
    pass


def _module(lib):
    class M(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(4, 3)
            self.drop = lib.nn.Dropout(0.5)
            self.scale = 2.0

        def forward(self, x):
            return self.drop(self.lin(x)) * self.scale

    lib.manual_seed(0)
    return M()


def test_module_attribute_training_and_grad_mode():
    me, mt = _module(ember), _module(torch)
    mt.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in me.state_dict().items()})
    me.eval()
    mt.eval()
    ce = ember.compile(me, backend="eager")
    torch._dynamo.reset()
    ct = torch.compile(mt, backend="eager")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    xe, xt = ember.from_numpy(x), torch.from_numpy(x)
    for _ in range(2):
        _check(ce(xe), ct(xt))
    out, hit = _replayed(ce, xe)
    assert hit and out.grad_fn is not None
    me.scale = 5.0  # a module attribute
    mt.scale = 5.0
    out, hit = _replayed(ce, xe)
    assert not hit
    _check(out, ct(xt))
    _check(out, mt(xt))
    with ember.no_grad(), torch.no_grad():  # grad mode
        out, hit = _replayed(ce, xe)
        assert not hit and out.grad_fn is None
        _check(out, ct(xt))
    me.train()  # training switch: dropout now draws (both sides differ from each other: count zeros)
    out, hit = _replayed(ce, xe)
    assert not hit
    zeros = [(ce(xe) == 0).sum().item() for _ in range(20)]
    assert len(set(zeros)) > 1  # a fresh dropout mask each call, as eager
    me.eval()
    out, hit = _replayed(ce, xe)
    _check(out, ct(xt))


def test_parameter_updates_replacements_and_hooks():
    ember.manual_seed(0)
    lin = ember.nn.Linear(3, 2)
    cf = ember.compile(lin, backend="eager")
    x = ember.ones(1, 3)
    cf(x)
    cf(x)
    with ember.no_grad():
        lin.weight.add_(1.0)  # in-place update: the replay reads the new values
    out, hit = _replayed(cf, x)
    assert hit and out.tolist() == lin(x).tolist()
    lin.weight = ember.nn.Parameter(ember.zeros(2, 3))  # a new parameter object
    out, hit = _replayed(cf, x)
    assert not hit and out.tolist() == lin(x).tolist()
    lin.weight.requires_grad_(False)
    out, hit = _replayed(cf, x)
    assert not hit
    calls = []
    lin.register_forward_hook(lambda m, i, o: calls.append(1))
    cf(x)
    cf(x)
    assert len(calls) == 2  # a hook runs on every call (it is Python the replay cannot skip)


def test_side_effects_keep_running_python():
    def f(x):
        LOG.append(1)
        return x + 1

    counter = {"n": 0}

    def g(x):
        counter["n"] += 1
        return x * 2

    cf, cg = ember.compile(f, backend="eager"), ember.compile(g, backend="eager")
    LOG.clear()
    for _ in range(4):
        cf(ember.ones(2))
        cg(ember.ones(2))
    assert len(LOG) == 4 and counter["n"] == 4


def test_print_and_python_random_run_every_call(capsys):
    import random

    def f(x):
        print("step")
        return x + 1

    def g(x):
        return x * random.random()

    cf, cg = ember.compile(f, backend="eager"), ember.compile(g, backend="eager")
    for _ in range(3):
        cf(ember.ones(2))
    assert capsys.readouterr().out == "step\n" * 3
    values = {cg(ember.ones(1)).item() for _ in range(4)}
    assert len(values) == 4 and not _state(cf).entries and not _state(cg).entries


def test_data_reads_breaks_and_results():
    def f(x):
        return x * 2 if x.sum().item() > 0 else x - 1

    cf = ember.compile(f, backend="eager")
    for sign in (1, -1, 1, -1):
        x = ember.ones(3) * sign
        assert cf(x).tolist() == f(x).tolist()

    def h(x, y):
        x.add_(1)  # an input mutation, returned beside outputs in containers
        return {"a": x, "b": [y * 2, None, 3]}, (x.shape[0],)

    ch = ember.compile(h, backend="eager")
    xa, xb = ember.zeros(2), ember.zeros(2)
    y = ember.ones(2)
    for _ in range(3):
        ra, rb = ch(xa, y), h(xb, y)
        assert ra[0]["a"] is xa and ra[0]["a"].tolist() == rb[0]["a"].tolist()
        assert ra[0]["b"][0].tolist() == rb[0]["b"][0].tolist() and ra[0]["b"][1:] == [None, 3]
        assert ra[1] == rb[1]
    assert _state(ch).entries


def test_module_passed_as_argument_guards_its_submodules():
    ember.manual_seed(0)
    outer = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.Dropout(0.5)).eval()

    @ember.compile(backend="eager")
    def f(model, x):
        return model(x)

    x = ember.ones(4, 3)
    f(outer, x)
    out, hit = _replayed(f, outer, x)
    assert hit and out.tolist() == outer(x).tolist()
    outer[1].train()  # a submodule's flag
    out, hit = _replayed(f, outer, x)
    assert not hit and (out == 0).any().item()


def test_aliased_arguments_are_guarded():
    def f(a, b):
        a.add_(1)
        return b * 2

    cf = ember.compile(f, backend="eager")
    for same in (True, True, False, False, True):
        x = ember.zeros(3)
        y = x if same else ember.zeros(3)
        xr = ember.zeros(3)
        yr = xr if same else ember.zeros(3)
        assert cf(x, y).tolist() == f(xr, yr).tolist()
        assert x.tolist() == xr.tolist()
        base, base_r = ember.zeros(6), ember.zeros(6)  # views of one storage
        got = cf(base[:3], base[:3] if same else base[3:])
        want = f(base_r[:3], base_r[:3] if same else base_r[3:])
        assert got.tolist() == want.tolist() and base.tolist() == base_r.tolist()


def test_shapes_and_recompile_limit(caplog):
    cf = ember.compile(lambda x: x.sum(0) * 2, backend="eager", dynamic=False)
    with caplog.at_level("WARNING", logger="ember._dynamo"):
        for n in range(2, 14):
            x = ember.ones(n, 2)
            assert cf(x).tolist() == [2.0 * n] * 2
            assert cf(x).tolist() == [2.0 * n] * 2
    assert any("cache size limit" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("backend", ["inductor"])
def test_inductor_replay_training(backend):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    ref = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    ref.load_state_dict(model.state_dict())
    cm = ember.compile(model, backend=backend)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    opt_r = ember.optim.SGD(ref.parameters(), lr=0.1)
    x = ember.from_numpy(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    for _ in range(4):
        for m, o in ((cm, opt), (ref, opt_r)):
            o.zero_grad()
            m(x).pow(2).sum().backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert _state(cm).entries


def test_replayed_graphs_do_not_apply_autocast_again():
    # The recording holds autocast's casts; a replayed call must not send the graph's library
    # calls (addmm) through autocast's policies again (a host cost on every step: on the H200
    # it was ~44% of a compiled GPT-2 step's profiled Python), and gives eager's values.
    from ember._src import dispatch

    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(16, 16), ember.nn.GELU(), ember.nn.Linear(16, 4))
    cm = ember.compile(model)
    x = ember.randn(8, 16)
    calls = []
    real = dispatch._AUTOCAST_CALL[0]

    def spy(op, args, kwargs):
        calls.append(op.name)
        return real(op, args, kwargs)

    with ember.autocast("cpu", dtype=ember.bfloat16):
        cm(x), cm(x)  # recorded; replay entries from here on
        dispatch._AUTOCAST_CALL[0] = spy
        try:
            outs = [_replayed(cm, x) for _ in range(2)]
            assert calls == [], calls
        finally:
            dispatch._AUTOCAST_CALL[0] = real
        expected = model(x)
    assert all(hit for _, hit in outs), outs
    for out, _ in outs:
        assert out.dtype == expected.dtype == ember.bfloat16
        np.testing.assert_allclose(_np(out.float()), _np(expected.float()), rtol=2e-2, atol=2e-2)


def test_autocast_training_replays_and_autocast_changes_fail_guards():
    # A training step under autocast (the usual mixed-precision loop): the compiled forward
    # replays from the third call on (it once kept its weight casts in autocast's cache, which
    # outlived the call, so every call re-ran the Python), and a change of autocast state
    # (off, another dtype) re-records with eager's answer.
    def build(lib):
        lib.manual_seed(0)
        return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.GELU(), lib.nn.Linear(8, 3))

    model, ref = build(ember), build(torch)
    ref.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in model.state_dict().items()})
    cm = ember.compile(model, backend="inductor")
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    xe, xt = ember.from_numpy(x), torch.from_numpy(x)
    hits = []
    for dtype in ["bfloat16"] * 4 + [None, "float16", "float16", "bfloat16"]:
        opt.zero_grad()
        opt_r.zero_grad()
        with ember.autocast("cpu", dtype=getattr(ember, dtype or "bfloat16"), enabled=dtype is not None):
            out, hit = _replayed(cm, xe)
            loss = out.float().pow(2).sum()
        with torch.autocast("cpu", dtype=getattr(torch, dtype or "bfloat16"), enabled=dtype is not None):
            out_t = ref(xt)
            loss_t = out_t.float().pow(2).sum()
        assert out.dtype == ember.float32 if dtype is None else out.dtype == getattr(ember, dtype)
        np.testing.assert_allclose(_np(out.float()), out_t.float().detach().numpy(), rtol=2e-2, atol=2e-2)
        loss.backward()
        loss_t.backward()
        opt.step()
        opt_r.step()
        hits.append(hit)
    assert hits[2] and hits[3], hits  # replayed under the same autocast state
    assert not hits[4] and not hits[5]  # autocast off, then float16: recorded again
    assert hits[7]  # bfloat16 again: its entry still serves
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=2e-2, atol=2e-2)


def test_error_on_recompile_raises_recompile_error_like_torch():
    kinds = []
    for lib in (torch, ember):
        lib._dynamo.reset()
        fn = lib.compile(lambda x: x * 2, backend="eager")
        with lib._dynamo.config.patch(error_on_recompile=True):
            fn(lib.ones(2))
            fn(lib.ones(2))  # the same inputs: no recompile
            with pytest.raises(lib._dynamo.exc.RecompileError) as info:
                fn(lib.ones(3, 3))
        assert isinstance(info.value, RuntimeError)
        kinds.append(type(info.value).__name__)
        assert lib.equal(fn(lib.ones(3, 3)), lib.full((3, 3), 2.0))  # off again: it compiles
    assert kinds == ["RecompileError", "RecompileError"]
