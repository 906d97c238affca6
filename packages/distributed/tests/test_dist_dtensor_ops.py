"""Operators on DTensors (sharding propagation) and their gradients against PyTorch's DTensor on
gloo, and against the single-process computation: a 1-D mesh at 2 ranks, a (2, 2) mesh at 4."""

from __future__ import annotations

import math

import pytest
from dist_harness import FULL_RUNS, run_ranks

# PyTorch 2.13's DTensor gives mse_loss's input gradient times the mesh size (its mean over a
# sharded dim is a Partial whose backward is not rescaled): ember's equals the single-process one.
PYTORCH_OFF = {"mse/grads"}


def _close(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)
    return a == b


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=[pytest.mark.slow, pytest.mark.skipif(
    not FULL_RUNS, reason="8 processes with PyTorch: set EMBER_TEST_DIST_FULL=1")])])
def test_dtensor_ops_match_pytorch_and_single_process(world):
    ours, _, _ = run_ranks("dtensor_ops_program.py", world, limit=200)
    theirs, _, _ = run_ranks("dtensor_ops_program.py", world, lib="torch", limit=200)
    for rank in range(world):
        got, want = ours[rank], theirs[rank]
        for key, value in got.items():
            if key.endswith("plain_ok") or key == "sdpa_matches_plain":
                assert value is True, f"rank {rank}: {key}"
        for key, expected in want.items():
            if key in PYTORCH_OFF or key.endswith("plain_ok"):
                continue
            assert _close(got[key], expected), f"rank {rank} {key}: {got[key]} != {expected}"
