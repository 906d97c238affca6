"""ember.profiler against torch.profiler: schedules, the trace-ready callback, event names,
nesting, shapes, memory and FLOP columns, tables and Chrome traces."""

import itertools
import json
import warnings

import pytest

import ember
from ember.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("wait,warmup,active,repeat,skip_first,skip_first_wait",
                         [p for p in itertools.product((0, 1, 2), (0, 1), (1, 2), (0, 2), (0, 3), (0, 1))])
def test_schedule_matches_torch(wait, warmup, active, repeat, skip_first, skip_first_wait):
    kw = dict(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first,
              skip_first_wait=skip_first_wait)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = schedule(**kw), torch.profiler.schedule(**kw)
    assert [ours(i).name for i in range(30)] == [theirs(i).name for i in range(30)]


def test_schedule_rejects_bad_arguments():
    with pytest.raises(AssertionError):
        schedule(wait=0, warmup=0, active=0)


def _trace_ready_log(T, steps=10):
    seen = []

    def ready(p):
        seen.append((p.step_num, sorted({e.name for e in p.events() if e.name.startswith("aten::add")})))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = T.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
        with T.profiler.profile(schedule=sched, on_trace_ready=ready) as p:
            for i in range(steps):
                T.ones(2) + i
                p.step()
    return seen


def test_trace_ready_steps_match_torch():
    assert _trace_ready_log(ember) == _trace_ready_log(torch)


def test_step_ranges_only_with_a_schedule():
    with profile() as p:
        ember.ones(2) + 1
    assert not any(e.name.startswith("ProfilerStep") for e in p.events())
    with profile(schedule=schedule(wait=0, warmup=1, active=1)) as p:
        for _ in range(2):
            ember.ones(2) + 1
            p.step()
    assert "ProfilerStep*" in {e.key for e in p.key_averages()}


def test_ops_nest_under_ranges_and_backward_is_recorded():
    x = ember.ones(8, 8, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        with record_function("block"):
            y = (x @ x).relu().sum()
        y.backward()
    events = p.events()
    block = next(e for e in events if e.name == "block")
    assert block.is_user_annotation and block.cpu_parent is None
    children = {c.name for c in block.cpu_children}
    assert {"aten::mm", "aten::relu", "aten::sum"} <= children
    mm_calls = [e for e in events if e.name == "aten::mm"]
    assert len(mm_calls) == 3  # forward, and the two gradients of mm in backward
    assert mm_calls[0].input_shapes == [[8, 8], [8, 8]]
    for e in events:
        assert e.time_range.end >= e.time_range.start
        assert e.self_cpu_time_total <= e.cpu_time_total + 1e-6
    assert block.cpu_time_total >= sum(c.cpu_time_total for c in block.cpu_children) - 1e-6


def test_composite_ops_record_their_children():
    with profile() as p:
        ember.nn.functional.log_softmax(ember.ones(4, 4), dim=1)
    names = [e.name for e in p.events()]
    assert names and all(n.startswith("aten::") for n in names)


def test_memory_and_flops_columns():
    a, b = ember.ones(16, 32), ember.ones(32, 8)
    with profile(profile_memory=True, with_flops=True) as p:
        ember.mm(a, b)
        ember.nn.functional.conv2d(ember.ones(2, 3, 8, 8), ember.ones(4, 3, 3, 3))
    avg = {e.key: e for e in p.key_averages()}
    assert avg["aten::mm"].flops == 2 * 16 * 32 * 8
    assert avg["aten::mm"].cpu_memory_usage == 16 * 8 * 4
    conv = [e for e in p.events() if e.name.startswith("aten::conv")]
    assert conv and conv[0].flops == 2 * (2 * 4 * 6 * 6) * (3 * 3 * 3)
    table = p.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "CPU Mem" in table and "Total KFLOPs" in table and "Self CPU time total" in table


def test_table_sort_and_limit():
    with profile() as p:
        for _ in range(3):
            ember.ones(3) * 2
    table = p.key_averages().table(sort_by="count", row_limit=1)
    rows = [line for line in table.splitlines() if "aten::" in line]
    assert len(rows) == 1
    with pytest.raises(AttributeError):
        p.key_averages().table(sort_by="no_such_column")


def test_chrome_trace_and_tensorboard_handler(tmp_path):
    with profile(on_trace_ready=ember.profiler.tensorboard_trace_handler(str(tmp_path / "tb"))) as p:
        ember.ones(4).sum()
    path = tmp_path / "trace.json"
    p.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    assert {e["name"] for e in trace["traceEvents"]} >= {"aten::sum"}
    written = list((tmp_path / "tb").iterdir())
    assert len(written) == 1 and written[0].name.endswith(".pt.trace.json")
    json.loads(written[0].read_text())


def test_legacy_autograd_profiler():
    with ember.autograd.profiler.profile(record_shapes=True) as prof:
        with ember.autograd.profiler.record_function("f"):
            ember.ones(2, 2).exp()
    keys = {e.key for e in prof.key_averages()}
    assert {"f", "aten::exp"} <= keys
    assert "aten::exp" in prof.table(sort_by="cpu_time_total")
    assert prof.self_cpu_time_total > 0
    with pytest.raises(RuntimeError):
        ember.autograd.profiler.profile().events()


def test_record_function_without_profiler_and_as_decorator():
    @record_function("decorated")
    def f(x):
        return x + 1

    assert f(ember.ones(1)).item() == 2.0  # no profiler: a plain call
    x = ember.ones(1)
    with profile() as p:
        f(x)
    assert [e.name for e in p.events()][:2] == ["decorated", "aten::add"]


def test_profiler_inside_compile_capture_leaves_results_equal():
    def fn(x):
        return (x.sin() * 2).sum()

    compiled = ember.compile(fn, backend="eager") if hasattr(ember, "compile") else fn
    x = ember.linspace(0, 1, 8)
    with profile():
        got = compiled(x)
    assert got.item() == pytest.approx(fn(x).item())


def test_profile_actions_enum_names_match_torch():
    assert [a.name for a in ProfilerAction] == [a.name for a in torch.profiler.ProfilerAction]
    assert {a.name for a in ProfilerActivity} == set(torch.profiler.ProfilerActivity.__members__)
