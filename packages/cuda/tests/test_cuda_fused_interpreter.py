"""The fused Adam/AdamW kernels (a launch per parameter, and one over a table of chunks), the
cross-entropy forward kernel (loss terms and the row log-sum-exp it saves; rows of huge scores), the one-pass
cross-entropy backward kernel (from the saved log-sum-exp, and recomputing it) and the pooling
kernels run by Triton's interpreter on the CPU (no GPU needed), against PyTorch's
``_fused_adamw_``/``_fused_adam_``, cross_entropy/nll_loss values and gradients (weights,
ignored rows, label smoothing, log-probability input, infinite and NaN scores) and max/avg pooling
forward and backward (padding, dilation, ceil mode, NaN, divisor override), and a column reduction
split into chunks of rows. ``fused_interp_check.py`` runs in a fresh process (the interpreter must
be chosen before Triton decorates the kernels). Skips where Triton is unavailable."""

from __future__ import annotations

import pytest
from cuda_helpers import run_interpreter_check

pytest.importorskip("torch")
pytest.importorskip("triton")


def test_fused_kernels_in_the_interpreter():
    run_interpreter_check("fused_interp_check.py", 53)
