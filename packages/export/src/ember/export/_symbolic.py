"""Symbolic tracing for export: one trace over symbolic sizes, guards read as constraints.

Each dynamic dim (a root ``Dim``, or a dim hinted ``Dim.AUTO``/``Dim.DYNAMIC``) becomes a
sympy symbol; the example inputs are replaced by fake tensors whose sizes are compile's
``SymInt`` s (``s0``, ``2*s0``, ``s0 + 1``) and whose hints are the example sizes. compile's
``make_fx`` runs the program once: the meta kernels compute result sizes as SymInt
arithmetic, so every size in the graph is a sympy expression, and every comparison of sizes
the program or a kernel makes is recorded as a guard in the ``ShapeEnv`` with the user's
source line. Guards are then read as PyTorch reads them:

- implied by the dims' ranges (``s0 != 1`` for ``s0 >= 2``): dropped when recorded;
- ``s0 == 5``: the dim was specialized. A ``Dim`` or ``Dim.DYNAMIC`` is an error naming
  the dim and the line (suggested fix: the constant); ``Dim.AUTO`` becomes static;
- ``s1 == s0 + 1``: two dims are related. Named dims must say so (suggested fix
  ``y = x + 1``); an AUTO dim is rewritten as derived from the other;
- a bound (``s0 <= 16``) or a divisibility (``s0 % 2 == 0``): named dims must declare it
  (suggested fix: ``Dim('batch', max=16)``, or ``batch = 2*_batch``); AUTO/DYNAMIC dims
  take the narrower range.

An AUTO dim that specializes or relates to another is traced again with its new spec (the
only case of a second trace). SymInt arguments of the graph's nodes become ``sym_size``
arithmetic on the inputs (``_sym.SizeBuilder``), and every node gets ``meta["sym_shape"]``.
"""

from __future__ import annotations

import sympy

from ember.compiler.symbolic_shapes import ShapeEnv, SymFloat, SymInt

from ._dims import INT_OO
from ._dynamic_shapes import constraint_violation
from ._ranges import ValueRange
from ._sym import SizeBuilder, _ratio


def _contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc = acc * s
    return tuple(reversed(strides))


def symbolic_leaves(leaves, roots, env: ShapeEnv):
    """Fake copies of the dynamic inputs with SymInt sizes; the symbol of each root."""
    from ember.compiler._fake import fake_from_tensor

    out = list(leaves)
    symbols = {}
    for k, root in enumerate(roots):
        sym = sympy.Symbol(f"s{k}", integer=True, positive=True)
        symbols[root.key] = root.symbol = sym
        env.var_to_val[sym] = root.base
        env.var_to_range[sym] = (max(root.lo, 2), None if root.hi >= INT_OO else root.hi)
    per_leaf: dict = {}
    for root in roots:
        for i, d, coeff, offset in root.uses:
            per_leaf.setdefault(i, {})[d] = (coeff * root.symbol + offset, coeff * root.base + offset)
    for i, dims in per_leaf.items():
        t = leaves[i]
        shape = tuple(SymInt(dims[d][0], dims[d][1], env) if d in dims else s for d, s in enumerate(t._shape))
        fake = fake_from_tensor(t)
        contiguous = tuple(t._stride) == _contiguous_strides(t._shape)
        fake._shape = shape
        fake._stride = _contiguous_strides(shape) if contiguous else t._stride
        out[i] = fake
    return out, symbols


# ------------------------------------------------------------------ reading guards


def _where(root) -> str:
    return root.name


def _frame_text(frame) -> str:
    return f"\n    (from {frame!r}: {frame.line.strip()})" if frame is not None and frame.line else (
        f"\n    (from {frame!r})" if frame is not None else "")


def classify_guards(env: ShapeEnv, roots):
    """(updates for AUTO roots, narrowed ranges) from the trace's guards; raises a
    constraint violation for a named/DYNAMIC dim the program does not allow to vary."""
    by_symbol = {r.symbol: r for r in roots}
    retrace: dict = {}  # root key -> ("static", value) | ("derived", other root, offset)
    narrowed: dict = {}
    pairs = list(zip(env.guards, env.guard_frames))
    # Equalities first: one that ties or fixes an AUTO dim re-traces, and the inequalities
    # between the same dims (x.size(0) <= h0.size(1)) are read again after it.
    equalities = [p for p in pairs if isinstance(p[0], sympy.Eq)]
    for i, (guard, frame) in enumerate(equalities + [p for p in pairs if not isinstance(p[0], sympy.Eq)]):
        if i == len(equalities) and retrace:
            return retrace, {}
        syms = sorted(guard.free_symbols, key=str)
        involved = [by_symbol[s] for s in syms if s in by_symbol]
        if not involved:
            continue
        rel = guard
        if isinstance(rel, sympy.Eq) and len(involved) > 1:
            rel = _without_size_factors(rel, by_symbol)
            involved = [by_symbol[s] for s in sorted(rel.free_symbols, key=str) if s in by_symbol]
            if not involved:
                continue
        if isinstance(rel, sympy.Ne):
            # A size that came out unequal to a constant (``x.shape[0] != 5`` in forward, a slice
            # ``x[: n // 2]`` that would be of size 1): PyTorch keeps it as an input guard of an
            # AUTO/DYNAMIC dim and refuses it for a named Dim whose range holds an excluded size.
            # Between several dims it is kept where the user's code decided it, else dropped (a kernel's
            # shape-equality fast path).
            # Kept: those the user's code decided, and those over a floor division of the user's
            # (``x[: n // 2]``); an ember kernel's (a broadcast's ``b != 3``) are not PyTorch's.
            direct = guard in getattr(env, "direct_guards", ())
            if len(involved) > 1 and direct:
                # ``if x.shape[0] != y.shape[0]`` in forward: PyTorch keeps it as an input guard (named Dims
                # too: their ranges hold unequal sizes), so equal sizes are refused, not run on the other branch
                env.runtime_guards = [*getattr(env, "runtime_guards", ()), guard]
                continue
            if len(involved) == 1 and (direct or rel.atoms(sympy.floor, sympy.ceiling)):
                excluded = _excluded_sizes(rel, involved[0])
                if excluded:
                    root = involved[0]
                    if root.kind in ("auto", "dynamic"):
                        env.runtime_guards = [*getattr(env, "runtime_guards", ()), guard]
                    elif direct:
                        text = _python_guard_text(rel.subs({root.symbol: sympy.Symbol(root.name)}))
                        raise constraint_violation(
                            [root.name],
                            [f"Not all values of {root.name} in the specified range {_range_text(root)} satisfy "
                             f"the generated guard {text}.{_frame_text(frame)}"], [])
            continue
        if len(involved) == 1:
            root = involved[0]
            if isinstance(rel, sympy.Eq):
                try:
                    values = [v for v in sympy.solve(rel, root.symbol) if v.is_Integer]
                except NotImplementedError:
                    values = []
                if values and not isinstance(rel.lhs, sympy.Mod) and not isinstance(rel.rhs, sympy.Mod) \
                        and _only_solutions(rel, root, values):
                    _specialized(root, int(values[0]), frame, retrace)
                    continue
                modulus = _modulus(rel, root)
                if modulus:
                    if root.kind in ("auto", "dynamic"):
                        # PyTorch keeps the dim and checks the divisibility on each call
                        env.runtime_guards = [*getattr(env, "runtime_guards", ()), guard]
                        continue
                    _divisibility(root, modulus, frame)
                    continue
            if isinstance(rel, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
                lo, hi = _bounds(rel, root)
                if lo is not None or hi is not None:
                    _narrow(root, lo, hi, guard, frame, narrowed)
                    continue
            if root.kind in ("auto", "dynamic"):
                # A Dim.AUTO/DYNAMIC dim accepts the guard: ep.module() checks it per call (as
                # PyTorch's input guards do); a named Dim must allow every size of its range.
                env.runtime_guards = [*getattr(env, "runtime_guards", ()), guard]
                continue
            _unexpressible([root], guard, frame)
        elif len(involved) == 2 and isinstance(rel, sympy.Eq):
            a, b = involved
            diff = sympy.expand(rel.lhs - rel.rhs)
            ca, cb = diff.coeff(a.symbol), diff.coeff(b.symbol)
            if ca == -cb and ca in (1, -1):
                offset = int(-(diff.subs({a.symbol: 0, b.symbol: 0})) / ca)  # a = b + offset
                _related(a, b, offset, frame, retrace, roots)
                continue
            _unexpressible(involved, guard, frame)
        else:
            _unexpressible(involved, guard, frame)
    return retrace, narrowed


def _without_size_factors(rel, by_symbol):
    """``Eq(5*b, b*s)`` as ``Eq(s - 5, 0)``: a dynamic size is never 0 (export assumes sizes >= 2),
    so a factor that is one drops out of an equality (an LSTM's time loop over ``x.view(b*s, ...)``)."""
    diff = sympy.factor(rel.lhs - rel.rhs)
    if not diff.is_Mul:
        return rel
    kept = [f for f in diff.args if not (f in by_symbol or f.is_Number or (f.is_Pow and f.base in by_symbol))]
    if len(kept) == len(diff.args):
        return rel
    return sympy.Eq(sympy.Mul(*kept), 0)


def _holds(rel, root, value) -> bool:
    """``rel`` at ``root = value`` (False where it divides by zero: ``Mod(3*s0, 4*floor(s0/4))`` at 2)."""
    try:
        return bool(rel.subs(root.symbol, value))
    except ZeroDivisionError:
        return False


def _only_solutions(rel, root, values) -> bool:
    """Whether ``sympy.solve``'s integer solutions of an equality guard are all the sizes near
    the example one that satisfy it: with floors (``4*floor(s0/4)*floor(3*s0/(4*floor(s0/4))) ==
    3*s0``, a ``reshape(n // 4, 4, -1)``) solve can return one point of a guard that every
    multiple of 4 satisfies, which is no specialization."""
    if not rel.has(sympy.floor, sympy.ceiling, sympy.Mod):
        return True
    base, found = root.base, {int(v) for v in values}
    sample = {base + k for k in range(-8, 9)} | {2 * base, 3 * base, base // 2}
    return not any(_holds(rel, root, v) for v in sample if v >= 2 and v not in found)


def _modulus(rel, root) -> int | None:
    """``m`` when a guard with ``floor``/``Mod`` holds exactly for the multiples of ``m``
    (``6*floor(s0/2) == 3*s0``: s0 even), tested over the sizes near the example one."""
    if not rel.has(sympy.floor, sympy.Mod):
        return None
    base = root.base
    for m in range(2, 17):
        if base % m:
            continue
        sample = [base + k for k in range(-m, 2 * m + 1) if base + k >= 2]
        if all(_holds(rel, root, v) == (v % m == 0) for v in sample):
            return m
    return None


def _specialized(root, value, frame, retrace) -> None:
    if root.kind == "auto":
        retrace[root.key] = ("static", value)
        return
    hint = " If you're using Dim.DYNAMIC, replace it with either Dim.STATIC or Dim.AUTO." if root.kind == "dynamic" \
        else ""
    raise constraint_violation(
        [_where(root)],
        [f"You marked {_where(root)} as dynamic but your code specialized it to be a constant ({value}).{hint}"
         f"{_frame_text(frame)}"],
        [f"{_where(root)} = {value}"])


def _divisibility(root, m, frame) -> None:
    raise constraint_violation(
        [_where(root)],
        [f"Not all values of {_where(root)} in the specified range satisfy the generated guard "
         f"{_where(root)} % {m} == 0.{_frame_text(frame)}"],
        [f"_{root.name} = Dim('_{root.name}', min={max(1, -(-root.lo // m))})", f"{root.name} = {m}*_{root.name}"])


def _bounds(rel, root):
    """(lower, upper) that a one-symbol linear inequality puts on the root."""
    diff = sympy.expand(rel.lhs - rel.rhs)  # rel: diff (op) 0
    if not diff.is_polynomial(root.symbol) or sympy.degree(diff, root.symbol) != 1:
        return None, None
    c = diff.coeff(root.symbol)
    k = -diff.subs(root.symbol, 0) / c  # the boundary point: symbol (op') k
    positive = c > 0
    if isinstance(rel, (sympy.Ge, sympy.Gt)) == positive:  # symbol >= / > k
        return int(sympy.ceiling(k) if isinstance(rel, sympy.Ge) or not k.is_Integer else k + 1), None
    return None, int(sympy.floor(k) if isinstance(rel, sympy.Le) or not k.is_Integer else k - 1)


def _narrow(root, lo, hi, guard, frame, narrowed) -> None:
    cur_lo, cur_hi = narrowed.get(root.key, (root.lo, root.hi))
    new_lo = max(cur_lo, lo) if lo is not None else cur_lo
    new_hi = min(cur_hi, hi) if hi is not None else cur_hi
    if (new_lo, new_hi) == (cur_lo, cur_hi):
        return
    if root.kind == "dim":
        parts = [f"min={new_lo}"] if new_lo != root.lo else []
        parts += [f"max={new_hi}"] if new_hi != root.hi else []
        raise constraint_violation(
            [_where(root)],
            [f"Not all values of {_where(root)} in the specified range {_range_text(root)} satisfy the generated "
             f"guard {_guard_text(guard, root)}.{_frame_text(frame)}"],
            [f"{root.name} = Dim('{root.name}', {', '.join(parts)})"])
    narrowed[root.key] = (new_lo, new_hi)


def _range_text(root) -> str:
    upper = "" if root.hi >= INT_OO else f" <= {root.hi}"
    return f"{root.lo} <= {root.name}{upper}"


def _guard_text(guard, root) -> str:
    return str(guard.subs(root.symbol, sympy.Symbol(root.name)))


def _related(a, b, offset, frame, retrace, roots) -> None:
    """``a = b + offset`` is required by the program."""
    # Dim.AUTO and Dim.DYNAMIC dims may be related (PyTorch): one becomes derived from the other.
    for kind in ("auto", "dynamic"):
        if a.kind == kind or b.kind == kind:
            free, other, off = (a, b, offset) if a.kind == kind else (b, a, -offset)
            retrace[free.key] = ("derived", other, off)
            return
    # PyTorch's fix names the larger dim by the smaller (c = b + 1), and of two equal dims the later
    # input's by the earlier's (m = n).
    position = {id(r): i for i, r in enumerate(roots)}
    if offset < 0 or (offset == 0 and position[id(a)] < position[id(b)]):
        a, b, offset = b, a, -offset
    rel = b.name + (f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else "")
    text = (f"The values of {a.name} and {b.name} must always be equal." if offset == 0 else
            f"The values of {a.name} must always be related to the values of {b.name} by {a.name} = {rel}.")
    raise constraint_violation([a.name], [f"{text}{_frame_text(frame)}"], [f"{a.name} = {rel}"])


def _excluded_sizes(rel, root, probe: int = 64) -> list[int]:
    """Sizes in ``root``'s range that ``rel`` (an ``Ne`` of one symbol) excludes: the integer
    solutions of its equality, else the failing sizes among the first ``probe`` of the range."""
    lo, hi = root.lo, root.hi
    eq = sympy.Eq(rel.lhs, rel.rhs)
    if not eq.atoms(sympy.floor, sympy.ceiling, sympy.Mod):
        try:
            sols = sympy.solve(eq, root.symbol)
        except NotImplementedError:
            sols = None
        if sols is not None:
            return [int(v) for v in sols if v.is_Integer and lo <= v <= hi]
    top = min(hi, lo + probe - 1)
    return [v for v in range(lo, top + 1) if rel.subs(root.symbol, v) is sympy.false]


def _python_guard_text(rel) -> str:
    """A relation in PyTorch's guard spelling: ``x.size()[0] // 2 != 1``."""
    from ._ranges import guard_text

    return guard_text(rel)


def _unexpressible(roots, guard, frame) -> None:
    names = [r.name for r in roots]
    text = str(guard.subs({r.symbol: sympy.Symbol(r.name) for r in roots}))
    divisor = _floor_divisor(guard, roots[0]) if len(roots) == 1 and roots[0].kind == "dim" else None
    if divisor:
        # ``x[: n // 2]``: PyTorch 2.13 reports the guard over the dim's range and suggests the dim
        # be a multiple of the divisor (a derived dim, with which the program exports)
        root = roots[0]
        upper = "oo" if root.hi >= INT_OO else root.hi // divisor
        raise constraint_violation(
            names,
            [f"Not all values of {root.name} in the specified range {_range_text(root)} satisfy the generated "
             f"guard {text}.{_frame_text(frame)}"],
            [f"_{root.name} = Dim('_{root.name}', max={upper})", f"{root.name} = {divisor}*_{root.name}"])
    raise constraint_violation(
        names,
        [f"Not all values of {', '.join(names)} satisfy the generated guard {text}, which export cannot express "
         f"as a range or a relation between dims.{_frame_text(frame)}"],
        [f"{r.name} = {r.base}" for r in roots])


def _floor_divisor(guard, root) -> int | None:
    """``k`` when every floor in the guard is ``floor(root / k)``, of one ``k``."""
    divisors = set()
    for term in guard.atoms(sympy.floor, sympy.ceiling):
        ratio = _ratio(term.args[0])
        if ratio is None or ratio[0] != root.symbol or not ratio[1].is_Integer or int(ratio[1]) < 2:
            return None
        divisors.add(int(ratio[1]))
    return divisors.pop() if len(divisors) == 1 else None


# ------------------------------------------------------------------ the graph


def _is_symbolic(x) -> bool:
    return isinstance(x, SymInt) and bool(x.node.free_symbols)


def _replace(value, builder):
    if isinstance(value, SymFloat):
        return builder.node_for_float(value.node, float.__float__(value)) if value.node is not None \
            else float.__float__(value)
    if isinstance(value, SymInt):
        return builder.node_for(value.node, int(value)) if _is_symbolic(value) else int(value)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_replace(v, builder) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, builder) for k, v in value.items()}
    return value


def sym_shape_of(val):
    """The shape(s) of a node's value with SymInts read as their sympy expressions."""
    def one(v):
        if not hasattr(v, "shape"):
            return None
        return tuple(s.node if _is_symbolic(s) else int(s) for s in v._shape)

    if hasattr(val, "shape"):
        return one(val)
    if isinstance(val, (list, tuple)):
        return [one(v) for v in val]
    return None


def apply_symbols(gm, roots, user_placeholders, leaf_of_placeholder, env=None) -> None:
    """Rewrites SymInt arguments of ``gm``'s nodes into ``sym_size`` arithmetic and records
    ``meta["sym_shape"]``; cond/while_loop subgraphs read sizes from their own placeholders.
    Unbacked symbols of ``env`` are read from the node that made them (``item``, or
    ``sym_size`` of a ``nonzero`` result right after it)."""
    sources = {}
    for root in roots:
        i, d, coeff, offset = sorted(root.uses, key=lambda u: (u[2], abs(u[3])))[0]
        sources[root.symbol] = (leaf_of_placeholder[i], d, coeff, offset)
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    builder = SizeBuilder(graph, sources, placeholders[-1] if placeholders else None)
    builder.hints = {r.symbol: r.base for r in roots}
    for root in roots:
        for i, d, coeff, offset in root.uses:
            builder.inputs.setdefault(coeff * root.symbol + offset, (leaf_of_placeholder[i], d))
    builder.unbacked = set(getattr(env, "unbacked", {}) or ())
    if builder.unbacked:
        _bind_unbacked(graph, builder)
    for node in list(graph.nodes):
        if node.op == "output" and builder.unbacked and _has_symint(node.args):
            builder.current = node  # a returned size (``idx.shape[0] * 2``): the graph computes it
            node.args = _replace(node.args, builder)
            continue
        if node.op in ("placeholder", "output") or node in builder.cache.values() and not _has_symint(node.args):
            # (a node making an unbacked symbol from sizes, ``clamp_slice_index``, reads them too)
            if node.op == "placeholder":
                _mark(node)
            continue
        builder.current = node
        node.args = _replace(node.args, builder)
        node.kwargs = _replace(dict(node.kwargs), builder)
        _mark(node)
    for node in graph.nodes:
        if node.op == "call_function" and node.target is not None and "sym_shape" not in node.meta:
            _mark(node)
    gm.recompile()
    _subgraphs(gm, builder.hints)
    return builder


def _bind_unbacked(graph, builder) -> None:
    from ._sym import sym_size

    for node in list(graph.nodes):
        val = node.meta.get("val")
        if isinstance(val, SymInt) and val.node in builder.unbacked:
            builder.cache.setdefault(val.node, node)
            continue
        for d, size in enumerate(getattr(val, "_shape", ())):
            if isinstance(size, SymInt) and size.node in builder.unbacked and size.node not in builder.cache:
                with graph.inserting_after(node):
                    read = graph.call_function(sym_size, (node, d))
                read.meta["val"] = size
                read.meta["sym_expr"] = size.node
                builder.cache[size.node] = read


def _mark(node) -> None:
    val = node.meta.get("val")
    shape = sym_shape_of(val)
    if shape is not None:
        node.meta["sym_shape"] = shape


def _subgraphs(gm, hints) -> None:
    from ._subgraphs import size_sources, sub_entries

    seen, subs = set(), []
    for sub, _node, hop in sub_entries(gm):  # one entry per node: each subgraph once
        if id(sub) not in seen:
            seen.add(id(sub))
            subs.append((sub, hop))
    for sub, hop in subs:
        needs = any(_has_symint(n.args) or _has_symint(n.kwargs) for n in sub.graph.nodes)
        for n in sub.graph.nodes:
            _mark(n)
        if not needs:
            continue
        sources = size_sources(sub, hop, hints)
        anchor = [n for n in sub.graph.nodes if n.op == "placeholder"][-1]
        builder = SizeBuilder(sub.graph, sources, anchor)
        builder.hints = hints
        for n in list(sub.graph.nodes):
            if n.op in ("placeholder", "output") or n in builder.cache.values():
                continue
            missing = [s for v in _symints(n.args) + _symints(n.kwargs) for s in v.node.free_symbols
                       if s not in builder.sources]
            if missing:
                raise constraint_violation(
                    [str(missing[0])],
                    [f"a size inside a cond/while_loop subgraph depends on {missing[0]}, which no operand of the "
                     "subgraph carries as one of its sizes"], ["pass a tensor of that size as an operand"])
            n.args = _replace(n.args, builder)
            n.kwargs = _replace(dict(n.kwargs), builder)
        sub.recompile()


def _symints(value) -> list:
    if _is_symbolic(value) or isinstance(value, SymFloat) and value.node is not None:
        return [value]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _symints(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _symints(v)]
    return []


def _has_symint(value) -> bool:
    return bool(_symints(value))


def ranges_of(roots, narrowed) -> tuple[dict, dict]:
    """(range constraints, {symbol: dim name}) of the traced roots."""
    ranges, names = {}, {}
    for root in roots:
        lo, hi = narrowed.get(root.key, (root.lo, root.hi))
        if root.kind == "dim":
            names[root.symbol] = root.name
        # In the order the inputs' dims use them, as PyTorch's; a root no input dim is (only
        # 2*_n or _n + 1 are) comes last and is at least 2 (the derived dims keep the range the
        # Dim's min implies), as PyTorch gives it.
        phantom = all((coeff, offset) != (1, 0) for _, _, coeff, offset in root.uses)
        for _, _, coeff, offset in sorted(root.uses, key=lambda u: (u[0], u[1])):
            expr = coeff * root.symbol + offset
            if (coeff, offset) == (1, 0):
                ranges.setdefault(root.symbol, ValueRange(lo, hi))
            else:
                ranges.setdefault(expr, ValueRange(coeff * lo + offset, hi if hi >= INT_OO else coeff * hi + offset))
        ranges.setdefault(root.symbol, ValueRange(max(lo, 2) if phantom and root.uses else lo, hi))
    return ranges, names


def unbacked_ranges(gm, env) -> dict:
    """{unbacked symbol: ValueRange} (``u0``: from ``item``/``nonzero``, the facts the program
    stated with ``torch._check``, and 0 at least where it is a size)."""
    if env is None or not getattr(env, "unbacked", None):
        return {}
    from ember.compiler._unbacked_export import ranges

    used_as_size = set()
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for size in getattr(val, "_shape", ()):
            if isinstance(size, SymInt):
                used_as_size |= size.node.free_symbols
    out = {}
    for sym, (lower, upper) in ranges(env, used_as_size).items():
        out[sym] = ValueRange(-INT_OO if lower is None else lower, INT_OO if upper is None else upper)
    return out


def assert_unbacked_ranges(gm, builder, ranges: dict) -> None:
    """After the node that makes each unbacked symbol, runtime checks of its finite bounds
    (``u0 >= 0``, ``u0 <= 10``), as PyTorch's exported graphs carry them."""
    import operator

    from ._sym import _assert_scalar

    graph = gm.graph
    for sym, vr in ranges.items():
        source = builder.cache.get(sym) if builder is not None else None
        if source is None:
            continue
        anchor = source
        for op, bound, text in ((operator.ge, vr.lower, ">="), (operator.le, vr.upper, "<=")):
            if abs(bound) >= INT_OO:
                continue
            with graph.inserting_after(anchor):
                check = graph.call_function(op, (source, bound))
            with graph.inserting_after(check):
                anchor = graph.call_function(_assert_scalar, (
                    check, f"Runtime assertion failed for expression {sym} {text} {bound} on node '{check.name}'"))
    gm.recompile()
