"""The prelude's float32 row helpers (eager's row-kernel structure in generated code): max/min with
NaN lanes in mask registers, a plain sum, softmax's exp-and-sum (storing the terms in the output
or in the streamed scratch row) and layer_norm's squared deviations. Every row length around the
helpers' 32-float blocks, rows of NaN/inf/-inf/signed zeros, one and two threads, and the
portable branch (compiled without AVX-512) give eager's and PyTorch's values."""

from __future__ import annotations

import pytest
from inductor_test_helpers import check, make_input

import ember
from ember.compiler.inductor import _codecache, config


def _softmax(m, x, w, b):
    return m.softmax(x, -1)


def _log_softmax(m, x, w, b):
    return m.log_softmax(x, -1)


def _extremes(m, x, w, b):
    return x.amax(-1), x.amin(-1), x.sum(-1)


def _layer_norm(m, x, w, b):
    return m.nn.functional.layer_norm(x, x.shape[-1:], w, b)


def _logsumexp_rows(m, x, w, b):
    # max and exp-sum of a row: cross-entropy's forward has the same two reductions
    mx = x.amax(-1, keepdim=True)
    return ((x - mx).exp().sum(-1, keepdim=True).log() + mx).squeeze(-1)


_HELPERS = {_softmax: ("ember_row_max_f32(", "ember_exp_shift_sum_f32("),
            _log_softmax: ("ember_row_max_f32(", "ember_exp_shift_sum_f32("),
            _extremes: ("ember_row_max_f32(", "ember_row_min_f32(", "ember_row_sum_f32("),
            _layer_norm: ("ember_row_sum_f32(", "ember_row_sq_dev_f32("),
            _logsumexp_rows: ("ember_row_max_f32(", "ember_exp_shift_sum_f32(")}


def _input(cols):
    x = make_input((9, cols), ember.float32, seed=cols, specials=False, low=-30, high=30)
    x[1, cols // 2] = float("nan")
    x[3] = float("-inf")
    x[4, cols - 1] = float("inf")
    x[5, 0] = float("-inf")
    x[6] = 0.0
    x[6, cols // 3] = -0.0
    x[7, :] = -95.0  # exp of the shifted row underflows to subnormals for nothing but the max
    x[7, 0] = 0.0
    w = make_input((cols,), ember.float32, seed=1, specials=False)
    b = make_input((cols,), ember.float32, seed=2, specials=False)
    return x, w, b


@pytest.mark.parametrize("cols", [1, 5, 31, 32, 33, 64, 97, 1000])
@pytest.mark.parametrize("program", list(_HELPERS), ids=lambda p: p.__name__)
def test_row_helpers_match_eager(program, cols):
    x, w, b = _input(cols)
    # (layer_norm of row 7 subtracts a mean of ~-95 in float32: ulp(95) ~ 8e-6 apart from PyTorch)
    compiled = check(program, x, w, b, rtol=1e-5, atol=1e-5 if program is _layer_norm else 1e-6)
    kernels = compiled.artifact.cpp_source.split("EMBER_KERNEL void ")[1:]
    if cols > 1:  # (a row of one element has no loop to reduce)
        assert all(any(h in k for k in kernels) for h in _HELPERS[program]), kernels


@pytest.mark.parametrize("threads", [1, 2])
def test_row_helpers_on_two_threads_and_streamed(monkeypatch, threads):
    # the scratch row of softmax streamed out, and rows split over threads (the prefetch of the
    # next row stops at the last row)
    monkeypatch.setattr(config.cpp, "streaming_min_bytes", 0)
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        x, w, b = _input(257)
        x = ember.cat([x] * 20)  # past the single-thread threshold
        for program in (_softmax, _log_softmax, _layer_norm):
            compiled = check(program, x, w, b, rtol=1e-5, atol=1e-5)
            assert "ember_row_" in compiled.artifact.cpp_source.split("EMBER_KERNEL void ")[1]
    finally:
        ember.set_num_threads(saved)


@pytest.mark.parametrize("cols", [7, 33, 200])
def test_row_helpers_portable_branch(monkeypatch, cols):
    # the same functions as plain loops, as a machine without AVX-512 compiles them (and its
    # streaming stores: two 32-byte halves a line)
    monkeypatch.setattr(config.cpp, "streaming_min_bytes", 0)
    x, w, b = _input(cols)
    with config.patch({"cpp.extra_flags": ("-mno-avx512f",)}):
        assert "-mno-avx512f" in _codecache.flags()
        for program in _HELPERS:
            check(program, x, w, b, rtol=1e-5, atol=1e-5)


def test_fused_rows_keep_the_generic_loops():
    # a max of a computed value (not a load) and a half-precision row stay generic loops
    x, w, b = _input(40)
    compiled = check(lambda m, x, w, b: m.softmax(x * 2 + w, -1), x, w, b, rtol=1e-5, atol=1e-6)
    kernel = compiled.artifact.cpp_source.split("EMBER_KERNEL void ")[1]
    assert "ember_row_max_f32(" not in kernel and "reduction(max:" in kernel, kernel
    h = x.to(ember.float64)
    compiled = check(_softmax, h, w, b, rtol=1e-12, atol=1e-12)
    assert "ember_row_" not in compiled.artifact.cpp_source.split("EMBER_KERNEL void ")[1]



def test_per_thread_fence_keeps_a_parenthesized_condition():
    # AOTI writes a symbolic row count in the row loop's `parallel for if(...)` ("(k0 * s0 * s1) >= ...");
    # the per-thread fence's rewrite of that pragma must keep the condition whole
    from ember.compiler.inductor._cpp import CppKernelWriter
    lines = ["    #pragma omp parallel for if((k0 * s0 * s1) >= 32768) firstprivate(a)", "    for (;;) {", "    }"]
    out = CppKernelWriter._fence_per_thread(None, lines, 0, "    ")
    assert out[0] == "    #pragma omp parallel if((k0 * s0 * s1) >= 32768)"
    assert out[2] == "    #pragma omp for firstprivate(a) nowait"
