"""Session-18 user programs, run with PyTorch and with ``import ember as torch``, printing the same lines.

The programs under ``tests/programs/s18_*.py`` start from seed-independent states: ``_seedfree`` fills
every parameter from NumPy (the same arrays in both libraries) and builds the data the same way, so the
printed losses agree per step (rtol 1e-5, plus one unit in the last printed digit) without relying on
the random streams. ``s18_hostile.py`` prints, per case, a result or the exception's type and message.
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

PROGRAMS = sorted(p.name for p in HERE.glob("s18_*.py") if p.name != "s18_hostile.py")
HOSTILE = "s18_hostile.py"
# Hostile cases whose exception type is PyTorch's but whose message deliberately is not.
MESSAGE_DIFFERS: dict[str, str] = {
    "interpolate int input": "PyTorch's text names an internal helper of whichever kernel path it took "
                             "(compute_indices_weights_nearest, upsample_nearest2d_channels_last, ...); ember names "
                             "the op",
    "conv2d padding_mode bad": "PyTorch prints a Python set of strings, whose order changes with the hash seed",
    "conv2d bad padding str": "as above",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    pytest.importorskip("torch")
    return run_under_both([*PROGRAMS, HOSTILE], tmp_path_factory.mktemp("programs_s18"))


def test_there_are_programs():
    assert len(PROGRAMS) >= 12, PROGRAMS


@pytest.mark.parametrize("spec", PROGRAMS)
def test_program_prints_what_pytorch_prints(outputs, spec):
    assert_prints_what_pytorch_prints(outputs, spec)


def test_hostile_inputs_raise_what_pytorch_raises(outputs):
    assert_raises_what_pytorch_raises(outputs, HOSTILE, MESSAGE_DIFFERS, 40)


def test_message_exceptions_name_existing_cases(outputs):
    assert set(MESSAGE_DIFFERS) <= set(hostile_cases(outputs["torch"][HOSTILE]))
