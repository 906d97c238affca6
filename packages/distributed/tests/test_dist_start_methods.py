"""Each way of starting processes forms one world: by hand with env:// / tcp:// / file://,
``mp.spawn``, ``mpiexec``, and the ``ember-run`` launcher."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from dist_harness import free_port, run_command, run_ranks

EXPECTED_SUM = [1.0, 3.0, 5.0, 7.0]  # arange(4) + rank, summed over 2 ranks


def _check(results, world=2):
    for rank in range(world):
        assert results[rank]["rank"] == rank
        assert results[rank]["world"] == world
        assert results[rank]["sum"]["value"] == [sum(i + r for r in range(world)) for i in range(4)]
        assert results[rank]["bcast"]["value"] == [float(world - 1)] * 2


@pytest.mark.parametrize("method", ["env", "tcp", "file"])
def test_started_by_hand(method):
    results, _, _ = run_ranks("start_program.py", 2, method=method)
    _check(results)


def test_four_ranks_env():
    results, _, _ = run_ranks("start_program.py", 4, method="env", limit=120)
    _check(results, 4)


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec on PATH")
def test_started_by_mpiexec():
    results, _, _ = run_command(["mpiexec", "-n", "2", sys.executable, "start_program.py"], 2)
    _check(results)


def test_mp_spawn_and_error_propagation():
    # Both workers all-reduce and report; then worker 1 raises, which the parent's spawn turns
    # into ProcessRaisedException carrying the worker's traceback.
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    results, _, _ = run_command([sys.executable, "spawn_program.py", "raise"], 10, extra_env=env)
    assert results[0]["sum"]["value"] == [3.0, 3.0, 3.0]
    assert results[1]["sum"]["value"] == [3.0, 3.0, 3.0]
    assert results[9] == {"outcome": ["ProcessRaisedException", 1, True]}


def test_launcher_sets_torchrun_environment():
    port = free_port()
    command = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", "--master-addr",
               "127.0.0.1", "--master-port", str(port), "start_program.py"]
    results, _, _ = run_command(command, 2)
    _check(results)
    for rank in range(2):
        env = results[rank]["env"]
        assert env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == str(port)
        assert env["GROUP_RANK"] == "0" and env["TORCHELASTIC_RUN_ID"] == "none"  # torchrun's default


def test_launcher_restarts_a_failed_group():
    command = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", "--master-port",
               str(free_port()), "--max-restarts", "1", "restart_program.py"]
    results, codes, logs = run_command(command, 2, limit=120)
    assert codes == [0], logs
    assert [r["restart"] for r in results] == [1, 1]
    assert all(r["sum"]["value"] == [2.0, 2.0] for r in results)
    assert "worker failure: rank 1 (exit code 1)" in logs
    # the exception @record wrote into TORCHELASTIC_ERROR_FILE, reported as torchrun's root cause
    assert "rank 1 (local_rank: 1) exit code 1: ValueError: rank 1 gives up" in logs
    assert 'raise ValueError("rank 1 gives up")' in logs


def test_launcher_fails_after_restarts_run_out():
    command = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", "--master-port",
               str(free_port()), "restart_program.py"]
    _, codes, logs = run_command(command, 2, limit=120, allow_fail=True)
    assert codes == [1], logs


def test_init_destroy_init_again_on_the_same_port():
    # MPI starts once per process: later rounds reuse the world; rank 0's new store replaces the
    # old one on the same port while rank 1 may still be connected to the old one.
    results, _, _ = run_ranks("reinit_program.py", 2)
    for rank in range(2):
        assert results[rank]["sums"] == [[2.0, 2.0], [4.0, 4.0], [6.0, 6.0]]


def test_launcher_multi_node_environment():
    # Node 1 of 2 with 2 workers each: ranks 2 and 3 of 4; the store address from --rdzv-endpoint.
    code = ("import json, os; r = os.environ['RANK']; json.dump({k: os.environ.get(k) for k in "
            "('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'MASTER_ADDR', 'MASTER_PORT')}, "
            "open(os.path.join(os.environ['DIST_OUT'], 'rank%d.json' % (int(r) - 2)), 'w'))")
    command = [sys.executable, "-m", "ember.distributed.run", "--nnodes", "2", "--node_rank", "1",
               "--nproc_per_node", "2", "--rdzv-endpoint", "10.1.2.3:4567", "--no-python", sys.executable, "-c", code]
    results, _, _ = run_command(command, 2)
    for local in range(2):
        assert results[local] == {
            "RANK": str(2 + local), "LOCAL_RANK": str(local), "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1", "MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "4567",
        }


def test_launcher_log_dir_redirects_and_tee(tmp_path):
    # torchrun's --log-dir/--redirects/--tee/--local-ranks-filter: each redirected or tee'd stream in
    # <log-dir>/<run id>_*/attempt_0/<local rank>/{stdout,stderr}.log; tee'd lines also reach the
    # console prefixed "[<role><local rank>]:", for the filtered local ranks only.
    script = tmp_path / "talk.py"
    script.write_text("import os, sys\nprint('out', os.environ['LOCAL_RANK'])\n"
                      "print('err', os.environ['LOCAL_RANK'], file=sys.stderr)\n")
    logs = tmp_path / "logs"
    out = subprocess.run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2", "--standalone",
                          "--log_dir", str(logs), "--tee", "3", "--local-ranks-filter", "0", "-r", "1:2",
                          str(script)], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[default0]:out 0"]
    assert "[default0]:err 0" in out.stderr and "err 1" not in out.stderr
    (run_dir,) = logs.iterdir()
    assert run_dir.name.startswith("none_")
    for rank in (0, 1):
        folder = run_dir / "attempt_0" / str(rank)
        assert (folder / "stdout.log").read_text() == f"out {rank}\n"
        assert (folder / "stderr.log").read_text() == f"err {rank}\n"


def test_calls_before_init_and_bad_init_arguments_match_pytorch():
    # Collectives and queries before init_process_group, destroy without a group, unknown backends
    # and incomplete init_method URLs: PyTorch's exception types and messages.
    ember_results, _, _ = run_ranks("misuse_program.py", 1, "ember", limit=60)
    torch_results, _, _ = run_ranks("misuse_program.py", 1, "torch", limit=60)
    assert ember_results[0] == torch_results[0]


def test_sharing_strategies_as_torch():
    import torch.multiprocessing as tmp

    import ember.multiprocessing as emp

    assert emp.get_all_sharing_strategies() == tmp.get_all_sharing_strategies()
    assert emp.get_sharing_strategy() == tmp.get_sharing_strategy() == "file_descriptor"
    try:
        for mp in (emp, tmp):
            mp.set_sharing_strategy("file_system")
            assert mp.get_sharing_strategy() == "file_system"
            with pytest.raises(AssertionError):
                mp.set_sharing_strategy("shared_memory")
            assert mp.get_sharing_strategy() == "file_system"
    finally:
        emp.set_sharing_strategy("file_descriptor")
        tmp.set_sharing_strategy("file_descriptor")
