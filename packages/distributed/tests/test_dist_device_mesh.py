"""DeviceMesh at 4 ranks, against PyTorch's init_device_mesh on gloo."""

from __future__ import annotations

import pytest
from dist_harness import run_ranks


@pytest.mark.slow
def test_device_mesh_matches_pytorch():
    ours, _, _ = run_ranks("mesh_program.py", 4, limit=150)
    theirs, _, _ = run_ranks("mesh_program.py", 4, lib="torch", limit=150)
    assert ours == theirs


def test_device_mesh_layout_at_four_ranks():
    results, _, _ = run_ranks("mesh_program.py", 4, limit=120)
    for rank, got in enumerate(results):
        dp, tp = divmod(rank, 2)
        assert got["coordinate"] == [dp, tp]
        assert got["tp_ranks"] == [2 * dp, 2 * dp + 1] and got["dp_ranks"] == [tp, tp + 2]
        assert got["sum_tp"] == [float(4 * dp + 1)] and got["sum_dp"] == [float(2 * tp + 2)]
        assert got["sub_tp"] == [[2 * dp, 2 * dp + 1], 1, [2 * dp, 2 * dp + 1], tp]
        assert got["both"] == [[0, 1], [2, 3]] and got["swapped"] == "KeyError"
        assert got["no_dim_error"] == "RuntimeError"
