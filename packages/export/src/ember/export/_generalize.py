"""Dynamic dims: from graphs traced at concrete sizes to one graph over symbolic sizes.

compile's ``make_fx`` records concrete sizes. For each dynamic dim (a root ``Dim``, or a
dim hinted ``Dim.AUTO``/``Dim.DYNAMIC``), export traces the program again with that size
changed (every corner of {example size, another size} over the roots), checks that each
trace records the same ops, and fits every size that differs between traces (view shapes,
expand sizes, slice bounds, each node's result shape) as a polynomial in the roots that is
linear in each root (``b*t*c``, ``2*s0 + 1``). A further trace at fresh sizes must agree
with every fitted expression. Sizes that vary in any other way, a trace that fails at
another size, or a graph whose ops change are reported as PyTorch reports a constraint
violation (which dim, what happened, the suggested fix); ``Dim.AUTO`` dims silently become
static instead. The fitted expressions replace the integers in the graph through
``sym_size`` nodes, and every node gets ``meta["sym_shape"]``.
"""

from __future__ import annotations

import itertools

import sympy

import ember

from ._dims import INT_OO, _DerivedDim
from ._dynamic_shapes import constraint_violation, dim_kind
from ._errors import UserError, UserErrorType
from ._ranges import ValueRange
from ._sym import SizeBuilder
from ._trace_compare import same_structure, signature, val_shapes


class _Root:
    def __init__(self, key, name, lo, hi, kind, base):
        self.key, self.name, self.lo, self.hi, self.kind, self.base = key, name, lo, hi, kind, base
        self.uses = []  # (leaf index, dim, coeff, offset)
        self.symbol = None


def _roots(leaves, dim_specs, arg_names):
    roots: dict = {}
    for i, (leaf, specs) in enumerate(zip(leaves, dim_specs)):
        for d, spec in specs.items():
            size = int(leaf.shape[d])
            where = f"{arg_names[i]}.size()[{d}]"
            kind = dim_kind(spec)
            if kind == "static":
                if isinstance(spec, int) and spec != size:
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Expected {where} to be {spec} as the dynamic_shapes spec says, got {size}")
                continue
            if kind == "dim":
                root = spec.root
                coeff, offset = (spec.coeff, spec.offset) if isinstance(spec, _DerivedDim) else (1, 0)
                if (size - offset) % coeff:
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Expected {where} = {size} to be of the form {spec!r} for an integer "
                                    f"{root.__name__}")
                value = (size - offset) // coeff
                if not spec.min <= size <= spec.max:
                    upper = "int_oo" if spec.max >= INT_OO else spec.max
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"Expected input at {where} to be in the range [{spec.min}, {upper}] of "
                                    f"{spec.__name__}, but got {size}")
                key = ("dim", root.__name__)  # PyTorch identifies dims by name
                entry = roots.get(key)
                if entry is not None and (entry.lo, entry.hi) != (root.min, root.max):
                    raise UserError(UserErrorType.INVALID_INPUT,
                                    f"Found different definitions {root!r} and Dim({root.__name__!r}, "
                                    f"min={entry.lo}, max={entry.hi}) for the same symbolic dimension "
                                    f"{root.__name__}!")
                if entry is None:
                    entry = roots[key] = _Root(key, root.__name__, root.min, root.max, "dim", value)
                elif entry.base != value:
                    raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                                    f"The example inputs give {root.__name__} two values ({entry.base} and "
                                    f"{value}, at {where})")
                entry.uses.append((i, d, coeff, offset))
            else:
                lo = spec.min if spec.min is not None else 2  # PyTorch's 0/1 specialization
                hi = spec.max if spec.max is not None else INT_OO
                entry = roots[(i, d)] = _Root((i, d), where, lo, hi, kind, size)
                entry.uses.append((i, d, 1, 0))
    return list(roots.values())


def _values_for(root: _Root, count: int) -> list[int]:
    """``count`` sizes other than the example one, inside the root's range, each >= 2."""
    lo = max(root.lo, 2)
    out = []
    for v in [root.base + k for k in range(1, 6)] + [root.base - k for k in range(1, 4)]:
        if lo <= v <= root.hi and v != root.base and v not in out:
            out.append(v)
        if len(out) == count:
            break
    return out


def _leaves_at(leaves, roots, values: dict):
    out = list(leaves)
    for root in roots:
        for i, d, coeff, offset in root.uses:
            shape = list(out[i].shape)
            shape[d] = coeff * values[root.key] + offset
            out[i] = ember.empty(shape, dtype=out[i].dtype)
    return out


def _trace_at(trace, leaves, roots, values):
    try:
        return trace(_leaves_at(leaves, roots, values)), None
    except Exception as exc:  # the failure is the answer: this size does not trace
        return None, exc


# ------------------------------------------------------------------ fitting


def _fit(points: list[tuple[dict, int]], roots: list[_Root], symbols: dict):
    """The polynomial, linear in each root, through the corner points (base/alt per root)."""
    base = {r.key: r.base for r in roots}
    alt = {}
    for values, _ in points:
        for r in roots:
            if values[r.key] != r.base:
                alt[r.key] = values[r.key]
    expr = sympy.Integer(0)
    table = {tuple(v[r.key] != r.base for r in roots): y for v, y in points}
    for subset in itertools.product((False, True), repeat=len(roots)):
        if subset not in table:
            continue
        # Möbius inversion over the corners below `subset`.
        coeff = 0
        for lower in itertools.product((False, True), repeat=len(roots)):
            if all(lo <= hi for lo, hi in zip(lower, subset)) and lower in table:
                sign = (-1) ** (sum(subset) - sum(lower))
                coeff += sign * table[lower]
        if coeff == 0:
            continue
        term = sympy.Integer(coeff)
        for r, on in zip(roots, subset):
            if on:
                term *= (symbols[r.key] - base[r.key]) / sympy.Integer(alt[r.key] - base[r.key])
        expr += term
    return sympy.expand(expr)


def _corners(roots, alts):
    if len(roots) <= 3:
        for subset in itertools.product((False, True), repeat=len(roots)):
            yield {r.key: (alts[r.key] if on else r.base) for r, on in zip(roots, subset)}
    else:  # linear in each root only: the base and one point per root
        yield {r.key: r.base for r in roots}
        for r in roots:
            yield {q.key: (alts[q.key] if q is r else q.base) for q in roots}


def _violation(root, roots, trace, leaves, exc_or_diff, alt):
    """A UserError describing why ``root`` cannot vary, with PyTorch's suggested fix."""
    where = root.name if root.kind != "dim" else root.name
    reasons, fixes = [], []
    base_values = {r.key: r.base for r in roots}
    # Another root it must move with (c = b + 1)?
    for other in roots:
        if other is root:
            continue
        values = dict(base_values)
        values[root.key] = alt
        values[other.key] = other.base + (alt - root.base)
        if other.lo <= values[other.key] <= other.hi and _trace_at(trace, leaves, roots, values)[0] is not None:
            diff = root.base - other.base
            rel = other.name + (f" + {diff}" if diff > 0 else f" - {-diff}" if diff < 0 else "")
            reasons.append(f"The values of {where} must always be related to the values of {other.name} by "
                           f"{where} = {rel}.")
            fixes.append(f"{where} = {rel}")
            return constraint_violation([where], reasons, fixes)
    for m in (2, 3, 4, 8):
        if root.base % m == 0 and root.base + m <= root.hi:
            values = dict(base_values)
            values[root.key] = root.base + m
            if _trace_at(trace, leaves, roots, values)[0] is not None:
                reasons.append(f"Not all values of {where} in the specified range satisfy the program: it does not "
                               f"trace at {where} = {alt} ({_brief(exc_or_diff)}), but it does for multiples of {m}.")
                fixes += [f"_{where} = Dim('_{where}', min={max(1, -(-root.lo // m))})", f"{where} = {m}*_{where}"]
                return constraint_violation([where], reasons, fixes)
    if isinstance(exc_or_diff, str):
        reasons.append(f"You marked {where} as dynamic but your code specialized it to be a constant ({root.base}): "
                       f"{exc_or_diff}. If you're using Dim.DYNAMIC, replace it with either Dim.STATIC or Dim.AUTO.")
    else:
        reasons.append(f"Not all values of {where} in the specified range satisfy the program: tracing at {where} = "
                       f"{alt} failed with {_brief(exc_or_diff)}.")
    fixes.append(f"{where} = {root.base}")
    return constraint_violation([where], reasons, fixes)


def _brief(exc) -> str:
    if isinstance(exc, str):
        return exc
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}{_user_line(exc)}"


def _user_line(exc) -> str:
    """`` (at File "...", line N)`` for the deepest traceback frame outside ember's own packages."""
    import os

    import ember as _ember

    roots = [os.path.dirname(os.path.dirname(p)) for p in getattr(_ember, "__path__", [])]
    where = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(filename.startswith(r) for r in roots) and "importlib" not in filename:
            where = f'File "{filename}", line {tb.tb_lineno}, in {tb.tb_frame.f_code.co_name}'
        tb = tb.tb_next
    return f" (at {where})" if where else ""


def generalize(gm, capture, state_values, leaves, dim_specs, arg_names):
    """Makes ``gm`` symbolic in the dynamic dims; returns (range constraints, {symbol: dim name})."""
    from ._trace import trace_flat

    def trace(new_leaves):
        return trace_flat(capture, state_values, new_leaves)

    roots = _roots(leaves, dim_specs, arg_names)
    base_sig = signature(gm)
    # Drop AUTO roots that cannot vary; fail on Dim/DYNAMIC ones.
    kept, alts, checks = [], {}, {}
    for root in roots:
        values = _values_for(root, 2)
        if not values:
            if root.kind == "dynamic" or root.kind == "dim" and root.lo < root.hi:
                raise _violation(root, roots, trace, leaves, "its range allows only one size", root.base)
            continue
        probe = {r.key: r.base for r in roots}
        probe[root.key] = values[0]
        traced, exc = _trace_at(trace, leaves, roots, probe)
        problem = exc if traced is None else same_structure(base_sig, signature(traced))
        if problem is not None:
            if root.kind == "auto":
                continue
            raise _violation(root, roots, trace, leaves, problem, values[0])
        kept.append(root)
        alts[root.key] = values[0]
        if len(values) > 1:
            checks[root.key] = values[1]
    static_roots = [r for r in roots if r not in kept]
    roots = kept
    if not roots:
        return {}, {}
    symbols = {}
    for k, root in enumerate(roots):
        root.symbol = symbols[root.key] = sympy.Symbol(f"s{k}", integer=True, positive=True)
    fixed = {r.key: r.base for r in static_roots}
    sigs = []
    for values in _corners(roots, alts):
        full = {**fixed, **values}
        if all(values[r.key] == r.base for r in roots):
            sigs.append((values, base_sig))
            continue
        traced, exc = _trace_at(trace, leaves, roots + static_roots, full)
        problem = exc if traced is None else same_structure(base_sig, signature(traced))
        if problem is not None:
            moved = [r for r in roots if values[r.key] != r.base]
            raise _violation(moved[0], roots, trace, leaves, problem, values[moved[0].key])
        sigs.append((values, signature(traced)))
    check_sig = None
    if checks:
        values = {r.key: checks.get(r.key, r.base) for r in roots}
        traced, exc = _trace_at(trace, leaves, roots + static_roots, {**fixed, **values})
        if traced is not None and same_structure(base_sig, signature(traced)) is None:
            check_sig = (values, signature(traced))
    fits = _fit_all(sigs, check_sig, roots, symbols, base_sig)
    _apply(gm, fits, roots, symbols, leaves)
    ranges = {}
    names = {}
    for root in roots:
        ranges[root.symbol] = ValueRange(root.lo, root.hi)
        if root.kind == "dim":
            names[root.symbol] = root.name
        for _, _, coeff, offset in root.uses:
            if (coeff, offset) != (1, 0):
                expr = coeff * root.symbol + offset
                hi = root.hi if root.hi >= INT_OO else coeff * root.hi + offset
                ranges[expr] = ValueRange(coeff * root.lo + offset, hi)
    return ranges, names


def _fit_all(sigs, check_sig, roots, symbols, base_sig):
    """{(node index, 'arg', path) or (node index, 'shape', k, d): expr} for every varying size."""
    fits = {}

    def fit_slot(key, values_per_trace, check_value, what):
        if len(set(values_per_trace)) == 1:
            return
        points = [(v, y) for (v, _), y in zip(sigs, values_per_trace)]
        expr = _fit(points, roots, symbols)
        bad = False
        if expr.free_symbols:
            bad = any(not c.is_Integer for c in sympy.Poly(expr, *symbols.values()).coeffs())
        if check_value is not None:
            cv, cy = check_value
            predicted = expr.subs({symbols[r.key]: cv[r.key] for r in roots})
            bad = bad or predicted != cy
        if bad:
            names = ", ".join(r.name for r in roots)
            raise constraint_violation(
                [r.name for r in roots],
                [f"{what} depends on {names} in a way export cannot express (not a polynomial with integer "
                 f"coefficients, linear in each dim; values {sorted(set(values_per_trace))})."],
                [f"{r.name} = {r.base}" for r in roots])
        fits[key] = expr

    for k, (_, target, slots, shapes) in enumerate(base_sig):
        for s, (path, leaf) in enumerate(slots):
            if leaf[0] not in ("int", "float"):
                continue
            ys = [sig[k][2][s][1][1] for _, sig in sigs]
            cy = (check_sig[0], check_sig[1][k][2][s][1][1]) if check_sig else None
            if leaf[0] == "float" and len(set(ys)) > 1:
                raise constraint_violation([r.name for r in roots],
                                           [f"the float argument {path} of {target} changes with the dynamic dims"],
                                           [f"{r.name} = {r.base}" for r in roots])
            fit_slot((k, "arg", path), ys, cy, f"argument {path[1:]} of node {k} ({target})")
        for j, shape in enumerate(shapes or []):
            if shape is None:
                continue
            for d in range(len(shape)):
                ys = [sig[k][3][j][d] for _, sig in sigs]
                cy = (check_sig[0], check_sig[1][k][3][j][d]) if check_sig else None
                fit_slot((k, "shape", j, d), ys, cy, f"size {d} of result {j} of node {k} ({target})")
    return fits


def _replace_at(container, path, value):
    """A copy of ``container`` (args list / kwargs dict) with the leaf at ``path`` replaced."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(container, dict):
        out = dict(container)
        out[head] = _replace_at(container[head], rest, value)
        return out
    out = list(container)
    out[head] = _replace_at(container[head], rest, value)
    return type(container)(out) if isinstance(container, tuple) else out


def _apply(gm, fits, roots, symbols, leaves):
    graph = gm.graph
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    n_user = len([x for x in leaves if isinstance(x, ember.Tensor)])
    user_ph = placeholders[len(placeholders) - n_user:]
    tensor_leaf_index = [i for i, x in enumerate(leaves) if isinstance(x, ember.Tensor)]
    ph_of_leaf = dict(zip(tensor_leaf_index, user_ph))
    sources = {}
    for root in roots:
        # Prefer a use where the size is the root itself.
        uses = sorted(root.uses, key=lambda u: (u[2], abs(u[3])))
        i, d, coeff, offset = uses[0]
        sources[symbols[root.key]] = (ph_of_leaf[i], d, coeff, offset)
    builder = SizeBuilder(graph, sources, placeholders[-1])
    builder.hints = {symbols[r.key]: r.base for r in roots}
    shapes: dict = {}
    for key, expr in fits.items():
        k = key[0]
        if k >= len(nodes):  # a subgraph's node: _apply_in_subgraphs
            if key[1] != "arg":
                shapes.setdefault(k, {})[(key[2], key[3])] = expr
            continue
        node = nodes[k]
        if key[1] == "arg":
            path = key[2]
            hint = int(expr.subs(builder.hints))
            value = builder.node_for(expr, hint)
            if path[0] == "args":
                node.args = tuple(_replace_at(list(node.args), path[1:], value))
            else:
                node.kwargs = _replace_at(dict(node.kwargs), path[1:], value)
        else:
            shapes.setdefault(k, {})[(key[2], key[3])] = expr
    for k, node in enumerate(nodes):
        _set_sym_shape(node, shapes.get(k, {}))
    gm.recompile()
    _apply_in_subgraphs(gm, fits, len(nodes), shapes, builder.hints)


def _set_sym_shape(node, fitted: dict) -> None:
    val = node.meta.get("val")
    base = val_shapes(val)
    if base is None:
        return
    sym = []
    for j, shape in enumerate(base):
        if shape is None:
            sym.append(None)
            continue
        sym.append(tuple(fitted.get((j, d), size) for d, size in enumerate(shape)))
    node.meta["sym_shape"] = sym[0] if hasattr(val, "shape") else sym


def _apply_in_subgraphs(gm, fits, n_root: int, shapes: dict, hints: dict) -> None:
    """The fitted sizes of subgraph nodes, written with ``sym_size`` of the subgraph's own
    placeholders (whose sizes come from the graph op's operands)."""
    from ._subgraphs import size_sources, sub_entries

    entries = sub_entries(gm)
    builders: dict = {}
    touched = []
    for offset, (sub, node, hop) in enumerate(entries):
        k = n_root + offset
        arg_fits = [(key, expr) for key, expr in fits.items() if key[0] == k and key[1] == "arg"]
        if arg_fits:
            builder = builders.get(id(sub))
            if builder is None:
                sources = size_sources(sub, hop, hints)
                anchor = [n for n in sub.graph.nodes if n.op == "placeholder"][-1]
                builder = builders[id(sub)] = SizeBuilder(sub.graph, sources, anchor)
                builder.hints = hints
                touched.append(sub)
            for key, expr in arg_fits:
                missing = [s for s in expr.free_symbols if s not in builder.sources]
                if missing:
                    raise constraint_violation(
                        [str(s) for s in missing],
                        [f"a size inside a cond/while_loop subgraph depends on {missing[0]}, which no operand of the "
                         "subgraph carries as one of its sizes"], ["pass a tensor of that size as an operand"])
                value = builder.node_for(expr, int(expr.subs(hints)))
                path = key[2]
                if path[0] == "args":
                    node.args = tuple(_replace_at(list(node.args), path[1:], value))
                else:
                    node.kwargs = _replace_at(dict(node.kwargs), path[1:], value)
        _set_sym_shape(node, shapes.get(k, {}))
    for sub in touched:
        sub.recompile()
