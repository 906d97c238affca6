"""Session-19 user programs, run with PyTorch and with ``import ember as torch``, printing the same lines.

The programs under ``tests/programs/s19_*.py`` are written in the style of well-known public examples
(pytorch/examples' imagenet loop, the DQN tutorial, A2C, siamese losses, ViT, U-Net, nanoGPT, mixture
density networks, LR finders, ...). As the session-18 ones, they start from seed-independent states
(``_seedfree``), so the printed losses agree per step (rtol 1e-5, plus one unit in the last printed digit).
``s19_hostile.py`` and ``s19_hostile_api.py`` print, per case, a result or the exception's type and message.
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

HOSTILE = {"s19_hostile.py": 120, "s19_hostile_api.py": 280}  # each program, the fewest cases it must have
PROGRAMS = sorted(p.name for p in HERE.glob("s19_*.py") if p.name not in HOSTILE)
# Hostile cases whose exception type is PyTorch's but whose message deliberately is not.
MESSAGE_DIFFERS: dict[str, str] = {
    "categorical log_prob out of support": "the same text, but the case cuts it at 160 characters, in the middle of "
                                           "the distribution's repr (torch.Size / ember.Size)",
    "pad_sequence 0-d": "PyTorch's text is an internal ArrayRef slicing failure; ember says which sequence is 0-d",
    "sdpa q k dim mismatch": "PyTorch's text names the batched matmul inside its math kernel; ember names the three "
                             "shapes",
    "sdpa int inputs": "PyTorch's text comes from a kernel's dtype check; ember says the inputs must be floating",
    "interp bool": "PyTorch's text names the internal kernel it took (upsample_nearest2d_channels_last); ember "
                   "names the op",
    "load bad bytes": "PyTorch's text is its generic weights-only advice; ember says the bytes are no zip archive",
    "inplace on pow input": "ember names the node the saved tensor had when saved (Mul), PyTorch its current one (Add, "
                            "the in-place op's): ember keeps no reference to the original tensor",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    pytest.importorskip("torch")
    return run_under_both([*PROGRAMS, *HOSTILE], tmp_path_factory.mktemp("programs_s19"))


def test_there_are_programs():
    assert len(PROGRAMS) >= 15, PROGRAMS


@pytest.mark.parametrize("spec", PROGRAMS)
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
