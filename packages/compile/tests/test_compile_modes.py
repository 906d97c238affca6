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


def test_config_patch_restores():
    assert config.triton.cudagraphs is False and config.max_autotune is False
    with config.patch({"triton.cudagraphs": True, "max_autotune": True}):
        assert config.triton.cudagraphs is True and config.max_autotune is True
    assert config.triton.cudagraphs is False and config.max_autotune is False


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"])
def test_modes_on_cpu_match_eager(mode):
    def fn(x):
        return (x.sin() * 2 + 1).relu().sum(-1)

    compiled = ember.compile(fn, mode=mode)
    for seed in range(3):
        x = ember.tensor(np.random.default_rng(seed).standard_normal((4, 8)).astype(np.float32))
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy(), rtol=1e-6)
    assert config.triton.cudagraphs is False  # the mode applied while compiling only


def test_cudagraphify_leaves_cpu_graphs_alone():
    from ember.compiler.inductor._cudagraphs import CudaGraphed, cudagraphify

    def fn(a, b):
        return a + b

    assert cudagraphify(fn, [ember.ones(2), ember.ones(2)]) is fn
    wrapped = CudaGraphed(fn)
    assert wrapped(ember.ones(2), ember.ones(2)).tolist() == [2.0, 2.0]  # CPU inputs: run as they are
