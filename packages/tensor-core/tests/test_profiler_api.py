"""ember.profiler / ember.autograd.profiler against torch.profiler, a second check from the API-parity
side: schedules, which ops and ranges are recorded and how they nest, key averages, tables, Chrome
traces, on_trace_ready calls, and the autograd grad_mode/multithreading names."""

import json
import warnings

import pytest
import torch
import torch.profiler as tp

import ember
import ember.profiler as ep


@pytest.mark.parametrize("kw", [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=2, active=1, repeat=2),
                                dict(wait=2, warmup=1, active=3, repeat=1, skip_first=3),
                                dict(wait=1, warmup=1, active=1, skip_first_wait=1)])
def test_schedule_matches_torch(kw):
    e, t = ep.schedule(**kw), tp.schedule(**kw)
    assert [e(i).name for i in range(20)] == [t(i).name for i in range(20)]
    with pytest.raises(AssertionError):
        ep.schedule(wait=0, warmup=0, active=0)


def test_ops_and_ranges_are_recorded_and_nested():
    x = ember.randn(8, 8)
    with ep.profile(record_shapes=True) as prof:
        with ep.record_function("outer"):
            y = (x @ x).relu()
            with ep.record_function("inner"):
                y.sum()
    events = prof.events()
    names = [e.name for e in events]
    assert names[0] == "outer" and "inner" in names and {"aten::mm", "aten::relu", "aten::sum"} <= set(names)
    outer = events[0]
    assert {c.name for c in outer.cpu_children} >= {"aten::mm", "aten::relu", "inner"}
    inner = next(e for e in events if e.name == "inner")
    assert [c.name for c in inner.cpu_children] == ["aten::sum"] and inner.cpu_parent is outer
    assert outer.cpu_time_total >= sum(c.cpu_time_total for c in outer.cpu_children)
    assert abs(outer.self_cpu_time_total - (outer.cpu_time_total - sum(c.cpu_time_total for c in
                                                                       outer.cpu_children))) < 1e-6
    mm = next(e for e in events if e.name == "aten::mm")
    assert mm.input_shapes == [[8, 8], [8, 8]]
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["aten::mm"].count == 1 and avg["outer"].count == 1
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "aten::mm" in table and "Self CPU time total" in table
    with pytest.raises(AttributeError):
        prof.key_averages().table(sort_by="no_such_column")


def test_record_function_is_a_decorator_and_free_outside_a_profile():
    @ep.record_function("decorated")
    def f(a):
        return a * 2

    assert f(ember.ones(2)).tolist() == [2.0, 2.0]  # no profiler: just runs
    a = ember.ones(2)
    with ep.profile() as prof:
        f(a)
    assert [e.name for e in prof.events()][:2] == ["decorated", "aten::mul"]


def test_same_counts_as_torch_for_a_training_step(tmp_path):
    def step(lib, prof_mod, model, opt, x):
        with prof_mod.record_function("step"):
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()

    counts = {}
    for lib, mod in ((ember, ep), (torch, tp)):
        model = lib.nn.Linear(4, 3)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        x = lib.randn(5, 4)
        ready = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = mod.schedule(wait=1, warmup=1, active=2, repeat=2)
        with mod.profile(activities=[mod.ProfilerActivity.CPU], schedule=sched,
                         on_trace_ready=lambda p, ready=ready: ready.append(len(p.events()))) as prof:
            for _ in range(10):
                step(lib, mod, model, opt, x)
                prof.step()
        counts[lib.__name__] = (len(ready), [n > 0 for n in ready])
        assert sum(1 for e in prof.events() if e.name == "step") == 2  # the last active span's two steps
    assert counts["ember"] == counts["torch"]


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    with ep.profile() as prof:
        ember.ones(3).add(1)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert any(ev["name"] == "aten::add" and ev["ph"] == "X" for ev in trace["traceEvents"])
    handler = ep.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w")
    with ep.profile(on_trace_ready=handler):
        ember.ones(2).mul(3)
    files = list((tmp_path / "tb").iterdir())
    assert len(files) == 1 and files[0].name.startswith("w.") and files[0].name.endswith(".pt.trace.json")


def test_autograd_profiler_names():
    import ember.autograd.profiler as eap
    import ember.autograd.profiler_util as epu

    assert eap.profile is ep._profile.LegacyProfile and epu.EventList is eap.EventList
    a = ember.ones(2)
    with eap.profile(use_cuda=False) as prof:
        a.exp()
    assert [e.key for e in prof.key_averages()] == ["aten::exp"]
    with pytest.raises(RuntimeError, match="didn't finish"):
        eap.profile().events()
    assert ember.autograd.is_multithreading_enabled() is torch.autograd.is_multithreading_enabled() is True
    with ember.autograd.set_multithreading_enabled(False):
        assert not ember.autograd.is_multithreading_enabled()
    assert ember.autograd.is_multithreading_enabled()
    assert ember.autograd.grad_mode.no_grad is ember.no_grad
