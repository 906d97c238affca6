"""`import ember` beside `import torch`: wall and CPU seconds, each in a fresh interpreter, runs interleaved.

    python3 benchmarks/bench_import.py [runs]      # default 10; prints min and median of each
    python3 benchmarks/bench_import.py 20 --variant base=/tmp/old/packages/tensor-core/src

Bytecode is written and cached (PYTHONDONTWRITEBYTECODE dropped, one warm-up run each), as an installed
package has it. One thread (OMP_NUM_THREADS=1). Issue 18's target: import ember < 0.1 s.

``--variant LABEL=SRC`` (repeatable) also imports ember with SRC in place of this tree's
packages/tensor-core/src on PYTHONPATH (an exported older tree with the built _C copied in): an A/B
run under the same load. Each row also gives the min over the runs of ``-X importtime``'s cumulative
microseconds for the top-level module (an unmarshal + exec figure, with the tracer's own overhead).

``--first-use`` instead times what `import ember` leaves to first use, each in a fresh interpreter after
`import ember`: the first attribute access of a lazy name (its module imported) and the first call of
a function found there against its second call (us, min over the runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CODE = ("import time; w = time.perf_counter(); c = time.process_time(); import {mod}; "
        "print(time.perf_counter() - w, time.process_time() - c)")
CORE_SRC = os.path.join("packages", "tensor-core", "src")


def once(mod: str, env) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CODE.format(mod=mod)], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    return float(out[0]), float(out[1])


def importtime_us(mod: str, env) -> int:
    """Cumulative microseconds `-X importtime` gives the top-level import of ``mod``."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {mod}"], capture_output=True,
                         text=True, check=True, env=env).stderr
    rows = [line.split("|") for line in err.splitlines() if line.startswith("import time:")]
    return next(int(r[1]) for r in reversed(rows) if r[2].strip() == mod)


# (label, statement run once before timing, the lazy attribute, a call of it)
FIRST_USES = (
    ("ember.linalg.norm", "x = ember.randn(4, 4)", "ember.linalg", "ember.linalg.norm(x)"),
    ("ember.fft.rfft (1st call imports scipy.fft)", "x = ember.randn(64)", "ember.fft", "ember.fft.rfft(x)"),
    ("ember.special.expit", "x = ember.randn(64)", "ember.special", "ember.special.expit(x)"),
    ("ember.save", "import io; x = ember.randn(4); b = io.BytesIO()", "ember.save", "ember.save(x, b)"),
    ("ember.GradScaler", "", "ember.GradScaler", "ember.GradScaler(enabled=False)"),
    ("ember.profiler.profile", "", "ember.profiler", "ember.profiler.profile()"),
    ("ember.randn(3) + 1 (eager)", "", "ember.randn", "ember.randn(3) + 1"),
)
FIRST_CODE = ("import ember, time; {setup}; p = time.perf_counter; t0 = p(); {attr}; t1 = p(); {call}; t2 = p(); "
              "{call}; t3 = p(); print(t1 - t0, t2 - t1, t3 - t2)")


def first_uses(runs: int, env) -> None:
    """The cost of a lazy name on first use (see the module docstring)."""
    found = {label: [] for label, *_ in FIRST_USES}
    for _ in range(runs):
        for label, setup, attr, call in FIRST_USES:
            code = FIRST_CODE.format(setup=setup or "pass", attr=attr, call=call)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
            found[label].append([float(v) for v in out.stdout.split()])
    print("| first use | attribute (import) | first call | second call | first - second |")
    print("| --- | --- | --- | --- | --- |")
    for label, rows in found.items():
        access, first, second = (min(r[i] for r in rows) * 1e6 for i in range(3))
        print(f"| {label} | {access:.0f} us | {first:.1f} us | {second:.1f} us | {first - second:.1f} us |")
    print(f"load average {os.getloadavg()[0]:.1f}")


def variant_env(env: dict, src: str) -> dict:
    paths = env.get("PYTHONPATH", "").split(os.pathsep)
    swapped = [src if p.rstrip(os.sep).endswith(CORE_SRC) else p for p in paths]
    if swapped == paths:
        raise SystemExit(f"no {CORE_SRC} on PYTHONPATH to replace with {src}")
    return {**env, "PYTHONPATH": os.pathsep.join(swapped)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=10)
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=SRC")
    parser.add_argument("--first-use", action="store_true")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["OMP_NUM_THREADS"] = "1"
    if args.first_use:
        first_uses(args.runs, env)
        return
    rows = [("ember", "ember", env)]
    for spec in args.variant:
        label, _, src = spec.partition("=")
        rows.append((f"ember ({label})", "ember", variant_env(env, src)))
    rows.append(("torch", "torch", env))
    results = {label: [] for label, _, _ in rows}
    traced = {label: [] for label, _, _ in rows}
    for _, mod, e in rows:
        once(mod, e)  # warm-up: bytecode written, files in the page cache
    for _ in range(args.runs):
        for label, mod, e in rows:  # interleaved, so load changes hit all alike
            results[label].append(once(mod, e))
            traced[label].append(importtime_us(mod, e))
    print("| import | wall min | wall median | cpu min | cpu median | -X importtime min |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, _, _ in rows:
        wall, cpu = [r[0] for r in results[label]], [r[1] for r in results[label]]
        print(f"| {label} | {min(wall):.3f} s | {statistics.median(wall):.3f} s | {min(cpu):.3f} s | "
              f"{statistics.median(cpu):.3f} s | {min(traced[label]) / 1e6:.3f} s |")
    t = min(r[0] for r in results["torch"])
    for label, _, _ in rows[:-1]:
        print(f"{label}/torch (wall min): {min(r[0] for r in results[label]) / t:.3f}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
