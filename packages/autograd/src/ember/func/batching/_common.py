"""What every batching rule needs: the op's argument names, and moving between the logical
(per-sample) and physical (batch dim first) views of its tensor arguments.

A rule is ``rule(op, level, args, kwargs)``: ``level`` is the vmap level being removed; tensors
batched at it are BatchedTensors whose ``_value`` carries the batch at dim 0, anything else (a
plain tensor or a BatchedTensor of an outer level) is the same for every sample. A rule calls
ops on physical values (which re-dispatch for outer levels) and wraps what comes back.
"""

from __future__ import annotations

import ast
import functools

from ember._src.tensor import Tensor

from .._batched import BatchedTensor, make_batched
from .._levels import vmap_level

# Note [Physical layout]: a batched value has the batch dim first; a rule returns values in the
# same layout, so nested levels never need to search for their batch dim.


def unwrap(t, level):
    if type(t) is BatchedTensor and t._level == level:
        return t._value, True
    return t, False


def wrap(value, level):
    return make_batched(value, level)


def wrap_all(out, level):
    """Wraps a result: a tensor, or a tuple/list of them (non-tensors pass through)."""
    if isinstance(out, Tensor):
        return make_batched(out, level)
    if isinstance(out, (tuple, list)):
        return type(out)(make_batched(o, level) if isinstance(o, Tensor) else o for o in out)
    return out


def batch_size(level) -> int:
    return vmap_level(level).batch_size


def logical_dim(value, batched: bool) -> int:
    return value.dim() - 1 if batched else value.dim()


def ensure_batched(value, batched: bool, size: int):
    """The physical value with a batch dim (an expanded view when it had none)."""
    if batched:
        return value
    return value.unsqueeze(0).expand(size, *value.shape)


def pad_to(value, batched: bool, ndim: int):
    """Inserts size-1 dims after the batch dim so that the logical rank becomes ``ndim`` (so that
    right-aligned broadcasting against other batched values lines the batch dims up)."""
    if not batched:
        return value
    for _ in range(ndim - (value.dim() - 1)):
        value = value.unsqueeze(1)
    return value


def wrap_dim(dim: int, ndim: int) -> int:
    """PyTorch's dim wrapping, with its IndexError, against the logical rank."""
    n = max(ndim, 1)
    if dim < -n or dim >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


_MISSING = object()


def _default(text: str):
    text = text.strip()
    literal = {"None": None, "True": True, "False": False}
    if text in literal:
        return literal[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text.strip("'\"")


@functools.cache
def signature(schema: str) -> tuple[tuple[str, ...], frozenset, dict]:
    """(argument names in order, the keyword-only ones, defaults by name) parsed from a schema."""
    inner = schema[schema.index("(") + 1:]
    depth, current, parts = 0, "", []
    for ch in inner:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    names, kw_only, defaults, keyword = [], set(), {}, False
    for part in parts:
        part = part.strip()
        if not part:
            continue
        if part == "*":
            keyword = True
            continue
        decl, _, default = part.partition("=")
        name = decl.split()[-1]
        names.append(name)
        if default:
            defaults[name] = _default(default)
        if keyword:
            kw_only.add(name)
    return tuple(names), frozenset(kw_only), defaults


def bind(op, args, kwargs) -> dict:
    """Every argument of the op by schema name, defaults filled in (missing required ones absent)."""
    names, _, defaults = signature(op.schema)
    bound = dict(defaults)
    bound.update(zip(names, args))
    bound.update(kwargs)
    return bound


def call_bound(op, bound: dict):
    """Calls ``op`` with every positional argument by position and the keyword-only ones by name."""
    names, kw_only, _ = signature(op.schema)
    args = [bound[n] for n in names if n not in kw_only and n in bound]
    kwargs = {n: bound[n] for n in names if n in kw_only and n in bound}
    return op(*args, **kwargs)


def inplace_error(op_name: str) -> RuntimeError:
    return RuntimeError(
        f"vmap: {op_name}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args "
        "that has more elements than `self`. This happened due to `other` being vmapped over but `self` not "
        "being vmapped over in a vmap. Please try to use out-of-place operators instead of "
        f"{op_name}. If said operator is being called inside the PyTorch framework, please file a bug report "
        "instead.")


def finish_inplace(self_wrapper) -> None:
    """An in-place rule changed the wrapper's physical value: bump the wrapper's version too."""
    self_wrapper._bump_version()
