"""What each built distribution carries (the files in $EMBER_DIST_DIR, set by the noxfile).

The sdist must rebuild the wheel on a machine with only Python and a C++ compiler, so it
needs every native source and the CMake build; the wheels need their markers and binaries.
"""

from __future__ import annotations

import os
import re
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def _packages() -> dict[str, Path]:
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        found[tomllib.loads(pyproject.read_text())["project"]["name"]] = pyproject.parent
    return found


def _built(name: str, kind: str) -> Path:
    if not os.environ.get("EMBER_DIST_DIR"):
        pytest.skip("EMBER_DIST_DIR is not set: run through `nox -s tests`, which builds dist/ and sets it")
    dist = Path(os.environ["EMBER_DIST_DIR"])
    package_dir = _packages()[name]
    version = tomllib.loads((package_dir / "pyproject.toml").read_text())["project"]["version"]
    stem = name.replace("-", "_")
    pattern = f"{stem}-{version}.tar.gz" if kind == "sdist" else f"{stem}-{version}-*.whl"
    matches = sorted(dist.glob(pattern))
    if len(matches) != 1:
        pytest.skip(f"no single {pattern} in {dist}: run through `nox -s tests` (it builds dist/ first)")
    return matches[0]


def test_core_sdist_has_native_sources_and_build():
    sdist = _built("ember-tensor-core", "sdist")
    prefix = sdist.name.removesuffix(".tar.gz") + "/"
    with tarfile.open(sdist) as archive:
        names = {n.removeprefix(prefix) for n in archive.getnames()}
    package_dir = _packages()["ember-tensor-core"]
    expected = {p.relative_to(package_dir).as_posix() for p in (package_dir / "csrc").rglob("*") if p.is_file()}
    expected |= {"CMakeLists.txt", "pyproject.toml", "README.md", "src/ember/__init__.py", "src/ember/py.typed"}
    assert not expected - names, f"missing from {sdist.name}: {sorted(expected - names)}"
    assert not any(n.startswith("build/") or n.endswith(".so") for n in names), "build output leaked into the sdist"


def test_core_wheel_has_extension_and_marker():
    with zipfile.ZipFile(_built("ember-tensor-core", "wheel")) as archive:
        names = archive.namelist()
    assert any(n.startswith("ember/_C") and n.endswith(".so") for n in names)
    assert "ember/py.typed" in names and "ember/__init__.py" in names


def test_meta_package_wheel_has_no_code_and_depends_on_every_package():
    with zipfile.ZipFile(_built("ember", "wheel")) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert all(".dist-info/" in n for n in names), f"the meta-package ships code: {names}"
    requirements = [line.split(":", 1)[1].strip() for line in metadata.splitlines()
                    if line.startswith("Requires-Dist:")]
    required = {re.split(r"[<>=!~;\[ ]", r)[0] for r in requirements if "extra ==" not in r}
    extras = {re.split(r"[<>=!~;\[ ]", r)[0] for r in requirements if "extra ==" in r}
    # Every package is a dependency of the meta-package, device plugins as extras (ember[cuda]).
    assert required | extras == set(_packages()) - {"ember"}
    assert "ember-cuda" in extras and "ember-cuda" not in required
