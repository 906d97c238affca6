"""Importing ember-compile and running a compiled training step must not define a Tensor subclass with
``__torch_dispatch__`` (ember.func's BatchedTensor, through an import of ember.func.batching): the dispatcher
would switch its subclass path on for the whole process, and the fused optimizers and native fast paths would
step aside (session 18: a compiled GPT-2 step on an H100 went from 19.5 to 24 ms that way)."""

import os
import subprocess
import sys

PROGRAM = """
import ember
from ember._src import dispatch
import ember._higher_order_ops
from ember.compiler import _class_nll_split  # noqa: F401
model = ember.nn.Sequential(ember.nn.Linear(8, 8), ember.nn.ReLU(), ember.nn.Linear(8, 4))
step = ember.compile(model)
x, t = ember.randn(16, 8), ember.randint(0, 4, (16,))
opt = ember.optim.AdamW(model.parameters(), fused=True)
for _ in range(2):
    ember.nn.functional.cross_entropy(step(x), t, label_smoothing=0.1).backward()
    opt.step()
    opt.zero_grad()
assert "ember.func._batched" not in __import__("sys").modules
print(dispatch._SUBCLASS_DISPATCH[0])
"""


def test_compiled_training_step_leaves_the_subclass_path_off():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "False"
