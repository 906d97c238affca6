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


def test_c_stub_reads_signature_lines_followed_by_prose():
    # A hand-written docstring "name(args) -> T: prose" once became "def name(args) -> T: prose: ...";
    # prose with brackets, defaults with brackets and nested types must not confuse the split either.
    import ast
    import types

    def fn(doc):
        def f(*args, **kwargs):
            return None

        f.__doc__ = doc
        return f

    class Launcher:
        arm = fn("arm(launcher, grid_x=(1, 1)): launches (grid_x, 1, 1); arm(None) turns it off.")
        run = fn("run(self: ember._C.Launcher, stream: int) -> None")

    module = types.ModuleType("fake_C")
    docs = {
        "typed": "typed(x: int, f: Callable[[int], tuple[int, int]]) -> list[int]: the values (as f(x) gives them).",
        "pybind": "pybind(out: object, scale: float = 1.0) -> None",
        "no_return": "no_return(a, b=None): a with b (or a: see above).",
        "returns_prose": "returns_prose(t) -> (int, int) pairs: what it returns.",
        "prose": "prose(tensor) is what it takes.",
        "plain": "No signature here.",
    }
    for name, doc in docs.items():
        setattr(module, name, fn(doc))
    module.Launcher = Launcher
    tree = ast.parse(_generator().render(module))
    defs = {node.name: ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert defs["typed"] == "def typed(x: int, f: Callable[[int], tuple[int, int]]) -> list[int]:\n    ..."
    assert defs["pybind"] == "def pybind(out: object, scale: float=...) -> None:\n    ..."
    assert defs["no_return"] == "def no_return(a, b=...) -> typing.Any:\n    ..."
    for name in ("returns_prose", "prose", "plain"):
        assert defs[name] == f"def {name}(*args, **kwargs) -> typing.Any:\n    ..."
    assert defs["arm"] == "def arm(self, launcher, grid_x=...) -> typing.Any:\n    ..."
    assert defs["run"] == "def run(self, stream: int) -> None:\n    ..."


def test_c_stub_of_the_built_module_is_python():
    import ast

    ast.parse(_generator().render(_C))
