"""Placements of a ``DTensor`` on one mesh dimension: ``Shard(dim)``, ``Replicate()``, ``Partial()``."""

from __future__ import annotations


class Placement:
    def is_shard(self, dim=None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op=None) -> bool:
        return False


class Shard(Placement):
    """Split along tensor dimension ``dim`` (``torch.chunk``'s sizes)."""

    def __init__(self, dim: int):
        self.dim = dim

    def is_shard(self, dim=None) -> bool:
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class Replicate(Placement):
    """Every rank of the mesh dimension holds the whole tensor."""

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


# ``Partial``'s reductions: PyTorch's names, as ``ReduceOp`` member names in lower case
REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


class Partial(Placement):
    """Every rank holds a term; the tensor is their reduction (``reduce_op``: "sum", "avg",
    "max", "min", "product", ...). Operators propagate "sum" partials where linear; a partial of
    any other reduction is reduced before an operator runs on it."""

    def __init__(self, reduce_op: str = "sum"):
        if reduce_op not in REDUCE_OPS:
            raise NotImplementedError(f"Partial({reduce_op!r}): the reduction must be one of {', '.join(REDUCE_OPS)}")
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op=None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"
