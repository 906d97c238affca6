"""Runs PyTorch programs in one process, with PyTorch or with ember standing in for it.

``python _driver.py torch|ember OUT.json prog.py[:arg,arg] ...``: each program runs as
``__main__`` (its own ``sys.argv``), its printed lines are captured, and an exception that
escapes it is recorded as ``!! <type name>: <message>`` (the program's last line). With
``ember`` the interpreter maps ``torch`` to ember before any program imports it, as
``import ember as torch`` does for the programs' ``import torch.nn as nn`` lines too.
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys
import time
import traceback


def main() -> None:
    lib, out_path, *programs = sys.argv[1:]
    if lib == "ember":
        import ember

        sys.modules["torch"] = ember
    import torch

    results = {}
    for spec in programs:
        path, _, args = spec.partition(":")
        torch.manual_seed(0)
        torch.set_default_dtype(torch.float32)
        buf = io.StringIO()
        started = time.process_time()
        saved_argv = sys.argv
        sys.argv = [path] + ([a for a in args.split(",") if a] if args else [])
        try:
            with contextlib.redirect_stdout(buf):
                runpy.run_path(path, run_name="__main__")
        except BaseException as e:  # noqa: BLE001 - the program's failure is the result
            if isinstance(e, SystemExit) and e.code in (0, None):
                pass
            else:
                buf.write(f"!! {type(e).__name__}: {e}\n")
                where = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
                buf.write("".join(f"## {line}\n" for line in where.splitlines()))
        finally:
            sys.argv = saved_argv
        results[spec] = buf.getvalue()
        sys.stderr.write(f"{spec}: {time.process_time() - started:.2f}s CPU\n")
    with open(out_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
