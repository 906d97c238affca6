"""The hooks upper packages plug into: the autograd hook, plugin discovery, lazy subpackages."""

import subprocess
import sys
import textwrap

import pytest

import ember
from ember._src import plugins


def test_backward_without_autograd_names_the_package(monkeypatch):
    monkeypatch.setitem(plugins._LOADED, "autograd", None)
    x = ember.ones(2)
    with pytest.raises(RuntimeError, match="ember-autograd"):
        x.backward()


def test_autograd_hook_sees_ops_on_tensors_requiring_grad():
    # A fresh interpreter: once ember-autograd is loaded in this process (by any earlier test), its
    # native recorder takes ops before the Python hook, and unloading it is not possible.
    script = textwrap.dedent("""
        import sys
        import ember
        from ember._src import dispatch, plugins

        assert "ember.autograd" not in sys.modules
        seen = []

        def hook(op, args, kwargs):
            seen.append(op.name)
            result = op.call_kernel(args, kwargs)
            result._requires_grad = True  # as a real engine marks outputs of recorded ops
            return result

        plugins._LOADED["autograd"] = None
        dispatch._AUTOGRAD_HOOK = [hook]
        a = ember.ones(2, 2).requires_grad_()
        b = ember.ones(2, 2)
        _ = b + b  # no tensor requires grad: the hook is skipped
        assert seen == [], seen
        out = a * b + 1
        assert seen == ["mul", "add"], seen
        assert out.tolist() == [[2.0, 2.0], [2.0, 2.0]]
        with ember.no_grad():
            _ = a * b
        assert seen == ["mul", "add"], seen
        assert "ember.autograd" not in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_requires_grad_only_for_floating_point():
    with pytest.raises(RuntimeError, match="floating point"):
        ember.ones(2, dtype=ember.int64).requires_grad_()


def test_registered_plugin_is_returned_and_installed():
    class Fake:
        installed = False

        def install(self):
            Fake.installed = True

    plugins.register("fake-feature", Fake())
    assert Fake.installed
    assert isinstance(plugins.load("fake-feature"), Fake)
    assert plugins.load("no-such-feature") is None


def test_optional_subpackage_absent_gives_attribute_error(monkeypatch):
    # Every planned subpackage now exists somewhere in the repo, so name one that no distribution ships.
    monkeypatch.setattr(ember, "_OPTIONAL_SUBPACKAGES", ember._OPTIONAL_SUBPACKAGES + ("not_shipped",))
    with pytest.raises(AttributeError, match="ember.not_shipped"):
        ember.not_shipped  # noqa: B018


def test_grad_mode_context_managers_and_decorators():
    assert ember.is_grad_enabled()
    with ember.no_grad():
        assert not ember.is_grad_enabled()
        with ember.enable_grad():
            assert ember.is_grad_enabled()
        assert not ember.is_grad_enabled()

    @ember.no_grad()
    def f():
        return ember.is_grad_enabled()

    assert f() is False
    with ember.inference_mode():
        assert ember.is_inference_mode_enabled() and not ember.is_grad_enabled()
    ember.set_grad_enabled(False)
    assert not ember.is_grad_enabled()
    ember.set_grad_enabled(True)
    assert ember.is_grad_enabled()
