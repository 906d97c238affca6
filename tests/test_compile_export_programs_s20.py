"""Session-20 compile/export programs (``tests/programs/s20c_*.py``) under PyTorch 2.13 and under ``import ember as
torch``: the same printed lines (compiled answers and gradients, compile counts, config knobs, fullgraph refusals,
exported programs' ranges, guards, signatures and higher-order ops, save/load, unflatten, ONNX Runtime's verdicts,
jit trace/script). ``s20c_hostile.py`` prints, per case, a result or the exception's type and message; ember must
raise PyTorch's type (its message too, except where listed below).
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

HOSTILE = "s20c_hostile.py"
PROGRAMS = sorted(p.name for p in HERE.glob("s20c_*.py") if p.name != HOSTILE)
# Hostile cases whose exception type is PyTorch's but whose message deliberately is not.
MESSAGE_DIFFERS: dict[str, str] = {
    "export numpy input": "PyTorch's text comes from its pytree code meeting the ndarray ('int' object is not "
                          "callable); ember's from the first op given the ndarray",
    "export dims on scalar arg": "ember names the argument (y); PyTorch the flattened positions (dynamic_shapes[1])",
    "export same dim unequal": "ember names sizes x.size()[0], PyTorch's Dynamo sources L['x'].size()[0]",
    "while body arity": "PyTorch lists the outputs as FakeTensor reprs, ember by type",
    "fullgraph disabled call": "PyTorch words a disabled torch function (torch.sin) apart from a disabled user "
                               "function; ember words both as the user function",
    "bad stance": "ember refuses an unknown stance at set_stance, naming the stances; PyTorch at the next compile",
    "onnx function not module": "each exporter's first attribute read of the function differs",
    "jit load garbage": "PyTorch's archive reader's text; ember's loader names the file that is no archive",
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")  # torch.onnx.export(dynamo=True) needs it
    return run_under_both([*PROGRAMS, HOSTILE], tmp_path_factory.mktemp("programs_s20"))


def test_there_are_programs():
    assert len(PROGRAMS) >= 15, PROGRAMS


@pytest.mark.parametrize("spec", PROGRAMS)
def test_program_prints_what_pytorch_prints(outputs, spec):
    assert_prints_what_pytorch_prints(outputs, spec)


def test_hostile_inputs_raise_what_pytorch_raises(outputs):
    assert_raises_what_pytorch_raises(outputs, HOSTILE, MESSAGE_DIFFERS, 40)


def test_message_exceptions_name_existing_cases(outputs):
    assert set(MESSAGE_DIFFERS) <= set(hostile_cases(outputs["torch"][HOSTILE]))
