"""The scattering kernels (scatter with every reduction, the atomic sum, index_put, masked_scatter,
nonzero), the adaptive pooling and the sort kernels run by Triton's interpreter on the CPU (no GPU
needed) against PyTorch; ``scatter_interp_check.py`` runs in a fresh process (the interpreter must
be chosen before Triton decorates the kernels). Skips where Triton is unavailable."""

from __future__ import annotations

import pytest
from cuda_helpers import run_interpreter_check

pytest.importorskip("torch")
pytest.importorskip("triton")


def test_scatter_kernels_in_the_interpreter():
    run_interpreter_check("scatter_interp_check.py", 20)
