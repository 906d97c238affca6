"""The on-disk cache of the Triton backend: lowered graphs and tuned block sizes, across processes.

Three layers keep a second process from redoing a first one's work:

- *graphs* (this module, through ``_graphcache``'s store): the wrapper's source, each kernel's
  spec (Triton source, parameters, pointer dtypes, launch sizes) and the names the wrapper
  refers to, under the key of the C++ path's graph cache (every node, every input layout, the
  inductor settings, the code generator's own source) extended with the Triton version, the
  device's name and compute capability and the ``config.triton`` settings. A hit skips
  lowering, scheduling and code generation (most of a warm compile);
- *tuning* (``<cache dir>/triton/tune/<digest>.json``): the configuration each kernel's first
  launch picked for a size class, keyed by the kernel source, the device, the Triton version
  and ``max_autotune``; a hit skips compiling and timing the other candidates;
- *binaries*: the device plugin keeps the cubins (``Backend.compile_triton``, keyed by source,
  signature, constexprs, architecture and Triton version), so nothing is compiled again.

Every file is written to a temporary name and renamed into place (readers see no file or a
whole one); entries not owned by this user, or writable by others, are ignored (they hold code
that is executed). A damaged entry is skipped and rewritten.
"""

from __future__ import annotations

import hashlib
import os

import sympy

import ember
from ember._src import dtypes as dt

from . import _graphcache, config

_FORMAT = 1
# The generated wrapper's form (2: launch sites and the device's allocation front, bound at link time);
# entries of another form are lowered again.
_WRAPPER_FORMAT = 2


def _device_facts(device) -> str:
    """The device's name and compute capability ("" for the interpreter on CPU)."""
    if device.type == "cpu":
        return "interpreter"
    try:
        cuda = ember.cuda
        index = device.index or 0
        return f"{cuda.get_device_name(index)}|{cuda.get_device_capability(index)}"
    except Exception:  # noqa: BLE001 - a device without those facts: its type alone
        return device.type


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:  # noqa: BLE001
        return "none"


def graph_key(gm, example_inputs, device) -> str:
    """The graph cache key of ``gm`` on the Triton backend (``Uncacheable`` if there is none)."""
    base = _graphcache.graph_key(gm, example_inputs)
    extra = (_FORMAT, base, _triton_version(), _device_facts(device), _graphcache._settings(config.triton))
    return "t" + hashlib.sha256(repr(extra).encode()).hexdigest()[:39]


# -- kernel specs as JSON ---------------------------------------------------------------------------

def _expr(text: str) -> sympy.Expr:
    expr = sympy.sympify(text)
    # sizes are positive integers (the code generator's symbols carry those assumptions)
    return expr.xreplace({s: sympy.Symbol(s.name, integer=True, positive=True) for s in expr.free_symbols})


def spec_to_json(spec) -> dict:
    return {"name": spec.name, "source": spec.source,
            "params": [[kind, what if kind in ("ptr", "number") else what.name] for kind, what in spec.params],
            "dtypes": {name: d.name for name, d in spec.dtypes.items()},
            "xnumel": str(spec.xnumel), "rnumel": str(spec.rnumel), "reduction": spec.reduction,
            "persistent": spec.persistent, "inplace": spec.inplace, "origins": list(spec.origins),
            "index_type": spec.index_type}


def spec_from_json(d: dict):
    from ._triton import TritonKernelSpec

    params = [(kind, what if kind in ("ptr", "number") else sympy.Symbol(what, integer=True, positive=True))
              for kind, what in d["params"]]
    dtypes = {name: getattr(dt, name_) for name, name_ in d["dtypes"].items()}
    spec = TritonKernelSpec(d["name"], d["source"], params, dtypes, _expr(d["xnumel"]), _expr(d["rnumel"]),
                            d["reduction"], d["persistent"], d["inplace"], d["origins"])
    spec.index_type = d["index_type"]
    return spec


def store_graph(key, gm, graph, wrapper: str, names: dict, specs, externs: int) -> None:
    """Writes a compiled Triton graph to the cache, if every object its wrapper uses can be named."""
    from ._wrapper import fixed_globals

    kernels = dict.fromkeys(s.name for s in specs)
    try:
        objects, constants = _graphcache.describe_names(names, {**fixed_globals(), **kernels}, gm, graph.constants)
    except _graphcache.Uncacheable:
        return
    _graphcache.store_entry(key, {"triton": _FORMAT, "wrapper_format": _WRAPPER_FORMAT, "wrapper": wrapper,
                                  "device": str(graph.device),
                                  "specs": [spec_to_json(s) for s in specs], "constants": constants,
                                  "objects": objects, "externs": externs})


def load_graph(key, gm):
    """(wrapper source, namespace without the kernels, kernel specs, device, externs) or None."""
    from ._wrapper import fixed_globals

    entry = _graphcache.load_entry(key)
    if entry is None or entry.get("triton") != _FORMAT or entry.get("wrapper_format") != _WRAPPER_FORMAT:
        return None
    namespace = fixed_globals()
    device = ember.device(entry["device"])
    namespace["_dev"] = device
    for name, path in entry["constants"].items():
        namespace[name] = _graphcache.attribute(gm, path)
    for name, desc in entry["objects"].items():
        namespace[name] = _graphcache.resolve(desc)
    specs = [spec_from_json(d) for d in entry["specs"]]
    return entry["wrapper"], namespace, specs, device, entry["externs"]


# -- tuned configurations -----------------------------------------------------------------------------

def _tune_path(spec, device) -> str:
    what = repr((_FORMAT, spec.source, spec.name, _device_facts(device), _triton_version(), config.max_autotune))
    digest = hashlib.sha256(what.encode()).hexdigest()[:32]
    return os.path.join(_graphcache.cache_dir(), "triton", "tune", digest + ".json")


def load_tuning(spec, device) -> dict:
    """Size class -> configuration, as an earlier process tuned them ({} if none)."""
    rows = _graphcache.read_json(_tune_path(spec, device))
    try:
        return {(int(x), int(r)): (int(xb), int(rb), int(w)) for x, r, xb, rb, w in rows or ()}
    except (TypeError, ValueError):
        return {}


def store_tuning(spec, device, best: dict) -> None:
    _graphcache.write_json(_tune_path(spec, device), [[x, r, *cfg] for (x, r), cfg in sorted(best.items())])


__all__ = ["graph_key", "load_graph", "load_tuning", "spec_from_json", "spec_to_json", "store_graph",
           "store_tuning"]
