"""What a first ``compile`` does to the process, beside PyTorch 2.13 (each side in a fresh
interpreter, since the change happens once per process): distribution argument validation is
switched off by default (PyTorch's ``TorchPatcher.patch``), and only by ``compile(fn)`` /
``_dynamo.optimize(backend)`` / ``_dynamo.export(f)(...)``, not by ``export`` or a disabled compile."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_STEPS = textwrap.dedent("""
    import importlib, sys
    torch = importlib.import_module(sys.argv[1])
    D = torch.distributions.Distribution
    seen = [D._validate_args]
    torch.export.export(torch.nn.Linear(2, 2), (torch.randn(2),))
    seen.append(D._validate_args)
    torch.compile(lambda x: x, disable=True)
    seen.append(D._validate_args)
    torch.compile(backend="eager")  # the decorator form, before it is applied
    seen.append(D._validate_args)
    f = torch.compile(lambda x: x + 1, backend="eager")
    seen.append(D._validate_args)
    try:
        torch.distributions.Normal(torch.tensor(0.0), torch.tensor(-1.0))
        seen.append("accepted")
    except ValueError:
        seen.append("ValueError")
    D.set_default_validate_args(True)  # the user's choice stays: the switch happens once
    f(torch.ones(2))
    torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))
    seen.append(D._validate_args)
    print(seen)
""")

_OPTIMIZE = textwrap.dedent("""
    import importlib, sys
    torch = importlib.import_module(sys.argv[1])
    D = torch.distributions.Distribution
    seen = [D._validate_args]
    torch._dynamo.optimize("eager", disable=True)
    seen.append(D._validate_args)
    torch._dynamo.optimize("eager")
    seen.append(D._validate_args)
    print(seen)
""")


def _run(script: str, framework: str) -> str:
    result = subprocess.run([sys.executable, "-c", script, framework], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("script", [_STEPS, _OPTIMIZE], ids=["compile", "optimize"])
def test_first_compile_switches_distribution_validation_off_as_torch(script):
    pytest.importorskip("torch")
    if "torch.export" in script:
        pytest.importorskip("ember.export")  # (ember-export: the package above ember-compile)
    expected = _run(script, "torch")
    assert _run(script, "ember") == expected
    assert "False" in expected  # the oracle does switch it (the check is not vacuous)
