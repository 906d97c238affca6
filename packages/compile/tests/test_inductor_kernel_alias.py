"""Kernels equal up to buffer names (the same block applied twice) are compiled once: the
second is an alias of the first's symbol, and both compute their own buffers."""

import glob
import os

import numpy as np
import torch

import ember
from ember.compiler.inductor import _codecache


def _program(lib):
    def f(x, w1, w2, w3):
        # the matmuls (library calls) keep the blocks in separate kernels
        a = lib.softmax((x * w1).relu(), -1) @ w3
        b = lib.softmax((a * w2).relu(), -1) @ w3
        c = lib.softmax((b + w1).tanh(), -1)  # a different kernel: not an alias
        return a, b, c
    return f


def test_repeated_kernels_become_aliases_and_compute_their_own_values(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    _codecache.clear_memory_cache()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((5, 5)).astype(np.float32) for _ in range(4)]
    got = ember.compile(_program(ember))(*[ember.from_numpy(a) for a in arrays])
    expect = _program(torch)(*[torch.from_numpy(a) for a in arrays])
    for g, e in zip(got, expect):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)
    sources = "".join(open(p).read() for p in glob.glob(os.path.join(str(tmp_path), "compile", "*", "*.c")))
    assert sources.count("__attribute__((alias(") == 1
    assert sources.count("{\n") > 0


def test_kernels_with_streamed_rows_become_aliases(tmp_path, monkeypatch):
    # a row kernel's streaming-store loop names its locals after the buffer: those names end in
    # the buffer's, so the canonical text (and the alias) still finds the repeated block
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    _codecache.clear_memory_cache()

    def f(lib, x, w):
        a = lib.log_softmax(x * 2, -1) @ w
        return lib.log_softmax(a * 2, -1)

    rng = np.random.default_rng(1)
    x, w = (rng.standard_normal((6, 6)).astype(np.float32) for _ in range(2))
    got = ember.compile(lambda x, w: f(ember, x, w))(ember.from_numpy(x), ember.from_numpy(w))
    np.testing.assert_allclose(got.numpy(), f(torch, torch.from_numpy(x), torch.from_numpy(w)).numpy(),
                               rtol=1e-5, atol=1e-6)
    sources = "".join(open(p).read() for p in glob.glob(os.path.join(str(tmp_path), "compile", "*", "*.c")))
    assert "ember_stream_float(" in sources
    assert sources.count("__attribute__((alias(") == 1
