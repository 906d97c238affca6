"""Signature parity with PyTorch 2.13: parameter names, order, kinds and defaults.

Programs pass arguments by keyword (``nn.Linear(in_features=..)``, ``F.interpolate(x, scale_factor=..)``,
``opt.zero_grad(set_to_none=..)``), so a renamed, reordered, missing or extra parameter breaks them as
surely as a missing name. For every callable of ci/api_parity.py's NAMESPACES that both have and whose
PyTorch version is written in Python (C builtins carry no signature), this compares
``inspect.signature``: functions, class constructors, and the public methods of the classes defined
in PyTorch's namespaces (``Module.state_dict``, ``Optimizer.zero_grad``, ``Distribution.sample``),
plus the Python methods of ``torch.Tensor``. A method's first parameter (``self``) is not compared.
Known differences are listed, each with its reason, in ``EXCEPTIONS`` (tests/test_api_parity.py fails
on a new difference and on an exception that no longer differs).
Usage: PYTHONPATH=$(python3 ci/dev_env.py) python3 ci/api_signatures.py
"""

from __future__ import annotations

import inspect
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api_parity import NAMESPACES, _resolve  # noqa: E402

_TORCH_WRAPPER = ("PyTorch's own function is a (*args, **kwargs) dispatcher (boolean_dispatch on return_indices / "
                  "return_inverse, or a deprecation shim): ember spells out the real parameters, which accept "
                  "every call PyTorch's does")
_SYM = "symbolic shapes (SymInt/SymBool/SymFloat wrap a compile-time node): owned by the compile/export issue"
_STORAGE_C = "ember's storage classes are written in C++/a different base: no Python signature to compare"
_TENSOR_SPLIT = ("ember.split and Tensor.split are one record whose parameter is PyTorch's function spelling "
                 "(split_size_or_sections) and which also accepts the method's split_size keyword")
_OUT = "Tensor.norm/lu share the function's record, which adds out= (the function's keyword): calls that omit it agree"
_COMPILE = ("torch.compile's 2.13 keywords (name, recompile_limit, isolate_recompiles, shapes_spec) configure "
            "Dynamo's recompilation: owned by the compile issue")
_CHUNK = ("ember's jacfwd also takes chunk_size (jacrev's keyword), trailing and keyword-compatible: PyTorch "
          "calls never pass it")
_MODULE_FORWARD = ("Module.forward's base is 'not implemented' in both; ember's takes (*args, **kwargs) where "
                   "PyTorch's takes (*input): neither is ever called with keywords")

# "namespace.name" (methods: "namespace.Class.method") -> reason.
EXCEPTIONS: dict[str, str] = {
    **{f"nn.functional.{n}": _TORCH_WRAPPER for n in (
        "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "fractional_max_pool2d",
        "fractional_max_pool3d", "max_pool1d", "max_pool2d", "max_pool3d")},
    **{f"torch.{n}": _TORCH_WRAPPER for n in ("lu", "unique", "unique_consecutive")},
    **{f"torch.{n}": _SYM for n in ("SymBool", "SymFloat", "SymInt")},
    "torch.SymInt.conjugate": _SYM,
    "torch.UntypedStorage": _STORAGE_C,
    "torch.UntypedStorage.share_memory_": _STORAGE_C,
    "torch.split": _TENSOR_SPLIT,
    "Tensor.split": _TENSOR_SPLIT,
    "Tensor.norm": _OUT,
    "Tensor.lu": _OUT,
    "torch.compile": _COMPILE,
    "func.jacfwd": _CHUNK,
    "nn.Module.forward": _MODULE_FORWARD,
}


def _same_default(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):  # torch.Size([]) and () are interchangeable defaults
        return tuple(a) == tuple(b)
    simple = (type(None), bool, int, float, complex, str, tuple, list)
    if isinstance(a, simple) or isinstance(b, simple):
        if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                           and not isinstance(a, bool) and not isinstance(b, bool)):
            return False
        if isinstance(a, float) and a != a:
            return isinstance(b, float) and b != b
        return a == b
    # PyTorch objects (torch.float32, torch.contiguous_format, F.relu, default_generator): the same
    # kind of object with the same name/value on ember's side.
    if type(a).__name__ != type(b).__name__:
        return False
    name_a, name_b = getattr(a, "__name__", None), getattr(b, "__name__", None)
    if name_a is not None or name_b is not None:
        return name_a == name_b
    if " object at 0x" in repr(a) and " object at 0x" in repr(b):  # no value to show: the same type is enough
        return True
    return str(a).replace("torch", "ember") == str(b).replace("torch", "ember") or str(a) == str(b)


def compare(tsig: inspect.Signature, esig: inspect.Signature, method: bool = False) -> list[str]:
    """The differences of ember's signature from PyTorch's, as readable strings."""
    tp, ep = list(tsig.parameters.values()), list(esig.parameters.values())
    if method:
        tp, ep = tp[1:], ep[1:]
    if [p.name for p in tp] != [p.name for p in ep]:
        return [f"parameters ({', '.join(p.name for p in tp)}) vs ember ({', '.join(p.name for p in ep)})"]
    out = []
    for a, b in zip(tp, ep):
        if a.kind != b.kind:
            out.append(f"{a.name}: {a.kind.description} vs ember {b.kind.description}")
        if (a.default is inspect.Parameter.empty) != (b.default is inspect.Parameter.empty):
            out.append(f"{a.name}: default {'none' if a.default is inspect.Parameter.empty else repr(a.default)} "
                       f"vs ember {'none' if b.default is inspect.Parameter.empty else repr(b.default)}")
        elif a.default is not inspect.Parameter.empty and not _same_default(a.default, b.default):
            out.append(f"{a.name}: default {a.default!r} vs ember {b.default!r}")
    return out


def _signature(f):
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):
        return None


def _python_callable(obj) -> bool:
    return inspect.isfunction(inspect.unwrap(obj)) or (
        inspect.isclass(obj) and inspect.isfunction(getattr(obj, "__init__", None)))


def _pairs(torch, ember):
    """(key, torch callable, ember callable, is_method) for everything compared."""
    seen = set()
    for ns in NAMESPACES:
        if ns == "Tensor":
            continue
        tmod, emod = _resolve(torch, ns), _resolve(ember, ns)
        prefix = ns or "torch"
        for name in sorted(dir(tmod)):
            if name.startswith("_"):
                continue
            tobj, eobj = getattr(tmod, name, None), getattr(emod, name, None)
            if tobj is None or eobj is None or inspect.ismodule(tobj) or not callable(tobj):
                continue
            if id(tobj) in seen or not _python_callable(tobj):
                continue
            seen.add(id(tobj))
            if inspect.isclass(tobj):
                if not inspect.isclass(eobj):
                    continue
                yield f"{prefix}.{name}", tobj.__init__, eobj.__init__, True
                if (tobj.__module__ or "").startswith("torch") and tobj is not torch.Tensor:
                    yield from _methods(f"{prefix}.{name}", tobj, eobj, seen)
            else:
                yield f"{prefix}.{name}", tobj, eobj, False
    for name, tobj in vars(torch.Tensor).items():
        if not name.startswith("_") and inspect.isfunction(tobj) and hasattr(ember.Tensor, name):
            yield f"Tensor.{name}", tobj, getattr(ember.Tensor, name), True


def _methods(key, tcls, ecls, seen):
    for name, tm in vars(tcls).items():
        if name.startswith("_") and name != "__call__":
            continue
        is_static = isinstance(tm, staticmethod)
        if isinstance(tm, (staticmethod, classmethod)):
            tm = tm.__func__
        if not inspect.isfunction(tm) or id(tm) in seen:
            continue
        seen.add(id(tm))
        try:
            em = inspect.getattr_static(ecls, name)
        except AttributeError:
            continue  # a missing method is api_parity's concern, not a signature difference
        if isinstance(em, (staticmethod, classmethod)):
            em = em.__func__
        if callable(em):
            yield f"{key}.{name}", tm, em, not is_static


def report() -> tuple[dict[str, list[str]], int]:
    """({key: differences} for every compared callable that differs, number compared)."""
    import torch

    import ember

    warnings.simplefilter("ignore")
    diffs, compared = {}, 0
    for key, tobj, eobj, method in _pairs(torch, ember):
        tsig = _signature(tobj)
        if tsig is None:
            continue
        compared += 1
        esig = _signature(eobj)
        d = ["ember's has no inspectable signature"] if esig is None else compare(tsig, esig, method)
        if d:
            diffs[key] = d
    return diffs, compared


def main():
    diffs, compared = report()
    for key, d in sorted(diffs.items()):
        mark = "  (known)" if key in EXCEPTIONS else ""
        print(f"{key}{mark}: {'; '.join(d)}")
    print(f"\n{len(diffs)} of {compared} signatures differ ({sum(k in EXCEPTIONS for k in diffs)} known)")


if __name__ == "__main__":
    main()
