"""``ember-run`` / ``python -m ember.distributed.run``: torchrun's launcher for ember programs.

Starts ``--nproc-per-node`` copies of the training script on this node, with the environment
torchrun gives its workers (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``, ``MASTER_ADDR``/``MASTER_PORT``, ``TORCHELASTIC_*``), so ``init_process_group()``
with the default ``env://`` joins every worker of every node into one world. With a fixed
``--nnodes N`` the rendezvous is static: node ``--node-rank`` owns ranks ``node_rank * nproc ..
+ nproc - 1`` and rank 0's process hosts the store at ``--master-addr:--master-port`` (or
``--rdzv-endpoint``). With ``--nnodes MIN:MAX`` (or ``--rdzv-backend c10d``) the nodes meet at
``--rdzv-endpoint`` and take their ranks from it (``_elastic``).
When a worker fails, the others are stopped and the whole node group restarts, up to
``--max-restarts`` times; then the launcher exits with status 1 and names the failed ranks.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid


def _flag(parser, name: str, **kwargs):
    """Adds ``--a-b`` with torchrun's underscore spelling ``--a_b`` as an alias."""
    names = [f"--{name}"]
    if "-" in name:
        names.append(f"--{name.replace('-', '_')}")
    parser.add_argument(*names, **kwargs)


def get_args_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ember-run", description="Starts distributed ember workers (torchrun).")
    _flag(parser, "nnodes", default="1", help="number of nodes, or MIN:MAX (elastic: needs --rdzv-endpoint)")
    _flag(parser, "nproc-per-node", default="1", help="workers per node: an integer, 'cpu' or 'auto'")
    _flag(parser, "node-rank", type=int, default=0, help="rank of this node in [0, nnodes)")
    _flag(parser, "rdzv-endpoint", default="", help="HOST[:PORT] where rank 0 hosts the store")
    _flag(parser, "rdzv-backend", default="static", help="static, or c10d: nodes meet at --rdzv-endpoint")
    _flag(parser, "rdzv-id", default="none", help="job id (becomes TORCHELASTIC_RUN_ID)")
    _flag(parser, "rdzv-conf", default="", help="KEY=VALUE,...: last_call_timeout, join_timeout (seconds)")
    _flag(parser, "master-addr", default="127.0.0.1", help="address of rank 0's node")
    _flag(parser, "master-port", type=int, default=29500, help="port of the store on rank 0's node")
    _flag(parser, "max-restarts", type=int, default=0, help="restarts of the worker group after a failure")
    _flag(parser, "monitor-interval", type=float, default=0.1, help="seconds between worker checks")
    _flag(parser, "start-method", default="spawn", help="accepted for compatibility (workers are processes)")
    _flag(parser, "role", default="default", help="worker role name (ROLE_NAME)")
    parser.add_argument("--standalone", action="store_true", help="single node on a free local port")
    parser.add_argument("-m", "--module", action="store_true", help="run the script as a module (python -m)")
    _flag(parser, "no-python", action="store_true", help="run the script as an executable, not with python")
    _flag(parser, "run-path", action="store_true", help="run the script with runpy.run_path")
    _flag(parser, "local-addr", default=None, help="accepted for compatibility")
    _flag(parser, "log-dir", default=None, help="where workers' output files go (with --redirects/--tee)")
    parser.add_argument("-r", "--redirects", default="0",
                        help="worker streams to their log files only: 0 none, 1 stdout, 2 stderr, 3 both, "
                             "or per local rank as 0:1,1:2")
    parser.add_argument("-t", "--tee", default="0", help="worker streams to their log files and the console (as -r)")
    _flag(parser, "local-ranks-filter", default="", help="local ranks whose tee'd output the console shows: 0,1")
    parser.add_argument("training_script", help="the program each worker runs")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return parser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _nproc(value: str) -> int:
    if value in ("cpu", "auto"):
        return os.cpu_count() or 1
    count = int(value)
    if count < 1:
        raise ValueError(f"--nproc-per-node must be positive, got {value}")
    return count


def _nnodes(value: str) -> tuple[int, int]:
    low, _, high = value.partition(":")
    low, high = int(low), int(high or low)
    if not 1 <= low <= high:
        raise ValueError(f"--nnodes {value}: expected N or MIN:MAX with 1 <= MIN <= MAX")
    return low, high


def _command(args) -> list[str]:
    if args.no_python:
        return [args.training_script, *args.training_script_args]
    if args.module:
        return [sys.executable, "-u", "-m", args.training_script, *args.training_script_args]
    return [sys.executable, "-u", args.training_script, *args.training_script_args]


def _start(args, nproc: int, nnodes: int, restart: int, run_id: str, addr: str, port: int) -> list:
    world = nproc * nnodes
    workers = []
    for local_rank in range(nproc):
        rank = args.node_rank * nproc + local_rank
        env = dict(os.environ)
        env.update(
            RANK=str(rank), LOCAL_RANK=str(local_rank), GROUP_RANK=str(args.node_rank),
            ROLE_RANK=str(rank), ROLE_NAME=args.role, LOCAL_WORLD_SIZE=str(nproc), WORLD_SIZE=str(world),
            ROLE_WORLD_SIZE=str(world), GROUP_WORLD_SIZE=str(nnodes), MASTER_ADDR=addr, MASTER_PORT=str(port),
            TORCHELASTIC_RESTART_COUNT=str(restart), TORCHELASTIC_MAX_RESTARTS=str(args.max_restarts),
            TORCHELASTIC_RUN_ID=run_id, TORCHELASTIC_USE_AGENT_STORE="False",
            TORCHELASTIC_ERROR_FILE=_error_file(args, restart, local_rank),
        )
        env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")  # as torchrun
        if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = "1"  # torchrun's default: workers share the node's cores
        # A session of its own per worker, as torchrun: signals reach the worker's whole process
        # group, and the kernel's autogroup scheduling gives each worker its own share of a busy
        # machine instead of splitting one among all of them.
        streams = _streams(args, restart, local_rank)
        worker = subprocess.Popen(_command(args), env=env, start_new_session=True, **streams)
        _pump_tees(args, worker, local_rank)
        workers.append(worker)
    return workers


def _stream_choice(spec: str, local_rank: int) -> int:
    """torchrun's Std value (0 none, 1 stdout, 2 stderr, 3 both) for ``local_rank`` from "3" or "0:1,1:2"."""
    spec = (spec or "0").strip()
    if ":" not in spec:
        value = int(spec)
    else:
        value = 0
        for part in spec.split(","):
            rank, _, std = part.partition(":")
            if int(rank) == local_rank:
                value = int(std)
    if value not in (0, 1, 2, 3):
        raise ValueError(f"{spec!r} is not a valid value for --redirects/--tee: 0, 1, 2, 3 or LOCAL_RANK:VALUE,...")
    return value


def _streams(args, restart: int, local_rank: int) -> dict:
    """Popen's stdout/stderr for a worker, as torchrun's --log-dir/--redirects/--tee: each redirected
    or tee'd stream goes to <log-dir>/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log."""
    redirect, tee = _stream_choice(args.redirects, local_rank), _stream_choice(args.tee, local_rank)
    if not redirect and not tee:
        return {}
    if getattr(args, "log_run_dir", None) is None:
        base = args.log_dir or tempfile.mkdtemp(prefix="ember-run-logs-")
        args.log_run_dir = tempfile.mkdtemp(prefix=f"{args.rdzv_id}_", dir=os.makedirs(base, exist_ok=True) or base)
    folder = os.path.join(args.log_run_dir, f"attempt_{restart}", str(local_rank))
    os.makedirs(folder, exist_ok=True)
    chosen = {}
    for bit, name in ((1, "stdout"), (2, "stderr")):
        if (redirect | tee) & bit:
            log = open(os.path.join(folder, f"{name}.log"), "wb")  # noqa: SIM115 - the worker writes it
            chosen[name] = subprocess.PIPE if tee & bit else log
            if tee & bit:
                args.__dict__.setdefault("tee_files", {})[(local_rank, name)] = log
    return chosen


def _pump_tees(args, worker, local_rank: int) -> None:
    """Copies a worker's tee'd streams to its log file and, prefixed "[<role><local rank>]:" as
    torchrun's, to this process's console (only for --local-ranks-filter's ranks, when given)."""
    shown = {int(r) for r in args.local_ranks_filter.split(",") if r.strip()} if args.local_ranks_filter else None
    for name in ("stdout", "stderr"):
        pipe = getattr(worker, name)
        if pipe is None:
            continue
        log = args.tee_files.pop((local_rank, name))
        console = getattr(sys, name) if shown is None or local_rank in shown else None
        prefix = f"[{args.role}{local_rank}]:".encode()

        def pump(pipe=pipe, log=log, console=console, prefix=prefix):
            with log, pipe:
                for line in iter(pipe.readline, b""):
                    log.write(line)
                    log.flush()
                    if console is not None:
                        console.buffer.write(prefix + line)
                        console.flush()

        thread = threading.Thread(target=pump, name=f"ember-run-tee-{local_rank}-{name}", daemon=True)
        thread.start()
        args.__dict__.setdefault("tee_threads", []).append(thread)


def _error_file(args, restart: int, local_rank: int) -> str:
    """Where ``@record`` (``elastic.multiprocessing.errors``) writes a worker's exception, as
    torchrun's ``TORCHELASTIC_ERROR_FILE``: one file per attempt and local rank."""
    if getattr(args, "error_dir", None) is None:
        args.error_dir = tempfile.mkdtemp(prefix="ember-run-")
        atexit.register(shutil.rmtree, args.error_dir, True)
    folder = os.path.join(args.error_dir, f"attempt_{restart}", str(local_rank))
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, "error.json")


def _report(args, restart: int, failed, node_rank: int, nproc: int) -> None:
    """The failed workers, with the exception ``@record`` wrote for each (torchrun's "Root Cause")."""
    for local_rank, code in failed:
        if local_rank < 0:
            continue
        path = _error_file(args, restart, local_rank)
        try:
            with open(path) as f:
                message = json.load(f)["message"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        text = message.get("message", "") if isinstance(message, dict) else str(message)
        stack = message.get("extraInfo", {}).get("py_callstack", "") if isinstance(message, dict) else ""
        print(f"ember-run: rank {node_rank * nproc + local_rank} (local_rank: {local_rank}) exit code {code}: "
              f"{text}\n{stack}", file=sys.stderr, flush=True)


def _signal_group(worker, signum) -> None:
    try:
        os.killpg(worker.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(workers, grace: float = 5.0) -> None:
    for w in workers:
        if w.poll() is None:
            _signal_group(w, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for w in workers:
        try:
            w.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(w, signal.SIGKILL)
            w.wait()


def _monitor(workers, interval: float, stop_requested=None) -> list[tuple[int, int]]:
    """Waits until all workers exit successfully ([]) or one fails ([(local_rank, code), ...]);
    ``stop_requested()`` true (another node's failure) counts as a failure of none ([(-1, 0)])."""
    checked = time.monotonic()
    while True:
        codes = [w.poll() for w in workers]
        failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
        if failed:
            return failed
        if all(c == 0 for c in codes):
            return []
        if stop_requested is not None and time.monotonic() - checked > 0.5:
            checked = time.monotonic()
            if stop_requested():
                return [(-1, 0)]
        time.sleep(interval)


def run(args) -> int:
    nproc, (min_nodes, max_nodes) = _nproc(args.nproc_per_node), _nnodes(args.nnodes)
    if min_nodes != max_nodes or args.rdzv_backend in ("c10d", "etcd", "etcd-v2"):
        return _run_elastic(args, nproc, min_nodes, max_nodes)
    nnodes = min_nodes
    if not 0 <= args.node_rank < nnodes:
        raise ValueError(f"--node-rank {args.node_rank} is not in [0, {nnodes})")
    addr, port = args.master_addr, args.master_port
    if args.standalone:
        addr, port = "127.0.0.1", _free_port()
    elif args.rdzv_endpoint:
        host, _, port_text = args.rdzv_endpoint.rpartition(":") if ":" in args.rdzv_endpoint else (
            args.rdzv_endpoint, "", "")
        addr, port = host, int(port_text) if port_text else 29400
    # torchrun keeps --rdzv-id's default "none" as the run id; --standalone makes a fresh uuid4
    run_id = str(uuid.uuid4()) if args.standalone else args.rdzv_id
    workers: list = []

    def forward(signum, frame):
        _stop(workers)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for restart in range(args.max_restarts + 1):
        workers[:] = _start(args, nproc, nnodes, restart, run_id, addr, port)
        failed = _monitor(workers, args.monitor_interval)
        if not failed:
            return 0
        _stop(workers)
        _report(args, restart, failed, args.node_rank, nproc)
        ranks = ", ".join(f"rank {args.node_rank * nproc + i} (exit code {c})" for i, c in failed)
        left = args.max_restarts - restart
        print(f"ember-run: worker failure: {ranks}; {left} restart(s) left", file=sys.stderr, flush=True)
    return 1


def _run_elastic(args, nproc: int, min_nodes: int, max_nodes: int) -> int:
    """Nodes meet at the rendezvous endpoint each round; node ranks come from arrival order."""
    from . import _elastic

    if not args.rdzv_endpoint:
        raise ValueError("--nnodes MIN:MAX needs --rdzv-endpoint HOST:PORT (where the nodes meet)")
    conf = _elastic.parse_conf(args.rdzv_conf)
    join_timeout = float(conf.get("join_timeout", 600))
    rdzv = _elastic.Rendezvous(_elastic.connect(args.rdzv_endpoint, join_timeout), min_nodes, max_nodes, conf,
                               join_timeout)
    workers: list = []

    def forward(signum, frame):
        _stop(workers)
        sys.exit(128 + signum)  # at once: a stopped launcher does not wait for the other nodes

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = _elastic_rounds(args, nproc, rdzv, workers)
    rdzv.leave()
    return code


def _elastic_rounds(args, nproc: int, rdzv, workers: list) -> int:
    run_id = args.rdzv_id if args.rdzv_id != "none" else "elastic"
    for restart in range(args.max_restarts + 1):
        round_ = rdzv.current_round()
        host = args.rdzv_endpoint.rpartition(":")[0] or args.rdzv_endpoint
        local = args.local_addr or (host if host in ("127.0.0.1", "localhost") else None)
        node_rank, nnodes, addr, port = rdzv.join(round_, local)
        args.node_rank = node_rank
        workers[:] = _start(args, nproc, nnodes, restart, run_id, addr, port)
        failed = _monitor(workers, args.monitor_interval, lambda r=round_: rdzv.current_round() != r)
        if not failed:
            return 0
        _stop(workers)
        _report(args, restart, failed, node_rank, nproc)
        rdzv.request_restart(round_)
        ranks = ", ".join(f"rank {node_rank * nproc + i} (exit code {c})" for i, c in failed if i >= 0)
        cause = f"worker failure: {ranks}" if ranks else "another node restarted the group"
        print(f"ember-run: {cause}; {args.max_restarts - restart} restart(s) left", file=sys.stderr, flush=True)
    return 1


def main(argv=None) -> None:
    args = get_args_parser().parse_args(argv)
    code = run(args)
    for thread in getattr(args, "tee_threads", ()):  # the workers' last tee'd lines
        thread.join(timeout=5.0)
    sys.exit(code)


if __name__ == "__main__":
    main()
