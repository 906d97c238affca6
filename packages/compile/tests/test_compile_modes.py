"""``mode=``/``options=`` of ember.compile: what each mode sets in the inductor's config, and the
CPU behaviour of "reduce-overhead" (CUDA graphs apply to CUDA inputs only; CPU graphs run as
compiled)."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler.inductor import config


def test_unknown_option_raises_like_torch():
    with pytest.raises(RuntimeError, match="Unexpected optimization option"):
        ember.compile(lambda x: x, options={"no_such_option": True})
    with pytest.raises(RuntimeError, match="Either mode or options"):
        ember.compile(lambda x: x, mode="reduce-overhead", options={})


def test_unknown_mode_and_recompile_under_fail_stance_raise_like_torch():
    import torch

    def errors(lib):
        out = []
        with pytest.raises(RuntimeError) as info:
            lib.compile(lambda x: x, mode="no-such-mode")
        out.append(str(info.value))

        def double(x):
            return x * 2

        lib._dynamo.reset()
        compiled = lib.compile(double, backend="eager")
        compiled(lib.ones(2))
        with lib.compiler.set_stance("fail_on_recompile"), pytest.raises(RuntimeError) as info:
            compiled(lib.ones(2))
            compiled(lib.ones(2, 3, dtype=lib.float64))
        out.append(str(info.value).splitlines()[0])  # torch adds the failed guards below
        return out

    assert errors(ember) == errors(torch)


def test_config_patch_restores():
    assert config.triton.cudagraphs is False and config.max_autotune is False
    with config.patch({"triton.cudagraphs": True, "max_autotune": True}):
        assert config.triton.cudagraphs is True and config.max_autotune is True
    assert config.triton.cudagraphs is False and config.max_autotune is False


@pytest.mark.parametrize("mode", ["lite", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_modes_on_cpu_match_eager(mode):
    def fn(x):
        return (x.sin() * 2 + 1).relu().sum(-1)

    compiled = ember.compile(fn, mode=mode)
    for seed in range(3):
        x = ember.tensor(np.random.default_rng(seed).standard_normal((4, 8)).astype(np.float32))
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy(), rtol=1e-6, atol=1e-6)
    assert config.triton.cudagraphs is False  # the mode applied while compiling only


def test_cudagraphify_leaves_cpu_graphs_alone():
    from ember.compiler.inductor._cudagraphs import CudaGraphed, cudagraphify

    def fn(a, b):
        return a + b

    assert cudagraphify(fn, [ember.ones(2), ember.ones(2)]) is fn
    wrapped = CudaGraphed(fn)
    assert wrapped(ember.ones(2), ember.ones(2)).tolist() == [2.0, 2.0]  # CPU inputs: run as they are


def test_cudagraphs_backend_on_cpu_runs_the_graphs_like_torch(caplog):
    # PyTorch's backend="cudagraphs": AOT autograd, CUDA graphs for CUDA inputs; CPU graphs run as
    # they are (with a warning). Listed by list_backends(), as PyTorch's.
    import torch

    results = []
    for lib in (torch, ember):
        model = lib.nn.Linear(3, 2)
        with lib.no_grad():
            model.weight.copy_(lib.tensor([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0]]))
            model.bias.fill_(0.1)
        compiled = lib.compile(model, backend="cudagraphs")
        x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
        out = compiled(x)
        out.relu().sum().backward()
        results.append((out.tolist(), model.weight.grad.tolist(), "cudagraphs" in lib._dynamo.list_backends()))
    assert results[1] == results[0]
    assert "skipping cudagraphs due to cpu device" in caplog.text
