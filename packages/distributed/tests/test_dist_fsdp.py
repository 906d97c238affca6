"""FSDP2 (``fully_shard``): training on 2 and 4 ranks equals single-process full-batch training
(nested sharding with Adam, parameters kept gathered, bf16 mixed precision, gradient accumulation
without sync and with explicit prefetch); the layout, the module classes, the state_dict and
unshard/reshard match PyTorch's FSDP2 on gloo."""

from __future__ import annotations

import pytest
from dist_harness import run_ranks

TRAINING = ("adam_nested", "sgd_keep_gathered", "mp_close", "accumulate_no_sync")


def test_fsdp_matches_pytorch_and_full_batch_training():
    ours, _, _ = run_ranks("fsdp_program.py", 2, limit=150)
    theirs, _, _ = run_ranks("fsdp_program.py", 2, lib="torch", limit=150)
    for rank in range(2):
        assert ours[rank] == theirs[rank], f"rank {rank}: {ours[rank]} != {theirs[rank]}"
        assert all(ours[rank][key] is True for key in TRAINING)


@pytest.mark.slow
def test_fsdp_at_four_ranks_equals_full_batch_training():
    ours, _, _ = run_ranks("fsdp_program.py", 4, limit=150)
    for rank in range(4):
        assert all(ours[rank][key] is True for key in TRAINING), f"rank {rank}: {ours[rank]}"
        assert ours[rank]["layout"][3:] == [[3 if rank < 3 else 1, 6], [10, 6]]
