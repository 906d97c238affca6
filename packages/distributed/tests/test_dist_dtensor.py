"""DeviceMesh and DTensor placements/redistribution, against PyTorch's on gloo: a 1-D mesh at 2
ranks, a (2, 2) mesh at 4 ranks (one program run per library covers both)."""

from __future__ import annotations

import pytest
from dist_harness import run_ranks


def _compare(world):
    ours, _, _ = run_ranks("dtensor_program.py", world, limit=150)
    theirs, _, _ = run_ranks("dtensor_program.py", world, lib="torch", limit=150)
    for rank in range(world):
        assert set(ours[rank]) == set(theirs[rank])
        for key, expected in theirs[rank].items():
            assert ours[rank][key] == expected, f"rank {rank} {key}: {ours[rank][key]} != {expected}"
    return ours


def test_dtensor_on_a_1d_mesh_matches_pytorch():
    _compare(2)


@pytest.mark.slow
def test_2d_mesh_and_dtensor_match_pytorch():
    ours = _compare(4)
    for rank, got in enumerate(ours):  # the layout itself, spelled out
        mesh = got["mesh"]
        dp, tp = divmod(rank, 2)
        assert mesh["coordinate"] == [dp, tp]
        assert mesh["tp_ranks"] == [2 * dp, 2 * dp + 1] and mesh["dp_ranks"] == [tp, tp + 2]
        assert mesh["sum_tp"] == [float(4 * dp + 1)] and mesh["sum_dp"] == [float(2 * tp + 2)]
        assert mesh["sub_tp"] == [[2 * dp, 2 * dp + 1], 1, [2 * dp, 2 * dp + 1], tp]
        assert mesh["both"] == [[0, 1], [2, 3]] and mesh["swapped"] == "KeyError"
        assert mesh["no_dim_error"] == "RuntimeError"
