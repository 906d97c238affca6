"""The shared `ember` namespace holds together across distributions and install modes.

ember-tensor-core alone ships `ember/__init__.py` (which extends `__path__`); every other
distribution ships only `ember/<name>/`. These tests install the built tensor-core wheel into
a throw-away venv next to a generated second distribution, installed normally and then in
editable mode, and import both (docs/packaging.md, notes/build-facts.md).

They use the wheels `nox -s wheels` leaves in dist/: the noxfile passes that folder in
EMBER_DIST_DIR. Without it they skip rather than compile the extension again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PORTION = "zz_namespace_probe"  # the throw-away subpackage: ember.zz_namespace_probe


def _dist_dir() -> Path | None:
    value = os.environ.get("EMBER_DIST_DIR")
    return Path(value) if value else None


def _wheels() -> list[Path]:
    dist = _dist_dir()
    return sorted(dist.glob("*.whl")) if dist and dist.is_dir() else []


def _core_wheel() -> Path:
    found = [w for w in _wheels() if w.name.startswith("ember_tensor_core-")]
    if len(found) != 1:
        pytest.skip(
            "needs exactly one ember-tensor-core wheel in $EMBER_DIST_DIR (found "
            f"{[w.name for w in found]}); run these through `nox -s tests`, which builds it"
        )
    return found[0]


def _run(*command: str | Path, cwd: Path | None = None) -> str:
    result = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_only_the_core_source_tree_has_ember_init():
    owners = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("packages/*/src/ember/__init__.py"))
    assert owners == ["packages/tensor-core/src/ember/__init__.py"]


def test_only_the_core_wheel_ships_ember_init():
    wheels = _wheels()
    if not wheels:
        pytest.skip("no wheels in $EMBER_DIST_DIR: run through `nox -s tests` (it builds them first)")
    shipping = sorted(
        w.name.split("-")[0] for w in wheels if "ember/__init__.py" in zipfile.ZipFile(w).namelist()
    )
    assert shipping == ["ember_tensor_core"]


def test_core_init_extends_path_first():
    # extend_path must run before anything imports a subpackage, or portions go missing.
    import ast

    source = (ROOT / "packages/tensor-core/src/ember/__init__.py").read_text()
    body = [node for node in ast.parse(source).body if not isinstance(node, ast.Expr)]  # skip the docstring
    assert "extend_path" in ast.unparse(body[0]) and "__path__" in ast.unparse(body[0])


def _write_portion(root: Path) -> Path:
    """A hatchling project shipping only ember/<PORTION>/__init__.py (no ember/__init__.py)."""
    (root / "src" / "ember" / PORTION).mkdir(parents=True)
    (root / "src" / "ember" / PORTION / "__init__.py").write_text(
        "import ember\n\nVALUE = 42\n\n\ndef double(x):\n    return ember.mul(x, 2)\n"
    )
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"

            [project]
            name = "ember-{PORTION.replace("_", "-")}"
            version = "0.0.1"

            [tool.hatch.build.targets.wheel]
            packages = ["src/ember"]
            """
        )
    )
    return root


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv holding the built tensor-core wheel (with its declared deps) and hatchling.

    Hatchling is installed here (not isolated per build) so each install takes seconds.
    """
    wheel = _core_wheel()
    path = tmp_path_factory.mktemp("ns") / "venv"
    _run(sys.executable, "-m", "venv", path)
    python = path / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", wheel, "hatchling", "editables")  # editables: hatchling -e
    return python


IMPORT_BOTH = f"""
import ember, ember.{PORTION} as probe
assert probe.VALUE == 42
assert probe.double(ember.tensor([1.0, 2.0])).tolist() == [2.0, 4.0]
assert ember.{PORTION} is probe  # also reachable as an attribute after import
print(ember.__file__, probe.__file__)
"""


@pytest.mark.slow
@pytest.mark.packaging
@pytest.mark.parametrize("editable", [False, True], ids=["regular", "editable"])
def test_second_distribution_joins_the_namespace(venv, tmp_path, editable):
    project = _write_portion(tmp_path / "probe")
    flags = ["-e"] if editable else []
    _run(venv, "-m", "pip", "install", "-q", "--no-build-isolation", *flags, project)
    try:
        out = _run(venv, "-c", IMPORT_BOTH, cwd=tmp_path)  # cwd: nothing named ember nearby
        core_file, probe_file = out.split()
        assert "site-packages" in core_file
        assert ("site-packages" in probe_file) != editable  # editable: imported from the project folder
        if not editable:
            record = _run(venv, "-m", "pip", "show", "-f", f"ember-{PORTION.replace('_', '-')}")
            assert "ember/__init__.py" not in record
    finally:
        _run(venv, "-m", "pip", "uninstall", "-y", "-q", f"ember-{PORTION.replace('_', '-')}")
    # Removing the portion must leave the core (and its ember/__init__.py) intact.
    _run(venv, "-c", "import ember; assert ember.tensor([1]).tolist() == [1]", cwd=tmp_path)
