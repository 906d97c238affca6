"""``map(f, xs, *args)``: PyTorch's ``torch._higher_order_ops.map``.

``f`` runs on each slice of ``xs`` along the first dim (``xs`` a tensor or a pytree of tensors of
one leading size), with ``args`` passed whole to every step; the results of the steps are
stacked along a new first dim (a pytree of results, stacked leaf by leaf). Eagerly, and under
a capture or export, the steps run as a Python loop (the recording holds each step's ops: the
leading size of ``xs`` is static in the graph, where PyTorch records one ``map_impl`` node).
"""

from __future__ import annotations


def map(f, xs, *args):  # noqa: A001 - PyTorch's name
    import ember
    from ember.utils import _pytree as pytree

    flat_xs, xs_spec = pytree.tree_flatten(xs)
    if not all(isinstance(x, ember.Tensor) for x in flat_xs):
        raise RuntimeError(f"Mapped xs can only consist of tensors. Got xs {flat_xs}.")
    if any(x.dim() == 0 for x in flat_xs):
        raise IndexError("tuple index out of range")  # PyTorch's map reads the 0-d tensor's shape[0]
    leading = {x.shape[0] for x in flat_xs}
    if len(leading) != 1:
        raise RuntimeError("Leading dimensions of mapped xs must be consistent. "
                           f"Got shapes {[x.shape for x in flat_xs]}.")
    (n,) = leading
    if n == 0:
        raise RuntimeError("map: the mapped xs have a leading size of 0 (no step to stack)")
    steps = [f(pytree.tree_unflatten([x[i] for x in flat_xs], xs_spec), *args) for i in range(n)]
    flat_steps = [pytree.tree_flatten(out) for out in steps]
    out_spec = flat_steps[0][1]
    leaves = list(zip(*[leaves for leaves, _ in flat_steps]))
    return pytree.tree_unflatten([ember.stack(list(column)) for column in leaves], out_spec)
