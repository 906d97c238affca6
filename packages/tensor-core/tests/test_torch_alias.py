"""``sys.modules["torch"] = ember``, then import statements of torch submodules: each name is the
module already imported under ember's name (one copy of every class), never a second execution."""

import subprocess
import sys
import textwrap


def test_submodule_imports_resolve_to_embers_modules():
    script = textwrap.dedent("""
        import sys
        import ember
        sys.modules["torch"] = ember
        import torch
        torch.nn.Linear(2, 2)                    # ember.nn imported by attribute access first
        import torch.nn.functional as F          # then by an import statement of a submodule
        from torch.utils.data import DataLoader
        from torch import nn
        import torch.nn as nn2
        assert F is ember.nn.functional and F.__name__ == "ember.nn.functional"
        assert F.__spec__.name == "ember.nn.functional"
        assert nn is nn2 is ember.nn and isinstance(nn2.Linear(1, 1), ember.nn.Module)
        assert DataLoader is ember.utils.data.DataLoader
        try:
            import torch.no_such_module  # noqa: F401
        except ModuleNotFoundError as exc:
            assert exc.name == "torch.no_such_module", exc.name
        else:
            raise AssertionError("imported a module that does not exist")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_finder_is_inert_while_torch_is_pytorch():
    script = textwrap.dedent("""
        import ember
        import torch
        import torch.nn.functional as F
        assert F.__name__ == "torch.nn.functional" and F is not ember.nn.functional
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
