"""The flash-attention Triton kernels run by Triton's interpreter on the CPU (no GPU needed):
forward, log-sum-exp and the dK/dV and dQ kernels against float64 attention in PyTorch, over
the code paths the GPU takes (causal diagonal tiles, ragged lengths, grouped heads, a bias, a key-padding row,
padded head widths). ``flash_interp_check.py`` runs in a fresh process (the interpreter must be
chosen before Triton decorates the kernels). Skips where Triton is unavailable."""

from __future__ import annotations

import pytest
from cuda_helpers import run_interpreter_check

pytest.importorskip("torch")
pytest.importorskip("triton")


def test_flash_kernels_in_the_interpreter():
    run_interpreter_check("flash_interp_check.py", 6)
