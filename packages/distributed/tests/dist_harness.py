"""Runs a program in several real processes and collects what each rank reports.

Programs live in ``programs/``; they import ``torch`` or ``ember as torch`` according to
``DIST_LIB`` so one program runs on ember and on PyTorch's gloo (the oracle), and each rank
writes its results as JSON to ``$DIST_OUT/rank<r>.json``. Every run has a wall-clock limit, after
which all its processes are killed and the test fails: no test can hang.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The largest oracle runs (PyTorch in 4 processes beside ember's 4) run when this is set; CI's
# 2 cores keep the package's tests within a few minutes without them.
FULL_RUNS = os.environ.get("EMBER_TEST_DIST_FULL") == "1"
PROGRAMS = HERE / "programs"
ROOT = HERE.parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(lib: str, out_dir: str, limit: float | None = None) -> dict:
    env = dict(os.environ)
    if limit is not None:
        # A rank still running near the limit prints every thread's stack (programs/prelude.py),
        # so a hang that CI meets once in many runs leaves its place in the log.
        env["DIST_STACKS_AFTER"] = str(max(1.0, limit - 5))
    env["DIST_LIB"] = lib
    env["DIST_OUT"] = out_dir
    env["OMP_NUM_THREADS"] = "1"
    env.pop("EMBER_PMI_OWN", None)
    # The tests run from a checkout (ci/dev_env.py) or an install: keep whatever path pytest has.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


class RunFailed(AssertionError):
    pass


# PyTorch's gloo process group can end a process that already finished its work with std::terminate
# at interpreter exit (a worker std::thread still joinable when its static destructor runs: "terminate
# called without an active exception", seen once in CI on a rank that had written its results). In
# an oracle run that exit is not what a test compares, so it counts as success when every rank
# wrote its results; ember's own runs get no such allowance.
_TORCH_EXIT_ABORT = "terminate called without an active exception"


def _oracle_exit_abort_only(procs, outputs, results) -> bool:
    if any(r is None for r in results):
        return False
    # A rank started by torch's mp.spawn aborts the same way inside a launcher process, which then
    # exits 1 with ProcessExitedException("... terminated with signal SIGABRT").
    return all(p.returncode == 0 or (p.returncode == -6 and _TORCH_EXIT_ABORT in out)
               or (p.returncode == 1 and _TORCH_EXIT_ABORT in out and "terminated with signal SIGABRT" in out)
               for p, out in zip(procs, outputs))


def _collect(procs, out_dir, limit, nprocs, allow_fail=False, oracle=False):
    deadline = time.monotonic() + limit
    logs = []
    outputs = []
    timed_out = False
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for i, p in enumerate(procs):
        out = p.stdout.read().decode(errors="replace") if p.stdout else ""
        outputs.append(out)
        logs.append(f"--- process {i} (exit {p.returncode}) ---\n{out[-4000:]}")
    results = []
    for r in range(nprocs):
        path = Path(out_dir) / f"rank{r}.json"
        results.append(json.loads(path.read_text()) if path.exists() else None)
    failed = timed_out or any(p.returncode != 0 for p in procs)
    if failed and oracle and not timed_out and _oracle_exit_abort_only(procs, outputs, results):
        failed = False
    if failed and not allow_fail:
        reason = f"timed out after {limit}s" if timed_out else "a process failed"
        raise RunFailed(f"{reason}\n" + "\n".join(logs))
    return results, [p.returncode for p in procs], "\n".join(logs)


def run_ranks(program: str, nprocs: int, lib: str = "ember", method: str = "env", limit: float = 90,
              extra_env: dict | None = None, args: tuple = (), allow_fail: bool = False, kill=None):
    """Starts ``nprocs`` processes of ``programs/<program>`` by hand with ``method``:
    ``env`` (MASTER_ADDR/PORT, RANK, WORLD_SIZE), ``tcp`` or ``file`` (``DIST_INIT`` holds the URL).
    Returns (per-rank results, exit codes, logs). ``kill`` = (rank, seconds): SIGKILL that rank then.
    """
    out_dir = tempfile.mkdtemp(prefix="ember-dist-")
    port = free_port()
    procs = []
    for rank in range(nprocs):
        env = base_env(lib, out_dir, limit)
        env.update(RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank))
        if method == "env":
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        elif method == "tcp":
            env["DIST_INIT"] = f"tcp://127.0.0.1:{port}"
        elif method == "file":
            env["DIST_INIT"] = f"file://{out_dir}/rendezvous"
        env.update(extra_env or {})
        procs.append(subprocess.Popen(
            [sys.executable, str(PROGRAMS / program), *args], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        ))
    if kill is not None:
        victim, after = kill
        time.sleep(after)
        os.kill(procs[victim].pid, signal.SIGKILL)
    return _collect(procs, out_dir, limit, nprocs, allow_fail, oracle=lib == "torch")


def run_command(command: list[str], nprocs: int, lib: str = "ember", limit: float = 90,
                extra_env: dict | None = None, allow_fail: bool = False):
    """Runs one launcher command (``mpiexec``, ``ember-run``) that starts ``nprocs`` ranks."""
    out_dir = tempfile.mkdtemp(prefix="ember-dist-")
    env = base_env(lib, out_dir, limit)
    env.update(extra_env or {})
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=str(PROGRAMS))
    return _collect([proc], out_dir, limit, nprocs, allow_fail, oracle=lib == "torch")
