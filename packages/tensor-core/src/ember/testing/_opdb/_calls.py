"""How an entry reaches a function on each library, and samples derived from an op's schema."""

from __future__ import annotations

import re

from ._spec import DType, ErrorInput, Sample, T


def pub(path: str):
    """``L.<path>`` (dotted: ``"linalg.det"``) on ember and on torch."""

    def call(lib):
        obj = lib
        for part in path.split("."):
            obj = getattr(obj, part)
        return obj

    return call


def meth(name: str):
    """The Tensor method ``name`` called on the first argument."""
    return lambda lib: lambda self, *a, **k: getattr(self, name)(*a, **k)


def aten(name: str, overload: str = "default", ember_name: str | None = None):
    """ember's op-table op against ``torch.ops.aten.<name>.<overload>`` (same schema)."""

    def call(lib):
        import torch

        if lib is torch:
            return getattr(getattr(torch.ops.aten, name), overload)
        import ember

        return ember.ops[ember_name or name]

    return call


def both(ember_fn, torch_fn):
    """Different spellings per library: ``ember_fn(ember)`` and ``torch_fn(torch)`` give the callables."""

    def call(lib):
        import torch

        return torch_fn(lib) if lib is torch else ember_fn(lib)

    return call


# -- schema parsing --------------------------------------------------------------------------------


def _split_top(text: str) -> list:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([" and 1 or 0
        depth -= ch in ")]" and 1 or 0
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + ([cur.strip()] if cur.strip() else [])


def parse_schema(schema: str) -> list:
    """[(type, name, default or None, kw_only)] of an op schema ``name(args) -> returns``."""
    inner = schema[schema.index("(") + 1: schema.rindex("->")].strip().rstrip(")")
    out, kw_only = [], False
    for part in _split_top(inner):
        if part == "*":
            kw_only = True
            continue
        decl, _, default = part.partition("=")
        typ, _, name = decl.strip().rpartition(" ")
        out.append((re.sub(r"\([a-z]!?\)", "", typ), name, default.strip() if default else None, kw_only))
    return out


def _literal(text: str):
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text.strip("\"'")


# Values for scalar arguments without a default, by name (a clamp needs min < max, ...).
SCALAR_HINTS = {"min_val": -1.0, "max_val": 1.0, "min": -1.0, "max": 1.0, "negative_slope": 0.01, "beta": 1.0,
                "threshold": 0.5, "value": 2.0, "alpha": 1.0, "scale": 1.0, "input_scale": 1.0, "lambd": 0.5,
                "exponent": 2.0}


# Per-family value hints: ops whose inputs need a domain (log of positives, acos in (-1, 1)).
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "lgamma", "digamma", "polygamma", "igamma", "igammac", "i0",
            "special_i1", "reciprocal", "xlogy"}
UNIT = {"acos", "asin", "atanh", "erfinv", "logit"}
NONZERO_OTHER = {"div", "remainder", "fmod", "floor_divide", "div_rounding"}


def schema_samples(name: str, schema: str, *, shapes=((3, 4),)):
    """Samples from the schema: every layout for the first tensor, broadcasting and edge shapes.

    Returns a function dtype -> [Sample] (None when an argument has no value the schema implies)."""
    args = parse_schema(schema)
    base = name.rstrip("_").split(".")[0]
    kind = "positive" if base in POSITIVE else "unit" if base in UNIT else "any"
    plan = []  # (name, role, value or None, kw_only)
    for typ, arg, default, kw in args:
        t = typ.rstrip("?")
        if t in ("Tensor", "Scalar|Tensor") and not (typ.endswith("?") and default == "None"):
            plan.append((arg, "tensor", None, kw))
        elif default is not None:
            continue
        elif t in ("Scalar", "float"):
            plan.append((arg, "value", SCALAR_HINTS.get(arg, 0.5), kw))
        elif t in ("int", "SymInt"):
            plan.append((arg, "value", -1 if "dim" in arg else 2, kw))
        elif t in ("int[]", "int[1]", "SymInt[]"):
            plan.append((arg, "value", [-1] if "dim" in arg else [2], kw))
        elif t == "bool":
            plan.append((arg, "value", False, kw))
        elif t == "Tensor[]":
            plan.append((arg, "list", None, kw))
        else:
            return None
    n_tensors = sum(role == "tensor" for _, role, _, _ in plan)
    has_dim = any(a == "dim" for a, _, _, _ in plan)

    def build(shape_list, layouts, desc, kinds=None):
        a, k = [], {}
        ti = 0
        for arg, role, value, kw in plan:
            if role == "tensor":
                tkind = kind if ti == 0 or base in POSITIVE or base == "xlogy" else "any"
                if ti == 1 and base in NONZERO_OTHER:
                    tkind = "nonzero"
                v = T(shape_list[min(ti, len(shape_list) - 1)], layout=layouts[min(ti, len(layouts) - 1)],
                      kind=tkind, seed=ti)
                ti += 1
            elif role == "list":
                v = [T(shape_list[0], seed=5), T(shape_list[0], layout="transposed", seed=6)]
            else:
                v = value
            (k.__setitem__(arg, v) if kw else a.append(v))
        return Sample(tuple(a), k, desc, inplace="expanded" not in layouts[:1])

    def samples(dtype):
        out = [build([(3, 4)], ["contiguous"], "contiguous"),
               build([(3, 4)], ["transposed", "sliced"], "transposed"),
               build([(2, 3)], ["offset", "contiguous"], "storage offset"),
               build([(0, 4)], ["contiguous"], "empty"),
               build([()], ["contiguous"], "0-dim")]
        if n_tensors >= 2:
            out.append(build([(3, 4), (4,)], ["contiguous"], "broadcast other"))
            out.append(build([(2, 3, 4), (3, 4)], ["sliced", "expanded"], "expanded other"))
            out.append(build([(3, 1), (1, 4)], ["contiguous"], "broadcast both"))
        return out

    def errors():
        errs = []
        if n_tensors >= 2:
            errs.append(ErrorInput(build([(3, 4), (5,)], ["contiguous"], "shape mismatch"), RuntimeError))
        if has_dim:
            bad = build([(3, 4)], ["contiguous"], "dim out of range")
            bad.args = tuple(7 if v == -1 else [7] if v == [-1] else v for v in bad.args)
            errs.append(ErrorInput(bad, IndexError))
        return errs

    return samples, errors


__all__ = ["DType", "aten", "both", "meth", "parse_schema", "pub", "schema_samples"]
