"""Ordinary distributed PyTorch programs (``programs/user/``), run as their readers launch them
(``mp.spawn`` in one process, or torchrun's environment in several) on PyTorch's gloo and on ember
(``import torch`` mapped to ember): every rank's printed lines - losses, tensors, placements,
exception types - must be the same. ``python3 dist_user_programs.py PROGRAM [NPROCS]`` shows the
differences of one program by hand."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from dist_harness import FULL_RUNS, base_env, free_port
from dist_user_programs import _RANK_LINE, USER_PROGRAMS, compare, run_program

# Programs that found nothing to fix (session 20) run outside CI's 2 cores and 30 minutes:
# EMBER_TEST_DIST_FULL=1 (`nox -s distributed_full`) runs them.
_FULL_ONLY = [pytest.mark.slow, pytest.mark.skipif(not FULL_RUNS, reason="set EMBER_TEST_DIST_FULL=1")]


def _full_only(*values):
    return pytest.param(*values, marks=_FULL_ONLY)

PROGRAMS = [
    ("ddp_spawn_sampler.py", 1),  # mp.spawn, DistributedSampler.set_epoch, no_sync, checkpoint, BN buffers
    ("ddp_join_unused.py", 2),  # Join with uneven inputs, find_unused_parameters, no_sync inside Join
    ("collectives_tour.py", 2),  # object collectives, subgroups, batch_isend_irecv, splits, AVG/PREMUL_SUM
    ("collectives_tour.py", 3),
    ("fsdp2_train.py", 2),  # fully_shard, MixedPrecisionPolicy, checkpoint.state_dict get/set
    ("dtensor_tp.py", 2),  # distribute_tensor, Partial, redistribute, distribute_module, Colwise/Rowwise
    ("mesh_2d.py", 4),  # a 2-d DeviceMesh, sub-meshes, DDP over one dim
    ("pipeline_schedules.py", 2),  # PipelineStage with ScheduleGPipe and Schedule1F1B
    ("dcp_reshard.py", 2),  # DCP save from FSDP2, load into TP / other placements, load errors
    ("hostile_lifecycle.py", 2),  # init twice, destroy then use, bad arguments to collectives
    ("hostile_backends.py", 1),  # bad backend names and world arguments
    ("ddp_extras.py", 2),  # elastic record, ZeRO, DistributedSampler options, comm hooks, nn.functional
    ("fsdp2_extras.py", 2),  # clip_grad_norm_ of DTensor grads, accumulation, LR scheduler, rank-0 save
    ("tp_block.py", 2),  # the TP tutorial's plan: SequenceParallel, PrepareModuleInput, loss_parallel
    ("spawn_errors.py", 1),  # mp.spawn: a rank raising or exiting, join=False, argument checks
    ("join_tutorial.py", 1),  # the Join tutorial: DDP + ZeroRedundancyOptimizer, a custom Joinable
    ("collectives_more.py", 3),  # p2p with tags, reduce_scatter lists, uneven all_gather, dtypes, a ring
    ("groups_objects.py", 4),  # new_subgroups / by_enumeration, object collectives in groups, bitwise ops
    _full_only("ddp_variants.py", 2),  # static_graph, gradient_as_bucket_view, tied weights, no_sync == one step
    _full_only("dtensor_ops_tour.py", 3),  # placements of matmul/reductions/views, uneven shards, from_local checks
    ("init_methods.py", 2),  # env:// / tcp:// / file:// / store inits, elastic queries, env:// missing vars
    ("hostile_args.py", 2),  # bad group/rank/list arguments, gather_object checks, DistributedSampler options
    _full_only("fsdp2_options.py", 2),  # reshard_after_forward, shard_placement_fn, output_dtype, prefetch, unshard()
    ("fsdp1_train.py", 2),  # FSDP1 auto_wrap_policy, clip, state_dict_type, FSDP.optim_state_dict round trip
]


def _id(entry):
    program, nprocs = entry.values if hasattr(entry, "values") else entry
    return f"{program[:-3]}-{nprocs}"


@pytest.mark.parametrize("program,nprocs", PROGRAMS, ids=[_id(e) for e in PROGRAMS])
def test_program_prints_what_pytorch_prints(program, nprocs):
    differences = compare(program, nprocs, limit=120)
    assert not differences, "\n".join(differences)


def test_init_waiting_for_a_rank_that_never_comes_times_out_as_pytorch():
    ours, codes, log = run_program("hostile_timeouts.py", "ember", 1, limit=60, args=("missing_rank",))
    theirs, _, _ = run_program("hostile_timeouts.py", "torch", 1, limit=60, args=("missing_rank",))
    assert codes == [0], log
    assert ours == theirs == {0: ["init: DistStoreError (RuntimeError), within the timeout's margin: True",
                                  "initialized False"]}


@pytest.mark.parametrize("case,nprocs,late", [("monitored_barrier", 2, "Rank 1"),
                                               _full_only("monitored_barrier_all", 3, "Ranks 1, 2")])
def test_monitored_barrier_with_late_ranks_names_them_as_pytorch(case, nprocs, late):
    shown = {"SHOW_MESSAGE": "1"}
    ours, codes, log = run_program("hostile_timeouts.py", "ember", nprocs, limit=60, args=(case,), extra_env=shown)
    theirs, _, _ = run_program("hostile_timeouts.py", "torch", nprocs, limit=60, args=(case,), extra_env=shown)
    assert codes == [0] * nprocs, log
    message = f"'[Rank 0]: {late} failed to pass monitoredBarrier in 3000 ms'"
    assert ours == theirs == {0: [f"monitored_barrier: RuntimeError (RuntimeError) {message}, within the timeout's "
                                  "margin: True"], **{r: ["slept past the timeout"] for r in range(1, nprocs)}}


def test_a_skipped_collective_times_out_with_a_runtime_error():
    # gloo raises a plain RuntimeError; ember its subclass DistBackendError (docs/deviations.md)
    ours, codes, log = run_program("hostile_timeouts.py", "ember", 2, limit=60, args=("skipped_collective",))
    assert codes == [0, 0], log
    assert ours == {0: ["all_reduce: DistBackendError (RuntimeError), within the timeout's margin: True"],
                    1: ["slept past the timeout"]}


def test_ranks_disagreeing_on_the_world_size_both_fail_at_init():
    # PyTorch 2.13 lets rank 0 through and fails rank 1 with DistNetworkError (docs/deviations.md)
    ours, codes, log = run_program("hostile_timeouts.py", "ember", 2, limit=60, args=("wrong_world_size",))
    assert codes == [0, 0], log
    assert ours == {r: ["init: DistStoreError (RuntimeError), within the timeout's margin: True"] for r in (0, 1)}


def test_pytorchs_own_torchrun_launches_an_ember_program(tmp_path):
    # torchrun's agent serves a PyTorch TCPStore at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True);
    # ember's rank 0 hosts its own store beside it, at MASTER_PORT + 1, instead of failing to bind
    pytest.importorskip("torch.distributed.run")
    env = base_env("ember", os.environ.get("TMPDIR", "/tmp"))
    env.update(PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")
    logs = tmp_path / "logs"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
               str(free_port()), "--log-dir", str(logs), "--redirects", "3", str(USER_PROGRAMS / "collectives_tour.py")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ours: dict = {}
    for path in sorted(logs.rglob("stdout.log")):  # one per local rank: no interleaving
        for line in path.read_text().splitlines():
            m = _RANK_LINE.match(line)
            if m:
                ours.setdefault(int(m.group(1)), []).append(m.group(2))
    theirs, _, _ = run_program("collectives_tour.py", "torch", 2, limit=120)
    differing = [(r, i, a, b) for r in (0, 1) for i, (a, b) in enumerate(zip(ours.get(r, []), theirs[r])) if a != b]
    assert not differing and [len(ours.get(r, [])) for r in (0, 1)] == [len(theirs[r]) for r in (0, 1)], \
        f"{differing[:5]}\n{done.stdout[-2000:]}"


_DISAGREEING = {  # case: (each rank's collective, what its message names)
    "shape": ("all_reduce", "rank {r} runs all_reduce(SUM) of {n} float32 elements"),
    "dtype": ("all_reduce", "rank {r} runs all_reduce(SUM) of 4 {d} elements"),
    "broadcast_shape": ("broadcast", "rank {r} runs broadcast of {b} float32 elements with root 0"),
}


@pytest.mark.parametrize("case", sorted(_DISAGREEING))
def test_ranks_disagreeing_on_a_collective_both_raise_naming_the_difference(case):
    # gloo aborts the process whose receive does not fit ("op.preamble.length <= op.nbytes") and
    # fails the other with "Connection reset by peer" (docs/deviations.md): ember raises on both
    ours, codes, log = run_program("hostile_mismatch.py", "ember", 2, limit=60, args=(case,),
                                   extra_env={"SHOW_MESSAGE": "1"})
    assert codes == [0, 0], log
    op, names = _DISAGREEING[case]
    for r in (0, 1):
        (line,) = ours[r]
        expected = names.format(r=r, n=4 + r, d=("float32", "float64")[r], b=(6, 3)[r])
        assert line.startswith(f"{op}: DistBackendError (RuntimeError) '{op}: mismatched collectives"), line
        assert expected in line and line.endswith("within the timeout's margin: True"), line


@pytest.mark.parametrize("case,op", [("dead_rank", "all_reduce"), ("dead_rank_p2p", "recv")])
def test_a_rank_that_dies_fails_its_peer_within_the_timeout_as_gloo(case, op):
    ours, codes, log = run_program("hostile_mismatch.py", "ember", 2, limit=60, args=(case,),
                                   extra_env={"SHOW_MESSAGE": "1"})
    theirs, their_codes, _ = run_program("hostile_mismatch.py", "torch", 2, limit=60, args=(case,))
    assert codes == their_codes == [0, 3], log
    assert theirs == {0: [f"{op}: RuntimeError (RuntimeError), within the timeout's margin: True"]}
    (line,) = ours[0]
    assert line.startswith(f"{op}: DistBackendError (RuntimeError) '{op} failed on rank 0: rank 1 died"), line
    assert line.endswith("within the timeout's margin: True") and 1 not in ours, log


@pytest.mark.slow
@pytest.mark.skipif(not FULL_RUNS, reason="10 processes: set EMBER_TEST_DIST_FULL=1")
def test_a_checkpoint_saved_at_three_ranks_loads_at_two_as_pytorch(tmp_path):
    # each library reads its own checkpoint (the formats differ: docs/deviations.md)
    for phase, nprocs in (("save", 3), ("load", 2)):
        theirs, their_codes, _ = run_program("dcp_worlds.py", "torch", nprocs, limit=90, args=(phase, str(tmp_path)))
        ours, codes, log = run_program("dcp_worlds.py", "ember", nprocs, limit=90, args=(phase, str(tmp_path)))
        assert codes == their_codes == [0] * nprocs, log
        assert ours == theirs, f"{phase}: {ours} != {theirs}\n{log}"


def test_bad_peers_and_destroyed_groups_raise_at_once():
    # gloo waits out the timeout for a send to a rank outside the world (DistStoreError on the
    # peer's key), IndexErrors on an empty batch_isend_irecv and lets a destroyed subgroup's
    # collective through: ember's answers (docs/deviations.md). gloo's reduce_scatter_tensor of the
    # wrong size raises RuntimeError as ember's, then sometimes aborts the process from its worker thread.
    ours, codes, log = run_program("hostile_args.py", "ember", 2, limit=60, args=("ember_only",))
    assert codes == [0, 0], log
    assert ours == {r: ["send dst out of range: RuntimeError: invalid root rank: 2",
                        "isend dst negative: RuntimeError: invalid root rank: -1",
                        "batch_isend_irecv empty: []",
                        "reduce_scatter_tensor wrong size: RuntimeError: input tensor must be the same size as "
                        "output size times world size",
                        "collective on a destroyed group: ValueError: Invalid process group specified: it was "
                        "destroyed",
                        "world still works: ok"] for r in (0, 1)}, log
