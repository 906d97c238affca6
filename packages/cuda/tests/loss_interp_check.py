"""Runs ember's CUDA cross-entropy forward kernel (``_ops_loss._CLASS_NLL``) in Triton's CPU
interpreter against PyTorch on the CPU, including rows of huge scores whose log-sum-exp rounds
to their max (the loss must come from (x[t] - max) - log(sum), not x[t] - lse).
test_cuda_loss_interpreter.py starts it in a fresh process. Prints one "ok" line per case."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
from fused_interp_check import _load  # noqa: E402

from ember._cuda._ops_loss import _CLASS_NLL  # noqa: E402

kernel = _load(_CLASS_NLL.replace("__CT__", "tl.float32"), "k")
for scale in (1e30, -1e30, 3.0):
    for log_probs in (False, True):
        g = torch.Generator().manual_seed(0)
        x = (scale * (1 + torch.rand(5, 9, generator=g) * 1e-3)).float()
        x[0] = scale  # equal scores: the loss is log(9) exactly
        t = torch.randint(0, 9, (5,), generator=g)
        t[1] = -100
        xi = torch.log_softmax(x, 1) if log_probs else x
        nll, wt, lse = torch.empty(5), torch.empty(5), torch.empty(5)
        kernel[(5,)](xi, t, xi, nll, torch.empty(0), wt, lse, 9, -100, BLOCK=16, LOGP=log_probs, HAS_W=False,
                     SMOOTH=False)
        ref = torch.nn.functional.cross_entropy(x, t, reduction="none")
        torch.testing.assert_close(nll, ref, rtol=1e-5, atol=1e-6)
        print("ok", scale, log_probs)
