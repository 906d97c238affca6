"""``ember._C._get_tracing_state()`` (PyTorch's ``torch._C._get_tracing_state()``, which programs use as
an "am I being traced?" check) is None outside a jit trace and truthy inside one, call by call as
PyTorch's, and does not import ember-export to answer."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ember

torch = pytest.importorskip("torch")


def _seen_during_trace(lib):
    seen = []

    def f(x):
        seen.append(lib._C._get_tracing_state() is not None)
        return x * 2

    lib.jit.trace(f, (lib.ones(2),))
    return seen


def test_tracing_state_matches_torch():
    assert ember._C._get_tracing_state() is None and torch._C._get_tracing_state() is None
    assert _seen_during_trace(ember) == _seen_during_trace(torch)
    assert True in _seen_during_trace(ember)
    assert ember._C._get_tracing_state() is None
    with pytest.raises(TypeError):
        ember._C._get_tracing_state(1)


def test_tracing_state_does_not_import_export():
    code = "import sys, ember; ember._C._get_tracing_state(); print('ember.jit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
