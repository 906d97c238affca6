"""`import ember` leaves this distribution's subpackages (linalg, fft, sparse, profiler, serialization,
testing, ...) to first use (ember/__init__.py, PEP 562): the namespace must look and behave as if they
had been imported eagerly. Each check runs in a fresh interpreter, where nothing imported them yet."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import ember

LAZY = sorted(ember._LAZY_SUBMODULES)


def _run(body: str) -> str:
    script = "import sys\nimport ember\nLAZY = " + repr(LAZY) + "\n" + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_import_ember_imports_none_of_the_lazy_modules():
    out = _run("""
        loaded = sorted(m for m in LAZY if "ember." + m in sys.modules or m in vars(ember))
        print(loaded)
        x = ember.randn(3) + 1  # the first ops need none of them either
        y = (x * x).sum().item()
        print(sorted(m for m in LAZY if "ember." + m in sys.modules))
    """)
    assert out.split("\n")[:2] == ["[]", "[]"], out


def test_lazy_modules_are_the_modules_import_gives():
    out = _run("""
        import importlib
        before = set(dir(ember))
        assert set(LAZY) <= before
        for name in LAZY:
            assert hasattr(ember, name), name
            module = getattr(ember, name)
            assert module is sys.modules["ember." + name] is importlib.import_module("ember." + name), name
            assert vars(ember)[name] is module, name  # bound on ember: later lookups skip __getattr__
        assert set(dir(ember)) == before, set(dir(ember)) ^ before
        print("ok")
    """)
    assert out.strip() == "ok"


def test_import_statements_find_the_same_modules():
    out = _run("""
        import ember.linalg
        from ember import fft, special as sp
        from ember.testing import assert_close
        from ember.backends import cudnn
        assert ember.linalg is sys.modules["ember.linalg"] and fft is sys.modules["ember.fft"]
        assert sp is ember.special and assert_close is ember.testing.assert_close
        assert cudnn is ember.backends.cudnn
        sys.modules["torch"] = ember  # `import ember as torch` programs: torch.<sub> is the same module
        import torch.profiler
        import torch.sparse as ts
        assert torch.profiler is ember.profiler and ts is ember.sparse
        print("ok")
    """)
    assert out.strip() == "ok"


def test_lazy_names_are_their_modules_objects():
    out = _run("""
        import io
        assert {"GradScaler", "load", "save", "__version__"} <= set(dir(ember))
        assert "ember.serialization" not in sys.modules
        buffer = io.BytesIO()
        ember.save(ember.arange(4), buffer)
        buffer.seek(0)
        assert ember.load(buffer).tolist() == [0, 1, 2, 3]
        assert ember.save is ember.serialization.save and ember.load is ember.serialization.load
        assert ember.GradScaler is ember.amp.GradScaler and ember.amp.GradScaler is ember.amp.grad_scaler.GradScaler
        assert ember.__version__ is ember.version.__version__ and ember.__version__ >= "2.0"
        assert not hasattr(ember, "no_such_name")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_star_import_gives_every_public_name():
    out = _run("""
        names = {}
        exec("from ember import *", names)
        public = {n for n in dir(ember) if not n.startswith("_")}
        got = {n for n in names if not n.startswith("_")}
        assert got == public, got ^ public
        assert names["linalg"] is ember.linalg and names["save"] is ember.save
        print("ok")
    """)
    assert out.strip() == "ok"


def test_pickles_reach_lazy_modules_in_a_fresh_process():
    # Objects and functions of lazy modules pickle by reference; a fresh interpreter finds them.
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import pickle, sys
        import ember
        blob = pickle.dumps((ember.fft.rfft, ember.amp.GradScaler, ember.arange(3), ember.Size([2, 3]),
                             ember.profiler.ProfilerActivity.CPU))
        sys.stdout.buffer.write(blob)
    """)], capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    back = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import pickle, sys
        fn, scaler, t, size, activity = pickle.loads(sys.stdin.buffer.read())
        import ember
        assert fn is ember.fft.rfft and scaler is ember.GradScaler and t.tolist() == [0, 1, 2]
        assert size == ember.Size([2, 3]) and activity is ember.profiler.ProfilerActivity.CPU
        print("ok")
    """)], input=out.stdout, capture_output=True, timeout=300)
    assert back.returncode == 0, back.stderr
    assert back.stdout.strip() == b"ok"


def test_torch_function_switch_gates_namespaces_imported_after_it():
    # The protocol switched on before ember.linalg/fft/special were ever imported still reaches
    # their functions (bindings._torch_function_namespaces imports them when the switch turns on).
    out = _run("""
        seen = []

        class Logged(ember.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                seen.append(getattr(func, "__name__", str(func)))
                return super().__torch_function__(func, types, args, kwargs or {})

        x = ember.ones(2, 2).as_subclass(Logged)  # the first subclass with a handler turns it on
        _ = x + 1
        ember.linalg.norm(x)
        ember.fft.fft(x)
        ember.special.expit(x)
        print(seen)
    """)
    seen = eval(out.strip())
    assert "norm" in seen and "fft" in seen and "sigmoid" in seen, seen
