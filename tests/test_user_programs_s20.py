"""Session-20 user programs, run with PyTorch and with ``import ember as torch``, printing the same lines.

The programs under ``tests/programs/s20_*.py`` are eager training programs written in the style of well-known
public code not covered before (a LLaMA-style decoder with RoPE both ways, GQA and a KV cache, a DDPM UNet, CLIP,
LoRA, mnist_hogwild, forward-forward, the nn.Transformer translation tutorial, time_sequence_prediction with LBFGS,
T5's relative position bias, a selective scan / S4D layer, a neural ODE, distillation with mixup/cutmix, VQ-VAE,
Swin/ConvNeXt blocks, torch.utils.data utilities, and resuming a whole training state). They start from
seed-independent states (``_seedfree``), so the printed losses agree per step (rtol 1e-5, plus one unit in the
last printed digit). ``s20_hostile.py`` prints, per case, a result or the exception's type and message.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "programs"
sys.path.insert(0, str(HERE))
from _compare import (  # noqa: E402
    assert_prints_what_pytorch_prints,
    assert_raises_what_pytorch_raises,
    hostile_cases,
    run_under_both,
)

HOSTILE = {"s20_hostile.py": 300}  # each program, the fewest cases it must have
PROGRAMS = sorted(p.name for p in HERE.glob("s20_*.py") if p.name not in HOSTILE)
# Each program once more from its modules' own initialization (``_seedfree``'s ``torch-init``): the driver
# seeds both libraries alike and ember draws PyTorch's CPU random streams, so nn's default inits must agree.
TORCH_INIT = [f"{p}:torch-init" for p in PROGRAMS]
# Hostile cases whose exception type is PyTorch's but whose message deliberately is not.
MESSAGE_DIFFERS: dict[str, str] = {}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    pytest.importorskip("torch")
    return run_under_both([*PROGRAMS, *TORCH_INIT, *HOSTILE], tmp_path_factory.mktemp("programs_s20"))


def test_there_are_programs():
    assert len(PROGRAMS) >= 15, PROGRAMS


@pytest.mark.parametrize("spec", PROGRAMS + TORCH_INIT)
def test_program_prints_what_pytorch_prints(outputs, spec):
    assert_prints_what_pytorch_prints(outputs, spec)


@pytest.mark.parametrize("spec", sorted(HOSTILE))
def test_hostile_inputs_raise_what_pytorch_raises(outputs, spec):
    assert_raises_what_pytorch_raises(outputs, spec, MESSAGE_DIFFERS, HOSTILE[spec])


def test_message_exceptions_name_existing_cases(outputs):
    names = set()
    for spec in HOSTILE:
        names |= set(hostile_cases(outputs["torch"][spec]))
    assert set(MESSAGE_DIFFERS) <= names
