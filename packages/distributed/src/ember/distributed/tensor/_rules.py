"""Sharding rules: for one op call, the placement each DTensor input needs and each result gets.

A rule sees one mesh dimension at a time: ``rule(call, placements)`` gets the inputs' placements
on that dimension and returns ``(input placements, output placements)``, or None when it does
not apply, which replicates that mesh dimension (inputs Replicate, results Replicate: always
correct, at the price of communication). ``RULES`` maps op names to rules; ops tagged pointwise
share one. Views whose size argument depends on the layout also name a ``rewrite`` that turns the
global sizes into this rank's.
"""

from __future__ import annotations

from ember._src.shapes import view_strides

from ._layout import local_shape
from ._placements import Partial, Replicate, Shard

R = Replicate()
P = Partial()


class Call:
    """One op call as the rules see it: the op, its arguments, DTensor inputs, meta results."""

    def __init__(self, op, args, kwargs, inputs, outs, mesh):
        self.op, self.args, self.kwargs, self.inputs, self.outs, self.mesh = op, args, kwargs, inputs, outs, mesh

    def arg(self, index, name, default=None):
        if len(self.args) > index:
            return self.args[index]
        return self.kwargs.get(name, default)


def _shard_dim_of(t, out_dim, out_ndim):
    """The dim of ``t`` that broadcasting aligns with ``out_dim``, if it has the output's size."""
    d = out_dim - out_ndim + t.ndim
    return d if d >= 0 else None


# -- pointwise ----------------------------------------------------------------------------

_LINEAR_UNARY = {"neg", "clone", "_to_copy", "alias", "conj_physical", "neg_"}
_ADDITIVE = {"add", "sub", "add_scaled", "add_", "sub_", "add_scaled_", "copy_"}
_SCALING = {"mul", "div", "mul_", "div_"}


def _partial_ok(call, placements) -> bool:
    """Whether the op maps summands to summands (linear in its Partial inputs)."""
    name = call.op.name
    partial = [isinstance(p, Partial) for p in placements]
    if name in _LINEAR_UNARY:
        return len(placements) == 1
    if name in _ADDITIVE:
        # Every operand must be a Partial tensor: a replicated or scalar term would be counted once per rank.
        operands = [call.arg(0, "self"), call.arg(1, "other")]
        return all(partial) and all(hasattr(o, "_local") for o in operands)
    if name in _SCALING:
        if sum(partial) != 1:
            return False
        return name.startswith("mul") or (partial[0] and call.args[0] is call.inputs[0])
    return False


def pointwise(call, placements):
    out = call.outs[0] if call.outs else call.inputs[0]
    inplace = "inplace" in call.op.tags
    out_dim = None
    if inplace:
        first = placements[0]
        if isinstance(first, Shard):
            out_dim = first.dim
        elif isinstance(first, Partial):
            if _partial_ok(call, placements):
                return [p if isinstance(p, Partial) else R for p in placements], [P]
            return None
    else:
        for t, p in zip(call.inputs, placements):
            if isinstance(p, Shard):
                od = p.dim + out.ndim - t.ndim
                if t._shape[p.dim] == out._shape[od]:
                    out_dim = od
                    break
    if out_dim is not None:
        targets = []
        for t in call.inputs:
            d = _shard_dim_of(t, out_dim, out.ndim)
            targets.append(Shard(d) if d is not None and t._shape[d] == out._shape[out_dim] else R)
        return targets, [Shard(out_dim)] * max(len(call.outs), 1)
    if any(isinstance(p, Partial) for p in placements) and _partial_ok(call, placements):
        return list(placements), [P] * max(len(call.outs), 1)
    return None


# -- reductions ---------------------------------------------------------------------------

_SAME_SHAPE = {"softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"}
_SUMS = {"sum", "nansum"}
_LINEAR_REDUCTIONS = {"sum", "nansum", "mean", "cumsum"}
_DIM_ARG = {"norm": 2}


def _reduced_dims(call, ndim):
    dim = call.arg(_DIM_ARG.get(call.op.name, 1), "dim")
    if dim is None or (type(dim) in (list, tuple) and not dim):
        return set(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return {d % max(ndim, 1) for d in dims}


def reduction(call, placements):
    p = placements[0]
    name = call.op.name
    if len(placements) != 1:
        return None
    nouts = max(len(call.outs), 1)
    if isinstance(p, Partial):
        return ([P], [P] * nouts) if name in _LINEAR_REDUCTIONS else None
    if not isinstance(p, Shard):
        return [R], [R] * nouts
    t = call.inputs[0]
    if name in _SAME_SHAPE:
        dim = call.arg(1, "dim") % t.ndim
        return ([p], [p] * nouts) if dim != p.dim else None
    reduced = _reduced_dims(call, t.ndim)
    if name in ("max_all", "min_all") or (name in ("argmax", "argmin") and call.arg(1, "dim") is None):
        reduced = set(range(t.ndim))
    if p.dim in reduced:
        return ([p], [P] * nouts) if name in _SUMS else None
    keepdim = call.arg(2 if name not in ("var", "std", "var_mean", "std_mean", "norm") else 3, "keepdim", False)
    if name in ("var", "std", "var_mean", "std_mean"):
        keepdim = call.kwargs.get("keepdim", False)
    shift = 0 if keepdim else sum(1 for d in reduced if d < p.dim)
    return [p], [Shard(p.dim - shift)] * nouts


# -- views --------------------------------------------------------------------------------


def transpose(call, placements):
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    ndim = call.inputs[0].ndim
    d0, d1 = call.args[1] % ndim, call.args[2] % ndim
    dim = d1 if p.dim == d0 else d0 if p.dim == d1 else p.dim
    return [p], [Shard(dim)]


def permute(call, placements):
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    dims = [d % call.inputs[0].ndim for d in call.args[1]]
    return [p], [Shard(dims.index(p.dim))]


def unsqueeze(call, placements):
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    d = call.args[1] % (call.inputs[0].ndim + 1)
    return [p], [Shard(p.dim + 1 if p.dim >= d else p.dim)]


def squeeze(call, placements):
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    t = call.inputs[0]
    dims = call.arg(1, "dim")
    dims = range(t.ndim) if dims is None else [dims] if isinstance(dims, int) else dims
    removed = {d % t.ndim for d in dims if t._shape[d % t.ndim] == 1}
    if p.dim in removed:
        return None
    return [p], [Shard(p.dim - sum(1 for d in removed if d < p.dim))]


def _index_like(call, placements):
    """select / slice / narrow: the indexed dim must be whole; dims after a selected one shift."""
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    dim = call.args[1] % call.inputs[0].ndim
    if p.dim == dim:
        return None
    if call.op.name == "select" and p.dim > dim:
        return [p], [Shard(p.dim - 1)]
    return [p], [p]


def _local_size_rewrite(local_args, local_kwargs, out_placements, call):
    size = tuple(local_shape(call.outs[0]._shape, call.mesh, out_placements[0]))
    local = local_args[0]
    if call.op.name == "view" and view_strides(local._shape, local._stride, size) is None:
        # The global strides a DTensor shows are contiguous, its piece's need not be (a transposed
        # piece): reshape's "view if possible" then copies the piece, as reshape would.
        local = local.contiguous()
    return (local, size, *local_args[2:]), local_kwargs


def expand(call, placements):
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    t, out = call.inputs[0], call.outs[0]
    od = p.dim + out.ndim - t.ndim
    return ([p], [Shard(od)]) if t._shape[p.dim] == out._shape[od] else None


def _even(n, pieces):
    return pieces and n % pieces == 0


def view(call, placements):
    """A shard survives a reshape when it stays the leading dim of its group and splits evenly."""
    p = placements[0]
    if not isinstance(p, Shard):
        return [p], [p]
    t, out = call.inputs[0], call.outs[0]
    if p in t.placements[:call.mesh_dim]:
        return None  # nested shards of one dim: the outer mesh dim keeps it, this one gathers
    pieces = call.mesh.size(call.mesh_dim)
    n = t._shape[p.dim]
    before = 1
    for s in t._shape[:p.dim]:
        before *= s
    acc = 1
    for e, s in enumerate(out._shape):
        if acc == before and not (s == 1 and n != 1):
            if s and _even(s, pieces) and _even(n, pieces) and (s % n == 0 or n % s == 0):
                return [p], [Shard(e)]
            return None
        acc *= s
        if acc > before:
            return None
    return None


# -- matrix products and friends ------------------------------------------------------------


def _mm_pair(a, b, rows=0, cols=1, inner_a=1, inner_b=0):
    """(a, b) targets and the result's placement of one matrix product on one mesh dim."""
    if a == Shard(rows):
        return (a, R), Shard(rows)
    if b == Shard(cols):
        return (R, b), Shard(cols)
    if a == Shard(inner_a):
        return (a, Shard(inner_b)), P
    if b == Shard(inner_b):
        return (Shard(inner_a), b), P
    if isinstance(a, Partial) and isinstance(b, Partial):
        return (R, P), P
    if isinstance(a, Partial) or isinstance(b, Partial):
        return (P if isinstance(a, Partial) else R, P if isinstance(b, Partial) else R), P
    return (R, R), R


def mm(call, placements):
    (a, b), out = _mm_pair(placements[0], placements[1])
    return [a, b], [out]


def addmm(call, placements):
    bias = call.inputs[0]
    (a, b), out = _mm_pair(placements[1], placements[2])
    result = call.outs[0]
    if isinstance(out, Shard):
        d = _shard_dim_of(bias, out.dim, 2)
        target = Shard(d) if d is not None and bias._shape[d] == result._shape[out.dim] else R
    else:
        target = out  # Partial: the bias is added on one rank of the line only
    return [target, a, b], [out]


def bmm(call, placements):
    a, b = placements
    if a == Shard(0) or b == Shard(0):
        return [Shard(0), Shard(0)], [Shard(0)]
    (a, b), out = _mm_pair(a, b, rows=1, cols=2, inner_a=2, inner_b=1)
    return [a, b], [out]


def embedding(call, placements):
    weight, indices = placements[0], placements[1]
    out = call.outs[0]
    if isinstance(weight, Replicate) and isinstance(indices, Shard):
        return [R, indices], [indices]
    if weight == Shard(1):
        return [weight, R], [Shard(out.ndim - 1)]
    if isinstance(weight, Partial) and not isinstance(indices, Partial):
        return [P, R], [P]
    return None


def embedding_backward(call, placements):
    grad, indices = placements[0], placements[1]
    g = call.inputs[0]
    if grad == Shard(g.ndim - 1):
        return [grad, R], [Shard(1)]
    if isinstance(grad, Shard) and grad == indices:
        return [grad, indices], [P]
    if isinstance(grad, Partial):
        return [P, R], [P]
    return None


def _norm_axis(call):
    return call.inputs[0].ndim - len(call.args[1])


def layer_norm(call, placements):
    p = placements[0]
    if isinstance(p, Shard) and p.dim < _norm_axis(call):
        return [p] + [R] * (len(placements) - 1), [p] * len(call.outs)
    return None


def layer_norm_backward(call, placements):
    # (grad_out, input, mean, rstd, weight?, bias?) -> (grad_input, grad_weight, grad_bias)
    p = placements[1] if len(placements) > 1 else placements[0]
    axis = call.inputs[1].ndim - len(call.args[2])
    if isinstance(p, Shard) and p.dim < axis:
        targets = [p, p, p, p] + [R] * (len(placements) - 4)
        return targets, [p, P, P]
    return None


def sdpa(call, placements):
    q = placements[0]
    if isinstance(q, Shard) and q.dim < call.inputs[0].ndim - 2:
        return [q, q, q] + [R] * (len(placements) - 3), [q]
    return None


def cat(call, placements):
    dim = call.arg(1, "dim", 0)
    first = placements[0]
    ndim = call.outs[0].ndim
    if isinstance(first, Shard) and first.dim != dim % ndim and all(p == first for p in placements):
        return list(placements), [first]
    return None


RULES = {
    "mm": mm, "addmm": addmm, "bmm": bmm,
    "transpose": transpose, "permute": permute, "unsqueeze": unsqueeze, "squeeze": squeeze,
    "select": _index_like, "slice": _index_like, "narrow": _index_like,
    "expand": expand, "view": view,
    "embedding": embedding, "embedding_dense_backward": embedding_backward,
    "native_layer_norm": layer_norm, "_fused_rms_norm": layer_norm,
    "native_layer_norm_backward": layer_norm_backward,
    "scaled_dot_product_attention": sdpa, "cat": cat,
}
for _name in ("clone", "_to_copy", "alias", "copy_", "fill_", "masked_fill_"):
    RULES[_name] = pointwise
_REWRITES = {"view", "expand"}


def plan_for(op, args, kwargs, inputs, outs, mesh):
    """(per-input target placements, per-output placements, local-argument rewrite or None)."""
    rule = RULES.get(op.name)
    if rule is None:
        if "pointwise" in op.tags:
            rule = pointwise
        elif "reduction" in op.tags:
            rule = reduction
    call = Call(op, args, kwargs, inputs, outs, mesh)
    nouts = max(len(outs), 1)
    targets = [[] for _ in inputs]
    out_placements = [[] for _ in range(nouts)]
    for mesh_dim in range(mesh.ndim):
        call.mesh_dim = mesh_dim
        current = [t.placements[mesh_dim] for t in inputs]
        decided = rule(call, current) if rule is not None and outs else None
        if decided is None:
            decided = [R] * len(inputs), [R] * nouts
        ins, results = decided
        for i, p in enumerate(ins):
            targets[i].append(p)
        for i in range(nouts):
            out_placements[i].append(results[i] if i < len(results) else R)
    rewrite = None
    if op.name in _REWRITES:
        def rewrite(local_args, local_kwargs, placements):
            return _local_size_rewrite(local_args, local_kwargs, placements, call)
    return targets, out_placements, rewrite
