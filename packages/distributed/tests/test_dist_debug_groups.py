"""EMBER_DISTRIBUTED_DEBUG=DETAIL catches mismatched collectives; subgroups and monitored_barrier
at 4 ranks."""

from __future__ import annotations

from dist_harness import run_ranks


def test_mismatches_subgroups_and_monitored_barrier_at_four_ranks():
    world = 4
    results, _, logs = run_ranks("misc_program.py", world, extra_env={"EMBER_DISTRIBUTED_DEBUG": "DETAIL"},
                                 limit=120)
    for rank in range(world):
        got = results[rank]
        assert got is not None, logs
        assert got["matched"]["value"] == [4.0] * 3
        assert got["shape_mismatch"] == ["RuntimeError", True, True, True]
        assert got["op_mismatch"] == ["RuntimeError", True]
        assert got["gather_mismatch"] == ["RuntimeError", True]
        pair = [rank - rank % 2, rank - rank % 2 + 1]
        assert got["subgroup"] == [{"dtype": "float32", "value": [float(sum(pair))]}, pair, 2]
        assert got["monitored_ok"] is True
    # PyTorch's words (gloo at 4 ranks: "[Rank 0]: Ranks 2, 3 failed to pass monitoredBarrier in 1000 ms")
    assert results[0]["monitored_late"] == "[Rank 0]: Ranks 3 failed to pass monitoredBarrier in 1000 ms"
