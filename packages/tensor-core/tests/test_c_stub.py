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


def test_c_stub_marks_static_methods_static():
    # from_buffer/from_file carry docstrings without pybind11's signature line; the stub once wrote
    # them as instance methods (a type checker then wanted a Storage to call them on).
    import ast

    tree = ast.parse(_generator().render(_C))
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef) and hasattr(_C, node.name)):
        for fn in (node for node in cls.body if isinstance(node, ast.FunctionDef)):
            static = isinstance(vars(getattr(_C, cls.name)).get(fn.name), staticmethod)
            decorated = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
            assert static == decorated, f"{cls.name}.{fn.name}"
    assert isinstance(vars(_C.Storage)["from_buffer"], staticmethod)
