"""Compares two programs' printed output: the same lines, numbers equal within a tolerance.

dtype and Size reprs name ``ember`` where PyTorch's name ``torch`` (docs/deviations.md, "dtype reprs
name ember"), so ``ember.`` before a name reads as ``torch.``. Lines starting ``## `` (the
traceback excerpt the driver writes after a failure) are not compared.
"""

from __future__ import annotations

import math
import re

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
