"""Failures turn into errors within the timeout, never hangs: a rank killed mid-run, a rank that
stops calling collectives, a rank that never joins, a port already in use."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import pytest
from dist_harness import FULL_RUNS, PROGRAMS, _collect, base_env, free_port, run_ranks

import ember.distributed as dist


@pytest.mark.parametrize("victim", [1, 0], ids=["worker_killed", "store_host_killed"])
def test_sigkilled_rank_makes_survivors_raise_within_timeout(victim):
    timeout = 20.0
    results, codes, logs = run_ranks("fault_program.py", 2, args=("kill", str(timeout), str(victim)),
                                     allow_fail=True, limit=60)
    assert codes[victim] == -9, logs
    survivor = results[1 - victim]
    assert survivor is not None, logs
    assert survivor["completed"] == 3
    assert survivor["error"] == "DistBackendError"
    assert "RuntimeError" in survivor["mro"]  # PyTorch's gloo raises a RuntimeError subclass too
    assert f"rank {victim} died" in survivor["message"]
    assert survivor["waited"] < timeout
    # The broken group fails fast afterwards instead of hanging.
    assert survivor["second"] == "DistBackendError"
    assert survivor["second_waited"] < timeout


def test_rank_that_stops_calling_collectives_times_out():
    # The silent rank stays alive until rank 0 has reported (fault_program.py), so no exit can
    # pre-empt the timeout: rank 0 must fail by its timeout, never before it, and with the
    # timeout's message. No timeout at all would leave rank 0 waiting until the silent rank gives
    # up (60 s later), then fail with "rank 1 left" instead; a timeout that fires 10 s late fails
    # the last check (generous for a loaded machine: the wait checks its deadline every 10 ms).
    timeout = 3.0
    results, _, logs = run_ranks("fault_program.py", 2, args=("hang", str(timeout)), allow_fail=True, limit=90)
    survivor = results[0]
    assert survivor is not None, logs
    assert survivor["error"] == "DistBackendError"
    assert "timed out" in survivor["message"], survivor["message"]
    # named from the store, where a slow wait says which collective it waits in (gloo names none)
    assert "rank 1 never joined this operation" in survivor["message"], survivor["message"]
    assert survivor["waited"] >= timeout
    assert survivor["waited"] < timeout + 10, survivor


def test_rank_that_never_joins_names_the_missing_rank():
    # Only rank 0 of a world of 3 starts.
    results, _, logs = run_ranks("join_program.py", 1, args=("2",), extra_env={"WORLD_SIZE": "3"},
                                 allow_fail=True, limit=30)
    report = results[0]
    assert report is not None, logs
    assert report["error"] == "DistStoreError"
    assert "1/3 joined" in report["message"][0]
    assert "missing ranks: [1, 2]" in report["message"][0]


def test_port_in_use_raises_dist_network_error():
    torch_dist = pytest.importorskip("torch.distributed")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(dist.DistNetworkError, match="EADDRINUSE"):
            dist.TCPStore("127.0.0.1", port, 1, True, timedelta(seconds=2))
        with pytest.raises(torch_dist.DistNetworkError):
            torch_dist.TCPStore("127.0.0.1", port, 1, True, timedelta(seconds=2))
    assert issubclass(dist.DistNetworkError, RuntimeError)


def test_init_on_a_port_in_use_fails_cleanly():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        results, _, logs = run_ranks("join_program.py", 1, args=("5",), allow_fail=True, limit=30,
                                     extra_env={"MASTER_PORT": str(port), "MASTER_ADDR": "127.0.0.1"})
    assert results[0] is not None, logs
    assert results[0]["error"] == "DistNetworkError"


def test_client_without_server_times_out():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(dist.DistNetworkError, match="timed out"):
        dist.TCPStore("127.0.0.1", port, 2, False, timedelta(seconds=0.5))


@pytest.mark.parametrize("victim", [1, 0], ids=["worker", "server_host"])
def test_rank_dying_between_rendezvous_and_mpi_init_is_an_error(victim):
    # The survivors were inside MPI_Init (MPICH's shared-memory setup waits for every local
    # rank): they must raise within seconds, not wait for the dead rank forever.
    results, codes, logs = run_ranks("init_death_program.py", 3, args=(str(victim),), allow_fail=True, limit=90)
    assert codes[victim] == 3, logs
    for rank, got in enumerate(results):
        if rank == victim:
            continue
        assert got is not None and codes[rank] == 0, logs
        assert got["outcome"] == "DistBackendError", got
        assert f"rank {victim} exited before MPI initialization completed" in got["message"]
        assert got["seconds"] < 60


_MISMATCHES = ("shape", "shape_large", "dtype", "op", "kind", "barrier_kind", "async", "gather_into",
               "mixed_async", "async_then_more", "scatter_gather")
# every rank's call synchronous in program order (async_op=False, whatever the collective): the
# group goes on, as PyTorch's after TORCH_DISTRIBUTED_DEBUG=DETAIL reports a mismatch; where some
# rank's call was async_op=True it may have started later collectives: broken, at once
_GROUP_GOES_ON = ("shape", "shape_large", "dtype", "op", "kind", "barrier_kind", "gather_into", "scatter_gather")


def test_mismatched_collectives_raise_without_debug_mode():
    # Without EMBER_DISTRIBUTED_DEBUG, MPI matched these by order alone: garbage (shape, dtype,
    # op) or a wait for the timeout (kind). gloo checks byte counts: its smaller side aborts the
    # process and the other raises RuntimeError (the oracle run below), and it reduces a float32
    # against an int32 of the same size into garbage. ember: every rank raises DistBackendError (a
    # RuntimeError) at once, naming both calls. Where every rank's call was a synchronous
    # all_reduce/barrier, the group goes on working (the mismatched data is left on a retired
    # communicator); elsewhere that group is broken, the others go on.
    cases = (*_MISMATCHES, "recv_smaller", "same_numel", "many_groups")
    results, _, logs = run_ranks("mismatch_program.py", 2, args=cases, limit=90)
    for rank in (0, 1):
        got = results[rank]
        assert got is not None, logs
        for case in _MISMATCHES:
            hit = got[case]
            assert hit["error"] == "DistBackendError" and hit["runtime"], (case, hit)
            assert "mismatched collectives" in hit["message"] and "rank " in hit["message"], (case, hit)
            assert hit["seconds"] < 5, (case, hit)  # not the 30 s timeout
            if case in _GROUP_GOES_ON:
                assert hit["after"] == "ok", (case, hit)
                assert "still usable" in hit["message"], (case, hit)
            else:
                assert hit["after"] == "DistBackendError", (case, hit)
                assert "no longer usable" in hit["message"], (case, hit)
        mine, other = ("4", "8") if rank == 0 else ("8", "4")
        assert f"rank {rank} runs all_reduce(SUM) of {mine} float32 elements" in got["shape"]["message"]
        assert f"another rank all_reduce(SUM) of {other} float32 elements" in got["shape"]["message"]
        assert "int32" in got["dtype"]["message"] and "MAX" in got["op"]["message"]
        assert "broadcast of 4 float32 elements with root 0" in got["kind"]["message"]
        # a same-numel reshape is no mismatch (gloo agrees)
        assert got["same_numel"]["error"] is None and got["same_numel"]["out"]["value"] == [2.0] * 8
        assert got["world_after"] == "ok"
        # a group's communicator after a mismatch comes from the world's control communicator, not
        # a spare per group (which halved the groups that fit: 1022), so the 1100th group recovers too
        hit = got["many_groups"]
        assert hit["error"] == "DistBackendError" and "still usable" in hit["message"], hit
        assert hit["after"] == "ok", hit
    # a receive smaller than the message: MPI's truncation error, not MPICH's abort
    assert results[0]["recv_smaller"]["error"] is None
    hit = results[1]["recv_smaller"]
    assert hit["error"] == "DistBackendError" and "truncated" in hit["message"], hit
    assert hit["after"] == "ok"  # point to point: the group goes on

    # EMBER_DISTRIBUTED_DEBUG=DETAIL: the fingerprints (no reduction in them, as PyTorch's) catch
    # all but the op mismatch first; the signatures catch that one; every group goes on or fails
    # at once, none waits for the timeout
    detail_cases = ("op", "kind", "async", "mixed_async", "scatter_gather")
    results, _, logs = run_ranks("mismatch_program.py", 2, args=detail_cases, limit=90,
                                 extra_env={"EMBER_DISTRIBUTED_DEBUG": "DETAIL"})
    for rank in (0, 1):
        got = results[rank]
        assert got is not None, logs
        assert got["op"]["error"] == "DistBackendError" and got["op"]["after"] == "ok", got["op"]
        for case in ("kind", "async", "mixed_async", "scatter_gather"):
            hit = got[case]
            assert hit["error"] == "RuntimeError" and "Detected mismatch" in hit["message"], (case, hit)
            assert hit["after"] == "ok" and hit["seconds"] < 5, (case, hit)
        assert got["world_after"] == "ok"

    oracle, codes, logs = run_ranks("mismatch_program.py", 2, lib="torch", args=("shape",), allow_fail=True,
                                    limit=60)
    survivors = [r for r in oracle if r is not None]
    assert survivors and all(r["shape"]["runtime"] for r in survivors), logs


def _fake_wait_clock(monkeypatch, _work, busy):
    """Counts the wait's yields and naps (neither really happens) on a clock the test moves, on a
    machine that is not oversubscribed and is (or is not) busy. Returns (calls, clock)."""
    calls = {"yield": 0, "sleep": 0}
    clock = [0.0]
    monkeypatch.setattr(_work, "_sched_yield", lambda: calls.__setitem__("yield", calls["yield"] + 1))
    monkeypatch.setattr(_work.time, "sleep", lambda s: calls.__setitem__("sleep", calls["sleep"] + 1))
    monkeypatch.setattr(_work.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(_work, "_OVERSUBSCRIBED", [False])
    monkeypatch.setattr(_work, "_machine_busy", lambda now: busy)
    return calls, clock


def _bursts_request(_work, clock, bursts, step):
    """An MPI request that completes after ``bursts`` bursts of tests, each burst (the tests between
    two clock checks) moving the clock by ``step`` seconds."""

    class Request:
        tests = 0

        def Test(self):  # noqa: N802 - MPI's name
            Request.tests += 1
            if Request.tests % _work._TESTS_PER_CHECK == 0:
                clock[0] += step
            return Request.tests > bursts * _work._TESTS_PER_CHECK

    return Request()


class _HealthyGroup:
    def health_problem(self, *args):
        return None


@pytest.mark.parametrize("one_group", [True, False], ids=["one_sched_group_guess", "own_sessions_guess"])
@pytest.mark.parametrize("mode", ["reach_peer", "come_back_contended", "come_back_idle"])
def test_oversubscribed_wait_yields_only_while_yields_reach_a_peer(monkeypatch, one_group, mode):
    # Oversubscribed ranks that share a scheduling group (mp.spawn's children: one autogroup; or
    # one CPU cgroup) get a peer onto the core by yielding; ranks in sessions of their own
    # (mpiexec, ember-run) under autogroups get the core straight back, so they should sleep.
    # The node's layout is only the first guess: the wait times its yields and keeps yielding
    # while they hand the core over, else it sleeps after one probe (_work's comment has figures);
    # a yield that comes back while nothing else is runnable (the peers asleep) tells nothing.
    import time

    from ember.distributed import _work

    calls = {"yield": 0, "sleep": 0}

    def fake_yield():
        calls["yield"] += 1
        if mode == "reach_peer":  # another task ran meanwhile
            end = time.monotonic() + 10 * _work._HANDED_OVER_SECONDS
            while time.monotonic() < end:
                pass

    monkeypatch.setattr(_work, "_sched_yield", fake_yield)
    if mode != "reach_peer":
        # a yield that "comes straight back" must not count as handed over because the test's
        # own thread lost its core for 2 us on a loaded machine (CI failed once that way)
        monkeypatch.setattr(_work, "_HANDED_OVER_SECONDS", 0.5)
    monkeypatch.setattr(_work.time, "sleep", lambda s: calls.__setitem__("sleep", calls["sleep"] + 1))
    monkeypatch.setattr(_work, "_others_runnable", lambda: mode == "come_back_contended")
    monkeypatch.setattr(_work, "_OVERSUBSCRIBED", [False])
    monkeypatch.setattr(_work, "_YIELD_SCORE", [0])
    monkeypatch.setattr(_work, "_OVERSUBSCRIBED_YIELD_SECONDS", 60.0)  # no clock in the count
    _work.set_oversubscribed(True, one_group)

    class Request:
        tests = 0

        def Test(self):  # noqa: N802 - MPI's name
            Request.tests += 1
            return Request.tests > 8 * _work._TESTS_PER_CHECK

    def wait():
        Request.tests = 0
        calls.update({"yield": 0, "sleep": 0})
        _work.wait_requests([Request()], _HealthyGroup(), float("inf"), "all_reduce")
        return dict(calls)

    first = wait()
    if mode != "come_back_contended":
        assert first == {"yield": 8, "sleep": 0}
    elif one_group:  # yields until the score reaches the floor: 2 x limit, then sleeps
        assert first == {"yield": 2 * _work._YIELD_SCORE_LIMIT, "sleep": 8 - 2 * _work._YIELD_SCORE_LIMIT}
    else:  # one probe
        assert first == {"yield": 1, "sleep": 7}
    # what was learnt carries over to the next wait
    assert wait() == ({"yield": 1, "sleep": 7} if mode == "come_back_contended" else {"yield": 8, "sleep": 0})
    limit = _work._YIELD_SCORE_LIMIT
    idle = limit if one_group else -limit  # unchanged from the first guess
    assert _work._YIELD_SCORE[0] == {"reach_peer": limit, "come_back_contended": -limit, "come_back_idle": idle}[mode]


@pytest.mark.parametrize("large", [True, False], ids=["large_yields_every_test", "other_spins_then_naps"])
def test_busy_machine_wait_of_large_transfer_yields_instead_of_napping(monkeypatch, large):
    # On a machine busy with other work, the data of a synchronous collective of several MB waits
    # as MPICH's blocking calls do - a sched_yield after every test, never a nap (a nap in the
    # middle of the transfer stalls the peer) - while other waits spin briefly, then nap.
    from ember.distributed import _work

    calls, clock = _fake_wait_clock(monkeypatch, _work, busy=True)
    bursts = 6  # each burst outlasts the busy spin
    request = _bursts_request(_work, clock, bursts, 2 * _work._BUSY_SPIN_SECONDS)
    _work.wait_requests([request], _HealthyGroup(), float("inf"), "all_reduce", None,
                        _work.COLLECTIVE_SPIN_SECONDS, None, large)
    if large:
        assert calls == {"yield": bursts * _work._TESTS_PER_CHECK, "sleep": 0}
    else:
        assert calls == {"yield": 0, "sleep": bursts}


@pytest.mark.parametrize("nap", [50e-6, None], ids=["naps", "yields"])
@pytest.mark.parametrize("busy", [True, False], ids=["busy", "idle"])
def test_small_message_wait_on_a_busy_machine_naps_after_its_transfer_time(monkeypatch, busy, nap):
    # A synchronous all_reduce of up to 64 KB (or a barrier) on a busy machine spins as long as its
    # transfer takes while both ranks run, then naps briefly between bursts of tests, 10 us doubling
    # up to _SMALL_BUSY_NAP (spinning on held the core a peer placed on it needed: 6-9x MPICH under
    # load; yielding after every test, the wait of session 17 and still the one with the nap set to
    # None, kept it runnable: 4-5x the napping wait at load 18). On an idle machine it spins.
    from ember.distributed import _work

    calls, clock = _fake_wait_clock(monkeypatch, _work, busy=busy)
    naps = []
    monkeypatch.setattr(_work.time, "sleep", naps.append)
    monkeypatch.setattr(_work, "_SMALL_BUSY_NAP", nap)
    nbytes = 64 * 1024
    burst = _work._SMALL_SPIN_PER_BYTE * nbytes / 2.5  # the spin ends during the 3rd burst
    bursts = 8
    request = _bursts_request(_work, clock, bursts, burst)
    _work.wait_requests([request], _HealthyGroup(), float("inf"), "all_reduce", None,
                        _work.COLLECTIVE_SPIN_SECONDS, nbytes)
    # the clock read after the 3rd burst sees the spin over: from there a nap after every burst (the
    # request completes in the 9th), or a yield after every test
    if not busy:
        assert (calls["yield"], naps) == (0, [])
    elif nap is None:
        assert (calls["yield"], naps) == ((bursts - 3) * _work._TESTS_PER_CHECK, [])
    else:
        assert calls["yield"] == 0
        assert naps == pytest.approx([10e-6, 20e-6, 40e-6, 50e-6, 50e-6, 50e-6])


# (operation, survivors wait on async_op works, survivors leave through destroy + the interpreter's
# exit): each operation once, the two ways of waiting and of leaving spread over them
_KILLED_MID = [("all_gather", True, True), ("reduce_scatter", False, False), ("broadcast", True, False),
               ("send_recv", False, True), ("barrier", True, True), ("all_to_all_single", False, False)]


@pytest.mark.parametrize(("kind", "survivors_async", "clean_exit"), _KILLED_MID, ids=[k[0] for k in _KILLED_MID])
def test_rank_killed_mid_operation_at_4_ranks(kind, survivors_async, clean_exit):
    # The last of 4 ranks starts its part of the 4th operation (async_op, 1 MB per rank), lets it
    # get going and SIGKILLs itself: each survivor raises DistBackendError naming it, well before
    # the timeout, and a second call on the broken group raises at once. MPICH sometimes notices
    # the death first ("Other MPI error", seen for broadcast): the error still names the rank.
    timeout = 20.0
    args = (kind, str(timeout), "during", str(1 << 18), "async" if survivors_async else "sync",
            "exit" if clean_exit else "_exit")
    results, codes, logs = run_ranks("fault_kinds_program.py", 4, args=args, allow_fail=True, limit=90)
    assert codes[3] == -9, logs
    for rank in range(3):
        got = results[rank]
        assert got is not None and codes[rank] == 0, logs
        assert got["completed"] >= 3, got
        assert got["error"] == "DistBackendError", got
        assert "rank 3 died" in got["message"], got
        assert got["waited"] < timeout, got
        assert got["second"] == "DistBackendError" and got["second_waited"] < timeout, got


def test_mpi_error_of_a_killed_peer_names_it(monkeypatch):
    # MPICH may fail a request with an opaque "Other MPI error" when a peer was killed, before the
    # liveness watch reports the exit: the error waits (briefly) for the watch and names the rank.
    import threading

    from ember.distributed import _mpi_engine
    from ember.distributed._work import Health

    class World:
        health = Health()

    engine = object.__new__(_mpi_engine.MPIEngine)
    engine.world, engine.global_ranks, engine.rank, engine.broken = World(), [0, 1, 2, 3], 0, None
    engine._me = 0
    text = "broadcast failed in MPI: Other MPI error, error stack:\ninternal_Test(109): MPI_Test failed"
    monkeypatch.setattr(_mpi_engine, "_MPI_ERROR_GRACE", 0.05)
    assert engine.explain_mpi_error("broadcast", text) == text  # no exit: MPI's own words
    assert engine.broken is None
    monkeypatch.setattr(_mpi_engine, "_MPI_ERROR_GRACE", 30.0)
    threading.Timer(0.05, World.health.on_exit, (2, False)).start()  # the watch hears of it later
    problem = engine.explain_mpi_error("broadcast", text)
    assert problem.startswith("broadcast failed on rank 0: rank 2 died (killed or crashed)"), problem
    assert "(MPI: broadcast failed in MPI: Other MPI error, error stack:)" in problem
    assert engine.broken == problem  # later calls fail at once


def _start_job(program, nprocs, port, args):
    out = tempfile.mkdtemp(prefix="ember-dist-")
    procs = []
    for rank in range(nprocs):
        env = base_env("ember", out, 90)
        env.update(RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(PROGRAMS / program), *map(str, args)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True))
    return procs, out


def _wait_for(path, limit):
    give_up = time.monotonic() + limit
    while not os.path.exists(path):
        assert time.monotonic() < give_up, f"{path} never appeared"
        time.sleep(0.1)


# (the variants that add least run in full runs only: CI's 2 cores keep the package's tests short)
_FULL_ONLY = pytest.mark.skipif(not FULL_RUNS, reason="a variant: set EMBER_TEST_DIST_FULL=1")


@pytest.mark.parametrize("size", [2, pytest.param(3, marks=_FULL_ONLY)], ids=["same_size", "larger"])
def test_second_job_on_a_running_jobs_port_fails_and_leaves_it_alone(size):
    # Job B is started on the MASTER_PORT of job A, which is running: B's rank 0 cannot listen
    # (EADDRINUSE), and B's other ranks reach A's store. They must fail at once, saying why, and
    # not join A (before, B's rank 1 joined A's control server as A's rank 1, waited out its
    # timeout in MPI_Init, and its exit then failed A's all_reduce as "rank 1 died").
    port = free_port()
    a = _start_job("port_job_program.py", 2, port, (60, 0, "after"))
    try:
        _wait_for(os.path.join(a[1], "joined0"), 60)  # A is past its rendezvous
        b = _start_job("port_job_program.py", size, port, (20, 0))
        got_b, codes_b, logs_b = _collect(*b, 60, size, allow_fail=True)
    finally:
        with open(os.path.join(a[1], "go"), "w"):  # A's second all_reduce, after B has gone
            pass
        got_a, codes_a, logs_a = _collect(*a, 60, 2, allow_fail=True)
    assert codes_a == [0, 0] and all(r is not None and r["error"] is None for r in got_a), logs_a
    assert [r["count"]["value"] for r in got_a] == [[2.0, 2.0]] * 2
    assert got_b[0]["error"] == "DistNetworkError", logs_b
    for rank in range(1, size):
        assert got_b[rank]["error"] == "DistStoreError", logs_b
        assert "another job is using the same address and port" in got_b[rank]["message"]
        assert got_b[rank]["seconds"] < 20  # at once, not after the timeout


@pytest.mark.parametrize("victims", [pytest.param("all", marks=_FULL_ONLY), "store_host"])
def test_job_restarted_on_the_same_port_after_a_kill(victims):
    # A job killed (every rank, or only rank 0 that hosts the store: its other rank is left to
    # notice) and started again at once on the same port, as a supervisor restarting it would.
    port = free_port()
    a = _start_job("port_job_program.py", 2, port, (60, 0, "after"))
    for rank in range(2):
        _wait_for(os.path.join(a[1], f"joined{rank}"), 60)
    for p in a[0] if victims == "all" else a[0][:1]:
        os.killpg(p.pid, signal.SIGKILL)
    b = _start_job("port_job_program.py", 2, port, (30, 0))
    got_b, codes_b, logs_b = _collect(*b, 60, 2, allow_fail=True)
    with open(os.path.join(a[1], "go"), "w"):  # a surviving rank of A goes on, and fails
        pass
    _collect(*a, 30, 2, allow_fail=True)
    assert codes_b == [0, 0] and all(r is not None and r["error"] is None for r in got_b), logs_b
    assert [r["sum"]["value"] for r in got_b] == [[3.0, 3.0]] * 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
