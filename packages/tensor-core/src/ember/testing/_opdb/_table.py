"""The entries of the op table: hand-written where needed, derived from the schema otherwise."""

from __future__ import annotations

import inspect

from ._calls import aten, both, meth, parse_schema, pub, schema_samples
from ._manual import manual_entries
from ._spec import OpEntry

# Ops PyTorch has only in torch.nn.functional (the op itself is the kernel behind it).
# (ATen has the others under the op's own name, with the same schema: compared there.)
NN_FUNCTIONAL = {"gelu_tanh": ("gelu", {"approximate": "tanh"}), "softsign": ("softsign", {}),
                 "tanhshrink": ("tanhshrink", {})}
# ember's ops for PyTorch's composites accept bool (PyTorch's composites fail inside on abs/sub).
NO_BOOL = {"softsign", "tanhshrink"}
# In-place ops PyTorch has no method for: compared with the out-of-place result copied into self.
NO_TORCH_INPLACE = {"maximum_", "minimum_", "fmax_", "fmin_", "logaddexp_", "logaddexp2_"}


def _takes_out(fn) -> bool:
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _nn_call(name: str):
    base = name.rstrip("_")
    fname, extra = NN_FUNCTIONAL[base]
    inplace = name.endswith("_")

    def torch_side(t):
        fn = getattr(t.nn.functional, fname)
        kw = dict(extra, **({"inplace": True} if inplace else {}))
        return lambda *a, **k: fn(*a, **kw, **k)

    return both(lambda e: e.ops[name], torch_side)


def auto_entry(name: str, op) -> OpEntry | None:
    """An entry from the schema, or None when the schema does not say enough."""
    import torch

    import ember

    built = schema_samples(name, op.schema)
    if built is None:
        return None
    samples, errors = built
    base = name.split(".")[0]
    method = None
    if base in NO_TORCH_INPLACE:
        call = both(lambda e: e.ops[base], lambda t: lambda x, y: x.copy_(getattr(t, base[:-1])(x, y)))
    elif base.rstrip("_") in NN_FUNCTIONAL:
        call = _nn_call(base)
    elif base.endswith("_") and hasattr(torch.Tensor, base):
        call, method = meth(base), base
    elif hasattr(ember, base) and hasattr(torch, base):
        call = pub(base)
        method = base if hasattr(torch.Tensor, base) else None
    elif hasattr(torch.ops.aten, base):
        call = aten(base)
    elif hasattr(torch.ops.aten, base.rstrip("_")) and base.endswith("_"):
        call = both(lambda e: e.ops[base], lambda t: lambda x, *a: x.copy_(getattr(t.ops.aten, base[:-1])(x, *a)))
    else:
        return None
    out = _takes_out(getattr(ember, base, None)) if call.__qualname__.startswith("pub") else False
    inplace = base + "_" if not base.endswith("_") and hasattr(torch.Tensor, base + "_") else None
    first = parse_schema(op.schema)[0][1] if parse_schema(op.schema) else ""
    if first not in ("self", "input"):
        method = inplace = None
    dtypes = OpEntry.__dataclass_fields__["dtypes"].default  # every dtype under EMBER_OPDB_FULL=1
    if base.rstrip("_") in NO_BOOL:
        dtypes = tuple(d for d in dtypes if d != "bool")
    return OpEntry(name=name, call=call, samples=samples, errors=errors, dtypes=dtypes, out=out, method=method,
                   inplace=inplace)


def op_entries() -> dict:
    from ember._src.dispatch import OPS

    entries = manual_entries()
    for name, op in OPS.items():
        if name in entries:
            continue
        if "composite" in op.tags:
            # ember._src.composite: the public function (torch.batch_norm, F.linear) under its ATen
            # name, so one node in an exported graph; that function's entry compares it with torch
            entries[name] = OpEntry(name=name, covered_by=f"the public {name} function's entry",
                                    reason="composite op: runs the public function's decomposition")
            continue
        entry = auto_entry(name, op)
        if entry is not None:
            entries[name] = entry
    return entries
