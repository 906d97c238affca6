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


def test_importing_dtensor_keeps_plain_ops_on_the_native_path():
    # Defining DTensor (a __torch_dispatch__ subclass) would switch the core's subclass check on
    # for every op; it must wait for the first DTensor, so that importing FSDP or tensor
    # parallelism does not slow a process's plain ops. A world of one, in a fresh process.
    import subprocess
    import sys

    code = """
import os
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"], RANK="0", WORLD_SIZE="1")
import ember, ember.distributed as dist
import ember.distributed.fsdp, ember.distributed.tensor as dt
from ember._src import dispatch
before = dispatch._SUBCLASS_DISPATCH[0]
dist.init_process_group("gloo")
from ember.distributed.device_mesh import init_device_mesh
d = dt.distribute_tensor(ember.arange(4.0), init_device_mesh("cpu", (1,)), [dt.Shard(0)])
print(before, dispatch._SUBCLASS_DISPATCH[0], (d * 2).full_tensor().tolist())
dist.destroy_process_group()
"""
    from dist_harness import free_port

    env = dict(__import__("os").environ, PORT=str(free_port()))
    env["PYTHONPATH"] = __import__("os").pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split("\n")[0] == "False True [0.0, 2.0, 4.0, 6.0]", out.stderr
