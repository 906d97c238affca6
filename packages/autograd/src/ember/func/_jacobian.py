"""Jacobians and Hessians: ``jacrev`` (vmap over vjp), ``jacfwd`` (vmap over jvp), ``hessian``.

The basis of one-hot vectors covers every element of every output (jacrev) or input (jacfwd) at
once, so one vmap computes the whole Jacobian (``chunk_size`` bounds the rows per vmap call).
The result for output ``o`` and input ``i`` has shape ``o.shape + i.shape``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import ember
from ember.autograd._pytree import tree_flatten, tree_unflatten

from ._forward import jvp
from ._grad import _replace, _select, check_argnums, vjp
from ._vmap import vmap

__all__ = ["hessian", "jacfwd", "jacrev"]


def _basis(tensors):
    """One-hot rows over all elements of ``tensors``: per tensor, a (N, *shape) slice of eye(N)."""
    sizes = [t.numel() for t in tensors]
    total = sum(sizes)
    first = tensors[0]
    eye = ember.eye(total, dtype=first.dtype, device=first.device)
    pieces, start = [], 0
    for t, n in zip(tensors, sizes):
        pieces.append(eye[:, start:start + n].reshape((total,) + tuple(t.shape)))
        start += n
    return pieces, sizes


def _split_rows(values, sizes, shapes_before, flip: bool):
    """Splits (N, *shape) results into one block per element group, reshaped to ``before + shape``
    (``flip``: the group's dims go last, as jacfwd's input dims)."""
    out, start = [], 0
    for n, before in zip(sizes, shapes_before):
        block = values.narrow(0, start, n)
        start += n
        rest = tuple(block.shape[1:])
        if flip:
            block = block.reshape((n,) + rest).movedim(0, -1).reshape(rest + tuple(before))
        else:
            block = block.reshape(tuple(before) + rest)
        out.append(block)
    return out


def jacrev(func: Callable, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None,
           _preallocate_and_copy: bool = False) -> Callable:
    """The Jacobian of ``func`` with respect to the inputs ``argnums``, by reverse mode.

    Example:
        >>> import ember
        >>> from ember.func import jacrev
        >>> jacrev(ember.sin)(ember.zeros(2))
        tensor([[1., 0.],
                [0., 1.]])
    """
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = check_argnums(argnums, len(args), "jacrev")
        chosen = argnums if isinstance(argnums, int) else nums
        diff = _select(args, chosen)

        def partial(*d):
            return func(*_replace(args, chosen, d[0] if isinstance(chosen, int) else d), **kwargs)

        result = vjp(partial, *((diff,) if isinstance(chosen, int) else diff), has_aux=has_aux)
        output, vjp_fn = result[0], result[1]
        flat_out, out_spec = tree_flatten(output)
        basis, sizes = _basis(flat_out)
        rows = vmap(lambda *ct: vjp_fn(tree_unflatten(list(ct), out_spec)), chunk_size=chunk_size)(*basis)
        flat_in, in_spec = tree_flatten(rows)
        out_shapes = [tuple(x.shape) for x in flat_out]
        split = [_split_rows(g, sizes, out_shapes, False) for g in flat_in]
        per_output = []
        for o_index in range(len(flat_out)):
            entry = tree_unflatten([blocks[o_index] for blocks in split], in_spec)
            per_output.append(entry[0] if isinstance(chosen, int) else entry)
        jac = tree_unflatten(per_output, out_spec)
        return (jac, result[2]) if has_aux else jac

    return wrapper


def jacfwd(func: Callable, argnums=0, has_aux: bool = False, *, randomness: str = "error",
           chunk_size: int | None = None) -> Callable:
    """The Jacobian of ``func`` with respect to the inputs ``argnums``, by forward mode.

    Example:
        >>> import ember
        >>> from ember.func import jacfwd
        >>> jacfwd(ember.sin)(ember.zeros(2))
        tensor([[1., 0.],
                [0., 1.]])
    """
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError("jacfwd: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = check_argnums(argnums, len(args), "jacfwd")
        chosen = argnums if isinstance(argnums, int) else nums
        diff = _select(args, chosen)
        primals = (diff,) if isinstance(chosen, int) else tuple(diff)
        flat_p, p_spec = tree_flatten(primals)
        basis, sizes = _basis(flat_p)

        def partial(*d):
            return func(*_replace(args, chosen, d[0] if isinstance(chosen, int) else d), **kwargs)

        def push(*tangents):
            out = jvp(partial, primals, tree_unflatten(list(tangents), p_spec), has_aux=has_aux)
            return (out[1], out[2]) if has_aux else out[1]

        if has_aux:
            tangents, aux = vmap(push, out_dims=(0, None), randomness=randomness, chunk_size=chunk_size)(*basis)
        else:
            tangents = vmap(push, randomness=randomness, chunk_size=chunk_size)(*basis)
        flat_t, out_spec = tree_flatten(tangents)
        in_shapes = [tuple(p.shape) for p in flat_p]
        per_output = []
        for t in flat_t:
            entry = tree_unflatten(_split_rows(t, sizes, in_shapes, True), p_spec)
            per_output.append(entry[0] if isinstance(chosen, int) else entry)
        jac = tree_unflatten(per_output, out_spec)
        if has_aux:
            return jac, aux
        return jac

    return wrapper


def hessian(func: Callable, argnums=0) -> Callable:
    """The Hessian of scalar-valued ``func``: ``jacfwd(jacrev(func, argnums), argnums)``.

    Example:
        >>> import ember
        >>> from ember.func import hessian
        >>> hessian(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)
