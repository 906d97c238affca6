"""``ember-run --nnodes MIN:MAX``: launchers meet at a rendezvous endpoint and form one world of
however many nodes joined (within the range), with torchrun's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from dist_harness import PROGRAMS, base_env, free_port


def _launch(nodes: int, nnodes: str = "1:2", last_call: float = 3, extra_env: dict | None = None):
    out = tempfile.mkdtemp(prefix="ember-elastic-")
    port = free_port()
    procs = []
    for _ in range(nodes):
        command = [sys.executable, "-m", "ember.distributed.run", "--nnodes", nnodes, "--nproc-per-node", "1",
                   "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-conf",
                   f"last_call_timeout={last_call},join_timeout=60", str(PROGRAMS / "start_program.py")]
        procs.append(subprocess.Popen(command, env={**base_env("ember", out), **(extra_env or {})}, cwd=str(PROGRAMS),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        time.sleep(0.2)
    codes, logs = [], []
    for p in procs:
        try:
            codes.append(p.wait(120))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        logs.append(p.stdout.read().decode(errors="replace")[-3000:])
    assert not any(codes), "\n".join(logs)
    reports = [json.load(open(os.path.join(out, f))) for f in sorted(os.listdir(out))]
    return codes, reports


def test_two_launchers_in_a_one_to_two_node_range_form_one_world():
    # The round closes as soon as both joined; the long last call only covers a slow start.
    # Node 1's workers finish last: the launcher hosting the rendezvous store must stay until
    # node 1's launcher is done with it (it polls the store while its workers run).
    codes, reports = _launch(2, last_call=60, extra_env={"DIST_SLOW_GROUP_RANK": "1"})
    assert codes == [0, 0]
    assert [r["rank"] for r in reports] == [0, 1] and all(r["world"] == 2 for r in reports)
    assert [r["env"]["GROUP_RANK"] for r in reports] == ["0", "1"]
    assert reports[0]["sum"]["value"] == [1.0, 3.0, 5.0, 7.0]


def test_a_single_launcher_runs_once_the_minimum_is_reached():
    codes, reports = _launch(1)
    assert codes == [0] and len(reports) == 1 and reports[0]["world"] == 1


def test_bad_node_ranges_are_refused():
    from ember.distributed.run import _nnodes

    assert _nnodes("2") == (2, 2) and _nnodes("1:4") == (1, 4)
    for bad in ("3:1", "0:2"):
        try:
            _nnodes(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} accepted")
