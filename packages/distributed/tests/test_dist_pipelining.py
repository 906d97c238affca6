"""Pipeline parallelism: ScheduleGPipe and Schedule1F1B over 4 microbatches train each stage as
the single-process model trains on the whole batch, as PyTorch's pipelining does on gloo (2
stages), and at 4 stages; ScheduleInterleaved1F1B and ScheduleLoopedBFS with two stages per rank
(2 ranks) likewise; pipeline() cuts an nn.Sequential at SplitPoints."""

from __future__ import annotations

import pytest
from dist_harness import FULL_RUNS, run_ranks


def test_two_stage_pipeline_matches_pytorch_and_full_batch_training():
    ours, _, _ = run_ranks("pipeline_program.py", 2, limit=150)
    theirs, _, _ = run_ranks("pipeline_program.py", 2, lib="torch", limit=150)
    for rank in range(2):
        mine = {k: v for k, v in ours[rank].items() if not k.startswith("pipeline_")}
        assert mine == theirs[rank]
        assert all(v is True for k, v in ours[rank].items() if not k.endswith(("out_shape", "eval"))), ours[rank]
    assert ours[0]["eval"] == [True, 0, True] and ours[1]["eval"] == [True, 4, True]
    assert ours[1]["interleaved/out_shape"] == ours[1]["looped_bfs/out_shape"] == [8, 4]


@pytest.mark.slow
def test_four_stage_pipeline_equals_full_batch_training():
    ours, _, _ = run_ranks("pipeline_program.py", 4, limit=150)
    for rank in range(4):
        assert all(v is True for k, v in ours[rank].items() if k not in ("out_shape", "eval")), ours[rank]
        assert ours[rank]["eval"] == [True, 4 if rank == 3 else 0, True]
    assert ours[3]["out_shape"] == [8, 4]


@pytest.mark.slow
@pytest.mark.skipif(not FULL_RUNS, reason="4 more processes: set EMBER_TEST_DIST_FULL=1")
def test_pipelining_tutorial_manual_split_matches_pytorch():
    # programs/pipelining_tutorial_program.py: the tutorial's Transformer (ModuleDict layers) split
    # by deleting layers, PipelineStage + ScheduleGPipe, then an SGD step: the same losses, output
    # and parameters as PyTorch's pipelining on gloo (to 1e-5)
    ours, _, _ = run_ranks("pipelining_tutorial_program.py", 2, limit=150, args=("manual",))
    theirs, _, _ = run_ranks("pipelining_tutorial_program.py", 2, lib="torch", limit=150, args=("manual",))
    assert ours[1]["output"][0] == theirs[1]["output"][0] == [8, 16, 50]
    assert abs(ours[1]["output"][1] - theirs[1]["output"][1]) < 1e-3
    assert max(abs(a - b) for a, b in zip(ours[1]["losses"], theirs[1]["losses"])) < 1e-5
    for rank in range(2):
        assert set(ours[rank]["params"]) == set(theirs[rank]["params"])
        for name, value in theirs[rank]["params"].items():
            assert abs(ours[rank]["params"][name] - value) < 1e-5, (rank, name)
