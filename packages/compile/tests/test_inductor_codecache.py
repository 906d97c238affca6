"""The kernel cache across processes, concurrent compiles, size-generic kernels, the
``output_code`` log, and ember.compile(backend="inductor") end to end (inference and training).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from inductor_test_helpers import compile_program, make_input

import ember
from ember.compiler.inductor import _codecache

# A child process: compiles one graph in the cache dir it is given, prints "ok <compiles>".
CHILD = textwrap.dedent("""
    import sys
    import ember
    from ember.compiler import make_fx
    from ember.compiler.inductor import compile_fx, _codecache
    compiles = []
    original = _codecache._compile
    def counting(source, path):
        compiles.append(path)
        original(source, path)
    _codecache._compile = counting
    scale = float(sys.argv[1])
    def f(x):
        return ((x * scale).sin() + 1).relu().sum(0)
    x = ember.arange(12.0).reshape(3, 4)
    fn = compile_fx(make_fx(f)(x), [x])
    assert fn.artifact is not None and fn.artifact.kernel_count >= 1
    assert bool((fn(x) - f(x)).abs().max() < 1e-5)
    print("ok", len(compiles))
""")


def _run_child(cache_dir, scale="0.25", extra_env=None):
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), **(extra_env or {}))
    return subprocess.Popen([sys.executable, "-c", CHILD, scale], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _libraries(cache_dir):
    return sorted(p for p in (cache_dir / "compile").rglob("*.so"))


@pytest.mark.slow
def test_cache_is_shared_by_concurrent_and_later_processes(tmp_path):
    # two processes compile the same new kernel at once: each builds its own file and renames
    # it over one name; a third process then loads that library without compiling
    children = [_run_child(tmp_path) for _ in range(2)]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert out.split()[0] == "ok"
    libs = _libraries(tmp_path)
    assert len(libs) == 1 and libs[0].with_suffix(".c").exists()
    assert not list((tmp_path / "compile").rglob(".build-*"))
    later = _run_child(tmp_path)
    out, err = later.communicate(timeout=300)
    assert later.returncode == 0, err
    assert out.split() == ["ok", "0"]  # loaded, not compiled
    assert _libraries(tmp_path) == libs


@pytest.fixture
def compiles(monkeypatch):
    """The paths of the kernels compiled from here on (the in-memory cache emptied first)."""
    paths = []
    original = _codecache._compile
    monkeypatch.setattr(_codecache, "_compile", lambda source, path: (paths.append(path), original(source, path)))
    _codecache.clear_memory_cache()
    return paths


def test_new_batch_size_reuses_compiled_kernels(compiles):

    def program(m, x, w):
        return m.softmax(x * 0.37, -1) + w, (x - x.mean(-1, keepdim=True)).sum(0)

    w = make_input((24,), ember.float32, seed=1, specials=False)
    compiled, _ = compile_program(program, [make_input((4, 24), ember.float32, specials=False), w])
    first = len(compiles)
    for batch in (4, 9, 33, 1):
        x = make_input((batch, 24), ember.float32, seed=batch, specials=False)
        for got, want in zip(compiled(x, w), program(ember, x, w)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    # batch 1 specializes the size-1 dim away (new loop structure); 9 and 33 reuse batch 4's code
    assert len(compiles) - first <= 1
    assert "k0" in compiled.artifact.cpp_source  # sizes are arguments


def test_new_float_argument_reuses_compiled_kernels(compiles):
    # A float argument of a compiled function becomes a graph input once it changes (as in
    # PyTorch); its value is a kernel argument, so a new value re-lowers but compiles nothing.

    def step(x, lr, n):
        return (x[:n] * lr).sin().sum(0) - lr

    x = make_input((16, 8), ember.float64, seed=3, specials=False)
    compiled = ember.compile(step)
    values = [(0.5, 4), (0.25, 5), (0.125, 6), (1e-3, 7), (-2.5, 4), (0.3, 9)]
    for i, (lr, n) in enumerate(values):
        np.testing.assert_allclose(compiled(x, lr, n).numpy(), step(x, lr, n).numpy(), rtol=1e-10)
        if i == 1:
            after_dynamic = len(compiles)
    assert len(compiles) == after_dynamic


@pytest.mark.slow
def test_output_code_log_shows_readable_kernels(tmp_path):
    script = textwrap.dedent("""
        import ember
        def f(x, w):
            return ember.softmax(x @ w, -1).relu()
        c = ember.compile(f)
        x, w = ember.randn(4, 8), ember.randn(8, 8)
        assert bool((c(x, w) - f(x, w)).abs().max() < 1e-5)
    """)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path), EMBER_LOGS="output_code")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    log = proc.stdout + proc.stderr
    assert "def call(args)" in log and "EMBER_KERNEL void kernel0" in log
    assert "softmax" in log and "# mm" in log and "#pragma omp" in log


def test_ember_compile_inference_and_training_step():
    model = ember.nn.Sequential(ember.nn.Linear(16, 32), ember.nn.GELU(), ember.nn.LayerNorm(32),
                                ember.nn.Linear(32, 10))
    compiled = ember.compile(model)
    x = make_input((8, 16), ember.float32, specials=False)
    target = ember.tensor([1, 0, 3, 9, 2, 2, 5, 7])
    with ember.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-5)

    loss = ember.nn.functional.cross_entropy(compiled(x), target)
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ember.nn.functional.cross_entropy(model(x), target).backward()
    for g, p in zip(got, model.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5)
