"""API-surface parity: PyTorch's public names per namespace and which ember lacks.

Prints, per namespace, how many of PyTorch's public names ember has (coverage) and the missing
ones grouped by kind (function, class, module, constant). Coverage counts PyTorch's names minus
the deliberate exclusions of ci/api_parity_exclusions.py (each with its reason); the figure over
all names is printed beside it. ``--json PATH`` writes the figures.
PyTorch 2.13's CPU build is the reference; compile/export/distributed/cuda have their own issues
and are left out. Usage: PYTHONPATH=$(python3 ci/dev_env.py) python3 ci/api_parity.py [--all] [--json out.json]
(``--all`` adds EXTRA_NAMESPACES; ci/api_usage.py ranks what is missing by use in a corpus of programs).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_parity_exclusions import EXCLUDED  # noqa: E402

# Reported with --all (session 17): the rest of the surface ordinary programs touch. No coverage floor
# is asserted on these (tests/test_api_parity.py covers NAMESPACES); most of what they lack is CUDA/vendor
# machinery or internals that these modules happen to import.
EXTRA_NAMESPACES = ["nn.attention", "nn.attention.flex_attention", "backends.cuda", "backends.mkl", "cuda", "cuda.amp",
                    "hub", "utils.model_zoo", "utils.checkpoint", "utils.weak", "utils.dlpack", "autograd.function",
                    "masked", "quasirandom"]
# Asserted (>= 95% after exclusions, tests/test_api_parity.py). Session 20 added the sub-namespaces
# programs import directly: the nn.utils family, autograd's functional/graph/forward_ad, func, the optim
# and distributions submodules, testing, random, backends, overrides, amp and types.
NAMESPACES = ["", "Tensor", "nn", "nn.functional", "nn.init", "nn.utils", "nn.utils.rnn", "nn.utils.parametrize",
              "nn.utils.parametrizations", "nn.utils.stateless", "optim", "optim.lr_scheduler", "optim.swa_utils",
              "linalg", "fft", "special", "distributions", "distributions.constraints", "distributions.transforms",
              "distributions.kl", "autograd", "autograd.functional", "autograd.graph", "autograd.forward_ad", "func",
              "utils.data", "testing", "random", "backends", "overrides", "amp", "types"]
# Names of PyTorch's that are not API (re-exported modules, typing helpers, private-ish leftovers).
IGNORED = {"annotations", "builtins", "math", "os", "sys", "platform", "textwrap", "ctypes", "inspect", "importlib",
           "functools", "typing", "warnings", "collections", "itertools", "abc", "torch", "Optional", "Union",
           "Any", "Callable", "List", "Tuple", "Dict", "TYPE_CHECKING", "Iterable", "Sequence", "Set", "Type",
           "TypeVar", "overload", "cast", "deprecated", "Generic", "Iterator", "Enum", "Number", "defaultdict",
           "partial", "wraps", "chain", "contextmanager", "dataclass", "field", "logging", "weakref", "numbers",
           "operator", "copy", "threading", "types", "re", "np", "numpy", "F", "Tensor" if False else ""}


def _resolve(root, path):
    obj = root
    for part in filter(None, path.split(".")):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(f"{obj.__name__}.{part}")
    return obj


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "constant"


def _foreign(obj, n) -> bool:
    """Not PyTorch's own API: typing helpers, stdlib/third-party imports, docstring templates."""
    if isinstance(obj, (str, dict)) and (n.endswith(("_notes", "_args", "_common")) or n.islower()):
        return True
    mod = getattr(obj, "__module__", None) if not inspect.ismodule(obj) else obj.__name__
    if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj):
        return not (mod or "").startswith("torch")
    return type(obj).__module__ in ("typing", "typing_extensions")


def _reexport(mod, path, n, obj) -> bool:
    """A sub-namespace's value it does not list in ``__all__`` (a logger, ``math.inf``), or its import of a
    name defined elsewhere (``torch.nn.utils.stateless.Tensor``, ``torch.distributions.kl.Pareto``): not in
    the module's ``__all__`` and defined outside its package.
    Only modules that declare ``__all__`` are judged (nn, nn.functional, linalg have none: their names
    come from C bindings and torch.nn.modules)."""
    listed = getattr(mod, "__all__", None)
    if listed is None or n in listed:
        return False
    if not (inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj)):
        return True  # a value the module does not list (a logger, math.inf, a type alias): not its API
    home = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", None)
    if not isinstance(home, str):
        return False
    package = f"torch.{path}"
    return home != package and not home.startswith(package + ".")


def public_names(mod, path):
    names = {}
    for n in dir(mod):
        if n.startswith("_") or n in IGNORED:
            continue
        try:
            obj = getattr(mod, n)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails to load is still a name
            obj = None
        if path and path != "Tensor" and (_foreign(obj, n) or _reexport(mod, path, n, obj)):
            continue
        if inspect.ismodule(obj) and path == "" and n in {"compiler", "export", "distributed", "cuda", "onnx", "jit",
                                                           "fx", "xpu", "mps", "mtia", "backends", "_dynamo"}:
            continue
        names[n] = _kind(obj)
    return names


def report(namespaces=None):
    import torch

    import ember

    warnings.simplefilter("ignore")
    rows = {}
    for ns in namespaces or NAMESPACES:
        try:
            tmod = _resolve(torch, ns)
        except (AttributeError, ImportError):
            continue
        try:
            emod = _resolve(ember, ns)
        except (AttributeError, ImportError):
            emod = None
        tnames = public_names(tmod, ns)
        excluded = EXCLUDED.get(ns or "torch", {})
        have_names = {n for n in tnames if emod is not None and hasattr(emod, n)}
        # An excluded name ember has anyway counts as had; the others leave the denominator.
        left_out = {n: excluded[n] for n in tnames if n in excluded and n not in have_names}
        missing = {n: k for n, k in tnames.items() if n not in have_names and n not in left_out}
        total = len(tnames) - len(left_out)
        coverage = round(100 * len(have_names) / max(total, 1), 1)
        raw = round(100 * len(have_names) / max(len(tnames), 1), 1)
        rows[ns or "torch"] = {"total": total, "have": len(have_names), "coverage": coverage, "raw_total": len(tnames),
                               "raw_coverage": raw, "excluded": dict(sorted(left_out.items())),
                               "missing": dict(sorted(missing.items()))}
    return rows


def main(argv):
    rows = report(NAMESPACES + EXTRA_NAMESPACES if "--all" in argv else None)
    for ns, row in rows.items():
        print(f"{ns:22s} {row['have']:5d}/{row['total']:<5d} {row['coverage']:5.1f}%   "
              f"(all names: {row['have']}/{row['raw_total']} {row['raw_coverage']:.1f}%, "
              f"{len(row['excluded'])} excluded)")
    print()
    for ns, row in rows.items():
        if row["missing"]:
            by_kind = {}
            for n, k in row["missing"].items():
                by_kind.setdefault(k, []).append(n)
            print(f"[{ns}] missing:")
            for k, ns_names in sorted(by_kind.items()):
                print(f"  {k} ({len(ns_names)}): {', '.join(ns_names)}")
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
