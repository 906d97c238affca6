"""Session-19 compile/export programs (``tests/programs/s19c_*.py``, ``s19e_*.py``) under PyTorch 2.13 and under
``import ember as torch``: the same printed lines (compiled answers, compile counts of a counting backend, exported
programs' ranges, guards and errors, ONNX Runtime's verdicts). ``s19c_hostile.py`` prints, per case, a result or the
exception's type and message; ember must raise PyTorch's type (its message too, except where listed below).
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

HOSTILE = "s19c_hostile.py"
PROGRAMS = sorted(p.name for p in [*HERE.glob("s19c_*.py"), *HERE.glob("s19e_*.py")] if p.name != HOSTILE)
# Hostile cases whose exception type is PyTorch's but whose message deliberately is not.
MESSAGE_DIFFERS: dict[str, str] = {
    "export wrong rank": "ember's IndexError says which guard and how many dims the program was exported with; "
                         "PyTorch's is the bare 'tuple index out of range' of its guard code",
    "compile bad option": "the list of known options is each library's own",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")  # torch.onnx.export(dynamo=True) needs it
    return run_under_both([*PROGRAMS, HOSTILE], tmp_path_factory.mktemp("programs_s19"))


def test_there_are_programs():
    assert len(PROGRAMS) >= 15, PROGRAMS


@pytest.mark.parametrize("spec", PROGRAMS)
def test_program_prints_what_pytorch_prints(outputs, spec):
    assert_prints_what_pytorch_prints(outputs, spec)


def test_hostile_inputs_raise_what_pytorch_raises(outputs):
    assert_raises_what_pytorch_raises(outputs, HOSTILE, MESSAGE_DIFFERS, 40)


def test_message_exceptions_name_existing_cases(outputs):
    assert set(MESSAGE_DIFFERS) <= set(hostile_cases(outputs["torch"][HOSTILE]))
