"""The NCCL backend on 2 (and 4) GPUs, one process per GPU: every collective against the MPI
engine's CPU result for the same inputs, and DDP / FSDP2 training of a mini-GPT for 5 steps
equal to single-GPU training on the full batch (rtol 1e-4, float32). Skipped, with the reason,
on machines with fewer GPUs."""

from __future__ import annotations

from dist_harness import run_ranks
from nccl_helpers import all_true, need_gpus


@need_gpus(2)
def test_every_collective_on_two_gpus_matches_mpi():
    results, _, _ = run_ranks("nccl_collectives_program.py", 2, limit=300)
    for rank, r in enumerate(results):
        assert not all_true(r), (rank, all_true(r))


@need_gpus(4)
def test_every_collective_on_four_gpus_matches_mpi():
    results, _, _ = run_ranks("nccl_collectives_program.py", 4, limit=300)
    for rank, r in enumerate(results):
        assert not all_true(r), (rank, all_true(r))


@need_gpus(2)
def test_ddp_and_fsdp_on_two_gpus_match_full_batch_training():
    results, _, _ = run_ranks("nccl_training_program.py", 2, limit=300)
    for rank, r in enumerate(results):
        assert not all_true(r), (rank, r)
        assert r["ddp_buckets"] > 1


@need_gpus(2)
def test_a_peer_killed_mid_training_ends_in_an_error_not_a_hang():
    results, codes, logs = run_ranks("nccl_fault_program.py", 2, limit=150, args=("peer_dies",), kill=(1, 15),
                                     allow_fail=True)
    r = results[0]
    assert r is not None and codes[0] == 0, logs
    assert r["result"]["error"] == "DistBackendError", r
    assert r["steps"] > 0, r
