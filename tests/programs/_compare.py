"""Compares two programs' printed output: the same lines, numbers equal within a tolerance.

dtype and Size reprs name ``ember`` where PyTorch's name ``torch`` (docs/deviations.md, "dtype reprs
name ember"), so ``ember.`` before a name reads as ``torch.``. Lines starting ``## `` (the
traceback excerpt the driver writes after a failure) are not compared.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?\b(?:nan|inf)\b")


def _normalize(line: str) -> str:
    return re.sub(r"\bember\.", "torch.", line)


def _close(a: str, b: str, rtol: float, atol: float) -> bool:
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    # printed values are rounded: allow one unit in the last printed digit as well
    digits = len(a.split(".")[1].split("e")[0].split("E")[0]) if "." in a else 0
    exp = int(re.split("[eE]", a)[1]) if re.search("[eE]", a) else 0
    ulp = 10.0 ** (exp - digits)
    return abs(x - y) <= atol + rtol * abs(y) + 1.01 * ulp


def differences(expected: str, actual: str, rtol: float = 1e-4, atol: float = 1e-6) -> list[str]:
    """The lines where ``actual`` differs from ``expected`` (empty when the outputs agree)."""
    want = [_normalize(x) for x in expected.splitlines() if not x.startswith("## ")]
    got = [_normalize(x) for x in actual.splitlines() if not x.startswith("## ")]
    out = []
    for i in range(max(len(want), len(got))):
        w = want[i] if i < len(want) else "<missing>"
        g = got[i] if i < len(got) else "<missing>"
        if w == g:
            continue
        wn, gn = _NUMBER.findall(w), _NUMBER.findall(g)
        same_text = _NUMBER.sub("#", w) == _NUMBER.sub("#", g)
        if same_text and len(wn) == len(gn) and all(_close(a, b, rtol, atol) for a, b in zip(gn, wn)):
            continue
        out.append(f"line {i + 1}:\n  torch: {w}\n  ember: {g}")
    return out


def hostile_cases(text: str) -> dict:
    """A hostile-inputs program's output as {case: ("!!", "Type | message") or ("->", result)}."""
    cases = {}
    for line in text.splitlines():
        for sep in (" !! ", " -> "):
            if sep in line:
                name, rest = line.split(sep, 1)
                cases[name] = (sep.strip(), rest)
                break
    return cases


def hostile_problems(expected: str, actual: str, message_differs, min_cases: int) -> list[str]:
    """Where a hostile-inputs program under ember (``actual``) does not do what it does under PyTorch
    (``expected``): the same cases in the same order, each raising PyTorch's exception type with its message
    (except the cases named in ``message_differs``) or giving its result."""
    theirs, ours = hostile_cases(expected), hostile_cases(actual)
    assert len(theirs) > min_cases and list(theirs) == list(ours), (list(theirs), list(ours))
    problems = []
    for name, (kind, rest) in theirs.items():
        our_kind, our_rest = ours[name]
        if kind == "->":
            if our_kind != "->" or differences(rest, our_rest):
                problems.append(f"{name}: torch -> {rest}\n   ember {our_kind} {our_rest}")
            continue
        their_type, _, their_msg = rest.partition(" | ")
        our_type, _, our_msg = our_rest.partition(" | ")
        if our_kind != "!!" or our_type != their_type:
            problems.append(f"{name}: torch raises {their_type}: {their_msg}\n   ember {our_kind} {our_rest}")
        elif name not in message_differs and differences(their_msg, our_msg):
            problems.append(f"{name}: message\n   torch: {their_msg}\n   ember: {our_msg}")
    return problems


def assert_prints_what_pytorch_prints(outputs: dict, spec: str, rtol: float = 1e-5) -> None:
    """``spec``'s output under ember (run_under_both's ``outputs``) equals its output under PyTorch."""
    theirs, ours = outputs["torch"][spec], outputs["ember"][spec]
    assert "!! " not in theirs, f"the program fails under PyTorch itself:\n{theirs}"
    diff = differences(theirs, ours, rtol=rtol)
    assert not diff, "\n".join(diff) + f"\n--- ember's output:\n{ours}"


def assert_raises_what_pytorch_raises(outputs: dict, spec: str, message_differs, min_cases: int) -> None:
    """The hostile-inputs program ``spec`` raises PyTorch's exceptions under ember (hostile_problems)."""
    problems = hostile_problems(outputs["torch"][spec], outputs["ember"][spec], message_differs, min_cases)
    assert not problems, "\n".join(problems)


def run_under_both(scripts, tmp: Path) -> dict:
    """{"torch": {script: output}, "ember": {...}}: ``_driver.py`` runs every script in one process per library,
    both processes at once (one thread each, warnings off)."""
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    procs = {lib: subprocess.Popen([sys.executable, str(here / "_driver.py"), lib, str(tmp / f"{lib}.json"), *scripts],
                                   cwd=here, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for lib in ("torch", "ember")}
    results = {}
    for lib, proc in procs.items():
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"the {lib} driver failed:\n{err[-3000:]}"
        results[lib] = json.loads((tmp / f"{lib}.json").read_text())
    return results
