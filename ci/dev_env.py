"""Prints a PYTHONPATH that runs every package straight from the checkout.

Each package's ``src`` goes on the path, plus a folder of generated ``*.dist-info``
stubs (name, version, entry points) so ``importlib.metadata`` finds the plugins the
packages declare, exactly as it does for installed wheels. Pair it with
``ci/dev_build.sh`` for the native extension:

    export PYTHONPATH=$(python ci/dev_env.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "build" / "dev-dist-info"


def write_stub(pyproject: Path) -> None:
    project = tomllib.loads(pyproject.read_text())["project"]
    name, version = project["name"], project["version"]
    folder = STUBS / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, entries in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
    (folder / "entry_points.txt").write_text("\n".join(lines) + "\n")


def main() -> None:
    paths = []
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        write_stub(pyproject)
        if (pyproject.parent / "src").is_dir():
            paths.append(str(pyproject.parent / "src"))
    paths.append(str(STUBS))
    sys.stdout.write(":".join(paths))


if __name__ == "__main__":
    main()
