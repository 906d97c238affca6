"""The checked-in type stub of the native module (ember/_C.pyi) matches the built ember._C."""

import importlib.util
import pathlib

import pytest

from ember import _C

_ROOT = pathlib.Path(__file__).resolve().parents[3]
_GENERATOR = _ROOT / "ci" / "gen_c_stub.py"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_c_stub", _GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not _GENERATOR.exists(), reason="runs from a source checkout (ci/gen_c_stub.py)")
def test_c_stub_is_current():
    generator = _generator()
    stub = pathlib.Path(_C.__file__).with_name("_C.pyi")
    if not stub.exists():  # an installed wheel without the stub: compare with the source tree's
        stub = generator.STUB
    assert stub.read_text() == generator.render(_C), (
        "ember/_C.pyi is out of date: run `python3 ci/gen_c_stub.py` after building")


def test_c_stub_names_every_public_binding():
    text = _generator().render(_C)
    for name in dir(_C):
        if not name.startswith("__"):
            assert f"def {name}(" in text or f"class {name}:" in text or f"{name}: " in text, name
