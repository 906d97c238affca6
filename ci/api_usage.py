"""Which of PyTorch's names that ember lacks do programs use, ranked by how many files use them.

Scans a folder of Python sources (any checkout of PyTorch programs) for every dotted reference
``torch.a.b.c`` and every ``from torch.a.b import c``, keeps the ones that resolve in PyTorch 2.13,
and reports, for each reference ember cannot resolve, its first missing component with the number
of files that reach it. Private names are reported too (``torch._foreach_add_``): programs use some.
Usage: PYTHONPATH=$(python3 ci/dev_env.py) python3 ci/api_usage.py CORPUS_DIR [--top N]
(session 17 ran it over pytorch/examples, timm, nanoGPT, diffusers, accelerate, whisper, detectron2,
vit-pytorch, pytorch-lightning, peft, pyro and ignite: 5,382 files; NOTES.md of ember-tensor-core).
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import sys
import warnings

_CHAIN = re.compile(r"(?<![\w.])torch((?:\.[A-Za-z_]\w*)+)")
_FROM = re.compile(r"^\s*from\s+torch((?:\.\w+)*)\s+import\s+(\([^)]*\)|[^\n#]*)", re.M)


def references(text: str) -> set[str]:
    found = {"torch" + m.group(1) for m in _CHAIN.finditer(text)}
    for m in _FROM.finditer(text):
        names = re.split(r"[,\s()\\]+", m.group(2))
        for i, name in enumerate(names):
            if name and name != "as" and (i == 0 or names[i - 1] != "as"):
                found.add(f"torch{m.group(1)}.{name}")
    return found


def resolve(root, path: str):
    obj, name = root, root.__name__
    for part in path.split(".")[1:]:
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(f"{name}.{part}")
            except Exception:  # noqa: BLE001 - any failure means "not there"
                raise AttributeError(part) from None
        name = f"{name}.{part}"
    return obj


def rank(corpus: str) -> list[tuple[int, str]]:
    """(files, first missing prefix), most used first: a file counts once per missing prefix."""
    import torch

    import ember

    per_file = []
    for root, _, files in os.walk(corpus):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(root, f), errors="ignore") as fh:
                    per_file.append(references(fh.read()))
    prefix_of: dict[str, str | None] = {}
    for path in set().union(*per_file) if per_file else ():
        prefix_of[path] = None
        try:
            resolve(torch, path)
        except Exception:  # noqa: BLE001 - not a PyTorch name (a local alias, a typo): skipped
            continue
        parts = path.split(".")
        for k in range(2, len(parts) + 1):
            try:
                resolve(ember, "ember." + ".".join(parts[1:k]))
            except Exception:  # noqa: BLE001
                prefix_of[path] = ".".join(parts[:k])
                break
    counts: collections.Counter = collections.Counter()
    for refs in per_file:
        counts.update({prefix_of[p] for p in refs if prefix_of[p] is not None})
    return [(n, p) for p, n in counts.most_common()]


def main(argv: list[str]) -> None:
    warnings.simplefilter("ignore")
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 100
    for n, path in rank(argv[0])[:top]:
        print(f"{n:5d} {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
