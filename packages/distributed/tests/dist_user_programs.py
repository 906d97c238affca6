"""Runs a user-style program (``programs/user/``) as its readers launch it, on ember or PyTorch.

The programs are ordinary PyTorch programs: ``import torch`` at the top, which a header maps to
ember (``sys.modules["torch"] = ember``, the ``import ember as torch`` of a port) unless
``DIST_LIB=torch``. They start their ranks themselves (``mp.spawn``: one process here) or are
started as torchrun starts them (``nprocs`` processes with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT). Every rank prints ``[rank r] ...`` lines; ``run_program`` returns
them per rank in the order printed, and the lines without a rank prefix under the key ``None``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from dist_harness import _TORCH_EXIT_ABORT, PROGRAMS, base_env, free_port

USER_PROGRAMS = PROGRAMS / "user"
_RANK_LINE = re.compile(r"^\[rank (\d+)\] ?(.*)$")


def run_program(program: str, lib: str, nprocs: int = 1, limit: float = 90, args: tuple = (),
                extra_env: dict | None = None):
    """(lines per rank, exit codes, full output). ``nprocs`` > 1: started torchrun's way; the
    port is ``argv[1]`` for a program that spawns its ranks itself."""
    port = free_port()
    out_dir = os.environ.get("TMPDIR", "/tmp")
    procs = []
    for rank in range(nprocs):
        env = base_env(lib, out_dir, limit)
        env.update(PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore")
        if nprocs > 1:
            env.update(RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nprocs),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, str(USER_PROGRAMS / program), str(port), *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True))
    deadline = time.monotonic() + limit
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            out, err = p.communicate()
            err += b"\n[killed: over the limit]"
        outs.append((out.decode(errors="replace"), err.decode(errors="replace")))
    codes = [p.returncode for p in procs]
    if lib == "torch":
        # gloo's abort at interpreter exit ("terminate called without an active exception",
        # dist_harness.py) is not what these programs compare: the exit code the rank had
        for i, (_, err) in enumerate(outs):
            if codes[i] == -6 and _TORCH_EXIT_ABORT in err:
                codes[i] = 1 if "Traceback" in err else 0
    lines: dict = {}
    for out, _ in outs:
        for line in out.splitlines():
            m = _RANK_LINE.match(line)
            key, text = (int(m.group(1)), m.group(2)) if m else (None, line)
            lines.setdefault(key, []).append(text)
    log = "\n".join(f"--- process {i} (exit {p.returncode}) ---\n{o[-3000:]}\n{e[-3000:]}"
                    for i, (p, (o, e)) in enumerate(zip(procs, outs)))
    return lines, codes, log


def compare(program: str, nprocs: int = 1, limit: float = 90, args: tuple = ()):
    """Runs ``program`` on both libraries; a list of the differences (empty when equal)."""
    theirs, their_codes, their_log = run_program(program, "torch", nprocs, limit, args)
    ours, our_codes, our_log = run_program(program, "ember", nprocs, limit, args)
    if their_codes != our_codes and not any(our_codes):
        # The oracle failed where ember finished: gloo itself sometimes fails a connection on a busy
        # machine (seen in CI's single process after hundreds of worlds). One more run of PyTorch
        # tells its flake from a real difference; ember's output is compared either way.
        theirs, their_codes, their_log = run_program(program, "torch", nprocs, limit, args)
    diffs = []
    # a program that never got going (a syntax error, an import) fails alike on both: not a pass
    silent = [r for r in range(nprocs) if not theirs.get(r)] if nprocs > 1 else ([] if any(theirs.values()) else [0])
    if silent:
        diffs.append(f"PyTorch's run printed nothing for ranks {silent}")
    if their_codes != our_codes:
        diffs.append(f"exit codes: ember {our_codes} torch {their_codes}")
    for key in sorted(set(theirs) | set(ours), key=str):
        a, b = ours.get(key, []), theirs.get(key, [])
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else "<missing>"
            y = b[i] if i < len(b) else "<missing>"
            if x != y:
                diffs.append(f"rank {key} line {i}:\n  ember: {x}\n  torch: {y}")
    if diffs:
        diffs.append(f"ember's output:\n{our_log}\ntorch's output:\n{their_log}")
    return diffs


if __name__ == "__main__":  # python3 dist_user_programs.py PROGRAM [NPROCS]: prints the differences
    found = compare(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    print("\n".join(found) if found else "same")
