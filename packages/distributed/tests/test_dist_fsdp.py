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


def _close(a, b, path="") -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-5), path
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    else:
        assert a == b, path


def test_fsdp2_example_meta_init_checkpoint_and_explicit_unshard_match_pytorch():
    # pytorch/examples distributed/FSDP2: to_empty after a meta-device fully_shard, a checkpoint
    # assigned as distribute_tensor pieces, unshard() before each forward, full state dicts on
    # rank 0 only and set_*_state_dict(broadcast_from_rank0) with {} on the other ranks.
    ours, _, _ = run_ranks("fsdp_meta_program.py", 2, limit=120)
    theirs, _, _ = run_ranks("fsdp_meta_program.py", 2, lib="torch", limit=120)
    for rank in range(2):
        _close(ours[rank], theirs[rank], f"rank {rank}")
    assert ours[1]["full_state"][2] == {}
