"""CPU storages of 256 KiB to 32 MiB are recycled through ember's block cache (storage.cpp): a reused
block holds the old bytes, so zeros/zeros_like/new_zeros must still clear it, a block must never
serve two live tensors, and EMBER_CPU_CACHE_MB=0 turns the cache off. Checked against NumPy."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

import ember

N = 1 << 18  # float32 elements: 1 MiB, inside the cached range


def test_reused_block_is_cleared_by_zeros():
    for make in (lambda: ember.zeros(N), lambda: ember.zeros_like(ember.empty(N)), lambda: ember.empty(0).new_zeros(N)):
        a = ember.full((N,), 7.0)
        del a  # its block goes to the cache
        z = make()
        np.testing.assert_array_equal(z.numpy(), np.zeros(N, np.float32))


def test_live_tensors_never_share_a_block():
    held = [ember.full((N,), float(i)) for i in range(8)]
    for _ in range(3):
        tmp = [ember.empty(N) for _ in range(4)]
        ptrs = {t.data_ptr() for t in held} | {t.data_ptr() for t in tmp}
        assert len(ptrs) == len(held) + len(tmp)
        del tmp
    for i, t in enumerate(held):
        np.testing.assert_array_equal(t.numpy(), np.full(N, float(i), np.float32))


def test_results_the_same_with_the_cache_off():
    code = ("import sys, ember\n"
            "ember.manual_seed(0)\n"
            "x = ember.randn(512, 1024)\n"
            "for _ in range(3):\n"
            "    y = (x @ x.t() / 64).softmax(-1).sum(0)\n"
            "sys.stdout.buffer.write(y.numpy().tobytes())\n")
    outs = []
    for mb in ("64", "0"):
        env = dict(os.environ, EMBER_CPU_CACHE_MB=mb)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        outs.append(done.stdout)
    assert len(outs[0]) == 512 * 4 and len(set(np.frombuffer(outs[0], np.float32))) > 100
    assert outs[0] == outs[1]
