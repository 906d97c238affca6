"""DistributedDataParallel equals single-process full-batch training; DistributedSampler equals
PyTorch's index for index."""

from __future__ import annotations

import pytest
from dist_harness import run_ranks

EXPECTED = {
    "basic": True, "default_buckets": True, "no_sync": True, "bucket_view": True, "bucket_view_layout": True,
    "find_unused": True, "find_unused_grad_none": True,
    "fp16_hook": True, "bf16_hook": True, "broadcast_buffers": [1.0, 1.0, 1.0, 1.0],
    "unused_error": ["RuntimeError", True], "join": True, "join_context": True, "join_empty": "ValueError",
    "device_id_errors": ["ValueError", "ValueError", "ValueError", None],
    "no_sync_unused": [[0.4, 0.4, 0.4, 0.4], [1.0, 1.0]], "dataclass_output": [2.0, True],
}


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_ddp_matches_full_batch_training(world):
    # programs/ddp_program.py gives the same report under PyTorch's DDP (bf16 hook aside, which
    # PyTorch only offers with NCCL); each rank compares with rtol 1e-5 itself.
    results, _, _ = run_ranks("ddp_program.py", world, limit=150)
    for rank in range(world):
        assert results[rank] == EXPECTED, f"rank {rank}: {results[rank]}"


@pytest.mark.parametrize("n,replicas,shuffle,drop_last", [
    (10, 3, True, False), (10, 3, True, True), (7, 2, False, False), (100, 4, True, False), (2, 5, True, False),
    (1000, 2, True, True),
])
def test_distributed_sampler_matches_pytorch(n, replicas, shuffle, drop_last):
    torch_data = pytest.importorskip("torch.utils.data.distributed")
    from ember.utils.data.distributed import DistributedSampler

    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=11, drop_last=drop_last)
        theirs = torch_data.DistributedSampler(range(n), replicas, rank, shuffle=shuffle, seed=11,
                                               drop_last=drop_last)
        for epoch in range(3):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs)
            assert len(ours) == len(theirs)


def test_distributed_sampler_errors_and_defaults():
    from ember.utils.data.distributed import DistributedSampler

    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), num_replicas=2, rank=3)
    with pytest.raises(ValueError):  # no process group: PyTorch raises ValueError too
        DistributedSampler(range(4))


def test_ddp_is_reachable_from_nn_parallel():
    import ember.nn.parallel
    from ember.distributed._ddp import DistributedDataParallel

    assert ember.nn.parallel.DistributedDataParallel is DistributedDataParallel


def test_sampler_reachable_as_torch_programs_name_it():
    """``torch.utils.data.distributed.DistributedSampler`` and ``torch.utils.data.DistributedSampler``
    work after a bare ``import torch``; so must ember's."""
    import ember

    assert ember.utils.data.distributed.DistributedSampler is ember.utils.data.DistributedSampler


@pytest.mark.parametrize("shapes", [
    [(1024, 256), (1024,), (1024, 1024), (1024,), (10, 1024), (10,)],  # the benchmark's MLP
    [(300, 300)] * 8,  # several buckets: 1 MiB first, then the 25 MiB cap
    [(3000, 1000), (5,), (2000, 2000), (7,)],  # parameters larger than the caps
    [(600, 600), (600,), (20,)],  # nothing reaches the first cap
])
def test_bucket_assignment_matches_pytorch(shapes):
    # PyTorch's own assignment over the parameters in reverse order (as its DDP rebuilds buckets
    # in the order backward produces gradients), first bucket capped at 1 MiB.
    torch = pytest.importorskip("torch")
    import ember
    from ember.distributed._ddp import assign_buckets

    theirs, _ = torch.distributed._compute_bucket_assignment_by_size(
        [torch.empty(s) for s in reversed(shapes)], [1024 * 1024, 25 * 1024 * 1024], [False] * len(shapes))
    last = len(shapes) - 1
    assert assign_buckets([ember.empty(s) for s in shapes], 25 * 1024 * 1024) == [
        [last - i for i in bucket] for bucket in theirs]


def test_sync_batch_norm_matches_whole_batch_norm():
    # programs/syncbn_program.py: each rank normalizes its slice with the whole batch's statistics.
    results, _, _ = run_ranks("syncbn_program.py", 2, limit=120)
    expected = {"type": "SyncBatchNorm", "output": True, "input_grad": True, "weight_grad": True, "bias_grad": True,
                "running": [True, True, 1], "eval": True, "warnings": []}
    for rank in range(2):
        assert results[rank] == expected, f"rank {rank}: {results[rank]}"


def test_zero_redundancy_optimizer_matches_pytorch():
    ours, _, _ = run_ranks("zero_program.py", 2, limit=120)
    theirs, _, _ = run_ranks("zero_program.py", 2, lib="torch", limit=120)
    # The reload is checked on ember alone: PyTorch 2.13's reloaded ZeRO steps to other values than
    # the optimizer it was saved from (measured: reloaded_step_equal False there).
    for rank in range(2):
        mine = {k: v for k, v in ours[rank].items() if k != "reloaded_step_equal"}
        assert mine == {k: v for k, v in theirs[rank].items() if k != "reloaded_step_equal"}
        assert ours[rank]["reloaded_step_equal"] is True and ours[rank]["unconsolidated"] == "RuntimeError"


def _assert_reports_match(ours, theirs, is_parameters, ranks=2):
    """Every rank's report as PyTorch's: the same keys and values; the entries ``is_parameters(key)``
    names are lists of parameter lists, compared to 1e-5 (the libraries' matmuls may round the last
    bit differently)."""
    for rank in range(ranks):
        assert set(ours[rank]) == set(theirs[rank])
        for key, expected in theirs[rank].items():
            got = ours[rank][key]
            if is_parameters(key):
                flat_got = [v for p in got for v in p]
                flat_expected = [v for p in expected for v in p]
                assert len(flat_got) == len(flat_expected), key
                assert max(abs(a - b) for a, b in zip(flat_got, flat_expected)) < 1e-5, (rank, key)
            else:
                assert got == expected, (rank, key, got, expected)


def test_api_gaps_match_gloo():
    # programs/api_gaps_program.py: DDPCommHookType hooks, PowerSGD (ranks 1-3, warm and cold
    # start, with and without error feedback), Work.result() before completion,
    # split_group on CPU, ``with mesh:``; the same report as PyTorch's gloo (parameters to 1e-5:
    # the two libraries' matmuls may round the last bit differently).
    ours, _, _ = run_ranks("api_gaps_program.py", 2, "ember", limit=120)
    theirs, _, _ = run_ranks("api_gaps_program.py", 2, "torch", limit=120)
    _assert_reports_match(ours, theirs, lambda key: key.startswith("hook/") and key not in ("hook/members",
                                                                                           "hook/twice"))
    # no averaging under NOOP: the ranks' parameters part ways, unlike with the other hooks
    assert ours[0]["hook/NOOP"] != ours[1]["hook/NOOP"]
    assert ours[0]["hook/FP16_COMPRESS"] == ours[1]["hook/FP16_COMPRESS"]
    assert ours[0]["result/early"] == "RuntimeError"
    # PowerSGD's low-rank averaging really changed the training (against its plain warm-up steps)
    low_rank = [v for p in ours[0]["hook/powersgd_rank1"] for v in p]
    plain = [v for p in ours[0]["hook/powersgd_not_started"] for v in p]
    assert max(abs(a - b) for a, b in zip(low_rank, plain)) > 1e-3


def test_unimplemented_comm_hook_types_raise():
    from ember.distributed.algorithms.ddp_comm_hooks import DDPCommHookType, register_ddp_comm_hook

    for name in ("QUANTIZE_PER_TENSOR", "QUANTIZE_PER_CHANNEL", "BATCHED_POWER_SGD", "BATCHED_POWER_SGD_RANK2"):
        with pytest.raises(NotImplementedError, match=name):
            register_ddp_comm_hook(DDPCommHookType[name], object())


def test_comm_hooks_as_pytorch_docs_write_them_match_gloo():
    # programs/comm_hooks_program.py: hooks returning ember.futures.Future built by hand, through
    # fut.then(...), ProcessGroup.allreduce(...).get_future(), collect_all and wait_all; the
    # errors of malformed hooks; Work.get_future() values. The same report as PyTorch's gloo
    # (parameters to 1e-5: the libraries' matmuls may round the last bit differently).
    ours, _, _ = run_ranks("comm_hooks_program.py", 2, "ember", limit=120)
    theirs, _, _ = run_ranks("comm_hooks_program.py", 2, "torch", limit=120)
    _assert_reports_match(ours, theirs, lambda key: key.startswith("train/"))
    # the hooks averaged (the ranks agree), the no-op hook did not
    assert ours[0]["train/chained"] == ours[1]["train/chained"]
    assert ours[0]["train/noop"] != ours[1]["train/noop"]


def test_pytorch_ddp_tutorial_program_matches_gloo():
    # programs/ddp_tutorial_program.py: the DDP tutorial's demo_basic and demo_checkpoint under
    # mp.spawn, then static_graph, no_sync gradient accumulation and find_unused_parameters;
    # every rank's parameters as PyTorch's gloo gives them (to 1e-5).
    import sys

    from dist_harness import free_port, run_command

    ours, _, _ = run_command([sys.executable, "ddp_tutorial_program.py", str(free_port())], 2, limit=150)
    theirs, _, _ = run_command([sys.executable, "ddp_tutorial_program.py", str(free_port())], 2, "torch",
                               limit=150)
    for rank in range(2):
        assert set(ours[rank]) == set(theirs[rank])
        assert ours[rank]["checkpoint_equal"] is True
        for key, expected in theirs[rank].items():
            if isinstance(expected, list):
                flat_got = [v for p in ours[rank][key] for v in p]
                flat_expected = [v for p in expected for v in p]
                assert len(flat_got) == len(flat_expected), key
                assert max(abs(a - b) for a, b in zip(flat_got, flat_expected)) < 1e-5, (rank, key)
            else:
                assert ours[rank][key] == expected, (rank, key)
    assert ours[0]["static_graph"] == ours[1]["static_graph"]
