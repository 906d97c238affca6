"""Packages depend only downward (DESIGN.md section 2).

Scans every module under packages/*/src for imports (statements at any depth, relative ones,
and string literals passed to importlib.import_module / __import__) and every package's
declared dependencies, maps both ends to distributions, and fails on any edge from a lower
package to one above it.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]

# Which distribution provides each ember subpackage; everything else under `ember` is the core.
SUBPACKAGE_OWNERS = {
    "autograd": "ember-autograd",
    "nn": "ember-nn",
    "optim": "ember-nn",
    "utils": "ember-nn",
    "distributions": "ember-nn",
    "func": "ember-autograd",
    "compiler": "ember-compile",
    "fx": "ember-compile",
    "_dynamo": "ember-compile",
    "_logging": "ember-compile",
    "library": "ember-compile",
    "_higher_order_ops": "ember-compile",
    "_subclasses": "ember-compile",
    "jit": "ember-export",
    "multiprocessing": "ember-distributed",
    "export": "ember-export",
    "onnx": "ember-export",
    "_inductor": "ember-export",
    "_export": "ember-export",
    "_jit_internal": "ember-export",
    "distributed": "ember-distributed",
    "_cuda": "ember-cuda",
}
CORE = "ember-tensor-core"

# What each distribution may import or depend on besides itself: the layers below it.
ALLOWED_BELOW = {
    "ember-tensor-core": set(),
    "ember-autograd": {"ember-tensor-core"},
    "ember-nn": {"ember-tensor-core", "ember-autograd"},
    "ember-compile": {"ember-tensor-core", "ember-autograd", "ember-nn"},
    "ember-export": {"ember-tensor-core", "ember-autograd", "ember-nn", "ember-compile"},
    "ember-distributed": {"ember-tensor-core", "ember-autograd", "ember-nn"},
    # A device plugin sits directly on the core (autograd/nn only in its tests).
    "ember-cuda": {"ember-tensor-core"},
    # The meta-package sits on top of everything.
    "ember": {
        "ember-tensor-core", "ember-autograd", "ember-nn", "ember-compile", "ember-export",
        "ember-distributed", "ember-cuda",
    },
}


@dataclass(frozen=True)
class Edge:
    source: str  # file (or pyproject) the edge comes from
    line: int
    importer: str  # distribution doing the importing
    imported: str  # distribution imported
    what: str  # the module or requirement, as written

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.importer} -> {self.imported} ({self.what})"


def owner_of(module: str) -> str | None:
    """The distribution that provides `module`, or None when it is not part of ember."""
    parts = module.split(".")
    if parts[0] != "ember":
        return None
    if len(parts) > 1 and parts[1] in SUBPACKAGE_OWNERS:
        return SUBPACKAGE_OWNERS[parts[1]]
    return CORE


def module_name(path: Path, src_root: Path) -> str:
    """Dotted module name of a file under a src/ folder (packages/x/src/ember/nn/mod.py -> ember.nn.mod)."""
    parts = list(path.relative_to(src_root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve_relative(current: str, is_package: bool, level: int, module: str | None) -> str:
    base = current.split(".") if is_package else current.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imported_modules(source: str, current: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) for every import in `source`, including lazy ones inside functions."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(current, is_package, node.level, node.module)
            found.append((node.lineno, base))
            # `from ember import nn` imports ember.nn: check each imported name as a submodule too.
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def distribution_of_src(package_dir: Path) -> str:
    return tomllib.loads((package_dir / "pyproject.toml").read_text())["project"]["name"]


def scan_sources(src_root: Path, importer: str) -> list[Edge]:
    """Every import edge from the modules under `src_root` to another ember distribution."""
    edges = []
    for path in sorted(src_root.rglob("*.py")):
        current = module_name(path, src_root)
        is_package = path.name == "__init__.py"
        seen = set()  # `from ember.nn import Linear` names ember.nn and ember.nn.Linear: one edge
        for line, module in imported_modules(path.read_text(), current, is_package):
            imported = owner_of(module)
            if imported is not None and imported != importer and (line, imported) not in seen:
                seen.add((line, imported))
                edges.append(Edge(str(path), line, importer, imported, module))
    return edges


def scan_dependencies(package_dir: Path) -> list[Edge]:
    """Every declared dependency (runtime and extras) on another ember distribution."""
    project = tomllib.loads((package_dir / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    edges = []
    for requirement in requirements:
        name = requirement.split(";")[0]
        for stop in "<>=!~[ (":
            name = name.split(stop)[0]
        name = name.strip().lower().replace("_", "-")
        if name in ALLOWED_BELOW and name != project["name"]:
            edges.append(Edge(str(package_dir / "pyproject.toml"), 0, project["name"], name, requirement))
    return edges


def upward_edges(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if e.imported not in ALLOWED_BELOW.get(e.importer, set())]


def package_dirs() -> list[Path]:
    return sorted(p.parent for p in ROOT.glob("packages/*/pyproject.toml"))


def test_every_distribution_has_a_layer():
    for package_dir in package_dirs():
        assert distribution_of_src(package_dir) in ALLOWED_BELOW, f"{package_dir}: add it to ALLOWED_BELOW"


def test_imports_only_go_down():
    edges = []
    for package_dir in package_dirs():
        if (package_dir / "src").is_dir():
            edges += scan_sources(package_dir / "src", distribution_of_src(package_dir))
    assert (ROOT / "packages/tensor-core/src/ember/__init__.py").exists(), "scanner found no sources"
    bad = upward_edges(edges)
    assert not bad, "imports from a lower package to a higher one:\n" + "\n".join(map(str, bad))


def test_dependencies_only_go_down():
    edges = []
    for package_dir in package_dirs():
        edges += scan_dependencies(package_dir)
    bad = upward_edges(edges)
    assert not bad, "declared dependencies on a higher package:\n" + "\n".join(map(str, bad))


def test_sources_map_to_their_own_distribution():
    # A core file under ember/nn/ would be shipped by the wrong wheel and hide upward imports.
    for package_dir in package_dirs():
        dist = distribution_of_src(package_dir)
        for path in (package_dir / "src").rglob("*.py") if (package_dir / "src").is_dir() else []:
            module = module_name(path, package_dir / "src")
            if module != "ember":
                assert owner_of(module) == dist, f"{path} belongs to {owner_of(module)}, not {dist}"


# --- self-tests: the scanner must catch what it is meant to catch -------------------------


def _fake_package(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return src


@pytest.mark.parametrize(
    "code, target",
    [
        ("import ember.nn\n", "ember-nn"),
        ("from ember.autograd import grad\n", "ember-autograd"),
        ("from ember import optim\n", "ember-nn"),
        ("from ... import compiler\n", "ember-compile"),
        ("from ...distributed.mesh import DeviceMesh\n", "ember-distributed"),
        ("from .. import compiler\n", None),  # ember._src.compiler: still the core
        ("def f():\n    import ember.export\n", "ember-export"),
        ("import importlib\n\ndef f():\n    return importlib.import_module('ember.onnx')\n", "ember-export"),
        ("def f():\n    return __import__('ember.utils.data')\n", "ember-nn"),
    ],
)
def test_scanner_flags_upward_imports(tmp_path, code, target):
    src = _fake_package(tmp_path, {"ember/_src/ops/fake.py": code, "ember/_src/ops/__init__.py": ""})
    bad = upward_edges(scan_sources(src, CORE))
    assert [e.imported for e in bad] == ([target] if target else [])
    assert all(e.source.endswith("fake.py") for e in bad)


def test_scanner_allows_downward_and_own_imports(tmp_path):
    code = (
        "import ember\nfrom ember import _C\nfrom ember._src.tensor import Tensor\n"
        "from ..nn import Module\nimport importlib\nimportlib.import_module('ember.linalg')\n"
    )
    src = _fake_package(tmp_path, {"ember/optim/sgd.py": code})
    assert upward_edges(scan_sources(src, "ember-nn")) == []
    # The same file inside autograd points up at nn.
    src = _fake_package(tmp_path / "b", {"ember/autograd/fn.py": "from ember.optim import SGD\n"})
    assert [e.imported for e in upward_edges(scan_sources(src, "ember-autograd"))] == ["ember-nn"]


def test_scanner_flags_upward_dependency(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "ember-autograd"\nversion = "0"\n'
        'dependencies = ["ember-tensor-core>=0.1"]\n'
        '[project.optional-dependencies]\nextra = ["ember_nn ; python_version >= \'3.10\'"]\n'
    )
    bad = upward_edges(scan_dependencies(tmp_path))
    assert [(e.importer, e.imported) for e in bad] == [("ember-autograd", "ember-nn")]


def test_test_modules_have_unique_names_across_packages():
    # pytest imports every tests/ folder's modules by basename (rootdir-relative "prepend" import mode): two
    # packages with a same-named test or helper module break the whole suite's collection, though each
    # package's own session passes
    seen: dict = {}
    for path in sorted([*ROOT.glob("packages/*/tests/*.py"), *ROOT.glob("tests/*.py")]):
        if path.name != "conftest.py":
            seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
