"""``vmap``: vectorizing map over a batch dimension of the inputs (PyTorch's ``torch.func.vmap``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ember._src.tensor import Tensor
from ember.autograd._pytree import _broadcast_to_and_flatten, tree_flatten, tree_unflatten

from . import _levels

__all__ = ["vmap"]


def _name(func) -> str:
    return getattr(func, "__name__", repr(func))


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """Vectorizes ``func`` over dimension ``in_dims`` of its inputs.

    Args:
        func: a function of tensors (or nested tuples/lists/dicts of them) returning the same.
        in_dims: per input (a prefix tree of the inputs) the dim to map over, or None to pass
            the input unbatched to every call.
        out_dims: where the mapped dim goes in each output (None: the output is not mapped).
        randomness: ``"error"`` (random ops raise), ``"different"`` (each sample draws its own)
            or ``"same"`` (one draw shared by the batch).
        chunk_size: run at most this many samples at a time (memory for speed); None runs all.

    Returns:
        The vectorized function.

    Example:
        >>> import ember
        >>> from ember.func import vmap
        >>> vmap(ember.dot)(ember.ones(4, 3), ember.ones(4, 3))
        tensor([3., 3., 3., 3.])
    """
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    _check_out_dims(out_dims, func)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        batch_size, flat_in_dims, flat_args, spec = _process_inputs(in_dims, args, func)
        if chunk_size is None or chunk_size >= batch_size:
            return _vmap_call(func, batch_size, flat_in_dims, flat_args, spec, out_dims, randomness, kwargs)
        return _chunked(func, batch_size, flat_in_dims, flat_args, spec, out_dims, randomness, kwargs,
                        chunk_size)

    return wrapped


def _check_out_dims(out_dims, func) -> None:
    leaves, _ = tree_flatten(out_dims)
    for d in leaves:
        if d is not None and not isinstance(d, int):
            raise ValueError(
                f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                "collection of ints representing where in the outputs the vmapped dimension should appear.")


def _process_inputs(in_dims, args, func):
    # a bare None is refused as PyTorch's (None is for one input inside the tuple)
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        raise ValueError(
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
            f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(
            f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying "
            "to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, spec = tree_flatten(args)
    flat_in_dims = _broadcast_to_and_flatten(in_dims, spec)
    if flat_in_dims is None:
        raise ValueError(
            f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
            f"structure of `inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs has "
            f"structure {spec}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_in_dims)):
        if d is None:
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                "in_dim must be either an integer dimension or None.")
        if not isinstance(arg, Tensor):
            raise ValueError(
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but the "
                f"input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, please use None as "
                "the respective in_dim")
        n = arg.dim()
        if d < -n or d >= n:
            raise ValueError(
                f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but "
                f"that input is a Tensor of dimensionality {n} so expected in_dim to satisfy -{n} <= in_dim "
                f"< {n}.")
        flat_in_dims[i] = d % n
    sizes = [arg.size(d) for arg, d in zip(flat_args, flat_in_dims) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0], flat_in_dims, flat_args, spec


def _vmap_call(func, batch_size, flat_in_dims, flat_args, spec, out_dims, randomness, kwargs):
    from ._batched import VmapMode

    with _levels.entered("vmap", batch_size, randomness) as level, VmapMode(level):
        batched = [a if d is None else _add_batch_dim(a, d, level.number) for a, d in zip(flat_args, flat_in_dims)]
        outputs = func(*tree_unflatten(batched, spec), **kwargs)
        return _unwrap_outputs(outputs, out_dims, level, func)


def _unwrap_outputs(outputs, out_dims, level, func):
    from ._batched import BatchedTensor

    flat_out, out_spec = tree_flatten(outputs)
    if isinstance(outputs, Tensor) and isinstance(out_dims, tuple) and len(out_dims) == 1:
        flat_dims = list(out_dims)
    elif isinstance(outputs, Tensor) and isinstance(out_dims, (tuple, list, dict)):
        flat_dims = None
    else:
        flat_dims = _broadcast_to_and_flatten(out_dims, out_spec)
    if flat_dims is None:
        raise ValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
            f"structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but outputs has "
            f"structure {out_spec}.")
    result = []
    name = _name(func)
    for out, d in zip(flat_out, flat_dims):
        if d is None:
            if type(out) is BatchedTensor and out._level == level.number:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            result.append(out)
            continue
        if not isinstance(out, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(out)}. "
                             "Did you mean to set out_dims= to None for output?")
        result.append(_remove_batch_dim(out, level, d))
    return tree_unflatten(result, out_spec)


def _tangents():
    """ember's forward-mode AD (keyed by tensor identity), when a level of it is active."""
    from ember.autograd import forward_ad

    return forward_ad if forward_ad._TANGENTS else None


def _add_batch_dim(a: Tensor, in_dim: int, level: int):
    from ._batched import make_batched

    out = make_batched(a.movedim(in_dim, 0) if in_dim else a, level)
    fwad = _tangents()
    if fwad is not None:
        # Under jvp the wrapper carries the input's tangent, batched the same way.
        tangent = fwad._get_tangent(a)
        if tangent is not None:
            fwad._set_tangent(out, make_batched(tangent.movedim(in_dim, 0) if in_dim else tangent, level))
    return out


def _physical(out: Tensor, level):
    from ._batched import BatchedTensor

    if type(out) is BatchedTensor and out._level == level.number:
        return out._value
    # Not batched at this level: every sample gave the same value, which is repeated.
    return out.unsqueeze(0).expand(level.batch_size, *out.shape)


def _remove_batch_dim(out: Tensor, level, out_dim: int) -> Tensor:
    value = _physical(out, level)
    fwad = _tangents()
    if fwad is not None:
        tangent = fwad._get_tangent(out)
        if tangent is not None:
            fwad._set_tangent(value, _physical(tangent, level))
    n = value.dim()
    if out_dim < -n or out_dim >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {out_dim})")
    out_dim %= n
    return value.movedim(0, out_dim) if out_dim else value


def _chunked(func, batch_size, flat_in_dims, flat_args, spec, out_dims, randomness, kwargs, chunk_size):
    import ember

    pieces = []
    for start in range(0, batch_size, chunk_size):
        n = min(chunk_size, batch_size - start)
        chunk_args = [a if d is None else a.narrow(d, start, n) for a, d in zip(flat_args, flat_in_dims)]
        pieces.append(_vmap_call(func, n, flat_in_dims, chunk_args, spec, out_dims, randomness, kwargs))
    flat_first, out_spec = tree_flatten(pieces[0])
    flat_dims = _broadcast_to_and_flatten(out_dims, out_spec)
    if flat_dims is None and isinstance(out_dims, tuple) and len(out_dims) == 1:
        flat_dims = list(out_dims)
    columns = [tree_flatten(p)[0] for p in pieces]
    joined = []
    for i, d in enumerate(flat_dims):
        parts = [c[i] for c in columns]
        joined.append(parts[0] if d is None else ember.cat(parts, dim=d))
    return tree_unflatten(joined, out_spec)
