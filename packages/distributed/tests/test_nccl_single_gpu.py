"""The NCCL backend on one GPU: every collective through the real library in a world of one,
the unique-id exchange through TCPStore, DDP/FSDP2 of a mini-GPT against plain training, and the
failures that must end in an error rather than a hang (init timeout naming the missing rank,
the watchdog aborting a stuck communicator, two ranks on one GPU). Skipped without CUDA/NCCL."""

from __future__ import annotations

import pytest
from dist_harness import run_ranks
from nccl_helpers import all_true, gpu_count, need_gpus

pytestmark = need_gpus(1)


def test_nccl_library_and_unique_id_through_tcp_store():
    import ctypes
    from datetime import timedelta

    import ember.distributed as dist
    from ember.distributed import _nccl_lib as N

    assert N.version() >= (2, 14, 0)
    first, second = N.unique_id(), N.unique_id()
    assert len(first) == 128 and first != second
    server = dist.TCPStore("127.0.0.1", 0, 2, True, timedelta(seconds=10), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", server.port, 2, False, timedelta(seconds=10))
    server.set("ember_nccl/uid", first)
    assert client.get("ember_nccl/uid") == first
    uid = N.unique_id_from(client.get("ember_nccl/uid"))
    assert ctypes.string_at(ctypes.addressof(uid), 128) == first


def test_every_collective_in_a_world_of_one():
    results, _, logs = run_ranks("nccl_collectives_program.py", 1, limit=240)
    r = results[0]
    assert r["backend"] == "cpu:gloo,cuda:nccl" and r["nccl_available"] is True
    assert not all_true(r), all_true(r)


def test_ddp_and_fsdp_mini_gpt_in_a_world_of_one_match_plain_training():
    results, _, _ = run_ranks("nccl_training_program.py", 1, limit=240)
    assert not all_true(results[0]), results[0]


def test_init_timeout_names_the_rank_that_never_joined():
    results, _, logs = run_ranks("nccl_fault_program.py", 2, limit=120, args=("init_timeout",))
    first, again = results[0]["first"], results[0]["again"]
    assert first["error"] == "DistBackendError", logs
    assert "ranks [1] never joined" in first["text"] and first["seconds"] < 60
    assert again["error"] == "DistBackendError" and "earlier error" in again["text"]


def test_watchdog_aborts_a_stuck_communicator():
    results, _, logs = run_ranks("nccl_fault_program.py", 1, limit=120, args=("stuck",))
    r = results[0]
    assert r["register"] == 0 and r["wait_value"] == 0, r
    assert r["completed"] is True and r["exception"][0] == "DistBackendError", r
    assert "timed out" in r["exception"][1], r
    assert r["wait"]["error"] == "DistBackendError"
    assert r["drained"]["error"] is None, r
    assert r["again"]["error"] == "DistBackendError"
    assert r["fresh"]["error"] is None and r["fresh_value"] == [5.0, 5.0, 5.0], r


@pytest.mark.skipif(gpu_count() != 1, reason="two ranks share a GPU only where there is just one")
def test_two_ranks_on_one_gpu_end_in_an_error_not_a_hang():
    results, _, logs = run_ranks("nccl_fault_program.py", 2, limit=120, args=("duplicate_gpu",))
    for r in results:
        outcome = r["result"]
        assert outcome["error"] == "DistBackendError" or r["value"] == [2.0] * 4, (r, logs)
