"""ember.fx and ember.compile with the ``__torch_function__`` protocol switched on: the tracer's
stand-ins sit in front of the protocol's gates, and graphs are the same as with the protocol off;
the compiler finds the user's frames above the gates.

Each check runs in a fresh interpreter, since the protocol, once on, stays on for the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent


def _run(code: str) -> None:
    script = f"import sys\nsys.path.insert(0, {str(_TESTS)!r})\n" + textwrap.dedent(code)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_model_graphs_same_with_protocol_on():
    # The models of test_fx_models, traced before and after the switch, and a function whose
    # globals hold native functions taken before the switch (they stay ungated references).
    _run("""
        import ember
        import ember.fx
        from ember import flatten as early_flatten, matmul as early_matmul
        import test_fx_models as models

        def fn(x, y):
            return early_matmul(x, y) + ember.add(x, y) + early_flatten(x, 0).sum()

        def traces():
            found = []
            for make in (models._cnn, models._lstm_classifier, models._transformer_block):
                ember.manual_seed(0)
                found.append(ember.fx.symbolic_trace(make(ember)))
            found.append(ember.fx.symbolic_trace(fn))
            return found

        def key(gm):
            return gm.code, [(n.op, n.name, n.target if isinstance(n.target, str) else id(n.target))
                             for n in gm.graph.nodes]

        off = traces()
        import ember.overrides
        assert ember._src.torch_function.is_enabled()
        on = traces()
        for a, b in zip(off, on, strict=True):
            assert key(a) == key(b), (a.code, b.code)
        x = ember.randn(3, 3)
        assert ember.equal(on[-1](x, x), fn(x, x))
    """)


def test_models_trace_like_torch_with_protocol_on():
    # The whole test_fx_models / test_fx_passes checks against torch.fx, after a Tensor subclass
    # with __torch_function__ switched the protocol on.
    _run("""
        import ember
        import pytest

        class Sub(ember.Tensor):
            pass

        assert ember._src.torch_function.is_enabled()
        tests = sys.path[0]
        code = pytest.main(["-q", "-p", "no:cacheprovider", f"{tests}/test_fx_models.py", f"{tests}/test_fx_passes.py"])
        assert code == 0, code
    """)


def test_graph_module_calls_reach_mode():
    # A traced call of ember.add is spelled ember.add in the generated code, so a GraphModule run
    # under a TorchFunctionMode is seen by it, as torch.fx's are; a pass that compares targets
    # with the (gated) public function finds them.
    _run("""
        import ember
        import ember.fx
        from ember.overrides import TorchFunctionMode

        def fn(x, y):
            return ember.add(x, y) + ember.flatten(x, 0).sum()

        gm = ember.fx.symbolic_trace(fn)
        assert "ember.add(x, y)" in gm.code and "ember.flatten(x, 0)" in gm.code, gm.code
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target == ember.add:
                node.target = ember.mul
        gm.recompile()
        assert "ember.mul(x, y)" in gm.code, gm.code
        seen = []

        class Record(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(func.__name__)
                return func(*args, **(kwargs or {}))

        x, y = ember.randn(3, 3), ember.randn(3, 3)
        with Record():
            out = gm(x, y)
        assert seen[:3] == ["mul", "flatten", "sum"], seen
        assert ember.allclose(out, x * y + x.flatten(0).sum())
    """)


@pytest.mark.parametrize("switch_on", ["before", "after"])
def test_compile_assert_with_protocol_on(switch_on):
    # `assert tensor_cond, msg` in a compiled function is found by looking for the frame that
    # called Tensor.__bool__: above the gate once the protocol is on (switched on before or after
    # ember.compile's modules are imported).
    _run(f"""
        import ember
        if {switch_on!r} == "before":
            import ember.overrides
        import ember.compiler._hooks
        import pytest

        class Sub(ember.Tensor):
            pass

        tests = sys.path[0]
        code = pytest.main(["-q", "-p", "no:cacheprovider",
                            f"{{tests}}/test_compile_capture.py::test_assert_on_a_tensor_is_a_runtime_check_like_torch"])
        assert code == 0, code
    """)
