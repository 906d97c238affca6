"""`import ember` beside `import torch`: wall and CPU seconds, each in a fresh interpreter, runs interleaved.

    python3 benchmarks/bench_import.py [runs]      # default 10; prints min and median of each

Bytecode is written and cached (PYTHONDONTWRITEBYTECODE dropped, one warm-up run each), as an installed
package has it. One thread (OMP_NUM_THREADS=1). Issue 18's target: import ember < 0.1 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

CODE = ("import time; w = time.perf_counter(); c = time.process_time(); import {mod}; "
        "print(time.perf_counter() - w, time.process_time() - c)")


def once(mod: str, env) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CODE.format(mod=mod)], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["OMP_NUM_THREADS"] = "1"
    mods = ("ember", "torch")
    results = {m: [] for m in mods}
    for m in mods:
        once(m, env)  # warm-up: bytecode written, files in the page cache
    for _ in range(runs):
        for m in mods:  # interleaved, so load changes hit both alike
            results[m].append(once(m, env))
    print("| module | wall min | wall median | cpu min | cpu median |")
    print("| --- | --- | --- | --- | --- |")
    for m in mods:
        wall, cpu = [r[0] for r in results[m]], [r[1] for r in results[m]]
        print(f"| {m} | {min(wall):.3f} s | {statistics.median(wall):.3f} s | {min(cpu):.3f} s | "
              f"{statistics.median(cpu):.3f} s |")
    e, t = min(r[0] for r in results["ember"]), min(r[0] for r in results["torch"])
    print(f"ember/torch (wall min): {e / t:.2f}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
