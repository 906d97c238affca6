"""pipeline() on any module: ember-export's tracer cuts the exported graph at split_spec or
pipe_split(), and the schedules train the stages. The oracle is PyTorch's pipelining on gloo
running the same program (programs/pipeline_trace_program.py): the stages' parameter and buffer
names, the losses of 3 steps and every gradient after each step agree to rtol 1e-5. Where the
model's skip connection crosses stages, which PyTorch's schedules refuse or hang on, the oracle
is PyTorch's whole-batch training of the same model."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from dist_harness import FULL_RUNS, run_ranks

# The tracer is ember-export's: installed alone, ember-distributed has none (the last-but-one test).
needs_export = pytest.mark.skipif(importlib.util.find_spec("ember.export") is None,
                                  reason="pipeline() on any module traces with ember-export, not installed")


def _assert_same(ours: dict, theirs: dict) -> None:
    assert set(ours) == set(theirs)
    for label, want in theirs.items():
        got = ours[label]
        for key in ("num_stages", "names", "buffers"):
            assert got[key] == want[key], (label, key)
        assert len(got["losses"]) == len(want["losses"])
        for a, b in zip(got["losses"], want["losses"]):
            assert math.isclose(a, b, rel_tol=1e-5), (label, got["losses"], want["losses"])
        assert set(got["grads"]) == set(want["grads"]) and want["grads"], label
        for name, grad in want["grads"].items():
            np.testing.assert_allclose(got["grads"][name]["value"], grad["value"], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{label} {name}")


@needs_export
def test_traced_pipeline_two_ranks_matches_pytorch():
    # 2 stages (GPipe, 1F1B) and 4 stages two per rank (interleaved 1F1B) of a GPT with a skip
    # connection, cut by split_spec; a model with a keyword argument and a buffer cut by pipe_split()
    ours, _, _ = run_ranks("pipeline_trace_program.py", 2, limit=150)
    theirs, _, _ = run_ranks("pipeline_trace_program.py", 2, lib="torch", limit=150)
    for rank in range(2):
        _assert_same(ours[rank], theirs[rank])
    assert ours[0]["gpt2_gpipe"]["children"] == ["submod_pp_0", "submod_pp_1"]
    assert ours[1]["kw2_gpipe"]["buffers"] == {"1": ["shift"]}
    assert ours[1]["gpt2_gpipe"]["losses"] and ours[1]["gpt4_interleaved_skip"]["losses"]


@needs_export
@pytest.mark.slow
@pytest.mark.skipif(not FULL_RUNS, reason="4 more processes: set EMBER_TEST_DIST_FULL=1")
def test_traced_pipeline_four_ranks_matches_pytorch():
    ours, _, _ = run_ranks("pipeline_trace_program.py", 4, limit=150, args=("gpt",))
    theirs, _, _ = run_ranks("pipeline_trace_program.py", 4, lib="torch", limit=150, args=("gpt",))
    for rank in range(4):
        _assert_same(ours[rank], theirs[rank])


@needs_export
@pytest.mark.slow
@pytest.mark.skipif(not FULL_RUNS, reason="4 more processes: set EMBER_TEST_DIST_FULL=1")
def test_pipelining_tutorial_tracer_split_matches_pytorch():
    # the tutorial's Transformer (ModuleDict layers) cut by pipeline(split_spec={"layers.2": BEGINNING})
    ours, _, _ = run_ranks("pipelining_tutorial_program.py", 2, limit=150, args=("tracer",))
    theirs, _, _ = run_ranks("pipelining_tutorial_program.py", 2, lib="torch", limit=150, args=("tracer",))
    assert ours[1]["output"][0] == theirs[1]["output"][0] == [8, 16, 50]
    assert math.isclose(ours[1]["output"][1], theirs[1]["output"][1], rel_tol=1e-5)
    np.testing.assert_allclose(ours[1]["losses"], theirs[1]["losses"], rtol=1e-5)
    for rank in range(2):
        assert list(ours[rank]["params"]) == list(theirs[rank]["params"])
        for name, value in theirs[rank]["params"].items():
            assert math.isclose(ours[rank]["params"][name], value, rel_tol=1e-5, abs_tol=1e-5), (rank, name)


def test_pipeline_without_a_tracer_names_the_package(monkeypatch):
    import ember
    from ember.distributed.pipelining import _split, pipeline

    class Two(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = ember.nn.Linear(2, 2)

        def forward(self, x):
            return self.a(x)

    monkeypatch.setattr(_split, "_TRACERS", {})
    monkeypatch.setattr(_split, "TRACER_GROUP", "ember.pipelining.tracers.absent")
    with pytest.raises(ImportError, match="pip install ember-export"):
        pipeline(Two(), (ember.randn(2, 2),))
    # an nn.Sequential is still cut by child names
    pipe = pipeline(ember.nn.Sequential(ember.nn.Linear(2, 2), ember.nn.Tanh()), None,
                    split_spec={"1": _split.SplitPoint.BEGINNING})
    assert pipe.num_stages == 2


@needs_export
def test_split_module_runs_as_the_model_and_pipe_split_is_a_noop():
    import ember
    from ember.distributed.pipelining import SplitPoint, pipe_split, pipeline

    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = ember.nn.Embedding(10, 6)
            self.layers = ember.nn.ModuleList([ember.nn.Linear(6, 6) for _ in range(3)])
            self.head = ember.nn.Linear(6, 3)
            self.register_buffer("scale", ember.full((6,), 0.5), persistent=False)

        def forward(self, idx, bias=None):
            h = skip = self.emb(idx)
            for i, layer in enumerate(self.layers):
                h = ember.tanh(layer(h))
                if i == 0:
                    pipe_split()
            return self.head(h + skip * self.scale + bias)  # skip and bias cross two stages

    ember.manual_seed(0)
    net = Net()
    idx, bias = ember.randint(0, 10, (2, 4)), ember.randn(2, 4, 6)
    assert pipe_split() is None
    pipe = pipeline(net, (idx,), {"bias": bias}, split_spec={"layers.2": SplitPoint.BEGINNING})
    assert pipe.num_stages == 3 and pipe.info().num_stages == 3
    assert [n for n, _ in pipe.get_stage_module(0).named_parameters()] == ["emb.weight", "layers.0.weight",
                                                                          "layers.0.bias"]
    last = pipe.get_stage_module(2)
    assert [n for n, _ in last.named_buffers()] == ["scale"] and "scale" not in last.state_dict()
    assert last.get_parameter("head.weight") is net.head.weight  # the stages hold the model's parameters
    ember.testing.assert_close(pipe(idx, bias=bias), net(idx, bias=bias), rtol=0, atol=0)
    with pytest.raises(ValueError, match="runs no op"):
        pipeline(net, (idx,), {"bias": bias}, split_spec={"nothing": SplitPoint.END})
    with pytest.raises(TypeError, match="SplitPoint"):
        pipeline(net, (idx,), {"bias": bias}, split_spec={"layers.1": "BEGINNING"})
