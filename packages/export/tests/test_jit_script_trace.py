"""ember.jit: trace, script (TorchScript's checks, control flow), save/load, freeze, flags, decorators."""

from __future__ import annotations

import io

import pytest
import torch
from export_models import cnn, copy_weights, mlp

import ember
from ember import jit, nn


def test_trace_module_matches_eager_and_keeps_a_batch_dim_dynamic():
    ember.manual_seed(0)
    model = cnn(ember).eval()
    traced = jit.trace(model, ember.randn(4, 1, 8, 8), check_inputs=[(ember.randn(2, 1, 8, 8),)])
    assert isinstance(traced, jit.ScriptModule)
    assert set(traced.state_dict()) == set(model.state_dict())
    assert "ember.ops.conv2d" in traced.code
    with ember.no_grad():
        for b in (4, 1, 6):
            x = ember.randn(b, 1, 8, 8)
            ember.testing.assert_close(traced(x), model(x))


def test_trace_function_and_check_inputs_divergence():
    def f(x):
        return (x * 2).sum(dim=-1)

    traced = jit.trace(f, ember.randn(3, 4))
    assert isinstance(traced, jit.ScriptFunction)
    ember.testing.assert_close(traced(ember.ones(5, 4)), ember.full((5,), 8.0))

    def by_width(x):  # the recorded ops depend on the width: traces at other widths differ
        return x[:, :2] if x.shape[1] > 3 else x * 1

    with pytest.raises(jit.TracingCheckError, match="Graphs differed across invocations"):
        jit.trace(by_width, ember.randn(2, 4), check_inputs=[(ember.randn(2, 3),)])


def _tutorial_cell(L, gate):
    # PyTorch's TorchScript tutorial: a cell whose gate branches on tensor data.
    class MyCell(L.nn.Module):
        def __init__(self, dg):
            super().__init__()
            self.dg = dg
            self.linear = L.nn.Linear(4, 4)

        def forward(self, x, h):
            new_h = L.tanh(self.dg(self.linear(x)) + h)
            return new_h, new_h

    return MyCell(gate)


def _tutorial_gate(L):
    class MyDecisionGate(L.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    return MyDecisionGate()


@pytest.mark.parametrize("scripted_gate", [False, True])
def test_trace_data_dependent_branch_as_torchscript(scripted_gate):
    # Tracing freezes the branch the example takes, with a TracerWarning at the line; a scripted
    # gate keeps its branch inside the traced cell. Oracle: torch.jit on the same weights.
    import warnings

    def run(L, jit_mod, warning_type, weights_from=None):
        gate = _tutorial_gate(L)
        cell = _tutorial_cell(L, jit_mod.script(gate) if scripted_gate else gate)
        if weights_from is not None:
            copy_weights(weights_from, cell)
        x = L.tensor([[0.5, 1.0, -0.25, 2.0]] * 3)
        h = L.zeros(3, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            traced = jit_mod.trace(cell, (x, h))
        warned = sorted({str(w.message)[:48] for w in caught if issubclass(w.category, warning_type)})
        flipped = -x * 4  # the other sign: a frozen branch now differs from eager
        return cell, warned, type(traced).__name__, [traced(v, h)[0].tolist() for v in (x, flipped)]

    torch_cell, *want = run(torch, torch.jit, torch.jit.TracerWarning)
    _, *got = run(ember, jit, jit.TracerWarning, weights_from=torch_cell)
    assert got[:2] == want[:2]
    for a, b in zip(got[2], want[2]):
        ember.testing.assert_close(ember.tensor(a), ember.tensor(b), rtol=1e-5, atol=1e-6)


def test_traced_frozen_branch_saves_and_checks_inputs(tmp_path):
    class Branchy(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.warns(jit.TracerWarning, match="Python boolean"):
        traced = jit.trace(Branchy(), ember.ones(3))
    ember.testing.assert_close(traced(-ember.ones(3)), -ember.ones(3) * 2)  # the recorded branch
    assert "mul" in traced.code
    traced.save(tmp_path / "t.pt")
    ember.testing.assert_close(jit.load(tmp_path / "t.pt")(ember.ones(2)), ember.full((2,), 2.0))
    with pytest.raises(jit.TracingCheckError, match="Graphs differed"), pytest.warns(jit.TracerWarning):
        jit.trace(Branchy(), ember.ones(3), check_inputs=[(-ember.ones(3),)])


class _Branchy(nn.Module):
    __constants__ = ["scale"]

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.scale = 2.0

    def forward(self, x: ember.Tensor, n: int) -> ember.Tensor:
        y = self.fc(x)
        for _ in range(n):  # loop count from an int argument
            y = y.relu() * self.scale if bool(y.sum() > 0) else y - 1  # data-dependent branch
        return y + self.helper(y)

    @jit.export
    def helper(self, y):
        return y.mean()

    @jit.ignore
    def debug(self, y):
        return float(y.sum())

    @jit.unused
    def legacy(self, y):
        return y


def test_script_computes_what_eager_computes_with_control_flow():
    model = _Branchy()
    scripted = jit.script(model)
    for seed in range(4):
        ember.manual_seed(seed)
        x = ember.randn(2, 3)
        ember.testing.assert_close(scripted(x, 3), model(x, 3))
    ember.testing.assert_close(scripted.helper(ember.ones(2)), ember.tensor(1.0))
    assert isinstance(scripted.debug(ember.ones(2)), float)
    with pytest.raises(RuntimeError, match="unused"):
        scripted.legacy(ember.ones(2))
    with pytest.raises(RuntimeError, match="constant"):
        scripted.scale = 3.0


def test_script_argument_checks_match_torchscript():
    scripted = jit.script(_Branchy())
    with pytest.raises(RuntimeError, match=r"Expected a value of type 'Tensor' for argument 'x' but instead found "
                                           r"type 'int'"):
        scripted(3, 2)
    with pytest.raises(RuntimeError, match=r"Expected a value of type 'int' for argument 'n' but instead found type "
                                           r"'float'"):
        scripted(ember.ones(2, 3), 2.5)

    class TorchBranchy(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
            return x * n

    ts = torch.jit.script(TorchBranchy())
    with pytest.raises(RuntimeError, match="Expected a value of type 'int' for argument 'n'"):
        ts(torch.ones(2), 2.5)


def test_is_scripting_and_is_tracing():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append((jit.is_scripting(), jit.is_tracing()))
            return x + 1

    probe = Probe()
    probe(ember.ones(1))
    jit.script(probe)(ember.ones(1))
    jit.trace(probe, ember.ones(2), check_trace=False)
    assert seen[0] == (False, False) and seen[1] == (True, False) and (False, True) in seen[2:]


def test_save_load_runs_no_python_and_matches(tmp_path):
    ember.manual_seed(0)
    model = mlp(ember).eval()
    scripted = jit.script(model, example_inputs=[(ember.randn(4, 6),)])
    path = tmp_path / "mlp.pt"
    extra = {"note.txt": "hello"}
    jit.save(scripted, path, _extra_files=extra)
    files = {"note.txt": ""}
    loaded = jit.load(path, _extra_files=files)
    assert files["note.txt"] == "hello"
    with ember.no_grad():
        for b in (4, 2, 9):
            x = ember.randn(b, 6)
            ember.testing.assert_close(loaded(x), model(x))
    buf = io.BytesIO()
    jit.trace(model, ember.randn(3, 6)).save(buf)
    buf.seek(0)
    x = ember.randn(5, 6)
    ember.testing.assert_close(jit.load(buf)(x), model(x))


def test_saving_data_dependent_control_flow_fails_naming_the_problem(tmp_path):
    scripted = jit.script(_Branchy())
    scripted(ember.randn(2, 3), 1)
    with pytest.raises(Exception, match="data-dependent|item|bool"):
        jit.save(scripted, tmp_path / "branchy.pt")


def test_freeze_and_optimize_for_inference():
    ember.manual_seed(0)
    model = cnn(ember)
    with pytest.raises(RuntimeError, match="Freezing expects a ScriptModule"):
        jit.freeze(model)
    with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
        jit.freeze(jit.script(model, example_inputs=[(ember.randn(2, 1, 8, 8),)]))
    model.eval()
    frozen = jit.freeze(jit.trace(model, ember.randn(2, 1, 8, 8)))
    fast = jit.optimize_for_inference(jit.trace(model, ember.randn(2, 1, 8, 8)))
    x = ember.randn(3, 1, 8, 8)
    with ember.no_grad():
        ember.testing.assert_close(frozen(x), model(x))
        ember.testing.assert_close(fast(x), model(x), rtol=1e-5, atol=1e-6)


def test_traced_matches_torch_jit_trace_numerically():
    ember.manual_seed(0)
    torch.manual_seed(0)
    t_model, e_model = mlp(torch).eval(), mlp(ember).eval()
    copy_weights(t_model, e_model)
    x = torch.randn(5, 6)
    t_out = torch.jit.trace(t_model, x)(x)
    e_out = jit.trace(e_model, ember.from_numpy(x.numpy().copy()))(ember.from_numpy(x.numpy().copy()))
    ember.testing.assert_close(e_out.detach(), ember.from_numpy(t_out.detach().numpy().copy()), rtol=1e-5,
                               atol=1e-6)


def _batch_reader(L):
    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = L.nn.Conv2d(1, 2, 3)
            self.bn = L.nn.BatchNorm2d(2)
            self.fc = L.nn.Linear(2, 3)

        def forward(self, x):  # the batch size read as a Python number (frozen)
            y = L.relu(self.bn(self.conv(x)))
            return self.fc(y.mean((2, 3))) * int(x.size(0)) + x.squeeze(0).sum()

    return Net()


@pytest.mark.parametrize("build", [mlp, cnn, _batch_reader])
def test_trace_at_batch_one_runs_at_other_batches_as_torch(build):
    # torch.jit.trace replays the recorded ops: a batch-1 trace runs at any batch; sizes read as
    # Python numbers are frozen (with a TracerWarning), squeeze(0) stays what it recorded.
    torch.manual_seed(0)
    ember.manual_seed(0)
    ref, model = build(torch).eval(), build(ember).eval()
    copy_weights(ref, model)
    shape = (6,) if build is mlp else (1, 8, 8)
    x1 = torch.randn(1, *shape)
    with pytest.warns(torch.jit.TracerWarning) if build is _batch_reader else _no_warning():
        want_t = torch.jit.trace(ref, x1)
    with pytest.warns(jit.TracerWarning, match="Python integer") if build is _batch_reader else _no_warning():
        traced = jit.trace(model, ember.tensor(x1.numpy()))
    for b in (4, 1, 3):
        x = torch.randn(b, *shape) if build is not _batch_reader else torch.randn(b, 1, 8, 8)
        with torch.no_grad(), ember.no_grad():
            got = traced(ember.tensor(x.numpy()))
            want = want_t(x)
        assert tuple(got.shape) == tuple(want.shape)
        assert torch.allclose(torch.tensor(got.numpy()), want, rtol=1e-4, atol=1e-4)
    assert isinstance(traced.code, str) and traced.graph is not None
    # one state: the traced module's parameters are the model's
    assert all(a is b for a, b in zip(traced.parameters(), model.parameters()))
    buf = io.BytesIO()
    jit.save(traced, buf)
    buf.seek(0)
    loaded = jit.load(buf)
    x = torch.randn(5, *shape) if build is not _batch_reader else torch.randn(5, 1, 8, 8)
    with torch.no_grad(), ember.no_grad():
        got, want = loaded(ember.tensor(x.numpy())), want_t(x)
    assert torch.allclose(torch.tensor(got.numpy()), want, rtol=1e-4, atol=1e-4)


class _no_warning:
    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("error", jit.TracerWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", DeprecationWarning)

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def test_trace_at_batch_one_keeps_its_checks_and_buffers():
    # train-mode batch norm traced at batch 1: batch statistics at batch 4, as torch's trace
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2))
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    copy_weights(ref, model)
    x1, x3, x4 = torch.randn(1, 1, 5, 5), torch.randn(3, 1, 5, 5), torch.randn(4, 1, 5, 5)
    theirs = torch.jit.trace(ref, x1, check_inputs=[(x3,)])
    ours = jit.trace(model, ember.tensor(x1.numpy()), check_inputs=[(ember.tensor(x3.numpy()),)])
    with torch.no_grad(), ember.no_grad():
        got, want = ours(ember.tensor(x4.numpy())), theirs(x4)
    assert torch.allclose(torch.tensor(got.numpy()), want, atol=1e-5)
    assert model[1].num_batches_tracked.item() > 0  # (the trace runs the model, as torch's does)

    def frozen(x):  # the batch read as a number: a check at another batch disagrees, as in torch
        return x * int(x.size(0))

    for L, err in ((torch, torch.jit.TracingCheckError), (ember, jit.TracingCheckError)):
        with pytest.warns(L.jit.TracerWarning), pytest.raises(err):
            L.jit.trace(frozen, L.ones(1, 2), check_inputs=[(L.ones(3, 2),)])


def test_trace_module_matches_torch():
    def build(L):
        class M(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = L.nn.Linear(4, 2)

            def forward(self, x):
                return self.lin(x)

            def twice(self, x):
                return self.lin(x) * 2

        return M()

    ref, model = build(torch), build(ember)
    copy_weights(ref, model)
    x = torch.randn(3, 4)
    ours = jit.trace_module(model, {"forward": ember.ones(1, 4), "twice": (ember.ones(1, 4),)})
    theirs = torch.jit.trace_module(ref, {"forward": torch.ones(1, 4), "twice": (torch.ones(1, 4),)})
    assert isinstance(ours, jit.TopLevelTracedModule)
    with torch.no_grad(), ember.no_grad():
        for name in ("forward", "twice"):
            got, want = getattr(ours, name)(ember.tensor(x.numpy())), getattr(theirs, name)(x)
            assert torch.allclose(torch.tensor(got.numpy()), want, atol=1e-6)
    only = jit.trace_module(model, {"twice": ember.ones(2, 4)})
    assert only.twice(ember.ones(5, 4)).shape == (5, 2)
    for L in (torch, ember):
        with pytest.raises(AttributeError, match="object has no attribute 'forward'"):
            L.jit.trace_module(build(L), {"twice": L.ones(2, 4)})(L.ones(2, 4))
        with pytest.raises(AttributeError, match="expected a dictionary"):
            L.jit.trace_module(build(L), L.ones(2, 4))
        with pytest.raises(AttributeError, match="expected torch.nn.Module"):
            L.jit.trace_module(lambda x: x, {"forward": L.ones(2)})


def test_trace_kwarg_example_inputs_take_either_spelling_as_torch():
    # check_trace runs the keyword example; the traced program takes positions or names
    def f(x, y):
        return x * 2 + y

    for L in (torch, ember):
        lin = L.nn.Linear(3, 2)
        t = L.jit.trace(lin, example_kwarg_inputs={"input": L.ones(1, 3)})
        assert tuple(t(L.ones(4, 3)).shape) == (4, 2) and tuple(t(input=L.ones(2, 3)).shape) == (2, 2)
        g = L.jit.trace(f, example_kwarg_inputs={"y": L.ones(1, 3), "x": L.ones(1, 3)})
        assert g(L.ones(4, 3), L.ones(4, 3) * 3)[0].tolist() == [5.0] * 3
        assert g(y=L.ones(2, 3), x=L.ones(2, 3) * 5)[0].tolist() == [11.0] * 3


def test_trace_of_an_example_that_fails_raises_eagers_error():
    # export's error named the batch dim it had made symbolic ("(s0x5 and 4x4)"); TorchScript's
    # trace runs the example, so the message has its sizes.
    msgs = []
    for lib in (torch, ember):
        with pytest.raises(RuntimeError) as err:
            lib.jit.trace(lib.nn.Linear(4, 4), (lib.randn(3, 5),))
        msgs.append(str(err.value))
    assert msgs[1] == msgs[0]



def test_script_resolves_string_and_pep604_optional_annotations():
    """``bias: Optional[float]`` as a string (``from __future__ import annotations``) in a module
    with no ``typing`` import (TorchScript resolves its own names), and ``float | None``: a float
    passes, a str is refused naming ``Optional[float]``."""
    from ember.jit._script_module import check_call

    namespace = {}
    exec("def f(x, bias: 'Optional[float]' = None, b: 'float | None' = None):\n"  # noqa: S102
         "    return x if bias is None else x + bias\n", namespace)
    check_call(namespace["f"], (ember.ones(2), 0.5), {"b": 1.5}, "f")
    for kwargs in ({"bias": "x"}, {"b": "x"}):
        with pytest.raises(RuntimeError, match=r"Expected a value of type 'Optional\[float\]'"):
            check_call(namespace["f"], (ember.ones(2),), kwargs, "f")
