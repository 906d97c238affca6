"""Tensor parallelism: parallelize_module with Colwise/Rowwise/Sequence parallel styles and
PrepareModuleInput on a mini-GPT block trains as the single-process model does, and lays the
parameters out as PyTorch's does (gloo, 2 ranks)."""

from __future__ import annotations

from dist_harness import run_ranks


def test_tensor_and_sequence_parallel_match_pytorch_and_single_process():
    ours, _, _ = run_ranks("tp_program.py", 2, limit=150)
    theirs, _, _ = run_ranks("tp_program.py", 2, lib="torch", limit=150)
    for rank in range(2):
        assert ours[rank] == theirs[rank], f"rank {rank}: {ours[rank]} != {theirs[rank]}"
        for plan in ("tp", "sp"):
            assert ours[rank][f"{plan}/losses_close"] is True and ours[rank][f"{plan}/params_close"] is True
        assert ours[rank]["prepare_io"] == ["DTensor", "(Shard(dim=1),)", [2, 4, 8], True]
