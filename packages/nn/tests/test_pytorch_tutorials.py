"""Divergences found by running the official PyTorch tutorials (pytorch/tutorials: the basics,
the 60-minute blitz, examples_autograd/nn, the intermediate tutorials) with ember standing in
for torch (``sys.modules["torch"] = ember`` before the tutorial's imports), each checked
against PyTorch 2.13."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120)


_SUBMODULE_IMPORTS = """
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim
    from torch.utils.data import DataLoader
    import torch.autograd
    assert nn is torch.nn and F is torch.nn.functional and optim is torch.optim, (nn, F, optim)
    assert DataLoader is torch.utils.data.DataLoader
    assert sys.modules["torch.nn"] is torch.nn
    assert optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1) is not None
    try:
        import torch.no_such_submodule
    except ModuleNotFoundError as e:
        print("missing:", e.name)
"""


def test_submodule_imports_under_sys_modules_alias():
    # Every tutorial starts `import torch; import torch.nn as nn; import torch.optim as optim`.
    # Run under sys.modules["torch"] = ember, `import torch.nn` loaded ember/nn/__init__.py a
    # second time under the name torch.nn, and the next import of ember.nn (ember.optim's own)
    # raised ValueError('op linear is declared twice'). `torch.nn` must be ember.nn itself, as
    # in PyTorch `import torch.nn` gives the module torch.nn and an unknown submodule raises
    # ModuleNotFoundError naming it.
    import torch
    import torch.nn as nn

    assert nn is torch.nn
    with pytest.raises(ModuleNotFoundError) as info:
        import torch.no_such_submodule  # noqa: F401
    assert info.value.name == "torch.no_such_submodule"
    got = _run("import sys\nimport ember\nsys.modules['torch'] = ember\nimport torch\n"
               + textwrap.dedent(_SUBMODULE_IMPORTS) + "print(torch.nn.__spec__.name, torch.optim.__name__)\n")
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[0] == "missing: torch.no_such_submodule"
    # the modules keep their own names and specs
    assert got.stdout.splitlines()[1] == "ember.nn ember.optim"


def _masked_report(m) -> list:
    # the report without the object address line, numbers and time units replaced (times vary run
    # to run: a loaded machine reports ms where a quiet one reports us)
    import re

    lines = [line for line in repr(m).splitlines()[1:] if "WARNING" not in line and "environmental" not in line]
    return [re.sub(r"\bN (ns|us|ms|s)$", "N <unit>", re.sub(r"\d+(\.\d+)?", "N", line)) for line in lines]


def test_benchmark_timer_measurement():
    # per_sample_grads / jacobians_hessians / ensembling / neural_tangent_kernels time their
    # transforms with torch.utils.benchmark.Timer(stmt=..., globals=globals()).timeit(n) and print
    # the Measurement; ember had no ember.utils.benchmark (ModuleNotFoundError).
    import torch
    import torch.utils.benchmark as tb

    import ember
    import ember.utils.benchmark as eb

    for lib, bench in ((torch, tb), (ember, eb)):
        x = lib.ones(8)
        plain = bench.Timer(stmt="x.sin()", globals={"x": x}).timeit(5)
        titled = bench.Timer(stmt="x.sin() + y", setup="y = 1", globals={"x": x}, label="L", sub_label="S",
                             description="D", num_threads=2).timeit(3)
        blocked = bench.Timer(stmt="x.sin()", globals={"x": x}).blocked_autorange(min_run_time=0.01)
        if lib is torch:
            expected = (_masked_report(plain), _masked_report(titled), plain.number_per_run, titled.num_threads)
        else:
            assert (_masked_report(plain), _masked_report(titled), plain.number_per_run,
                    titled.num_threads) == expected
            assert plain.title == "x.sin()" and titled.title == "L: S"
        assert plain.times == [plain.raw_times[0] / 5] and plain.median == plain.mean == plain.times[0]
        assert len(blocked.times) >= 1 and blocked.median > 0
        assert _masked_report(blocked)[1].startswith("  Median: " if len(blocked.times) > 1 else "  N")
        with pytest.raises(NameError):
            bench.Timer(stmt="undefined_name", globals={"x": x}).timeit(1)
        with pytest.raises(SyntaxError):
            bench.Timer(stmt="x.sin(", globals={"x": x}).timeit(1)
